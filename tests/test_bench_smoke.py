"""Smoke run of the benchmarks at tiny sizes: they run, check results and report; no timing is asserted.

The comparative runner (``python -m bench.compare``) runs in-process on the
twins and the floors (no peer library needed); installed peers get a run of
their own. The pytest-benchmark suite runs once with ``--benchmark-disable``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from typing import Dict, List

import pytest

from conftest import REPO, compiled_twin_built

if str(REPO) not in sys.path:  # bench/ is a package at the repository root, not an installed one
    sys.path.insert(0, str(REPO))

from bench import compare  # noqa: E402
from bench.codecs import all_codecs  # noqa: E402
from bench.workloads import SIZES, WORKLOAD_NAMES, build_workloads, check_workload  # noqa: E402

from fastframe.codec import _codec_py  # noqa: E402


def _c_built() -> bool:
    return compiled_twin_built()  # False when absent by design, a failure when expected


def _table_rows(text: str, section: str) -> List[List[str]]:
    """The body rows of the Markdown table under ``## section``, as lists of cells."""
    lines = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0].splitlines()
    rows = [line for line in lines if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[1:]]  # [0] is the header


# --------------------------------------------------------------------------- workloads


def test_workloads_are_deterministic() -> None:
    first = build_workloads("tiny")
    again = build_workloads("tiny")
    other = build_workloads("tiny", seed=1)
    assert tuple(first) == WORKLOAD_NAMES
    for name in WORKLOAD_NAMES:
        assert first[name].data == again[name].data
        assert first[name].frames == again[name].frames
        assert first[name].ends == again[name].ends
        assert first[name].data != other[name].data
        assert len(first[name]) == SIZES["tiny"][name]


def test_workload_sizes_are_independent() -> None:
    # one workload's bytes do not depend on another's size
    alone = build_workloads({"small": 20, "escape": 5}, names=("escape",))
    assert alone["escape"].data == build_workloads({"escape": 5}, names=("escape",))["escape"].data


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_workloads_decode_to_their_frames(name: str) -> None:
    workload = build_workloads("tiny", names=(name,))[name]
    check_workload(workload)
    frames, data = workload.prefix(3)
    assert [(f.command, f.headers, f.body) for f in _codec_py.decode(data)] == list(frames)


def test_workloads_have_their_features() -> None:
    w = build_workloads("tiny")
    for command, headers, body in w["small"].frames:
        assert command == "MESSAGE" and 5 <= len(headers) <= 8 and len(body) <= 200
        assert headers[-1] == ("content-length", str(len(body)))
    assert all(1024 <= len(body) <= 4096 for _, _, body in w["medium"].frames)
    assert all(len(body) >= 64 * 1024 and b"\0" in body for _, _, body in w["large"].frames)
    escape = w["escape"].data
    assert all(sequence in escape for sequence in (b"\\n", b"\\r", b"\\c", b"\\\\"))
    assert any(ord(char) > 127 for _, headers, _ in w["escape"].frames for pair in headers for char in "".join(pair))
    mixed = w["mixed"]
    assert b"\r\n" in mixed.data and b"\0\r\n\r\n" in mixed.data and b"\0\n\n" in mixed.data
    assert {"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"} <= {command for command, _, _ in mixed.frames}
    assert any(body and all(n != "content-length" for n, _ in headers) for _, headers, body in mixed.frames)
    for _, headers, _ in w["repeats"].frames:
        names = [name for name, _ in headers]
        assert len(set(names)) < len(names)


# --------------------------------------------------------------------------- compare runner


@pytest.fixture(scope="module")
def twin_report(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, object]:
    out = tmp_path_factory.mktemp("bench")
    markdown = out / "report.md"
    args = ["--sizes", "tiny", "--repeat", "1", "--only", "fastframe,copy,scan,msgpack", "--quiet"]
    report = compare.run(compare.parse_args(args))
    code = compare.main(args + ["--markdown", str(markdown)])
    return {"report": report, "text": markdown.read_text(encoding="utf-8"), "code": code, "out": out}


def test_compare_reports_every_workload_for_the_twins(twin_report: Dict[str, object]) -> None:
    text = str(twin_report["text"])
    assert twin_report["code"] == 0
    twins = ["fastframe C twin", "fastframe Python twin"] if _c_built() else ["fastframe Python twin"]
    if not _c_built():
        assert "Not measured: fastframe C twin: not built" in text
    for section in ("Decode", "Encode"):
        rows = _table_rows(text, section)
        for name in WORKLOAD_NAMES:
            for twin in twins:
                (row,) = [r for r in rows if r[0] == name and r[1] == twin]
                assert row[5].startswith("ok"), row
                assert float(row[3].replace(",", "")) > 0
            copy = [r for r in rows if r[0] == name and r[1].startswith("floor: copy")]
            assert copy and copy[0][5] == "floor"
    feeds = _table_rows(text, "Incremental feeding")
    assert {row[0] for row in feeds} == {label for label, *_ in compare.FEED_ROWS}
    assert all(row[5].startswith("ok") for row in feeds if row[1] in twins)
    linearity = _table_rows(text, "Linearity")
    assert len(linearity) == 2 * len(twins) and all(row[-1] == "ok" for row in linearity)
    targets = text.split("## Targets\n", 1)[1]
    # stomp.py was not selected: every target against it is reported, as not measurable
    assert "- Python twin small decode ≥ 3× stomp.py: n/a (stomp.py not measured)" in targets
    assert targets.count("PASS") + targets.count("MISS") + targets.count("n/a") >= 5


