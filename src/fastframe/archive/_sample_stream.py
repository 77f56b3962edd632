"""Seeded, realistic sample STOMP streams (what a broker sends a subscriber).

``generate_stream(n_frames, seed=0, crlf=False)`` returns the bytes of one
broker-to-client STOMP 1.2 stream: a CONNECTED frame, then MESSAGE frames
shaped like RabbitMQ's (``subscription, destination, message-id,
redelivered, ack``, custom headers, ``content-type``, ``content-length``)
with a mix of bodies:

* JSON documents (``application/json``) with content-length;
* UTF-8 text (``text/plain;charset=utf-8``), some without content-length
  (as ActiveMQ forwards them), some starting with LF;
* binary bodies with NUL bytes (``application/octet-stream``), always with
  content-length, now and then one of 64 KiB;
* empty bodies without content-length or content-type (as RabbitMQ sends them).

Every frame ends with NUL and an EOL (both brokers do this), and idle
heart-beat EOLs sit between some frames. Header values with ``:`` are
1.2-escaped (``\\c``). ``crlf=True`` ends every line and heart-beat with
CRLF instead of LF. The output depends only on the arguments: the same seed
gives the same bytes on every platform and Python version. Every frame is
valid STOMP 1.2 (see ``fastframe.protocol.spec.frame_problems``) and the stream
decodes with the default and with ``strict=True`` decoders.

Public as :func:`fastframe.archive.generate_stream` (and ``DEFAULT_SEED``): the benchmarks, the
sample archives (:func:`fastframe.archive.generate_archive`), the fuzz seeds and ``fastframe sample``
use it.
"""

from __future__ import annotations

import json
import random
from typing import List, Tuple

__all__ = ["generate_stream", "DEFAULT_SEED"]

DEFAULT_SEED = 0

_ESCAPES_12 = str.maketrans({"\\": "\\\\", "\r": "\\r", "\n": "\\n", ":": "\\c"})
_DESTINATIONS = ("/queue/orders", "/queue/invoices", "/topic/prices.eu", "/exchange/amq.fanout/audit")
_WORDS = (
    "order", "shipped", "payment", "received", "invoice", "café", "Größe", "naïve", "日本",
    "warehouse", "ready", "delayed", "retry", "customer", "refund", "ok",
)  # fmt: skip


def _hex(rng: random.Random, digits: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(digits))


def _json_body(rng: random.Random, seq: int) -> bytes:
    items = [
        {
            "sku": f"SKU-{rng.randrange(10000):04d}",
            "qty": rng.randrange(1, 10),
            "price": rng.randrange(100, 99999) / 100,
        }
        for _ in range(rng.randrange(1, 8))
    ]
    doc = {
        "id": seq,
        "customer": f"c-{rng.randrange(100000)}",
        "status": rng.choice(("new", "paid", "shipped", "cancelled")),
        "items": items,
        "note": " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(0, 6))),
    }
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


def _text_body(rng: random.Random) -> bytes:
    lines = [" ".join(rng.choice(_WORDS) for _ in range(rng.randrange(1, 12))) for _ in range(rng.randrange(1, 6))]
    text = "\n".join(lines)
    if rng.random() < 0.15:
        text = "\n" + text  # ActiveMQ delivers some bodies starting with LF
    return text.encode("utf-8")


def _binary_body(rng: random.Random) -> bytes:
    size = 65536 if rng.random() < 0.02 else rng.randrange(16, 2048)
    body = bytearray(rng.randbytes(size))
    for _ in range(1 + size // 64):  # make sure there are NULs, including a fake frame end
        body[rng.randrange(size)] = 0
    return bytes(body)


def _message(rng: random.Random, seq: int, session: str) -> Tuple[List[Tuple[str, str]], bytes]:
    message_id = f"T_sub-0@@{session}@@{seq}"
    headers = [
        ("subscription", "sub-0"),
        ("destination", rng.choice(_DESTINATIONS)),
        ("message-id", message_id),
        ("redelivered", "true" if rng.random() < 0.05 else "false"),
        ("ack", message_id),
    ]
    # custom headers come back in reverse order of the SEND (RabbitMQ)
    custom = [("x-seq", str(seq)), ("x-trace-id", _hex(rng, 16))]
    if rng.random() < 0.3:
        custom.append(("x-time", f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"))
    if rng.random() < 0.2:
        custom.append(("persistent", "true"))
    headers += reversed(custom)

    kind = rng.random()
    with_length = True
    if kind < 0.45:
        body = _json_body(rng, seq)
        headers.append(("content-type", "application/json"))
    elif kind < 0.78:
        body = _text_body(rng)
        headers.append(("content-type", "text/plain;charset=utf-8"))
        with_length = rng.random() < 0.6
    elif kind < 0.93:
        body = _binary_body(rng)
        headers.append(("content-type", "application/octet-stream"))
    else:
        body = b""
        with_length = False  # RabbitMQ omits content-length on empty bodies
    if with_length:
        headers.append(("content-length", str(len(body))))
    return headers, body


def _frame(command: str, headers: List[Tuple[str, str]], body: bytes, eol: str, escape: bool) -> bytes:
    lines = [command]
    for name, value in headers:
        if escape:
            name, value = name.translate(_ESCAPES_12), value.translate(_ESCAPES_12)
        lines.append(f"{name}:{value}")
    head = eol.join(lines) + eol + eol
    return head.encode("utf-8") + body + b"\0" + eol.encode("ascii")


def generate_stream(n_frames: int, seed: int = DEFAULT_SEED, crlf: bool = False) -> bytes:
    """The bytes of a sample broker-to-client stream of ``n_frames`` frames.

    The first frame is CONNECTED (``version:1.2``), the others MESSAGE; see
    the module docstring for what they contain. Deterministic for a given
    ``(n_frames, seed, crlf)``, and a longer stream with the same seed starts
    with the shorter one's frames. ``crlf=True`` uses CRLF for every EOL.
    """
    if type(n_frames) is not int or n_frames < 0:
        raise ValueError(f"n_frames must be an int >= 0, not {n_frames!r}")
    rng = random.Random(seed)
    eol = "\r\n" if crlf else "\n"
    eol_b = eol.encode("ascii")
    session = f"session-{_hex(rng, 8)}"
    out = bytearray()
    if n_frames:
        connected = [
            ("server", "RabbitMQ/3.10.8"),
            ("session", session),
            ("heart-beat", rng.choice(("0,0", "10000,10000", "1000,0"))),
            ("version", "1.2"),
        ]
        out += _frame("CONNECTED", connected, b"", eol, escape=False)
    for seq in range(1, n_frames):
        if rng.random() < 0.1:
            out += eol_b * rng.randrange(1, 4)  # idle heart-beats
        headers, body = _message(rng, seq, session)
        out += _frame("MESSAGE", headers, body, eol, escape=True)
    return bytes(out)
