"""The main job end to end: ``fastframe sample-archive`` then ``fastframe convert`` in a fresh process.

``sample-archive`` and ``index`` alone (no Spark): tests/test_cli_archive.py.
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

import pyarrow.parquet as pq
import pytest

from .helpers import bare_decode

# the installed command (beside this interpreter), never the source tree: the test proves what users run
FASTFRAME = shutil.which("fastframe", path=str(Path(sys.executable).parent)) or "fastframe"


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([FASTFRAME, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def converted(tmp_path_factory: Any) -> Dict[str, Any]:
    root = tmp_path_factory.mktemp("cli")
    archive, out = root / "archive", root / "parquet"
    made = run_cli("sample-archive", str(archive), "--connections", "5", "--frames", "300", "--seed", "4")
    assert made.returncode == 0, made.stderr
    done = run_cli("convert", str(archive), "--out", str(out), "--master", "local[2]")
    return {"archive": archive, "out": out, "result": done}


def expected_rows(codec: Any, archive: Path) -> List[Any]:
    rows = []
    for path in sorted(archive.rglob("*.stomp*")):
        data = path.read_bytes()
        frames, error = bare_decode(codec, gzip.decompress(data) if path.suffix == ".gz" else data)
        rows.append((str(path), frames, error))
    return rows


def test_convert_writes_parquet_and_prints_a_summary(codec: Any, converted: Dict[str, Any]) -> None:
    result = converted["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    expected = expected_rows(codec, converted["archive"])
    commands = Counter(frame[2] for _, frames, _ in expected for frame in frames)
    errors = [(path, error) for path, _, error in expected if error is not None]
    assert len(errors) == 2

    table = pq.read_table(converted["out"])
    assert table.num_rows == sum(commands.values()) + len(errors)
    assert Counter(c for c in table.column("command").to_pylist() if c is not None) == commands
    got_errors = sorted(
        (r["path"], (r["offset"], r["error_code"], r["error_reason"]))
        for r in table.select(["path", "offset", "error_code", "error_reason"]).to_pylist()
        if r["error_code"] is not None
    )
    assert got_errors == sorted(errors)

    out = result.stdout
    assert f"converted {len(expected)} files" in out
    for command, n in commands.items():
        assert re.search(rf"^  {command}\s+{n:,}\s", out, re.M), (command, n, out)
    for path, (offset, code, _) in errors:
        assert f"{path} at offset {offset}" in out and code in out
    assert "top destinations:" in out and "/queue/" in out
    assert re.search(r"^decoded by: (c|python) \(", out, re.M)
    assert "tasks" in result.stderr  # the progress display


def test_convert_reports_bad_input_without_a_traceback(tmp_path: Path) -> None:
    result = run_cli("convert", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "o"))
    assert result.returncode == 1
    assert "PATH_NOT_FOUND" in result.stderr and "Traceback" not in result.stderr