def test_compare_results_are_checked(twin_report: Dict[str, object]) -> None:
    report = twin_report["report"]
    assert isinstance(report, compare.Report)
    statuses = {(r.codec, r.workload, r.op): r.status for r in report.results}
    assert statuses[("py", "small", "decode")] == "ok"
    assert statuses[("scan", "large", "decode")] == "floor"
    if importlib.util.find_spec("msgpack") is not None:
        assert statuses[("msgpack", "small", "decode")] == "ok"
    # a wrong answer is caught: a twin whose decoder drops the last frame
    py = next(codec for codec in report.codecs if codec.key == "py")
    runner = compare.Runner(report.args, log=lambda message: None)
    frames, data = report.workloads["small"].prefix(5)
    assert runner.check_decode(py, frames, py.decode(data)) is None
    assert runner.check_decode(py, frames, py.decode(data)[:-1]) == "4 frames for 5"
    assert runner.check_encode(py, frames, [b"MESSAGE\n\n\0"] * 5).startswith("frame 0:")


def test_compare_chart(twin_report: Dict[str, object]) -> None:
    report = twin_report["report"]
    assert isinstance(report, compare.Report)
    path = str(twin_report["out"] / "chart.png")  # type: ignore[operator]
    message = compare.chart(report, path)
    if importlib.util.find_spec("matplotlib") is None:
        assert message == "matplotlib is not installed: no chart"
    else:
        # without stomp.py there is nothing to be relative to
        assert message.startswith("no chart: stomp.py")
        ours = [r for r in report.results if r.codec == "py" and r.op in ("decode", "encode")]
        stand_in = [compare.Result(**{**r.__dict__, "codec": "stomp.py", "extra": {}}) for r in ours]
        report.results += stand_in
        try:
            assert compare.chart(report, path) == f"chart written to {path}"
        finally:
            del report.results[-len(stand_in) :]
        with open(path, "rb") as handle:
            assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


def test_compare_installed_peers() -> None:
    """Each installed peer runs through its adapter; at least its plain decode is right."""
    installed = [c.key for c in all_codecs() if c.kind == "peer" and importlib.util.find_spec(c.key.split(".")[0])]
    args = compare.parse_args(
        ["--sizes", "tiny", "--repeat", "1", "--only", "peers", "--workloads", "small,medium", "--quiet",
         "--ops", "decode,encode"]
    )  # fmt: skip
    report = compare.run(args)
    assert sorted(codec.key for codec in report.codecs) == sorted(installed)
    for key in installed:
        mine = [r for r in report.results if r.codec == key]
        assert len(mine) == 4  # 2 workloads x decode, encode
        assert [r.status for r in mine if r.op == "decode" and r.workload == "medium"] == ["ok"], mine
    assert set(report.unavailable) == {"stomp.py", "stompest", "coilmq", "aiostomp"} - set(installed)


def test_parse_args_refuses_unknown_names() -> None:
    with pytest.raises(SystemExit):
        compare.parse_args(["--ops", "decode,fly"])
    with pytest.raises(SystemExit):
        compare.parse_args(["--workloads", "huge"])
    with pytest.raises(SystemExit):
        compare.run(compare.parse_args(["--only", "nosuchcodec", "--sizes", "tiny"]))


# --------------------------------------------------------------------------- pytest-benchmark suite


def test_benchmark_suite_runs() -> None:
    env = {**os.environ, "FASTFRAME_BENCH_SIZES": "tiny"}
    command = [sys.executable, "-m", "pytest", "bench", "-q", "-p", "no:cacheprovider", "--benchmark-disable"]
    if not _c_built():
        command += ["-k", "py-"]  # the py twin's ids ("py" alone matches the file name too)
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    passed = int(done.stdout.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    per_twin = 3 * len(WORKLOAD_NAMES) + 4  # decode, decode to columns, encode per workload + 4 feeds
    assert passed == per_twin * (2 if _c_built() else 1)


# --------------------------------------------------------------------------- the asyncio client's halves


def test_aio_parts_receive_and_send_every_message() -> None:
    from bench import aio_parts

    # receiving raises unless every body arrives whole; sending returns after the last SEND is written
    assert aio_parts.receiving(2_000, 100_000.0, 0.002) > 0
    assert aio_parts.sending(2_000, 100_000.0) > 0
    text = subprocess.run(
        [sys.executable, "-m", "bench.aio_parts", "--messages", "1000", "--rate", "100000", "--rounds", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    rows = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")]
    assert rows == ["part", "receiving, rest 2 ms", "receiving, rest 10 ms", "sending"]


# --------------------------------------------------------------------------- a Spark stream task's read


def test_stream_task_reads_every_message_by_both_paths() -> None:
    from _extras import require
    from interop._live import BROKERS, require_broker

    require("pyarrow", "spark")  # (the task's read makes Arrow batches)
    require_broker(BROKERS["rabbitmq"])
    text = subprocess.run(
        [sys.executable, "-m", "bench.stream_task", "--messages", "3000", "--rounds", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    paths = [line.split(":")[0].strip() for line in text.splitlines() if "µs/msg" in line]
    assert paths == ["columns", "messages"]  # (each round asserts that every message was read)
