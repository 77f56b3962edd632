"""Encoding: random frames and options; both twins give the same bytes or the same error, and the
output decodes (by either twin) back to the frame, with content-length added as documented."""

from __future__ import annotations

import random
from typing import Any, Iterator, List, Tuple

from _common import C, Draw, P, streams

from fastframe import EncodeError

MAX_LEN = 1024
COMMANDS = ["SEND", "MESSAGE", "ERROR", "CONNECT", "CONNECTED", "STOMP", "SUBSCRIBE", "ACK", "RECEIPT", "DISCONNECT"]


def encode_both(command: str, headers: Any, body: bytes, options: Any) -> List[Tuple[Any, ...]]:
    results = []
    for module in (C, P):
        try:
            wire = module.encode(command, headers, body, **options)
            as_frame = module.Frame(command, headers, body).encode(**options)
            assert as_frame == wire, (as_frame, wire)
            assert module.Encoder(**options).encode(command, headers, body) == wire
            results.append(("ok", wire))
        except EncodeError as error:
            results.append(("error", type(error), error.code, str(error)))
    return results


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    command = draw.pick(COMMANDS) if draw.byte() % 4 else draw.text(6)
    headers = [(draw.text(6), draw.text(10)) for _ in range(draw.byte() % 5)]
    body = draw.binary(64)
    length = draw.byte() % 4
    if length == 1:
        headers.append(("content-length", str(len(body))))
    elif length == 2:
        headers.append(("content-length", draw.pick(["", "-1", "01", " 3", str(len(body) + 1), "1e3", "٣"])))
    version = draw.pick(["1.0", "1.1", "1.2"])
    options = {
        "version": version,
        "escapes": draw.pick([None, "1.0", "1.1", "1.2"]),
        "content_length": draw.pick([None, True, False]),
        "eol": draw.pick(["\n", "\r\n"]),
    }
    given: Any = dict(headers) if draw.byte() % 4 == 0 else headers
    results = encode_both(command, given, body, options)
    assert results[0] == results[1], results
    if results[0][0] != "ok":
        return
    wire = results[0][1]
    pairs = list(given.items()) if isinstance(given, dict) else headers
    expected = list(pairs)
    if not any(name == "content-length" for name, _ in pairs):
        content_length = options["content_length"]
        if content_length or (content_length is None and body) or b"\0" in body:
            expected.append(("content-length", str(len(body))))
    for module in (C, P):
        frames = module.decode(wire, version, escapes=options["escapes"])
        assert [(f.command, list(f.headers), f.body) for f in frames] == [(command, expected, body)], (frames, wire)


def seeds() -> Iterator[Tuple[str, bytes]]:
    # any bytes are a valid input here: a few streams and random-looking bytes start the corpus
    for name, stream in streams(max_size=MAX_LEN):
        yield name, stream[:MAX_LEN]
    for i in range(8):
        yield f"random-{i}", random.Random(i).randbytes(64)
