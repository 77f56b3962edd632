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

# the main job: a seeded sample archive of STOMP captures, converted to Parquet by Spark (local mode)
demo: $(VENV)/.installed
	@command -v java >/dev/null || { echo "make demo runs Spark, which needs Java 17+ (Debian: apt-get install openjdk-17-jre-headless)"; exit 1; }
	rm -rf out/demo-archive out/demo-parquet
	$(VENV)/bin/fastframe sample-archive out/demo-archive
	$(VENV)/bin/fastframe convert out/demo-archive --out out/demo-parquet

test: $(VENV)/.installed
	$(PY) -m pytest -q

bench: $(VENV)/.installed
	mkdir -p out
	$(PY) -m bench.compare --markdown out/bench.md --chart out/bench.png $(BENCH_ARGS)

clean:
	rm -rf build dist src/*.egg-info src/fastframe/*.so src/fastframe/_codec_c.c
