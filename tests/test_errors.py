"""Decoding errors: class, code, offset, excerpt, message; limits; the error state; options."""

from __future__ import annotations

import pickle
import tracemalloc
from types import ModuleType
from typing import Any, Dict, List, Optional

import pytest

import fastframe
from _strategies import events_key, feed_chunks
from fastframe import (
    BodyNotAllowedError,
    CommandError,
    ContentLengthError,
    DecodeError,
    EncodeError,
    FrameError,
    HeaderLineError,
    InvalidEscapeError,
    LimitExceededError,
    MissingNullError,
    TruncatedError,
)

KiB = 1024
MiB = 1024 * KiB


def fail(codec: ModuleType, data: bytes, **options: Any) -> DecodeError:
    """Decode ``data`` whole and byte by byte; both must fail the same way. Returns the whole-feed error."""
    errors = []
    for sizes in ([len(data)], [1] * len(data)):
        decoder = codec.Decoder(**options)
        with pytest.raises(DecodeError) as info:
            feed_chunks(decoder, data, sizes)
            decoder.close()
        errors.append(info.value)
    whole, bytewise = errors
    assert (type(bytewise), bytewise.offset, bytewise.reason) == (type(whole), whole.offset, whole.reason)
    return whole


def ok(codec: ModuleType, data: bytes, **options: Any) -> List[Any]:
    """Decode ``data`` whole and byte by byte; both must give the same frames."""
    whole = codec.decode(data, **options)
    decoder = codec.Decoder(**options)
    bytewise = feed_chunks(decoder, data, [1] * len(data))
    decoder.close()
    assert events_key(bytewise) == events_key(whole)
    return whole


# --------------------------------------------------------------------------- one test per category

CATEGORIES = [
    # name, data, options, class, offset, limit
    ("undefined-escape", b"SEND\na:b\\tc\n\n\0", {}, InvalidEscapeError, 8, None),
    ("trailing-backslash", b"SEND\na:bc\\\n\n\0", {}, InvalidEscapeError, 9, None),
    ("escape-in-name", b"SEND\na\\x:b\n\n\0", {}, InvalidEscapeError, 6, None),
    ("no-colon", b"SEND\nx:1\nnocolon\n\n\0", {}, HeaderLineError, 9, None),
    ("empty-name", b"SEND\n:v\n\n\0", {}, HeaderLineError, 5, None),
    ("nul-in-header", b"SEND\nab:c\0d\n\n\0", {}, HeaderLineError, 9, None),
    ("bad-utf8-header", b"SEND\nab:c\xffd\n\n\0", {}, HeaderLineError, 9, None),
    ("truncated-utf8-header", b"SEND\nab:\xe2\x98\n\n\0", {}, HeaderLineError, 8, None),
    ("cl-letters", b"SEND\ncontent-length:abc\n\nbody\0", {}, ContentLengthError, 20, None),
    ("cl-empty", b"SEND\ncontent-length:\n\n\0", {}, ContentLengthError, 20, None),
    ("cl-negative", b"SEND\ncontent-length:-1\n\n\0", {}, ContentLengthError, 20, None),
    ("cl-space", b"SEND\ncontent-length:1 \n\nx\0", {}, ContentLengthError, 21, None),
    ("cl-plus", b"SEND\ncontent-length:+1\n\nx\0", {}, ContentLengthError, 20, None),
    ("cl-out-of-range", b"SEND\ncontent-length:%d\n\n\0" % 2**63, {}, ContentLengthError, 20, None),
    ("missing-nul", b"SEND\ncontent-length:1\n\nxy\0", {}, MissingNullError, 24, None),
    ("missing-nul-cl0", b"SEND\ncontent-length:0\n\nx\0", {}, MissingNullError, 23, None),
    ("cr-in-command", b"SE\rND\n\n\0", {}, CommandError, 2, None),
    ("leading-cr", b"\rSEND\n\n\0", {}, CommandError, 0, None),
    ("nul-in-command", b"SE\0ND\n\n\0", {}, CommandError, 2, None),
    ("bad-utf8-command", b"SE\xc3ND\n\n\0", {}, CommandError, 2, None),
    ("unknown-command", b"\n\nFOO\n\n\0", {"strict": True}, CommandError, 2, None),
    ("body-not-allowed", b"SUBSCRIBE\nid:0\n\nx\0", {"strict": True}, BodyNotAllowedError, 16, None),
    (
        "body-not-allowed-cl",
        b"ACK\ncontent-length:2\n\nxy\0",
        {"strict": True},
        BodyNotAllowedError,
        22,
        None,
    ),
    ("colon-in-value", b"SEND\na:b:c\n\n\0", {"strict": True}, HeaderLineError, 8, None),
    ("bare-cr", b"SEND\na:b\rc\n\n\0", {"strict": True}, HeaderLineError, 8, None),
    ("truncated-head", b"SEND\na:b\n", {}, TruncatedError, 9, None),
    ("truncated-body", b"SEND\ncontent-length:5\n\nabc", {}, TruncatedError, 26, None),
    ("truncated-eol", b"SEND\n\n\0\r", {}, TruncatedError, 8, None),
    ("header-count", b"SEND\na:1\nb:2\n\n\0", {"max_header_count": 1}, LimitExceededError, 9, "max_header_count"),
    ("line-length", b"SEND\nabc:defgh\n\n\0", {"max_line_length": 8}, LimitExceededError, 13, "max_line_length"),
    ("body-size", b"SEND\n\nabcdef\0", {"max_body_size": 5}, LimitExceededError, 11, "max_body_size"),
    (
        "body-size-cl",
        b"SEND\ncontent-length:6\n\nabcdef\0",
        {"max_body_size": 5},
        LimitExceededError,
        20,
        "max_body_size",
    ),
    ("frame-size", b"SEND\n\nabcdef\0", {"max_frame_size": 10}, LimitExceededError, 10, "max_frame_size"),
]


