"""`fastframe broker` on the command line: starts, serves, stops on Ctrl-C."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from typing import List

import fastframe


def test_broker_command_serves_and_stops_on_interrupt() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastframe", "broker", "--port", "0", "--user", "guest:guest"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines: List[str] = []
        reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline() if proc.stdout else ""))
        reader.start()
        reader.join(30)
        assert lines and lines[0].startswith("fastframe broker listening on 127.0.0.1:"), lines
        port = int(lines[0].rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\0DISCONNECT\nreceipt:r\n\n\0")
            data = b""
            while not data.endswith(b"\0") or data.count(b"\0") < 2:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        assert [f.command for f in fastframe.decode(data)] == ["CONNECTED", "RECEIPT"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
