"""Run one fuzz harness with atheris, or replay inputs through it without atheris.

    python fuzz/run.py decode --seconds 60          # fuzz for a minute (corpus kept in build/fuzz/)
    python fuzz/run.py diff --replay                # the seeds, the kept corpus and the regressions, once
    python fuzz/run.py encode --replay some/file    # just these files (or folders)
    python fuzz/run.py columns --seconds 60 -- -jobs=1 -dict=...   # after --: more libFuzzer flags

Harnesses: decode, diff, columns, encode (fuzz/fuzz_<name>.py). Seeds are made afresh on every
run, from fastframe.archive.generate_stream, the hand-made fuzz/seeds/ and the broker recordings in
../shared/corpus/brokers (read in place, never copied into the repository). A failing input is
saved as build/fuzz/artifacts/<name>-crash-*; keep it as fuzz/regressions/<name>-<what>.bin and
it is replayed (and becomes a regression test) from then on.

The Python code of fastframe is instrumented for atheris; the compiled twin is guided too when
it is the clang -fsanitize=fuzzer-no-link build (`make fuzz` puts build/fuzz/pkg on PYTHONPATH).
Exit status: 0 when nothing failed, 1 on a finding.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Iterator, List, Tuple

HERE = Path(__file__).resolve().parent
WORK = HERE.parent / "build" / "fuzz"
HARNESSES = ("decode", "diff", "columns", "encode")


def regression_inputs(name: str) -> List[Path]:
    return sorted((HERE / "regressions").glob(f"{name}-*.bin"))


def write_seeds(harness: Any, name: str) -> Path:
    folder = WORK / "seeds" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for label, data in harness.seeds():
        (folder / f"{label}-{hashlib.sha1(data).hexdigest()[:10]}").write_bytes(data)
    for path in regression_inputs(name):
        shutil.copy(path, folder / path.name)
    return folder


def files(paths: List[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            yield path


def replay(harness: Any, name: str, paths: List[Path]) -> int:
    """Every input once, without atheris (so it runs under ASan/valgrind as well)."""
    if not paths:
        seeds = [data for _, data in harness.seeds()]
        inputs: List[Tuple[str, bytes]] = [(f"seed-{i}", data) for i, data in enumerate(seeds)]
        paths = [WORK / "corpus" / name] + regression_inputs(name)
    else:
        inputs = []
    inputs += [(str(path), path.read_bytes()) for path in files(paths)]
    failures = 0
    start = time.monotonic()
    for label, data in inputs:
        # a long broker recording is cut to the harness's own length limit, as libFuzzer would
        try:
            harness.test_one_input(data[: harness.MAX_LEN])
        except Exception:  # noqa: BLE001 - report every input that fails, then fail the run
            failures += 1
            print(f"FAIL {name}: {label}", file=sys.stderr)
            traceback.print_exc()
    took = time.monotonic() - start
    print(f"replay {name}: {len(inputs)} inputs, {failures} failed, {took:.1f} s")
    return 1 if failures else 0


def fuzz(name: str, seconds: int, extra: List[str]) -> None:
    import atheris

    # instrument fastframe's Python code (the Python twin, options, diagnosis) for coverage; the
    # compiled twin is guided only in the fuzz build (build_ext.py fuzz), which feeds atheris's
    # libFuzzer itself
    with atheris.instrument_imports(include=["fastframe"]):
        harness = importlib.import_module(f"fuzz_{name}")
        import fastframe.codec._codec_c as compiled
    print(f"fuzz {name}: compiled twin from {compiled.__file__}", file=sys.stderr)
    corpus = WORK / "corpus" / name
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts = WORK / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    seeds = write_seeds(harness, name)
    argv = [
        sys.argv[0], str(corpus), str(seeds),
        f"-max_total_time={seconds}", f"-max_len={harness.MAX_LEN}", "-timeout=20", "-rss_limit_mb=4096",
        f"-artifact_prefix={artifacts}/{name}-", "-print_final_stats=1", *extra,
    ]  # fmt: skip
    atheris.Setup(argv, harness.test_one_input)
    atheris.Fuzz()  # exits the process: 0 when the time is up, non-zero on a finding


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("harness", choices=HARNESSES)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--replay", action="store_true", help="run inputs once, without atheris")
    parser.add_argument("paths", nargs="*", type=Path, help="with --replay: files or folders to run")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_intermixed_args(argv[: len(argv) - len(extra) - bool(extra or "--" in argv)])
    sys.path.insert(0, str(HERE))
    if args.replay:
        harness = importlib.import_module(f"fuzz_{args.harness}")
        sys.exit(replay(harness, args.harness, args.paths))
    fuzz(args.harness, args.seconds, extra)


if __name__ == "__main__":
    main()
