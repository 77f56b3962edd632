#!/usr/bin/env bash
# Run a command against the AddressSanitizer + UBSan build of the compiled twin.
#   fuzz/sanitized.sh python -m pytest -q tests/test_decoder.py
# "python" means the venv's ($PY, default .venv/bin/python). The build lives in build/asan/ and the
# editable install in .venv is left alone: PYTHONPATH puts the sanitized copy of the package first.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
pkg="$("$PY" fuzz/build_ext.py asan)"
runtime="$("$PY" fuzz/build_ext.py asan --runtime)"
[ -f "$runtime" ] || { echo "sanitized.sh: ASan runtime $runtime not found" >&2; exit 2; }
# the runtime must be the first library loaded, as python itself is not instrumented
export LD_PRELOAD="$runtime"
# CPython keeps its objects alive at exit, so leak reports would be noise
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:strict_string_checks=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# every allocation through malloc, so ASan sees the codec's buffers and not pymalloc's arenas
export PYTHONMALLOC=malloc
export PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}"
export FASTFRAME_EXPECT_BUILD=asan
if [ "${1:-}" = python ]; then shift; set -- "$PY" "$@"; fi
exec "$@"
