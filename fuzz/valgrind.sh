#!/usr/bin/env bash
# valgrind memcheck over a corpus decode and encode with the installed compiled twin.
#   fuzz/valgrind.sh            # sample streams, broker recordings, fuzz corpora (make valgrind-smoke)
#   fuzz/valgrind.sh --large    # and the 24.5 MB messages-10k recording (make valgrind)
# The interpreter itself (a pyenv or Debian CPython, not built --with-valgrind) draws a few reports
# of its own, even for `python -c pass`; so the run fails on any report, or definitely lost block,
# whose stack or origin has a frame of the codec (_codec_c), and counts the others.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind not found (Debian: apt-get install valgrind)"; exit 2; }
mkdir -p build/valgrind
log=build/valgrind/memcheck.log
start=$SECONDS
# every allocation through malloc, so memcheck sees the codec's buffers and not pymalloc's arenas
PYTHONMALLOC=malloc valgrind --tool=memcheck --log-file="$log" --track-origins=yes \
    --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite --num-callers=40 \
    "$PY" fuzz/corpus_workout.py "$@"
"$PY" - "$log" "$((SECONDS - start))" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.split(r"\n==\d+== \n", text)
reports = [b for b in blocks if re.search(r"==\d+== (Invalid|Conditional|Use of|Syscall|Mismatched|Source and|Argument)", b)]
leaks = [b for b in blocks if "definitely lost in loss record" in b]
ours = [b for b in reports + leaks if "_codec_c" in b]
summary = re.search(r"ERROR SUMMARY: (\d+) errors", text)
print(f"valgrind: {len(reports)} reports, {len(leaks)} definitely lost records; "
      f"{len(ours)} with a codec frame; took {sys.argv[2]} s (log: {sys.argv[1]})")
for block in ours:
    print(block)
sys.exit(1 if ours or not summary else 0)
EOF
