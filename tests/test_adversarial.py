"""Hostile streams against both twins: each ends in the right typed error (or the right frames),
holds no more memory than the configured limits allow, and takes time linear in its size.

Sizes are kept small enough for a fast suite; ``python -m bench.eol_flood`` measures the full
figures (100 MB of EOLs, 1 GiB of header bytes). Memory is checked two ways: the decoder's own
``buffered`` count after every piece, and tracemalloc's peak (both twins allocate through
Python's allocators, so both are traced). Time is compared between two sizes in one run.
"""

from __future__ import annotations

import array
import time
import tracemalloc
from types import ModuleType
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import compiled_twin
from fastframe import (
    CommandError,
    DecodeError,
    HeaderLineError,
    InvalidEscapeError,
    LimitExceededError,
    TruncatedError,
)
from fastframe.codec import _codec_py as P
from fastframe.codec._errors import NOT_BYTES, NOT_CONTIGUOUS

C = compiled_twin()  # a skip for the whole module when absent by design

KiB = 1024
MiB = 1024 * KiB


def pieces(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def repeat(piece: bytes, total: int) -> Iterator[bytes]:
    """``piece`` again and again, ``total`` bytes in all (an endless stream, cut off)."""
    for _ in range(total // len(piece)):
        yield piece


class Run:
    """What feeding a stream piece by piece gave: frames, the error, the most bytes held, the peak traced memory."""

    def __init__(self) -> None:
        self.items: List[Any] = []
        self.error: Optional[DecodeError] = None
        self.fed = 0
        self.max_buffered = 0
        self.peak = 0


def feed_all(decoder: Any, stream: Iterable[bytes], trace: bool = False) -> Run:
    run = Run()
    if trace:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
    try:
        for piece in stream:
            run.fed += len(piece)
            run.items += decoder.feed(piece)
            run.max_buffered = max(run.max_buffered, decoder.buffered)
    except DecodeError as error:
        run.error = error
        run.items += error.frames
        run.max_buffered = max(run.max_buffered, decoder.buffered)
    finally:
        if trace:
            run.peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
    return run


def assert_linear(work: Callable[[int], None], small: int, factor: int = 8, slack: float = 3.0) -> None:
    """CPU time of ``work(factor * small)`` over ``work(small)``, best of 3 each, is at most ``slack * factor``.

    With the defaults a linear cost gives about 8 and a quadratic one 64: the bound (24) leaves room
    for a shared machine's noise and for caches (a small input may fit in them, a large one not).
    """

    def best(size: int) -> float:
        # CPU time of this process: other processes on a shared machine do not count
        times = []
        for _ in range(3):
            start = time.process_time()
            work(size)
            times.append(time.process_time() - start)
        return min(times)

    best(small)  # warm up
    ratio = best(factor * small) / max(best(small), 1e-6)
    assert ratio < slack * factor, f"{factor}x the input took {ratio:.1f}x the time"


# ------------------------------------------------------------------ lines and heads


def test_an_endless_header_line_stops_at_the_line_limit(codec: ModuleType) -> None:
    decoder = codec.Decoder(max_line_length=64 * KiB)
    run = feed_all(decoder, [b"SEND\nx:"] + list(repeat(b"a" * 8 * KiB, 64 * MiB)), trace=True)
    assert isinstance(run.error, LimitExceededError)
    assert (run.error.limit, run.error.offset) == ("max_line_length", 5 + 64 * KiB)
    assert run.fed < 64 * KiB + 16 * KiB  # stopped as soon as the line was too long
    assert run.max_buffered <= 64 * KiB + 8 * KiB
    assert run.peak < 1 * MiB


def test_a_gigabyte_of_header_bytes_is_held_to_the_frame_limit(codec: ModuleType) -> None:
    # no header count limit: the frame limit alone bounds the buffer (1 GiB against 1 MiB in the script)
    decoder = codec.Decoder(max_header_count=2**62, max_frame_size=256 * KiB)
    head = b"a:b\n" * (4 * KiB)
    run = feed_all(decoder, [b"SEND\n"] + list(repeat(head, 256 * MiB)), trace=True)
    assert isinstance(run.error, LimitExceededError)
    assert (run.error.limit, run.error.offset) == ("max_frame_size", 256 * KiB)
    assert run.fed < 256 * KiB + 2 * len(head)
    assert run.max_buffered < 512 * KiB
    # the buffer, plus the decoded headers of one frame (a tuple each in the Python twin: 64 KiB of them)
    assert run.peak < 8 * MiB


def test_millions_of_tiny_headers_decode_in_linear_time(codec: ModuleType) -> None:
    def frame(count: int) -> bytes:
        return b"SEND\n" + b"a:b\n" * count + b"\n\0"

    def work(count: int) -> None:
        decoder = codec.Decoder(max_header_count=count, max_frame_size=2**62)
        (decoded,) = feed_all(decoder, pieces(frame(count), 64 * KiB)).items
        assert len(decoded.headers) == count

    assert_linear(work, 25_000)
    # one header too many: the count limit, at the start of that line
    error = feed_all(codec.Decoder(max_header_count=99_999), pieces(frame(100_000), 64 * KiB)).error
    assert isinstance(error, LimitExceededError)
    assert (error.limit, error.offset) == ("max_header_count", 5 + 4 * 99_999)


def test_the_default_header_count_limit(codec: ModuleType) -> None:
    run = feed_all(codec.Decoder(), [b"SEND\n"] + list(repeat(b"a:b\n" * 1024, 64 * MiB)))
    assert isinstance(run.error, LimitExceededError)
    assert (run.error.limit, run.error.offset) == ("max_header_count", 5 + 4 * 1000)
    assert run.fed < 16 * KiB


# ------------------------------------------------------------------ bodies


def test_a_four_gigabyte_content_length_is_refused_before_any_body_byte(codec: ModuleType) -> None:
    head = b"SEND\ncontent-length:4294967296\n\n"
    run = feed_all(codec.Decoder(), [head] + list(repeat(b"x" * KiB, 1 * MiB)))
    assert isinstance(run.error, LimitExceededError)
    assert (run.error.limit, run.error.offset) == ("max_body_size", head.index(b"4294967296"))
    assert run.fed == len(head)


def test_a_four_gigabyte_body_allowed_by_the_limits_holds_only_what_arrived(codec: ModuleType) -> None:
    # the limits allow it, the peer trickles: memory follows the bytes received, not the content-length
    decoder = codec.Decoder(max_body_size=2**33, max_frame_size=2**34)
    head = b"SEND\ncontent-length:4294967296\n\n"
    run = feed_all(decoder, [head] + list(repeat(b"x" * 512, 2 * MiB)), trace=True)
    assert run.error is None and run.items == []
    assert decoder.buffered == len(head) + 2 * MiB
    assert run.peak < 8 * MiB
    with pytest.raises(TruncatedError):
        decoder.close()


def test_a_large_content_length_reserves_nothing_in_advance(codec: ModuleType) -> None:
    # 64 MiB announced, 100 KiB sent: what is held follows the 100 KiB (at most about twice it), so a
    # peer cannot make a decoder spend memory by announcing a size (a thousand connections, a thousand times)
    decoder = codec.Decoder()
    head = b"SEND\ncontent-length:67108864\n\n"
    run = feed_all(decoder, [head] + list(repeat(b"x" * 1024, 100 * 1024)), trace=True)
    assert run.error is None and run.items == []
    assert decoder.buffered == len(head) + 100 * 1024
    assert run.peak < 512 * 1024


def test_a_body_under_a_mebibyte_is_not_reserved_for_a_trickle(codec: ModuleType) -> None:
    # the compiled twin allocates a body of at most 1 MiB once at its final size, but only once a
    # sixteenth of it has arrived: a 1 MB announcement followed by 1 KiB reserves no megabyte
    decoder = codec.Decoder()
    head = b"SEND\ncontent-length:1000000\n\n"
    run = feed_all(decoder, [head] + list(repeat(b"x" * 256, 1024)), trace=True)
    assert run.error is None and run.items == [] and decoder.buffered == len(head) + 1024
    assert run.peak < 256 * 1024


def test_a_body_that_never_ends_stops_at_the_body_limit(codec: ModuleType) -> None:
    decoder = codec.Decoder(max_body_size=1 * MiB, max_frame_size=4 * MiB)
    run = feed_all(decoder, [b"SEND\n\n"] + list(repeat(b"x" * 64 * KiB, 256 * MiB)), trace=True)
    assert isinstance(run.error, LimitExceededError)
    assert (run.error.limit, run.error.offset) == ("max_body_size", 6 + 1 * MiB)
    assert run.max_buffered <= 1 * MiB + 128 * KiB
    assert run.peak < 4 * MiB


def test_a_frame_that_never_ends_stops_at_the_frame_limit(codec: ModuleType) -> None:
    decoder = codec.Decoder(max_frame_size=1 * MiB)
    run = feed_all(decoder, [b"SEND\n\n"] + list(repeat(b"x" * 7 * KiB, 256 * MiB)), trace=True)
    assert isinstance(run.error, LimitExceededError)
    assert (run.error.limit, run.error.offset) == ("max_frame_size", 1 * MiB)
    assert run.max_buffered <= 1 * MiB + 7 * KiB
    assert run.peak < 4 * MiB


# ------------------------------------------------------------------ NUL and EOL floods


def test_a_nul_flood_is_a_command_line_too_long(codec: ModuleType) -> None:
    run = feed_all(codec.Decoder(), repeat(b"\0" * 64 * KiB, 64 * MiB), trace=True)
    assert isinstance(run.error, LimitExceededError)
    assert (run.error.limit, run.error.offset) == ("max_line_length", 10240)
    assert run.fed == 64 * KiB and run.peak < 1 * MiB


@pytest.mark.parametrize("piece", [1, 7, 64 * KiB])
def test_nul_lines_after_a_frame_are_bad_commands(codec: ModuleType, piece: int) -> None:
    data = b"SEND\ncontent-length:1\n\n\0\0" + b"\0\n" * 1000
    run = feed_all(codec.Decoder(), pieces(data, piece))
    assert [frame.body for frame in run.items] == [b"\0"]
    assert isinstance(run.error, CommandError)
    assert (run.error.offset, run.error.reason) == (25, "NUL byte in command")


def eol_flood(size: int) -> Tuple[bytes, int]:
    """A frame, ``size`` bytes of LF and CRLF heart-beats, a frame: the stream and its EOL count."""
    frame = b"MESSAGE\ndestination:/q\ncontent-length:2\n\nhi\0"
    unit = b"\n\r\n\n\n"  # 4 EOLs in 5 bytes
    count = size // len(unit)
    return frame + unit * count + frame, 4 * count


@pytest.mark.parametrize(
    "piece, size",
    [(64 * KiB, 16 * MiB), (7, 2 * MiB), (1, 512 * KiB)],
    ids=["64KiB-pieces", "7-byte-pieces", "1-byte-pieces"],
)
def test_an_eol_flood_between_frames(codec: ModuleType, piece: int, size: int) -> None:
    data, eols = eol_flood(size)
    decoder = codec.Decoder()
    run = feed_all(decoder, pieces(data, piece))
    assert run.error is None
    assert [frame.offset for frame in run.items] == [0, len(data) - 44]
    assert decoder.heartbeats == eols
    assert run.max_buffered <= max(piece, 64)  # a frame's head at most: the EOLs are never kept
    assert decoder.buffered == 0


def test_an_eol_flood_takes_linear_time(codec: ModuleType) -> None:
    def work(size: int) -> None:
        data, eols = eol_flood(size)
        decoder = codec.Decoder()
        for piece in pieces(data, 64 * KiB):
            decoder.feed(piece)
        assert decoder.heartbeats == eols

    assert_linear(work, 2 * MiB)


def test_eol_flood_events_are_exact(codec: ModuleType) -> None:
    data = b"\n\r\n" * 1000 + b"\r"  # a lone CR at the end waits for the next byte
    decoder = codec.Decoder(heartbeat_events=True)
    events = [event for piece in pieces(data, 7) for event in decoder.feed(piece)]
    assert len(events) == 2000 and decoder.buffered == 1
    assert events[-1] == codec.Heartbeat(2998, b"\r\n")
    assert decoder.feed(b"\n") == [codec.Heartbeat(3000, b"\r\n")]
    with pytest.raises(CommandError):
        decoder.feed(b"\r\rSEND\n")  # a CR no LF follows starts a frame: a bad command


# ------------------------------------------------------------------ escapes and encodings


def test_deeply_escaped_values(codec: ModuleType) -> None:
    value = b"\\\\" * 5000  # 10,000 bytes: just inside the default line limit
    (frame,) = codec.decode(b"SEND\nx:" + value + b"\n\n\0")
    assert frame.get("x") == "\\" * 5000
    mixed = b"\\n\\c\\r\\\\" * 1250
    (frame,) = codec.decode(b"SEND\nx:" + mixed + b"\n\n\0")
    assert frame.get("x") == "\n:\r\\" * 1250


def test_deeply_escaped_values_take_linear_time_and_fail_at_the_exact_byte(codec: ModuleType) -> None:
    def work(size: int) -> None:
        line = b"x:" + b"\\\\\\n" * (size // 4)
        (frame,) = codec.decode(b"SEND\n" + line + b"\n\n\0", max_line_length=2**62)
        assert len(frame.get("x")) == size // 2

    assert_linear(work, 256 * KiB)
    line = b"x:" + b"\\\\" * (1 * MiB) + b"\\t"
    with pytest.raises(InvalidEscapeError) as caught:
        codec.decode(b"SEND\n" + line + b"\n\n\0", max_line_length=2**62)
    assert caught.value.offset == 5 + len(line) - 2


BAD_UTF8 = [
    (b"SEND\nna\xffme:v\n\n\0", HeaderLineError, 7, "invalid UTF-8 in header line"),
    (b"SEND\nx:va\xc3lue\n\n\0", HeaderLineError, 9, "invalid UTF-8 in header line"),
    (b"SEND\nx:\xed\xa0\x80\n\n\0", HeaderLineError, 7, "invalid UTF-8 in header line"),  # a surrogate
    (b"SEND\nx:\xf4\x90\x80\x80\n\n\0", HeaderLineError, 7, "invalid UTF-8 in header line"),  # past U+10FFFF
    (b"SEND\nx:ab\\\xff\n\n\0", InvalidEscapeError, 9, "undefined escape sequence " + repr("\\\\xff")),
    (b"SE\xc0\x80ND\n\n\0", CommandError, 2, "invalid UTF-8 in command"),  # an overlong NUL
    (b"\xffSEND\n\n\0", CommandError, 0, "invalid UTF-8 in command"),
    (b"CONNECT\nhost:\xff\n\n\0", HeaderLineError, 13, "invalid UTF-8 in header line"),
]


@pytest.mark.parametrize("data, cls, offset, reason", BAD_UTF8)
@pytest.mark.parametrize("piece", [1, 3, 1024])
def test_invalid_utf8_in_names_values_and_commands(
    codec: ModuleType, data: bytes, cls: type, offset: int, reason: str, piece: int
) -> None:
    run = feed_all(codec.Decoder(), pieces(data, piece))
    assert type(run.error) is cls
    assert (run.error.offset, run.error.reason) == (offset, reason)


# ------------------------------------------------------------------ API misuse


def _released() -> memoryview:
    view = memoryview(b"SEND\n\n\0")
    view.release()
    return view


MISUSE = [
    (lambda: memoryview(b"SEND\n\n\0 " * 2)[::2], BufferError, NOT_CONTIGUOUS),
    (lambda: "SEND\n\n\0", TypeError, NOT_BYTES.format("str")),
    (lambda: None, TypeError, NOT_BYTES.format("NoneType")),
    (lambda: 42, TypeError, NOT_BYTES.format("int")),
    (lambda: [83, 69], TypeError, NOT_BYTES.format("list")),
    (_released, ValueError, "operation forbidden on released memoryview object"),
]
ENTRY_POINTS = {
    "Decoder.feed": lambda module, data: module.Decoder().feed(data),
    "ColumnDecoder.feed": lambda module, data: module.ColumnDecoder().feed(data),
    "decode": lambda module, data: module.decode(data),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("make, cls, message", MISUSE, ids=["strided", "str", "None", "int", "list", "released"])
def test_misuse_gets_the_same_answer_from_both_twins(entry: str, make: Any, cls: type, message: str) -> None:
    answers = []
    for module in (C, P):
        with pytest.raises(Exception) as caught:
            ENTRY_POINTS[entry](module, make())
        answers.append((type(caught.value), str(caught.value)))
    assert answers[0] == answers[1] == (cls, message)


def test_a_refused_feed_leaves_the_decoder_usable(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    decoder.feed(b"SEND\n")
    for bad in ("x", None, memoryview(b"abcd")[::2]):
        with pytest.raises((TypeError, BufferError)):
            decoder.feed(bad)
    assert decoder.buffered == 5
    assert decoder.feed(b"\n\0")[0].command == "SEND"  # not stuck busy, not in an error state


@pytest.mark.parametrize(
    "make",
    [
        lambda data: memoryview(data).cast("B", (1, len(data))),  # two dimensions, contiguous
        lambda data: array.array("b", data),
        lambda data: memoryview(bytearray(data))[0:],
        lambda data: memoryview(b"xx" + data)[2:],
    ],
    ids=["2d", "array", "bytearray-view", "sliced-view"],
)
def test_any_contiguous_buffer_is_accepted(codec: ModuleType, make: Any) -> None:
    data = b"SEND\ncontent-length:2\n\nhi\0\n"
    expected = codec.decode(data)
    assert codec.decode(make(data)) == expected
    decoder = codec.Decoder()
    assert decoder.feed(make(data[:9])) + decoder.feed(make(data[9:])) == expected


# ------------------------------------------------------------------ large bodies in pieces
# The compiled twin copies a large body (64 KiB and more) arriving in pieces straight into the
# frame's bytes; both twins must still agree on everything observable, errors included.


def _observe(module: ModuleType, kind: str, data: bytes, cuts: List[int], close: bool) -> Any:
    decoder = getattr(module, kind)()
    seen: List[Any] = []
    try:
        start = 0
        for cut in cuts + [len(data)]:
            result = decoder.feed(data[start:cut])
            start = cut
            seen.append(
                ([(f.command, f.headers, f.body, f.offset) for f in result] if isinstance(result, list) else result)
            )
            seen.append((decoder.buffered, decoder.bytes_fed))
        if close:
            decoder.close()
    except DecodeError as error:
        seen.append((type(error), str(error), error.offset, [f.offset for f in error.frames]))
    if kind == "ColumnDecoder":
        seen.append(decoder.take())
    return seen


def _large(size: int, seed: int) -> bytes:
    body = bytes((i * 7 + seed) % 256 for i in range(size))
    return b"MESSAGE\ndestination:/q\ncontent-length:%d\n\n" % size + body


LARGE_STREAMS = {
    "two frames": _large(70_000, 1) + b"\0\n\r\n" + _large(200_000, 2) + b"\0RECEIPT\n\n\0",
    "missing NUL": _large(100_000, 3) + b"X" + b"after" * 10,
    "missing NUL at the end": _large(100_000, 4) + b"Y",
    "truncated": _large(150_000, 5)[:-1000],
    "body complete, no NUL yet": _large(65_536, 6),
    "then a bad frame": _large(90_000, 7) + b"\0SEND\nx:\\t\n\n\0",
}


@pytest.mark.parametrize("kind", ["Decoder", "ColumnDecoder"])
@pytest.mark.parametrize("name", sorted(LARGE_STREAMS))
@pytest.mark.parametrize("piece", [1000, 4096, 16, 65536, 99_999, 1 << 20])
def test_large_bodies_in_pieces_agree_between_twins(kind: str, name: str, piece: int) -> None:
    data = LARGE_STREAMS[name]
    cuts = list(range(piece, len(data), piece))
    if piece == 16:  # a few tiny pieces around the head, large ones after
        cuts = [3, 30, 60, 100, 116, 5000, 65_600, 70_100, 70_200]
    compiled = _observe(C, kind, data, [c for c in cuts if c < len(data)], close=True)
    assert compiled == _observe(P, kind, data, [c for c in cuts if c < len(data)], close=True)


@given(cuts=st.lists(st.integers(0, 300_000), max_size=12), name=st.sampled_from(sorted(LARGE_STREAMS)))
@settings(max_examples=40, deadline=None)
def test_large_bodies_cut_anywhere_agree_between_twins(cuts: List[int], name: str) -> None:
    data = LARGE_STREAMS[name]
    points = sorted({c for c in cuts if c < len(data)})
    assert _observe(C, "Decoder", data, points, close=True) == _observe(P, "Decoder", data, points, close=True)
