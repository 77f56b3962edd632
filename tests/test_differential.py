"""Differential tests: the compiled twin and the Python twin on the same input.

Both twins get the same valid, mutated and random streams, cut at the same
random places, under the same random options and limits, and must return the
same frames (offsets included) and heart-beats, or raise the same error class
at the same offset with the same message and the same frames before it.
Encoding is compared the same way, and each twin decodes what the other
encoded.

``FASTFRAME_DIFF_EXAMPLES`` sets the number of examples per test (default 1500;
the closing note of the compiled-twin issue reports a run with 100,000).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Sequence, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _strategies import column_rows
from conftest import compiled_twin
from fastframe import DecodeError, FrameError
from fastframe.archive import generate_stream
from fastframe.codec import _codec_py as P

C = compiled_twin()  # a skip for the whole module when absent by design

EXAMPLES = int(os.environ.get("FASTFRAME_DIFF_EXAMPLES", "1500"))
DIFF = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=False,
)
examples_run = {"decode": 0, "encode": 0, "columns": 0, "long": 0}

COMMANDS = ["SEND", "MESSAGE", "ERROR", "CONNECT", "CONNECTED", "STOMP", "SUBSCRIBE", "ACK", "NACK", "RECEIPT", "FOO"]
TEXT = st.text(alphabet=st.sampled_from(list("ab:\\\n\rcnr é☃ \t")), max_size=8) | st.text(
    alphabet=st.sampled_from(list("abcdefgh:\\né")), min_size=7, max_size=48
)  # long enough for the compiled twin's 8-byte scans and its cache of short fields
HEADER = st.tuples(TEXT.filter(bool), TEXT)
FRAMES = st.lists(
    st.tuples(st.sampled_from(COMMANDS), st.lists(HEADER, max_size=4), st.binary(max_size=24)), max_size=4
)
INSERTS = [b"\n", b"\r", b"\0", b"\\", b":", b"\r\n", b"\xff", b"\xc3", b"content-length:2\n", b"\n\n"]


@st.composite
def decoder_options(draw: Any) -> Dict[str, Any]:
    options: Dict[str, Any] = {"heartbeat_events": draw(st.booleans())}
    if draw(st.booleans()):
        options["version"] = draw(st.sampled_from(["1.0", "1.1", "1.2"]))
    for flag in ("strict", "allow_missing_colon", "keep_undefined_escapes", "keep_invalid_utf8"):
        if draw(st.integers(0, 3)) == 0:
            options[flag] = True
    for flag in ("allow_colon_in_value", "allow_bare_cr"):
        if draw(st.integers(0, 3)) == 0:
            options[flag] = draw(st.booleans())
    if draw(st.integers(0, 3)) == 0:
        options["escapes"] = draw(st.sampled_from(["1.0", "1.1", "1.2"]))
    limits = {
        "max_header_count": (0, 6),
        "max_line_length": (1, 40),
        "max_body_size": (0, 40),
        "max_frame_size": (2, 120),
    }
    for name, (low, high) in limits.items():
        if draw(st.integers(0, 3)) == 0:
            options[name] = draw(st.integers(low, high))
    return options


def encode_valid(frames: Sequence[Tuple[str, List[Tuple[str, str]], bytes]], version: str, crlf: bool) -> bytes:
    """Frames the encoder accepts, joined with heart-beats; the rest is dropped."""
    eol = "\r\n" if crlf else "\n"
    parts = []
    for command, headers, body in frames:
        try:
            parts.append(P.encode(command, headers, body, version=version, eol=eol))
        except FrameError:
            continue
    return (eol.encode()).join(parts)


@st.composite
def streams(draw: Any) -> bytes:
    kind = draw(st.sampled_from(["valid", "mutated", "mutated", "random"]))
    if kind == "random":
        return bytes(draw(st.binary(max_size=80)))
    data = bytearray(encode_valid(draw(FRAMES), draw(st.sampled_from(["1.0", "1.1", "1.2"])), draw(st.booleans())))
    if kind == "mutated":
        for _ in range(draw(st.integers(1, 4))):
            operation = draw(st.sampled_from(["flip", "insert", "truncate", "delete"]))
            at = draw(st.integers(0, len(data)))
            if operation == "flip" and at < len(data):
                data[at] ^= 1 << draw(st.integers(0, 7))
            elif operation == "insert":
                data[at:at] = draw(st.sampled_from(INSERTS))
            elif operation == "truncate":
                del data[at:]
            elif operation == "delete":
                del data[at : at + draw(st.integers(1, 4))]
    return bytes(data)


def outcome(module: Any, data: bytes, cuts: Sequence[int], options: Dict[str, Any]) -> Tuple[Any, ...]:
    """Everything observable about decoding ``data`` fed in pieces ending at ``cuts``."""
    decoder = module.Decoder(**options)
    seen: List[Any] = []

    def describe(items: List[Any]) -> List[Any]:
        return [
            ("frame", item.command, item.headers, item.body, item.offset)
            if hasattr(item, "command")
            else ("heartbeat", item.offset, item.eol)
            for item in items
        ]

    try:
        start = 0
        for cut in list(cuts) + [len(data)]:
            seen += describe(decoder.feed(data[start:cut]))
            start = cut
        decoder.close()
    except DecodeError as error:
        seen += describe(error.frames)
        return ("error", type(error), error.offset, str(error), getattr(error, "limit", None), seen, decoder.heartbeats)
    return ("ok", seen, decoder.heartbeats, decoder.bytes_fed, decoder.buffered)


@DIFF
@given(data=streams(), options=decoder_options(), cut_seed=st.lists(st.integers(0, 10_000), max_size=6))
def test_twins_decode_identically(data: bytes, options: Dict[str, Any], cut_seed: List[int]) -> None:
    examples_run["decode"] += 1
    cuts = sorted({seed % (len(data) + 1) for seed in cut_seed})
    compiled = outcome(C, data, cuts, options)
    assert compiled == outcome(P, data, cuts, options)
    # however it is cut, the result is the same (messages may show fewer bytes when cut)
    whole = outcome(P, data, [], options)
    if compiled[0] == "ok":
        assert compiled[:3] == whole[:3]
    else:
        assert (compiled[1], compiled[2], compiled[4], compiled[5]) == (whole[1], whole[2], whole[4], whole[5])


def column_outcome(
    module: Any, data: bytes, cuts: Sequence[int], options: Dict[str, Any], takes: List[Tuple[int, int]]
) -> Tuple[Any, ...]:
    """Everything observable about a ColumnDecoder fed ``data`` in pieces, taking rows between pieces."""
    decoder = module.ColumnDecoder(**options)
    batches: List[Any] = []
    pending: List[Any] = []
    limits = iter(takes)

    def take() -> None:
        max_rows, max_bytes = next(limits, (0, 0))
        batches.append(decoder.take(max_rows or None, max_bytes or None))

    try:
        start = 0
        for cut in list(cuts) + [len(data)]:
            pending.append(decoder.feed(data[start:cut]))
            pending.append(decoder.pending_bytes)
            take()
            start = cut
        decoder.close()
        result: Tuple[Any, ...] = ("ok", decoder.heartbeats, decoder.bytes_fed, decoder.buffered)
    except DecodeError as error:
        assert error.frames == []  # the rows stay in the decoder
        result = ("error", type(error), error.offset, str(error), getattr(error, "limit", None), decoder.heartbeats)
    while decoder.rows:
        take()
    return result + (pending, batches)


@DIFF
@given(
    data=streams(),
    options=decoder_options(),
    cut_seed=st.lists(st.integers(0, 10_000), max_size=6),
    takes=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60)), max_size=8),
)
def test_twins_decode_to_the_same_columns(
    data: bytes, options: Dict[str, Any], cut_seed: List[int], takes: List[Tuple[int, int]]
) -> None:
    examples_run["columns"] += 1
    options.pop("heartbeat_events")
    options.pop("keep_invalid_utf8", None)  # a ColumnDecoder refuses it (test_columns)
    cuts = sorted({seed % (len(data) + 1) for seed in cut_seed})
    compiled = column_outcome(C, data, cuts, options, takes)
    assert compiled == column_outcome(P, data, cuts, options, takes)
    # the rows are the frames the plain decoder returns, however they were taken
    frames = outcome(P, data, cuts, options)
    expected = frames[1] if frames[0] == "ok" else frames[5]
    rows = [row for batch in compiled[-1] for row in column_rows(batch)]
    assert rows == [item[1:] for item in expected if item[0] == "frame"]
    if compiled[0] == "error":
        assert compiled[1:5] == frames[1:5]


@st.composite
def long_streams(draw: Any) -> bytes:
    """Sample broker streams (tens of KiB), sometimes damaged once: pieces then outgrow the buffered tail."""
    data = bytearray(generate_stream(draw(st.integers(5, 150)), seed=draw(st.integers(0, 2**16))))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data[at:at] = draw(st.sampled_from(INSERTS))
    return bytes(data)


@DIFF
@given(
    data=long_streams(),
    cut_seed=st.lists(st.integers(0, 2**24), max_size=12),
    takes=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20_000)), max_size=8),
)
def test_twins_decode_long_streams_identically(data: bytes, cut_seed: List[int], takes: List[Tuple[int, int]]) -> None:
    examples_run["long"] += 1
    cuts = sorted({seed % (len(data) + 1) for seed in cut_seed})
    compiled = outcome(C, data, cuts, {"heartbeat_events": True})
    assert compiled == outcome(P, data, cuts, {"heartbeat_events": True})
    whole = outcome(C, data, [], {"heartbeat_events": True})
    assert compiled[:3] == whole[:3] if compiled[0] == "ok" else compiled[1:3] == whole[1:3]
    assert column_outcome(C, data, cuts, {}, takes) == column_outcome(P, data, cuts, {}, takes)


ENCODE_TEXT = st.text(max_size=6) | TEXT


@DIFF
@given(
    command=st.sampled_from(COMMANDS) | st.text(max_size=5),
    headers=st.lists(st.tuples(ENCODE_TEXT, ENCODE_TEXT), max_size=4),
    body=st.binary(max_size=20),
    version=st.sampled_from(["1.0", "1.1", "1.2"]),
    escapes=st.sampled_from([None, "1.0", "1.1", "1.2"]),
    content_length=st.sampled_from([None, True, False]),
    eol=st.sampled_from(["\n", "\r\n"]),
    add_length=st.sampled_from([None, "right", "wrong"]),
)
def test_twins_encode_identically(
    command: str,
    headers: List[Tuple[str, str]],
    body: bytes,
    version: str,
    escapes: Any,
    content_length: Any,
    eol: str,
    add_length: Any,
) -> None:
    examples_run["encode"] += 1
    if add_length:
        headers = headers + [("content-length", str(len(body) + (add_length == "wrong")))]
    options = dict(version=version, escapes=escapes, content_length=content_length, eol=eol)
    results = []
    for module in (C, P):
        try:
            results.append(("ok", module.encode(command, headers, body, **options)))
        except FrameError as error:
            results.append(("error", type(error), str(error)))
    assert results[0] == results[1]
    if results[0][0] == "ok":
        encoded = results[0][1]
        # cross-twin round trip: what one encodes, the other decodes back
        decode_options = dict(version=version, escapes=escapes, allow_missing_colon=False)
        from_c = C.decode(encoded, **decode_options)
        from_py = P.decode(encoded, **decode_options)
        assert from_c == from_py
        expected = list(headers)
        if not any(name == "content-length" for name, _ in headers):
            if content_length or (content_length is None and body) or b"\0" in body:
                expected.append(("content-length", str(len(body))))
        assert [(f.command, list(f.headers), f.body) for f in from_py] == [(command, expected, body)]


@pytest.mark.parametrize("module", [C, P], ids=["c", "py"])
def test_same_bytes_decode_by_their_frame(module: Any) -> None:
    # the compiled twin caches fields by their wire bytes: the same bytes in a
    # CONNECT frame (never unescaped) and a SEND frame (unescaped) must differ
    line = b"x-path:C\\\\dir\\cname"
    stream = b"CONNECT\n" + line + b"\n\n\0SEND\n" + line + b"\n\n\0CONNECT\n" + line + b"\n\n\0"
    connect, send, again = module.decode(stream)
    assert connect.get("x-path") == again.get("x-path") == "C\\\\dir\\cname"
    assert send.get("x-path") == "C\\dir:name"


def test_examples_were_run() -> None:
    # reported by `pytest -s`; guards against a silently empty property run
    print(f"differential examples run: {examples_run}")
    for kind in ("decode", "columns", "long"):
        assert examples_run[kind] >= min(EXAMPLES, 100) or examples_run[kind] == 0
