# Two commands set up a fresh machine: `make demo` runs the main job,
# `make test` runs the whole test suite. Each creates .venv when missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= test,bench,spark

.PHONY: demo test bench clean

$(VENV)/.installed: pyproject.toml setup.py MANIFEST.in src/fastframe/_codec_c.pyx
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/fastframe demo

test: $(VENV)/.installed
	$(PY) -m pytest -q

bench: $(VENV)/.installed
	mkdir -p out
	$(PY) -m bench.compare --markdown out/bench.md --chart out/bench.png $(BENCH_ARGS)

clean:
	rm -rf build dist src/*.egg-info src/fastframe/*.so src/fastframe/_codec_c.c