@pytest.mark.parametrize("name, data, options, cls, offset, limit", CATEGORIES, ids=[c[0] for c in CATEGORIES])
def test_error_category(
    codec: ModuleType,
    name: str,
    data: bytes,
    options: Dict[str, Any],
    cls: type,
    offset: int,
    limit: Optional[str],
) -> None:
    err = fail(codec, data, **options)
    assert type(err) is cls
    assert isinstance(err, DecodeError) and isinstance(err, FrameError) and isinstance(err, ValueError)
    assert err.offset == offset
    assert err.code == cls.code
    assert err.reason and isinstance(err.reason, str)
    assert str(err) == f"{err.reason} at offset {offset} (near {err.excerpt!r})"
    # the excerpt: up to 16 bytes either side, within this frame and what was received
    frame_start = 7 if name == "truncated-eol" else len(data) - len(data.lstrip(b"\n"))
    assert err.excerpt == data[max(offset - 16, frame_start) : offset + 16]
    if limit is not None:
        assert err.limit == limit
    else:
        assert not hasattr(err, "limit") or err.limit == ""


def test_codes_are_distinct() -> None:
    classes = [
        InvalidEscapeError,
        HeaderLineError,
        ContentLengthError,
        MissingNullError,
        LimitExceededError,
        CommandError,
        BodyNotAllowedError,
        TruncatedError,
    ]
    codes = [cls.code for cls in classes]
    assert len(set(codes)) == len(codes)
    assert all(issubclass(cls, DecodeError) for cls in classes)
    assert issubclass(EncodeError, FrameError) and not issubclass(EncodeError, DecodeError)


def test_reasons(codec: ModuleType) -> None:
    assert fail(codec, b"SEND\na:b\\tc\n\n\0").reason == "undefined escape sequence '\\\\t'"
    assert fail(codec, b"SEND\nnocolon\n\n\0").reason == "header line without ':'"
    assert fail(codec, b"FOO\n\n\0", strict=True).reason == "unknown command 'FOO' in STOMP 1.2"
    assert fail(codec, b"NACK\n\n\0", version="1.0", strict=True).reason == "unknown command 'NACK' in STOMP 1.0"
    assert fail(codec, b"SEND\ncontent-length:1\n\nxy\0").reason == "no NUL after the 1 body bytes of content-length"
    assert fail(codec, b"SEND\n\nxy\0", max_body_size=1).reason == "body larger than 1 bytes"
    assert fail(codec, b"SEND\nab\n\n\0", max_line_length=1).reason == "line longer than 1 bytes"
    assert fail(codec, b"SEND\n\nxy\0", max_frame_size=8).reason == "frame larger than 8 bytes"
    assert fail(codec, b"SEND\na:b\nc:d\n\n\0", max_header_count=1).reason == "more than 1 headers"
    assert fail(codec, b"RECEIPT\n\nx\0", strict=True).reason == "RECEIPT frames cannot have a body"
    assert fail(codec, b"\nSEND\n").reason == "stream ended inside a frame (started at offset 1)"
    assert fail(codec, b"\r").reason == "stream ended inside an EOL (started at offset 0)"


def test_huge_content_length_digit_string(codec: ModuleType) -> None:
    # far more digits than Python's int() accepts by default: still a ContentLengthError
    data = b"SEND\ncontent-length:" + b"1" * 5000 + b"\n\n\0"
    err = fail(codec, data)
    assert type(err) is ContentLengthError
    assert err.offset == 20


def test_excerpt_is_bounded_and_stays_in_the_frame(codec: ModuleType) -> None:
    first = b"SEND\ndestination:/queue/a\n\nfirst body\0\n"
    second = b"MESSAGE\nx:" + b"v" * 40 + b"\\t" + b"w" * 40 + b"\n\n\0"
    err = fail(codec, first + second)
    offset = len(first) + second.index(b"\\t")
    assert err.offset == offset
    assert err.excerpt == (first + second)[offset - 16 : offset + 16]
    assert len(err.excerpt) == 32
    # near the frame start the excerpt does not reach back into the previous frame
    err = fail(codec, first + b"MESSAGE\n:empty\n\n\0")
    assert err.offset == len(first) + 8
    assert err.excerpt.startswith(b"MESSAGE\n:empty")


