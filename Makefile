# Two commands set up a fresh machine: `make demo` runs the main job,
# `make test` runs the whole test suite. Each creates .venv when missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= test,bench,spark,zstd,ws

.PHONY: demo test bench docs sync-signatures clean fuzz fuzz-smoke broker-stress broker-stress-smoke sanitize sanitize-smoke valgrind valgrind-smoke

$(VENV)/.installed: pyproject.toml setup.py MANIFEST.in src/fastframe/codec/_codec_c.pyx $(wildcard src/fastframe/codec/*.pxi)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

# the main job: a seeded sample archive of STOMP captures, converted to Parquet by Spark (local mode).
# Spark needs Java 17+: installed here when missing on Debian as root (as .ci/run does), else a hint.
demo: $(VENV)/.installed
	@major=$$(java -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -n 1); \
	if [ -z "$$major" ] || [ "$$major" -lt 17 ]; then \
	    if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null; then \
	        echo "installing Java for Spark: apt-get install openjdk-17-jre-headless"; \
	        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; \
	    else \
	        echo "make demo runs Spark, which needs Java 17+ (Debian: apt-get install openjdk-17-jre-headless)"; exit 1; \
	    fi; \
	fi
	rm -rf out/demo-archive out/demo-parquet
	$(VENV)/bin/fastframe sample-archive out/demo-archive
	$(VENV)/bin/fastframe convert out/demo-archive --out out/demo-parquet

test: $(VENV)/.installed
	$(PY) -m pytest -q

bench: $(VENV)/.installed
	mkdir -p out
	$(PY) -m bench.compare --markdown out/bench.md --chart out/bench.png $(BENCH_ARGS)

# the documentation site (docs/): warnings are errors, every reference must resolve (-n). The docs
# extra's pinned tools go into the venv by name, as for fuzzing (no rebuild of the editable install).
$(VENV)/.docs-installed: $(VENV)/.installed pyproject.toml
	$(PY) -c "import subprocess, sys, tomllib; docs = tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['docs']; subprocess.check_call([sys.executable, '-m', 'pip', 'install', '-q', *docs])"
	touch $@

docs: $(VENV)/.docs-installed
	$(PY) -m sphinx -q -E -W -n --keep-going -b html docs docs/_build/html
	@echo "the site: docs/_build/html/index.html"

# the blocking API's signatures and shared docstrings, written from the asyncio API's
# (tools/sync_signatures.py; tests/sync/test_api_mirror.py fails when they are not up to date)
sync-signatures:
	$(PYTHON) tools/sync_signatures.py

# --- fuzzing, sanitizers, valgrind (fuzz/README.md) -----------------------------------------------
# atheris and Cython go into the venv by name: `pip install -e .[fuzz]` would rebuild the editable
# install. Cython's range is build-system.requires's.
FUZZ_SECONDS ?= 300
FUZZ_SMOKE_SECONDS ?= 12
# the codec's own tests (the layers above it have theirs); the RSS leak test means nothing under
# ASan's quarantine, and the bench smoke runs other projects' clients
SANITIZE_TESTS = $(filter-out tests/test_bench_smoke.py,$(wildcard tests/test_*.py))
SANITIZE_PYTEST = fuzz/sanitized.sh python -m pytest -q --capture=sys -p no:randomly \
	--deselect tests/test_twins.py::test_compiled_twin_does_not_leak
SANITIZE_SMOKE_TESTS = $(wildcard tests/test_decoder.py tests/test_encoder.py tests/test_errors.py \
	tests/test_columns.py tests/test_frame.py tests/test_twins.py tests/test_corpus.py tests/test_threads.py \
	tests/test_slot_maker.py tests/test_route_differential.py)

$(VENV)/.fuzz-installed: $(VENV)/.installed
	$(PY) -m pip install -q 'atheris>=2.3' 'Cython>=3.1,<3.2'
	touch $@

# every harness for FUZZ_SECONDS (300) each; FUZZ_HARNESSES="decode diff" picks some
fuzz: $(VENV)/.fuzz-installed
	FUZZ_SECONDS=$(FUZZ_SECONDS) PY=$(PY) fuzz/fuzz.sh

fuzz-smoke: $(VENV)/.fuzz-installed
	FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS) PY=$(PY) fuzz/fuzz.sh

# `fastframe broker` under mutated real client streams: healthy throughout, memory given back (fuzz/README.md)
broker-stress: $(VENV)/.installed
	$(PY) fuzz/broker_stress.py --seconds $(FUZZ_SECONDS)

broker-stress-smoke: $(VENV)/.installed
	$(PY) fuzz/broker_stress.py --seconds 25

# the ASan + UBSan build (build/asan/) under the codec's test suite, the fuzz corpora and the
# corpus workout; the smoke takes fewer tests and fewer differential examples
sanitize: $(VENV)/.fuzz-installed
	PY=$(PY) $(SANITIZE_PYTEST) $(SANITIZE_TESTS)
	for h in decode diff columns encode; do PY=$(PY) fuzz/sanitized.sh python fuzz/run.py $$h --replay || exit 1; done
	PY=$(PY) fuzz/sanitized.sh python fuzz/corpus_workout.py --large

sanitize-smoke: $(VENV)/.fuzz-installed
	FASTFRAME_DIFF_EXAMPLES=60 PY=$(PY) $(SANITIZE_PYTEST) $(SANITIZE_SMOKE_TESTS) tests/test_differential.py
	for h in decode diff columns encode; do PY=$(PY) fuzz/sanitized.sh python fuzz/run.py $$h --replay || exit 1; done
	PY=$(PY) fuzz/sanitized.sh python fuzz/corpus_workout.py --quick

valgrind: $(VENV)/.installed
	PY=$(PY) fuzz/valgrind.sh --large

valgrind-smoke: $(VENV)/.installed
	PY=$(PY) fuzz/valgrind.sh --quick

# (src/fastframe/_codec_c.*: where the compiled twin was built before it moved into codec/)
clean:
	rm -rf build dist docs/_build docs/_generated src/*.egg-info src/fastframe/codec/*.so src/fastframe/codec/_codec_c.c \
	    src/fastframe/_codec_c.*.so src/fastframe/_codec_c.c
