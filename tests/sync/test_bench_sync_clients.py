"""bench/sync_clients.py: a small run through RabbitMQ verifies every body of every row."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from _extras import require
from interop._live import BROKERS, REPO, require_broker


@pytest.mark.interop
def test_a_small_run_verifies_every_body(tmp_path: Path) -> None:
    require_broker(BROKERS["rabbitmq"])
    require("stomp", "bench")  # the run measures stomp.py beside the blocking client
    out = tmp_path / "sync_clients.md"
    cmd = [sys.executable, "-m", "bench.sync_clients", "--messages", "2000", "--designs", "--timeout", "60"]
    proc = subprocess.run([*cmd, "--markdown", str(out)], cwd=REPO, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ") and "---" not in line][1:]
    names = [row.split("|")[1].strip() for row in rows]
    assert names == [
        "stomp.py-beside-sync",
        "fastframe.aio",
        "fastframe.sync",
        "fastframe.sync-callback",
        "socket-thread",
    ]
    for row in rows:
        assert row.endswith("| all bodies verified |"), row
