"""bench/clients.py: its body check catches what it must, and a small run through RabbitMQ verifies every body."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from _extras import require

from ._live import BROKERS, REPO, require_broker

if str(REPO) not in sys.path:  # bench/ is a package at the repository root, not an installed one
    sys.path.insert(0, str(REPO))

from bench import clients  # noqa: E402

TOKEN = b"0badf00d:"


def test_bodies_are_distinct_and_sized() -> None:
    bodies = [clients.body_for(TOKEN, i, 200) for i in range(500)]
    assert {len(b) for b in bodies} == {200}
    assert len(set(bodies)) == 500
    with pytest.raises(ValueError):
        clients.body_for(TOKEN, 1, 10)


def test_check_counts_duplicates_corruption_and_stale_bodies() -> None:
    good = [clients.body_for(TOKEN, i, 64) for i in range(4)]
    corrupt = good[2][:-1] + b"!"
    stale = clients.body_for(b"deadbeef:", 0, 64)
    counts = clients.check(TOKEN, [good[0], good[1], good[1], corrupt, stale, good[3]], 4, 64)
    assert counts == {"ok": 3, "duplicate": 1, "corrupt": 1, "stale": 1}
    assert clients.check(TOKEN, good, 4, 64) == {"ok": 4, "duplicate": 0, "corrupt": 0, "stale": 0}


def test_collector_finishes_on_the_runs_own_bodies_only() -> None:
    got = clients.Collector(TOKEN, 2)
    assert not got.add(clients.body_for(b"deadbeef:", 0, 32))
    assert not got.add(clients.body_for(TOKEN, 0, 32))
    assert got.add(clients.body_for(TOKEN, 1, 32)) and got.finished.is_set()


@pytest.mark.interop
def test_a_small_run_verifies_every_body(tmp_path: Path) -> None:
    require_broker(BROKERS["rabbitmq"])
    require("stomp", "bench")  # the run measures stomp.py beside fastframe
    out = tmp_path / "clients.md"
    cmd = [
        sys.executable,
        "-m",
        "bench.clients",
        "--only",
        "fastframe,fastframe-no-rest,fastframe.sync,stomp.py",
        "--messages",
        "2000",
    ]
    cmd += ["--round-trips", "20"]
    proc = subprocess.run(
        [*cmd, "--timeout", "60", "--markdown", str(out)], cwd=REPO, capture_output=True, text=True, timeout=200
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [
        line for line in out.read_text().splitlines() if line.startswith("| fastframe") or line.startswith("| stomp")
    ]
    assert len(rows) == 4
    for row in rows:
        assert row.endswith("| all bodies verified |"), row
        timed = row.split("|")[1].strip() in clients.GOAL_ROWS  # fastframe's rows, both clients
        for cell in row.split("|")[-4:-2]:  # "median / p99" in ms for those rows, one and two connections
            round_trips = cell.strip()
            assert (round_trips == "-") != timed, row
            if round_trips != "-":
                median, p99 = (float(x) for x in round_trips.split(" / "))
                assert 0 < median <= p99