def test_excerpt_only_shows_received_bytes(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    assert decoder.feed(b"SEND\na:b\\q") == []
    with pytest.raises(InvalidEscapeError) as info:
        decoder.feed(b"\n")
    assert info.value.excerpt == b"SEND\na:b\\q\n"


@pytest.mark.parametrize("body_size", [4069, 4075, 9000])
def test_excerpt_after_a_buffered_tail_shows_the_whole_feed(codec: ModuleType, body_size: int) -> None:
    # the tail "SEND\n" is buffered; the next feed finishes its frame: the bad byte sits near the end of
    # the compiled twin's first 4 KiB piece (or past it), and the excerpt still shows the 16 bytes after it
    rest = b"content-length:%d\n\n" % body_size + b"x" * body_size + b"Y" + bytes(range(65, 95))
    decoder = codec.Decoder()
    decoder.feed(b"SEND\n")
    with pytest.raises(MissingNullError) as info:
        decoder.feed(rest)
    whole = fail(codec, b"SEND\n" + rest)
    assert (info.value.offset, info.value.excerpt, str(info.value)) == (whole.offset, whole.excerpt, str(whole))
    assert info.value.excerpt.endswith(b"Y" + bytes(range(65, 80)))
    assert decoder.bytes_fed == 5 + len(rest) and decoder.buffered == 5 + len(rest)


def test_errors_pickle(codec: ModuleType) -> None:
    for data, options in [(b"SEND\na:\\t\n\n\0", {}), (b"SEND\n\nxy\0", {"max_body_size": 1})]:
        err = fail(codec, data, **options)
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err)
        assert (again.offset, again.reason, again.excerpt) == (err.offset, err.reason, err.excerpt)
        assert str(again) == str(err)
        assert getattr(again, "limit", None) == getattr(err, "limit", None)


# --------------------------------------------------------------------------- which problem wins


def test_lowest_offset_wins_within_a_line(codec: ModuleType) -> None:
    # CR at 6, ':' in value at 9, undefined escape at 10
    assert fail(codec, b"SEND\na\rb:c:\\t\n\n\0", strict=True).offset == 6
    err = fail(codec, b"SEND\nab:\\tc:d\n\n\0", strict=True)
    assert (type(err), err.offset) == (InvalidEscapeError, 8)
    err = fail(codec, b"SEND\nab:c:d\\t\n\n\0", strict=True)
    assert (type(err), err.offset) == (HeaderLineError, 9)
    # a NUL before invalid UTF-8
    err = fail(codec, b"SEND\nab:\0\xff\n\n\0")
    assert (type(err), err.offset) == (HeaderLineError, 8)
    # the escape in the name comes before the value's
    assert fail(codec, b"SEND\na\\tb:\\q\n\n\0").offset == 6
    # a content-length with a bad escape in a later header: the first bad line wins
    err = fail(codec, b"SEND\ncontent-length:x\nb:\\t\n\n\0")
    assert (type(err), err.offset) == (ContentLengthError, 20)


def test_line_limits_come_before_the_content(codec: ModuleType) -> None:
    # the NUL at offset 7 is never looked at: the line is already too long
    err = fail(codec, b"SEND\na:\0bcdefghij\n\n\0", max_line_length=8)
    assert (type(err), err.offset, err.limit) == (LimitExceededError, 13, "max_line_length")
    # one header too many, even if that line is malformed
    err = fail(codec, b"SEND\na:1\n\\t\n\n\0", max_header_count=1)
    assert (type(err), err.offset, err.limit) == (LimitExceededError, 9, "max_header_count")


def test_line_limit_before_frame_limit_when_lower(codec: ModuleType) -> None:
    data = b"SEND\nabcdefghijklmnop:q\n\n\0"
    err = fail(codec, data, max_line_length=5, max_frame_size=12)
    assert (err.offset, err.limit) == (10, "max_line_length")
    err = fail(codec, data, max_line_length=10, max_frame_size=12)
    assert (err.offset, err.limit) == (12, "max_frame_size")


# --------------------------------------------------------------------------- limits: at and one past


