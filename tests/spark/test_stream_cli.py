"""``fastframe stream`` as a user runs it: a RabbitMQ stream queue into Parquet with a checkpoint folder,
progress on stderr, Ctrl-C stopping cleanly, and a rerun resuming (every message once)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List

from .stream_helpers import (
    RABBIT,
    check_rows,
    delete_streams,  # noqa: F401  (deletes the streams a session declared)
    drain,
    new_queue,
    publish_queue,
    publish_stream,
    read_rows,
    require_broker,
)

FASTFRAME = shutil.which("fastframe", path=str(Path(sys.executable).parent)) or "fastframe"


def _command(queue: str, out: Path, *extra: str) -> List[str]:
    return [
        FASTFRAME, "stream", f"/queue/{queue}", "--out", str(out), "--consume", "stream",
        "--login", "guest", "--passcode", "guest", "--max-messages", "1000", *extra,
    ]  # fmt: skip


def test_stream_command_runs_stops_on_ctrl_c_and_resumes(spark: Any, tmp_path: Path) -> None:
    require_broker(RABBIT)
    queue = new_queue("cli")
    publish_stream(queue, range(3000))
    out = tmp_path / "out"

    # a query that runs until Ctrl-C
    log = open(tmp_path / "first.log", "w+")
    child = subprocess.Popen(_command(queue, out), stdout=subprocess.DEVNULL, stderr=log, text=True)
    try:
        deadline = time.monotonic() + 120
        while "batch 0:" not in (tmp_path / "first.log").read_text():
            assert child.poll() is None, (tmp_path / "first.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "first.log").read_text()
            time.sleep(0.2)
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=60) == 0, (tmp_path / "first.log").read_text()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        log.close()
    first = (tmp_path / "first.log").read_text()
    assert "stopping (a rerun resumes from the checkpoint)" in first
    assert (tmp_path / "out.checkpoint" / "offsets").is_dir()

    # more messages, and a rerun that resumes, then ends once it caught up
    publish_stream(queue, range(3000, 3500))
    done = subprocess.run(_command(queue, out, "--available-now"), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "batch " in done.stderr and "messages written to" in done.stderr
    check_rows(read_rows(spark, out), range(3500))


def test_stream_command_reports_a_bad_destination(tmp_path: Path) -> None:
    require_broker(RABBIT)
    command = _command(new_queue("cli-missing"), tmp_path / "out", "--available-now")
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 1
    assert "does not exist on the broker" in done.stderr and "option destination" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr  # no Java trace first


def test_ctrl_c_with_consume_ack_acknowledges_what_it_wrote(spark: Any, tmp_path: Path) -> None:
    """consume=ack: Ctrl-C waits for the batch that acknowledges the last one written, or says how many
    messages a rerun will write again; what the queue still holds is exactly what was not written plus those."""
    import re

    require_broker(RABBIT)
    destination = f"/queue/{new_queue('cli-ack')}"
    publish_queue("rabbitmq", destination, range(3000))
    out = tmp_path / "out"
    command = [
        FASTFRAME, "stream", destination, "--out", str(out), "--login", "guest", "--passcode", "guest",
        "--max-messages", "1000",
    ]  # fmt: skip
    log_path = tmp_path / "ack.log"
    log = open(log_path, "w+")
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, text=True)
    try:
        deadline = time.monotonic() + 120
        while "batch 0:" not in log_path.read_text():
            assert child.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=60) == 0, log_path.read_text()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        log.close()
    text = log_path.read_text()
    written = {int({h["name"]: h["value"] for h in row["headers"]}["n"]) for row in read_rows(spark, out)}
    left = {int(m.get("n")) for m in drain("rabbitmq", destination, quiet=1.0)}
    found = re.search(r"the last (\d+) messages written are not acknowledged", text)
    again = int(found.group(1)) if found else 0
    assert written | left == set(range(3000)), text
    assert len(written & left) == again, text  # duplicates only as announced
    assert again == 0, text  # a quiet queue: the acknowledging batch ran before the exit
