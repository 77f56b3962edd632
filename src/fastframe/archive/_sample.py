"""Seeded sample archives of recorded STOMP traffic, for demos, tests and benchmarks.

``generate_archive(out_dir, ...)`` writes a folder that looks like what a
capture tool or a broker's trace leaves behind: per connection, the bytes each
side sent, as frame streams::

    out_dir/
      rabbit-1/2026-11-21/conn-0001.s2c.stomp      broker -> client (generate_stream)
      rabbit-1/2026-11-21/conn-0001.c2s.stomp      client -> broker (fastframe.encode)
      rabbit-2/2026-11-22/conn-0004.s2c.stomp.gz   every third connection gzip-compressed
      ...
      _manifest.json                               what was written (skipped by readers: it starts with _)

Broker streams come from :func:`generate_stream` (RabbitMQ's
header order, JSON/text/binary bodies with NULs, NUL+EOL trailers, heart-beat
EOLs); client streams (CONNECT, SUBSCRIBE, SEND, ACK, DISCONNECT with EOL
heart-beats) are encoded with :func:`fastframe.encode`. Every fourth
connection uses CRLF. With ``malformed=True`` two files are damaged the way
real archives are: a capture cut off in the middle of a frame (``truncated``)
and a client frame whose content-length is larger than its body
(``missing-null``; RabbitMQ closes such connections). The same arguments give
the same bytes on every platform.

Needs the codec only (no Spark): ``fastframe sample-archive DIR`` runs it;
``fastframe.spark.generate_archive`` is the same function.
"""

from __future__ import annotations

import gzip
import json
import os
import random
from typing import Any, Dict, List, Optional, Tuple

from ..codec import DecodeError, Decoder, decode, encode
from ._sample_stream import generate_stream

__all__ = ["generate_archive"]

_DESTINATIONS = ("/queue/orders", "/queue/invoices", "/topic/prices.eu", "/exchange/amq.fanout/audit")
_BROKERS = ("rabbit-1", "rabbit-2")


def _client_stream(rng: random.Random, n_frames: int, crlf: bool) -> bytes:
    """A client's side of a connection: CONNECT, SUBSCRIBE, SENDs and ACKs, DISCONNECT."""
    eol = "\r\n" if crlf else "\n"
    out = bytearray()

    def add(command: str, headers: List[Tuple[str, str]], body: bytes = b"") -> None:
        out.extend(encode(command, headers, body, eol=eol))
        if rng.random() < 0.2:
            out.extend(eol.encode("ascii") * rng.randrange(1, 3))  # heart-beats while idle

    add("CONNECT", [("accept-version", "1.2"), ("host", "/"), ("login", "guest"), ("passcode", "guest"),
                    ("heart-beat", "0,1000")])  # fmt: skip
    add("SUBSCRIBE", [("id", "sub-0"), ("destination", rng.choice(_DESTINATIONS)), ("ack", "client-individual"),
                      ("receipt", "r-sub")])  # fmt: skip
    for seq in range(max(0, n_frames - 3)):
        if rng.random() < 0.6:
            doc = {"id": seq, "amount": rng.randrange(100, 99999) / 100, "currency": rng.choice(("EUR", "USD", "JPY"))}
            headers = [("destination", rng.choice(_DESTINATIONS)), ("content-type", "application/json"),
                       ("x-seq", str(seq))]  # fmt: skip
            if rng.random() < 0.1:
                headers.append(("receipt", f"r-{seq}"))
            add("SEND", headers, json.dumps(doc).encode("utf-8"))
        else:
            add("ACK", [("id", f"T_sub-0@@session-{rng.randrange(1 << 32):08x}@@{seq}")])
    add("DISCONNECT", [("receipt", "r-bye")])
    return bytes(out)


def _count_frames(data: bytes) -> int:
    """Frames a reader gets before any error."""
    decoder = Decoder()
    try:
        return len(decoder.feed(data))
    except DecodeError as err:
        return len(err.frames)


def _truncate_mid_frame(data: bytes, fraction: float) -> bytes:
    """Cut ``data`` inside a frame (a capture killed mid-write)."""
    cut = int(len(data) * fraction)
    frames = decode(data)
    for frame in frames:
        if frame.offset > cut:
            return data[: frame.offset + 5]  # five bytes into a frame's command line
    return data[: max(1, len(data) - 2)]


def _bad_content_length(rng: random.Random, crlf: bool) -> bytes:
    """A client stream in which one SEND announces more bytes than its body has."""
    eol = "\r\n" if crlf else "\n"
    good = _client_stream(rng, 12, crlf)
    head = f"SEND{eol}destination:/queue/orders{eol}content-length:40{eol}{eol}".encode("ascii")
    broken = head + b"short\0" + encode("SEND", [("destination", "/queue/orders")], b"after", eol=eol)
    return good + broken


def generate_archive(
    out_dir: str,
    connections: int = 12,
    frames: int = 2000,
    seed: int = 0,
    malformed: bool = True,
    gzip_every: int = 3,
) -> Dict[str, Any]:
    """Write a sample archive under ``out_dir``; return its manifest (also saved as ``_manifest.json``).

    ``connections`` pairs of files (broker and client side) of about
    ``frames`` and ``frames // 2`` frames each. The manifest lists every
    file with its size, frame count and, for the damaged ones, the expected
    error code.
    """
    if connections < 1 or frames < 1:
        raise ValueError("connections and frames must be at least 1")
    rng = random.Random(seed)
    files: List[Dict[str, Any]] = []
    for number in range(1, connections + 1):
        broker = _BROKERS[(number - 1) % len(_BROKERS)]
        day = f"2026-11-{21 + (number - 1) // 4:02d}"
        folder = os.path.join(out_dir, broker, day)
        os.makedirs(folder, exist_ok=True)
        crlf = number % 4 == 0
        compress = gzip_every > 0 and number % gzip_every == 0
        s2c = generate_stream(frames, seed=seed * 100_003 + number, crlf=crlf)
        c2s = _client_stream(random.Random(rng.random()), max(3, frames // 2), crlf)
        expected: Dict[str, Optional[str]] = {"s2c": None, "c2s": None}
        if malformed and number == 2:
            s2c = _truncate_mid_frame(s2c, 0.7)
            expected["s2c"] = "truncated"
        if malformed and number == 3:
            c2s = _bad_content_length(random.Random(rng.random()), crlf)
            expected["c2s"] = "missing-null"
        for side, data in (("s2c", s2c), ("c2s", c2s)):
            name = f"conn-{number:04d}.{side}.stomp"
            path = os.path.join(folder, name)
            if compress and side == "s2c":
                path += ".gz"
                payload = gzip.compress(data, compresslevel=6, mtime=0)  # mtime 0: same bytes every run
            else:
                payload = data
            with open(path, "wb") as out:
                out.write(payload)
            files.append(
                {
                    "path": os.path.relpath(path, out_dir),
                    "bytes": len(payload),
                    "stream_bytes": len(data),
                    "frames": _count_frames(data),
                    "crlf": crlf,
                    "gzip": path.endswith(".gz"),
                    "error": expected[side],
                }
            )
    manifest = {
        # the module's name before it moved out of fastframe.spark (still importable there): same arguments,
        # same bytes, manifest included
        "generator": "fastframe.archive.generate_archive",
        "seed": seed,
        "connections": connections,
        "frames": sum(f["frames"] for f in files),
        "bytes": sum(f["bytes"] for f in files),
        "files": files,
    }
    with open(os.path.join(out_dir, "_manifest.json"), "w") as out:
        json.dump(manifest, out, indent=1)
    return manifest