def _head(n_headers: int, eol: bytes = b"\n") -> bytes:
    return b"SEND" + eol + b"".join(b"h%d:v%s" % (i, eol) for i in range(n_headers)) + eol


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_max_header_count(codec: ModuleType, eol: bytes) -> None:
    (frame,) = ok(codec, _head(3, eol) + b"\0", max_header_count=3)
    assert len(frame.headers) == 3
    data = _head(4, eol) + b"\0"
    err = fail(codec, data, max_header_count=3)
    assert (type(err), err.limit) == (LimitExceededError, "max_header_count")
    assert err.offset == data.index(b"h3:")
    # zero headers allowed: a bare frame still passes
    assert ok(codec, b"SEND" + eol + eol + b"\0", max_header_count=0) == [codec.Frame("SEND")]
    assert fail(codec, _head(1, eol) + b"\0", max_header_count=0).offset == 4 + len(eol)


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_max_line_length_header(codec: ModuleType, eol: bytes) -> None:
    limit = 20
    exact = b"name:" + b"v" * (limit - 5)
    assert len(exact) == limit
    (frame,) = ok(codec, b"SEND" + eol + exact + eol + eol + b"\0", max_line_length=limit)
    assert frame.headers == (("name", "v" * (limit - 5)),)
    data = b"SEND" + eol + exact + b"w" + eol + eol + b"\0"
    err = fail(codec, data, max_line_length=limit)
    assert (type(err), err.offset, err.limit) == (LimitExceededError, 4 + len(eol) + limit, "max_line_length")


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_max_line_length_command(codec: ModuleType, eol: bytes) -> None:
    assert ok(codec, b"COMMAND" + eol + eol + b"\0", max_line_length=7)[0].command == "COMMAND"
    err = fail(codec, b"\nCOMMANDS" + eol + eol + b"\0", max_line_length=7)
    assert (err.offset, err.limit) == (8, "max_line_length")


def test_max_line_length_unterminated_line(codec: ModuleType) -> None:
    # refused as soon as the line is one byte too long, without waiting for its EOL
    decoder = codec.Decoder(max_line_length=8)
    assert decoder.feed(b"SEND\nabcd:efg") == []
    with pytest.raises(LimitExceededError) as info:
        decoder.feed(b"h")
    assert info.value.offset == 13
    # a CR at exactly the limit may be the start of CRLF: wait for the next byte
    decoder = codec.Decoder(max_line_length=8)
    assert decoder.feed(b"SEND\nabcd:efg\r") == []
    assert decoder.feed(b"\n\n\0") == [codec.Frame("SEND", [("abcd", "efg")])]
    decoder = codec.Decoder(max_line_length=8)
    assert decoder.feed(b"SEND\nabcd:efg\r") == []
    with pytest.raises(LimitExceededError) as info:
        decoder.feed(b"x")
    # the CR was bare, so content: the line is 10 bytes long
    assert info.value.offset == 13


@pytest.mark.parametrize("with_length", [False, True], ids=["nul-terminated", "content-length"])
def test_max_body_size(codec: ModuleType, with_length: bool) -> None:
    def frame(body: bytes) -> bytes:
        head = b"SEND\ncontent-length:%d\n\n" % len(body) if with_length else b"SEND\n\n"
        return head + body + b"\0"

    (got,) = ok(codec, frame(b"x" * 10), max_body_size=10)
    assert got.body == b"x" * 10
    data = frame(b"x" * 11)
    err = fail(codec, data, max_body_size=10)
    assert (type(err), err.limit) == (LimitExceededError, "max_body_size")
    # with content-length: at the value's first byte; without: at the first byte past the limit
    assert err.offset == (20 if with_length else 6 + 10)
    assert ok(codec, frame(b""), max_body_size=0)[0].body == b""
    assert fail(codec, frame(b"x"), max_body_size=0).limit == "max_body_size"


@pytest.mark.parametrize("with_length", [False, True], ids=["nul-terminated", "content-length"])
@pytest.mark.parametrize("eol", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_max_frame_size(codec: ModuleType, with_length: bool, eol: bytes) -> None:
    body = b"0123456789"
    head = b"SEND" + eol + (b"content-length:10" + eol if with_length else b"") + eol
    frame = head + body + b"\0"
    size = len(frame)  # the NUL counts, the EOLs after it do not
    assert ok(codec, frame + eol + eol, max_frame_size=size)[0].body == body
    err = fail(codec, b"\n" + frame, max_frame_size=size - 1)
    assert (type(err), err.offset, err.limit) == (LimitExceededError, 1 + size - 1, "max_frame_size")


def test_max_frame_size_in_the_head(codec: ModuleType) -> None:
    data = b"SEND\na:b\nc:d\n\n\0"
    err = fail(codec, data, max_frame_size=7)
    assert (err.offset, err.limit) == (7, "max_frame_size")
    # the NUL is the 15th byte
    assert ok(codec, data, max_frame_size=15)[0].headers == (("a", "b"), ("c", "d"))
    assert fail(codec, data, max_frame_size=14).offset == 14


def test_content_length_beyond_frame_limit_refused_at_end_of_head(codec: ModuleType) -> None:
    decoder = codec.Decoder(max_body_size=1000, max_frame_size=100)
    with pytest.raises(LimitExceededError) as info:
        decoder.feed(b"\nSEND\ncontent-length:500\n\n")
    assert (info.value.offset, info.value.limit) == (101, "max_frame_size")


# --------------------------------------------------------------------------- memory bounds


def _peak_while(action: Any) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "options, limit, offset",
    [({}, "max_body_size", 20), ({"max_body_size": 2**40}, "max_frame_size", 116 * MiB)],
    ids=["body-limit", "frame-limit"],
)
def test_4_gib_content_length_allocates_nothing(
    codec: ModuleType, options: Dict[str, Any], limit: str, offset: int
) -> None:
    decoder = codec.Decoder(**options)
    head = b"SEND\ncontent-length:4294967296\n\n"
    caught: List[LimitExceededError] = []

    def feed() -> None:
        try:
            decoder.feed(head)
        except LimitExceededError as err:
            caught.append(err)

    peak = _peak_while(feed)
    assert len(caught) == 1, "4 GiB content-length accepted"
    assert (caught[0].limit, caught[0].offset) == (limit, offset)
    assert peak < 1 * MiB
    assert decoder.buffered < 1 * KiB


