"""`fastframe broker` on the command line: starts, serves, stops on Ctrl-C or SIGTERM.

It stops whatever SIGINT disposition it inherits: a background job of a non-interactive shell (``make test &``
in a script) starts with SIGINT ignored, where Python raises no KeyboardInterrupt and asyncio.run installs
no handler; the broker then ran on after Ctrl-C until the test gave up (issue 19).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from typing import List

import pytest

import fastframe

CONNECT = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\0"


BROKER = [sys.executable, "-m", "fastframe", "broker", "--port", "0", "--user", "guest:guest"]
# the broker exec'd with SIGINT ignored, as `cmd &` in a non-interactive shell starts it
SIGINT_IGNORED = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"]  # fmt: skip


def _read_frames(sock: socket.socket, count: int) -> List[fastframe.Frame]:
    """The frames until ``count`` arrived or the peer closed (a deadline on each read)."""
    data = b""
    while data.count(b"\0") < count:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return list(fastframe.decode(data))


@pytest.mark.parametrize(
    ("sig", "launcher"),
    [(signal.SIGINT, []), (signal.SIGINT, SIGINT_IGNORED), (signal.SIGTERM, [])],
    ids=["ctrl-c", "ctrl-c-with-sigint-ignored-at-start", "sigterm"],
)
def test_broker_command_serves_and_stops_on_interrupt(sig: signal.Signals, launcher: List[str]) -> None:
    proc = subprocess.Popen([*launcher, *BROKER], stdout=subprocess.PIPE, text=True)
    try:
        lines: List[str] = []
        reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline() if proc.stdout else ""))
        reader.start()
        reader.join(30)
        assert lines and lines[0].startswith("fastframe broker listening on 127.0.0.1:"), lines
        port = int(lines[0].rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(CONNECT + b"DISCONNECT\nreceipt:r\n\n\0")
            assert [f.command for f in _read_frames(sock, 2)] == ["CONNECTED", "RECEIPT"]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as staying:
            staying.sendall(CONNECT)
            assert [f.command for f in _read_frames(staying, 1)] == ["CONNECTED"]
            proc.send_signal(sig)
            # the client still connected is told, then closed: a stop in the loop, not a kill
            told = _read_frames(staying, 1)
            assert [(f.command, f.get("message")) for f in told] == [("ERROR", "Server shutting down")]
            assert staying.recv(4096) == b""
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_broker_command_dead_letter_options() -> None:
    """``--dead-letter`` and ``--no-requeue-on-nack``: a NACKed message goes to the dead-letter queue at
    once (ActiveMQ's way); a destination that is no queue or topic is refused before anything starts."""
    bad = subprocess.run([*BROKER, "--dead-letter", "DLQ"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "expected /queue/NAME or /topic/NAME" in bad.stderr
    options = ["--dead-letter", "/queue/DLQ", "--no-requeue-on-nack", "--max-redeliveries", "3"]
    proc = subprocess.Popen([*BROKER, *options], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        port = int(line.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                CONNECT
                + b"SUBSCRIBE\nid:d\ndestination:/queue/DLQ\n\n\0"
                + b"SUBSCRIBE\nid:s\ndestination:/queue/w\nack:client-individual\n\n\0"
                + b"SEND\ndestination:/queue/w\n\npoison\0"
            )
            (_, message) = _read_frames(sock, 2)
            sock.sendall(b"NACK\nid:%s\n\n\0" % message.get("ack").encode())
            (dead,) = _read_frames(sock, 1)
            assert (dead.get("subscription"), dead.body, dead.get("x-first-death-reason")) == (
                "d",
                b"poison",
                "rejected",
            )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
