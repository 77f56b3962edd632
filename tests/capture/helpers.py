"""What the capture tests share: streams to record, and reading an archive back."""

from __future__ import annotations

import gzip
import os
import random
import re
import signal
import subprocess
import sys
from typing import Dict, List

import fastframe
from _extras import require
from fastframe.archive import compressed_reader, generate_stream


def client_stream(n: int, seed: int = 0) -> bytes:
    """CONNECT, SENDs with binary bodies and escaped headers, heart-beat EOLs, DISCONNECT."""
    rng = random.Random(seed)
    out = bytearray(fastframe.encode("CONNECT", [("accept-version", "1.2"), ("host", "/")]))
    for i in range(n):
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
        out += fastframe.encode("SEND", [("destination", "/queue/a"), ("x-key", f"a:b\nc\\{i}")], body)
        if rng.random() < 0.2:
            out += b"\n"
    out += fastframe.encode("DISCONNECT", [("receipt", "bye")])
    return bytes(out)


def redacted(client_bytes: bytes) -> bytes:
    """What a recorder writes of a client's stream by default: the first CONNECT's passcode replaced."""
    head, sep, rest = client_bytes.partition(b"\n\n")
    if not head.lstrip(b"\r\n").startswith((b"CONNECT\n", b"STOMP\n")):
        return client_bytes
    return re.sub(rb"\npasscode:[^\r\n]*", b"\npasscode:<redacted>", head) + sep + rest


def server_stream(n: int, seed: int = 0) -> bytes:
    return generate_stream(n, seed=seed)


def pieces(data: bytes, seed: int = 0, most: int = 700) -> List[bytes]:
    """``data`` cut at random places (reads of 1 to ``most`` bytes)."""
    rng = random.Random(seed)
    out, at = [], 0
    while at < len(data):
        size = rng.randrange(1, most)
        out.append(data[at : at + size])
        at += size
    return out


def require_zstd() -> None:
    """zstd is in the standard library from Python 3.14, else the zstd extra (a skip, a failure in CI)."""
    if sys.version_info < (3, 14):
        require("zstandard", "zstd")


def read_file(path: str) -> bytes:
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as stream:
            return stream.read()
    if path.endswith(".zst"):
        with open(path, "rb") as raw, compressed_reader(raw, "zstd") as stream:
            return bytes(stream.read())
    with open(path, "rb") as stream:
        return stream.read()


def stomp_files(root: str) -> Dict[str, List[str]]:
    """The recorded files under ``root`` by connection and direction (``conn-0001.c2s``), pieces in order."""
    found: Dict[str, List[str]] = {}
    for folder, _, names in os.walk(root):
        for name in sorted(names):
            if name.endswith((".stomp", ".stomp.gz", ".stomp.zst")):
                stem = name.split(".stomp")[0].split("_")[0]
                found.setdefault(stem, []).append(os.path.join(folder, name))
    return {key: sorted(value) for key, value in found.items()}


def joined(paths: List[str]) -> bytes:
    return b"".join(read_file(p) for p in paths)


def start_fastframe(*args: str) -> tuple:
    """``python -m fastframe ARGS`` in the background; returns the process and the port its first line names."""
    process = subprocess.Popen(
        [sys.executable, "-m", "fastframe", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    line = process.stdout.readline() if process.stdout else ""  # where it listens (bounded by its start)
    match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
    if match is None:
        process.kill()
        raise AssertionError(f"no port in {line!r}: {process.communicate(timeout=10)}")
    return process, int(match.group(1))


class RecordProcess:
    """``fastframe record`` in a process of its own, as a user runs it: ``with`` gives the port it listens on;
    leaving sends Ctrl-C (SIGINT) and checks that it finished every file and exited with 0 (bounded)."""

    def __init__(self, upstream_port: int, out: str, *options: str) -> None:
        self.args = [sys.executable, "-m", "fastframe", "record", "--listen", "127.0.0.1:0"]
        self.args += ["--upstream", f"127.0.0.1:{upstream_port}", "--out", out, *options]

    def __enter__(self) -> int:
        self.process = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline() if self.process.stdout else ""
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if match is None:
            self.process.kill()
            raise AssertionError(f"fastframe record did not start: {line!r} {self.process.communicate(timeout=10)}")
        return int(match.group(1))

    def __exit__(self, *exc: object) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            out, err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate(timeout=10)
            raise
        if exc[0] is None:
            assert self.process.returncode == 0 and "every file closed" in out, err
