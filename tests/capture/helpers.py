"""What the capture tests share: streams to record, and reading an archive back."""

from __future__ import annotations

import gzip
import os
import random
from typing import Dict, List

import fastframe
from fastframe.sample import generate_stream


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


def read_file(path: str) -> bytes:
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as stream:
            return stream.read()
    with open(path, "rb") as stream:
        return stream.read()


def stomp_files(root: str) -> Dict[str, List[str]]:
    """The recorded files under ``root`` by connection and direction (``conn-0001.c2s``), pieces in order."""
    found: Dict[str, List[str]] = {}
    for folder, _, names in os.walk(root):
        for name in sorted(names):
            if name.endswith((".stomp", ".stomp.gz")):
                stem = name.split(".stomp")[0].split("_")[0]
                found.setdefault(stem, []).append(os.path.join(folder, name))
    return {key: sorted(value) for key, value in found.items()}


def joined(paths: List[str]) -> bytes:
    return b"".join(read_file(p) for p in paths)
