#!/usr/bin/env bash
# Fuzz every harness in turn for FUZZ_SECONDS each (make fuzz, make fuzz-smoke), then print the
# executions of each. With clang, the compiled twin is the -fsanitize=fuzzer-no-link build, so
# libFuzzer sees its C branches too; without clang only the Python code guides the fuzzer.
# A finding stops the run with its input in build/fuzz/artifacts/ and its log printed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
seconds="${FUZZ_SECONDS:-15}"
harnesses="${FUZZ_HARNESSES:-decode diff columns encode}"
if command -v clang >/dev/null; then
    export PYTHONPATH="$("$PY" fuzz/build_ext.py fuzz)${PYTHONPATH:+:$PYTHONPATH}"
    guide="Python and C coverage (clang build in build/fuzz/pkg)"
else
    guide="Python coverage only: no clang (Debian: apt-get install clang libclang-rt-14-dev)"
fi
mkdir -p build/fuzz/logs
echo "fuzz: ${seconds} s per harness, guided by ${guide}"
for name in $harnesses; do
    log="build/fuzz/logs/$name.log"
    start=$SECONDS
    if ! "$PY" fuzz/run.py "$name" --seconds "$seconds" >"$log" 2>&1; then
        grep -v '^INFO: Instrumenting' "$log" | tail -n 60
        echo "fuzz $name: FAILED, input saved in build/fuzz/artifacts/ (log: $log)"
        exit 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    added=$(sed -n 's/^stat::new_units_added: *//p' "$log")
    corpus=$(find "build/fuzz/corpus/$name" -type f | wc -l)
    echo "fuzz $name: ${runs:-?} executions in $((SECONDS - start)) s, ${added:-?} new inputs, corpus ${corpus}, no failure"
done