def test_4_gib_content_length_refused_when_its_line_ends(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    assert decoder.feed(b"SEND\ncontent-length:4294967296") == []
    with pytest.raises(LimitExceededError) as info:
        decoder.feed(b"\n")
    assert info.value.offset == 20


@pytest.mark.parametrize("limit_name", ["max_body_size", "max_frame_size"])
def test_growing_body_without_length_is_bounded(codec: ModuleType, limit_name: str) -> None:
    limit = 1 * MiB
    head = b"MESSAGE\ndestination:/q\n\n"
    decoder = codec.Decoder(**{limit_name: limit})
    chunk = b"x" * (64 * KiB)
    decoder.feed(head)
    fed = 0
    with pytest.raises(LimitExceededError) as info:
        while fed < 4 * limit:
            decoder.feed(chunk)
            fed += len(chunk)
            assert decoder.buffered <= limit + len(head)
    err = info.value
    assert err.limit == limit_name
    # refused by the feed that passed the limit, not later
    assert fed < limit + len(chunk)
    expected = len(head) + limit if limit_name == "max_body_size" else limit
    assert err.offset == expected


def test_growing_body_bytewise_refused_at_the_first_byte_past(codec: ModuleType) -> None:
    decoder = codec.Decoder(max_body_size=100)
    decoder.feed(b"SEND\n\n")
    for _ in range(100):
        assert decoder.feed(b"x") == []
    with pytest.raises(LimitExceededError) as info:
        decoder.feed(b"x")
    assert info.value.offset == 106


# --------------------------------------------------------------------------- the error state


def test_frames_before_an_error_are_kept(codec: ModuleType) -> None:
    good = b"SEND\n\none\0\nSEND\ncontent-length:3\n\ntwo\0\r\n"
    bad = b"SEND\nx:\\t\n\n\0"
    decoder = codec.Decoder()
    with pytest.raises(InvalidEscapeError) as info:
        decoder.feed(good + bad)
    err = info.value
    assert err.offset == len(good) + 7
    assert err.frames == [codec.Frame("SEND", (), b"one"), codec.Frame("SEND", [("content-length", "3")], b"two")]
    assert [f.offset for f in err.frames] == [0, 11]
    assert decoder.heartbeats == 2


def test_heartbeat_events_before_an_error_are_kept(codec: ModuleType) -> None:
    decoder = codec.Decoder(heartbeat_events=True)
    assert decoder.feed(b"\n") == [codec.Heartbeat(0, b"\n")]
    with pytest.raises(CommandError) as info:
        decoder.feed(b"\r\nSEND\n\n\0\n\rX\n")
    assert info.value.frames == [codec.Heartbeat(1, b"\r\n"), codec.Frame("SEND"), codec.Heartbeat(10, b"\n")]
    assert info.value.offset == 11


def test_error_sticks_until_reset(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    with pytest.raises(HeaderLineError) as info:
        decoder.feed(b"SEND\n\n\0SEND\nbad\n\n\0")
    first = info.value
    assert len(first.frames) == 1
    for attempt in (lambda: decoder.feed(b"SEND\n\n\0"), lambda: decoder.feed(b""), decoder.close):
        with pytest.raises(HeaderLineError) as again:
            attempt()
        err = again.value
        assert (err.offset, err.reason, err.excerpt) == (first.offset, first.reason, first.excerpt)
        assert str(err) == str(first)
        assert err.frames == []
    decoder.reset()
    assert (decoder.bytes_fed, decoder.buffered, decoder.heartbeats) == (0, 0, 0)
    (frame,) = decoder.feed(b"\nSEND\n\n\0")
    assert frame.offset == 1
    decoder.close()


def test_limit_error_sticks_with_its_limit(codec: ModuleType) -> None:
    decoder = codec.Decoder(max_body_size=1)
    with pytest.raises(LimitExceededError):
        decoder.feed(b"SEND\n\nxy")
    with pytest.raises(LimitExceededError) as again:
        decoder.feed(b"\0")
    assert (again.value.limit, again.value.offset) == ("max_body_size", 7)


# --------------------------------------------------------------------------- close()


@pytest.mark.parametrize(
    "data, start",
    [
        (b"S", 0),
        (b"SEND", 0),
        (b"SEND\r", 0),
        (b"SEND\n", 0),
        (b"SEND\na:b", 0),
        (b"SEND\na:b\n", 0),
        (b"SEND\na:b\n\r", 0),
        (b"SEND\n\n", 0),
        (b"SEND\n\nbody without nul", 0),
        (b"SEND\ncontent-length:4\n\nbod", 0),
        (b"SEND\ncontent-length:4\n\nbody", 0),
        (b"SEND\n\n\0\n\nMESSAGE\n", 9),
    ],
)
def test_close_inside_a_frame(codec: ModuleType, data: bytes, start: int) -> None:
    for sizes in ([len(data)], [1] * len(data)):
        decoder = codec.Decoder()
        feed_chunks(decoder, data, sizes)
        with pytest.raises(TruncatedError) as info:
            decoder.close()
        assert info.value.offset == len(data)
        assert info.value.reason == f"stream ended inside a frame (started at offset {start})"
        assert info.value.excerpt == data[max(start, len(data) - 16) :]


def test_close_after_a_lone_cr(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    assert decoder.feed(b"SEND\n\n\0\r") == [codec.Frame("SEND")]
    with pytest.raises(TruncatedError) as info:
        decoder.close()
    assert info.value.offset == 8
    assert info.value.reason == "stream ended inside an EOL (started at offset 7)"


@pytest.mark.parametrize("data", [b"", b"\n", b"\r\n\n", b"SEND\n\n\0", b"SEND\n\n\0\n\r\n"])
def test_close_between_frames(codec: ModuleType, data: bytes) -> None:
    decoder = codec.Decoder()
    decoder.feed(data)
    decoder.close()
    decoder.close()  # closing twice is harmless


def test_truncation_error_sticks(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    decoder.feed(b"SEND\n")
    with pytest.raises(TruncatedError):
        decoder.close()
    # "After an error, feed()/close() raise the same error again until reset()"
    with pytest.raises(TruncatedError) as again:
        decoder.feed(b"\n\0")
    assert again.value.offset == 5
    with pytest.raises(TruncatedError):
        decoder.close()
    decoder.reset()
    assert decoder.feed(b"SEND\n\n\0") == [codec.Frame("SEND")]


# --------------------------------------------------------------------------- strict mode


@pytest.mark.parametrize("command", sorted(fastframe.CLIENT_COMMANDS | fastframe.SERVER_COMMANDS))
def test_strict_accepts_every_command(codec: ModuleType, command: str) -> None:
    assert ok(codec, command.encode() + b"\n\n\0", strict=True)[0].command == command


@pytest.mark.parametrize("command", [b"FOO", b"send", b"SEND ", b" SEND", b"MESSAGES"])
def test_strict_refuses_unknown_commands(codec: ModuleType, command: bytes) -> None:
    data = b"SEND\n\n\0\n" + command + b"\nx:y\n\n\0"
    err = fail(codec, data, strict=True)
    assert (type(err), err.offset) == (CommandError, 8)
    assert fail(codec, data, strict=True).frames == [codec.Frame("SEND")]
    # lenient mode takes them
    assert ok(codec, data)[1].command == command.decode()


@pytest.mark.parametrize("command", [b"NACK", b"STOMP"])
def test_strict_1_0_has_no_nack_or_stomp(codec: ModuleType, command: bytes) -> None:
    data = command + b"\n\n\0"
    assert type(fail(codec, data, version="1.0", strict=True)) is CommandError
    assert ok(codec, data, version="1.1", strict=True)[0].command == command.decode()


@pytest.mark.parametrize("command", sorted(fastframe.CLIENT_COMMANDS | fastframe.SERVER_COMMANDS))
def test_strict_body_rules(codec: ModuleType, command: str) -> None:
    head = command.encode() + b"\n"
    # an empty body is always fine, with or without content-length
    assert ok(codec, head + b"\n\0", strict=True)[0].body == b""
    assert ok(codec, head + b"content-length:0\n\n\0", strict=True)[0].body == b""
    for data, at in [(head + b"\nx\0", len(head) + 1), (head + b"content-length:1\n\n\0\0", len(head) + 18)]:
        if command in fastframe.BODY_COMMANDS:
            assert len(ok(codec, data, strict=True)[0].body) == 1
        else:
            err = fail(codec, data, strict=True)
            assert (type(err), err.offset) == (BodyNotAllowedError, at)
            assert ok(codec, data)[0].command == command  # lenient: taken


def test_strict_colon_in_value(codec: ModuleType) -> None:
    data = b"SEND\nx-time:12:30\n\n\0"
    assert fail(codec, data, strict=True).offset == 14
    assert ok(codec, data, strict=True, allow_colon_in_value=True)[0].get("x-time") == "12:30"
    assert ok(codec, data)[0].get("x-time") == "12:30"
    err = fail(codec, data, allow_colon_in_value=False)
    assert (type(err), err.offset) == (HeaderLineError, 14)


def test_strict_bare_cr(codec: ModuleType) -> None:
    data = b"SEND\nx-cr:a\rb\n\n\0"
    assert fail(codec, data, strict=True).offset == 11
    assert ok(codec, data, strict=True, allow_bare_cr=True)[0].get("x-cr") == "a\rb"
    assert ok(codec, data)[0].get("x-cr") == "a\rb"
    assert fail(codec, data, allow_bare_cr=False).offset == 11
    # a CR right before the LF is part of the EOL, never a bare CR
    assert ok(codec, b"SEND\nx:a\r\n\n\0", strict=True)[0].get("x") == "a"
    # CR in the name is bare too
    assert fail(codec, b"SEND\nx\ry:a\n\n\0", strict=True).offset == 6


# --------------------------------------------------------------------------- versions and escapes


def test_1_0_has_no_escapes(codec: ModuleType) -> None:
    data = b"SEND\nC\\c:C:\\path\\to\\n\\t\n\n\0"
    (frame,) = ok(codec, data, version="1.0")
    assert frame.headers == (("C\\c", "C:\\path\\to\\n\\t"),)


def test_1_1_escapes(codec: ModuleType) -> None:
    (frame,) = ok(codec, b"SEND\na\\cb:c\\nd\\\\e\n\n\0", version="1.1")
    assert frame.headers == (("a:b", "c\nd\\e"),)
    err = fail(codec, b"SEND\nx:a\\rb\n\n\0", version="1.1")
    assert (type(err), err.offset) == (InvalidEscapeError, 8)


def test_1_2_escapes(codec: ModuleType) -> None:
    (frame,) = ok(codec, b"SEND\na\\cb\\r:c\\nd\\\\e\\r\\c\n\n\0")
    assert frame.headers == (("a:b\r", "c\nd\\e\r:"),)
    # a backslash escape never combines with the next one
    assert ok(codec, b"SEND\nx:\\\\n\n\n\0")[0].get("x") == "\\n"
    assert fail(codec, b"SEND\nx:\\\\\\\n\n\0").offset == 9


def test_1_2_escapes_on_old_versions(codec: ModuleType) -> None:
    data = b"SEND\nx:a\\cb\\r\\n\\\\\n\n\0"
    for version in ("1.0", "1.1"):
        assert ok(codec, data, version=version, escapes="1.2")[0].get("x") == "a:b\r\n\\"
    assert ok(codec, data, version="1.0")[0].get("x") == "a\\cb\\r\\n\\\\"
    # and the other way round: 1.1 escapes on a 1.2 decoder
    assert type(fail(codec, data, escapes="1.1")) is InvalidEscapeError
    assert ok(codec, data, escapes="1.0")[0].get("x") == "a\\cb\\r\\n\\\\"


def test_keep_undefined_escapes(codec: ModuleType) -> None:
    data = b"SEND\nx\\q:tab\\there\\n\\\n\n\0"
    (frame,) = ok(codec, data, keep_undefined_escapes=True)
    # defined escapes are still decoded, undefined ones kept as they are
    assert frame.headers == (("x\\q", "tab\\there\n\\"),)
    assert ok(codec, b"SEND\nx:a\\rb\n\n\0", version="1.1", keep_undefined_escapes=True)[0].get("x") == "a\\rb"


def test_allow_missing_colon(codec: ModuleType) -> None:
    data = b"SEND\nnocolonhere\nx:y\n\n\0"
    (frame,) = ok(codec, data, allow_missing_colon=True)
    assert frame.headers == (("nocolonhere", ""), ("x", "y"))
    # the name is still unescaped and checked
    (frame,) = ok(codec, b"SEND\nno\\ccolon\n\n\0", allow_missing_colon=True)
    assert frame.headers == (("no:colon", ""),)
    assert type(fail(codec, b"SEND\nno\\tcolon\n\n\0", allow_missing_colon=True)) is InvalidEscapeError
    # an empty name is still refused
    assert type(fail(codec, b"SEND\n:x\n\n\0", allow_missing_colon=True)) is HeaderLineError


def test_keep_invalid_utf8(codec: ModuleType) -> None:
    # RabbitMQ passes on header bytes that are not UTF-8: an error by default, kept as surrogates on request
    data = b"MESSAGE\ndestination:/q\nx-bad:a\xffb\xc3\\n\nn\xe9:v\n\n\0"
    err = fail(codec, data)
    assert (type(err), err.offset, err.reason) == (HeaderLineError, 30, "invalid UTF-8 in header line")
    (frame,) = ok(codec, data, keep_invalid_utf8=True)
    # escapes are still decoded; each byte that is not UTF-8 is one surrogate (Python's surrogateescape)
    assert frame.headers == (("destination", "/q"), ("x-bad", "a\udcffb\udcc3\n"), ("n\udce9", "v"))
    assert frame.get("x-bad").encode("utf-8", "surrogateescape") == b"a\xffb\xc3\n"  # the raw bytes, unescaped
    # the rest of the line is still checked; the command stays UTF-8
    assert type(fail(codec, b"SEND\nx:\xff\\t\n\n\0", keep_invalid_utf8=True)) is InvalidEscapeError
    assert fail(codec, b"SEND\nx:\xff\0\n\n\0", keep_invalid_utf8=True).offset == 8
    assert type(fail(codec, b"SE\xffND\n\n\0", keep_invalid_utf8=True)) is CommandError
    # CONNECT's headers are not unescaped: kept as they come
    (frame,) = ok(codec, b"CONNECT\nlogin:\xfe\\n\n\n\0", keep_invalid_utf8=True)
    assert frame.get("login") == "\udcfe\\n"
    # the encoder writes UTF-8 only: such a frame is refused, not written with other bytes
    with pytest.raises(EncodeError, match="cannot encode as UTF-8"):
        frame.encode()
    with pytest.raises(TypeError, match="keep_invalid_utf8"):
        codec.Decoder(keep_invalid_utf8="yes")


@pytest.mark.parametrize("command", [b"CONNECT", b"STOMP", b"CONNECTED"])
def test_connect_frames_never_unescaped(codec: ModuleType, command: bytes) -> None:
    data = command + b"\nlogin:a\\tb\\nc\npasscode:x:y:z\n\n\0"
    for version in ("1.0", "1.1", "1.2"):
        strict = [{"strict": True}] if command != b"STOMP" or version != "1.0" else []  # 1.0 has no STOMP
        for options in [{}, *strict, {"escapes": "1.2"}, {"allow_colon_in_value": False}]:
            (frame,) = ok(codec, data, version=version, **options)
            assert frame.headers == (("login", "a\\tb\\nc"), ("passcode", "x:y:z"))
    # SEND with the same head would be unescaped (and fail)
    assert type(fail(codec, b"SEND" + data[len(command) :])) is InvalidEscapeError


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    "options, exc",
    [
        ({"version": "2.0"}, ValueError),
        ({"version": 1.2}, ValueError),
        ({"escapes": "1.3"}, ValueError),
        ({"strict": 1}, TypeError),
        ({"heartbeat_events": "yes"}, TypeError),
        ({"allow_bare_cr": 0}, TypeError),
        ({"max_line_length": 0}, ValueError),
        ({"max_header_count": -1}, ValueError),
        ({"max_body_size": 1.5}, ValueError),
        ({"max_frame_size": 1}, ValueError),
        ({"max_frame_size": True}, ValueError),
        ({"no_such_option": True}, TypeError),
    ],
)
def test_bad_decoder_options(codec: ModuleType, options: Dict[str, Any], exc: type) -> None:
    with pytest.raises(exc):
        codec.Decoder(**options)
    with pytest.raises(exc):
        codec.decode(b"", **options)


def test_options_are_reported(codec: ModuleType) -> None:
    decoder = codec.Decoder("1.1", strict=True, max_body_size=10)
    assert decoder.version == "1.1"
    options = decoder.options
    assert (options.version, options.escapes, options.strict) == ("1.1", "1.1", True)
    assert (options.allow_colon_in_value, options.allow_bare_cr) == (False, False)
    assert options.max_body_size == 10
    assert codec.Decoder("1.0", escapes="1.2").options.escapes == "1.2"
    lenient = codec.Decoder().options
    assert (lenient.allow_colon_in_value, lenient.allow_bare_cr) == (True, True)
    assert lenient.max_header_count == fastframe.DEFAULT_MAX_HEADER_COUNT
    assert lenient.max_line_length == fastframe.DEFAULT_MAX_LINE_LENGTH
    assert lenient.max_body_size == fastframe.DEFAULT_MAX_BODY_SIZE
    assert lenient.max_frame_size == fastframe.DEFAULT_MAX_FRAME_SIZE


def test_default_limits_at_and_past(codec: ModuleType) -> None:
    line = fastframe.DEFAULT_MAX_LINE_LENGTH
    for eol in (b"\n", b"\r\n"):
        assert ok(codec, b"SEND" + eol + b"x:" + b"v" * (line - 2) + eol + eol + b"\0")[0].get("x")
        err = fail(codec, b"SEND" + eol + b"x:" + b"v" * (line - 1) + eol + eol + b"\0")
        assert (err.offset, err.limit) == (4 + len(eol) + line, "max_line_length")
    count = fastframe.DEFAULT_MAX_HEADER_COUNT
    head = b"SEND\n" + b"".join(b"h:%d\n" % i for i in range(count))
    assert len(ok(codec, head + b"\n\0")[0].headers) == count
    err = fail(codec, head + b"h:x\n\n\0")
    assert (err.offset, err.limit) == (len(head), "max_header_count")
    # a content-length of exactly max_body_size is accepted (the stream then ends inside the body)
    body = fastframe.DEFAULT_MAX_BODY_SIZE
    assert type(fail(codec, b"SEND\ncontent-length:%d\n\n\0" % body)) is TruncatedError
    err = fail(codec, b"SEND\ncontent-length:%d\n\n\0" % (body + 1))
    assert (err.offset, err.limit) == (20, "max_body_size")
