"""The incremental decoder on valid input: heart-beats, bodies, headers, feeding, offsets, counters."""

from __future__ import annotations

import random
from types import ModuleType
from typing import Any, List

import pytest

from _strategies import events_key, feed_chunks

KiB = 1024
MiB = 1024 * KiB


def decode_all_ways(codec: ModuleType, data: bytes, **options: Any) -> List[Any]:
    """Whole, byte by byte and in random pieces: the same events (offsets included)."""
    whole = codec.decode(data, **options)
    rng = random.Random(len(data))
    for sizes in ([1] * len(data), [rng.randint(1, 7) for _ in range(len(data))]):
        decoder = codec.Decoder(**options)
        events = feed_chunks(decoder, data, sizes)
        decoder.close()
        assert events_key(events) == events_key(whole)
    return whole


# --------------------------------------------------------------------------- heart-beats


def test_heartbeats_lf_and_crlf(codec: ModuleType) -> None:
    data = b"\n\r\n\nSEND\n\n\0\n\r\n\n\r\nMESSAGE\n\n\0"
    events = decode_all_ways(codec, data, heartbeat_events=True)
    assert events == [
        codec.Heartbeat(0, b"\n"),
        codec.Heartbeat(1, b"\r\n"),
        codec.Heartbeat(3, b"\n"),
        codec.Frame("SEND"),
        codec.Heartbeat(11, b"\n"),
        codec.Heartbeat(12, b"\r\n"),
        codec.Heartbeat(14, b"\n"),
        codec.Heartbeat(15, b"\r\n"),
        codec.Frame("MESSAGE"),
    ]
    assert [e.offset for e in events if hasattr(e, "command")] == [4, 17]
    # without events only frames come back, but every EOL is counted
    decoder = codec.Decoder()
    assert decoder.feed(data) == [codec.Frame("SEND"), codec.Frame("MESSAGE")]
    assert decoder.heartbeats == 7


def test_heartbeat_right_after_nul_counts(codec: ModuleType) -> None:
    # brokers end every frame with NUL LF: that LF is a heart-beat too
    decoder = codec.Decoder(heartbeat_events=True)
    assert decoder.feed(b"RECEIPT\nreceipt-id:1\n\n\0\n") == [
        codec.Frame("RECEIPT", [("receipt-id", "1")]),
        codec.Heartbeat(23, b"\n"),
    ]
    assert decoder.heartbeats == 1


def test_heartbeat_crlf_split_across_feeds(codec: ModuleType) -> None:
    decoder = codec.Decoder(heartbeat_events=True)
    assert decoder.feed(b"\n\r") == [codec.Heartbeat(0, b"\n")]
    assert decoder.buffered == 1  # the CR waits for its LF
    assert decoder.heartbeats == 1
    assert decoder.feed(b"\n") == [codec.Heartbeat(1, b"\r\n")]
    assert decoder.heartbeats == 2
    assert decoder.buffered == 0
    decoder.close()


def test_heartbeats_only(codec: ModuleType) -> None:
    decoder = codec.Decoder(heartbeat_events=True)
    events = feed_chunks(decoder, b"\n" * 50 + b"\r\n" * 50, [3] * 100)
    assert len(events) == decoder.heartbeats == 100
    assert [e.eol for e in events] == [b"\n"] * 50 + [b"\r\n"] * 50
    assert [e.offset for e in events] == list(range(50)) + list(range(50, 150, 2))
    decoder.close()


def test_heartbeat_value_semantics(codec: ModuleType) -> None:
    beat = codec.Heartbeat(7, b"\r\n")
    assert (beat.offset, beat.eol) == (7, b"\r\n")
    assert beat == codec.Heartbeat(7, b"\r\n")
    assert beat != codec.Heartbeat(8, b"\r\n")
    assert beat != codec.Heartbeat(7, b"\n")
    assert hash(beat) == hash(codec.Heartbeat(7, b"\r\n"))
    assert beat != codec.Frame("SEND")
    assert "7" in repr(beat) and "\\r\\n" in repr(beat)


# --------------------------------------------------------------------------- bodies


def test_content_length_body_with_nuls(codec: ModuleType) -> None:
    body = b"\0a\0\0b\nSEND\n\n\0\0"
    data = b"MESSAGE\ncontent-length:%d\n\n" % len(body) + body + b"\0\n"
    (frame,) = decode_all_ways(codec, data)
    assert frame.body == body


def test_body_without_content_length_ends_at_first_nul(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    assert decoder.feed(b"SEND\n\nhello\0world\0") == [codec.Frame("SEND", (), b"hello")]
    # what follows the NUL is the next frame's command line, not more body
    assert decoder.buffered == 6
    frames = decode_all_ways(codec, b"SEND\n\nhello\0\nSEND\n\nworld\0")
    assert [f.body for f in frames] == [b"hello", b"world"]


@pytest.mark.parametrize(
    "body",
    [b"\n", b"\r\n", b"\n\nstarts with two LFs", b"fake\nSEND\n\nframe", b"\r", b"\xff\xfe binary", b"x" * 5000],
)
@pytest.mark.parametrize("with_length", [False, True], ids=["nul-terminated", "content-length"])
def test_bodies_are_kept_verbatim(codec: ModuleType, body: bytes, with_length: bool) -> None:
    head = b"SEND\ncontent-length:%d\n\n" % len(body) if with_length else b"SEND\n\n"
    (frame,) = decode_all_ways(codec, head + body + b"\0")
    assert frame.body == body
    assert type(frame.body) is bytes


def test_empty_bodies(codec: ModuleType) -> None:
    frames = decode_all_ways(codec, b"SEND\n\n\0MESSAGE\ncontent-length:0\n\n\0ERROR\r\n\r\n\0")
    assert [(f.command, f.body) for f in frames] == [("SEND", b""), ("MESSAGE", b""), ("ERROR", b"")]
    assert frames[1].headers == (("content-length", "0"),)


def test_body_crlf_is_not_touched(codec: ModuleType) -> None:
    (frame,) = decode_all_ways(codec, b"SEND\r\nx:y\r\n\r\n\r\nbody\r\n\0\r\n")
    assert frame.headers == (("x", "y"),)
    assert frame.body == b"\r\nbody\r\n"


def test_repeated_content_length_first_one_counts(codec: ModuleType) -> None:
    (frame,) = decode_all_ways(codec, b"SEND\ncontent-length:3\ncontent-length:abc\n\na\0c\0")
    assert frame.body == b"a\0c"
    assert frame.get_all("content-length") == ["3", "abc"]
    # leading zeros are plain decimal
    (frame,) = decode_all_ways(codec, b"SEND\ncontent-length:003\n\nabc\0")
    assert frame.body == b"abc"


def test_content_length_on_any_frame(codec: ModuleType) -> None:
    (frame,) = decode_all_ways(codec, b"RECEIPT\ncontent-length:2\n\n\0\0\0")
    assert frame.body == b"\0\0"


def test_big_body_in_64k_pieces(codec: ModuleType) -> None:
    body = bytes(range(256)) * (16 * MiB // 256)
    for head in (b"MESSAGE\ncontent-length:%d\n\n" % len(body), b"MESSAGE\n\n"):
        payload = body.replace(b"\0", b"\1") if b"content-length" not in head else body
        data = head + payload + b"\0\n"
        decoder = codec.Decoder()
        frames = feed_chunks(decoder, data, [64 * KiB] * (len(data) // (64 * KiB) + 1))
        decoder.close()
        assert len(frames) == 1
        assert frames[0].body == payload
        assert decoder.buffered == 0
        assert decoder.bytes_fed == len(data)
        del frames


@pytest.mark.parametrize("with_length", [True, False], ids=["content-length", "nul-terminated"])
def test_1_mib_body_one_byte_at_a_time(codec: ModuleType, with_length: bool) -> None:
    # completing is the point; linear behaviour is measured by the benchmarks
    body = b"0123456789abcdef" * (MiB // 16)
    head = b"SEND\ncontent-length:%d\n\n" % len(body) if with_length else b"SEND\n\n"
    data = head + body + b"\0"
    decoder = codec.Decoder()
    out = []
    feed = decoder.feed
    for i in range(len(data)):
        out += feed(data[i : i + 1])
    assert len(out) == 1 and out[0].body == body


# --------------------------------------------------------------------------- headers


def test_repeated_headers_first_wins_all_kept(codec: ModuleType) -> None:
    (frame,) = decode_all_ways(codec, b"MESSAGE\nfoo:World\nbar:1\nfoo:Hello\nfoo:\n\n\0")
    assert frame.headers == (("foo", "World"), ("bar", "1"), ("foo", "Hello"), ("foo", ""))
    assert frame.get("foo") == "World"
    assert frame.get_all("foo") == ["World", "Hello", ""]
    assert frame.header_map() == {"foo": "World", "bar": "1"}


def test_utf8_names_and_values(codec: ModuleType) -> None:
    head = "MESSAGE\nx-utf8-ключ:значение ☃ 日本語 😀\n☃:\U0001f600\n\n".encode()
    (frame,) = decode_all_ways(codec, head + "тело".encode() + b"\0")
    assert frame.headers == (("x-utf8-ключ", "значение ☃ 日本語 😀"), ("☃", "\U0001f600"))
    assert frame.body == "тело".encode()
    # a UTF-8 command (lenient mode takes any command)
    assert decode_all_ways(codec, "КОМАНДА\n\n\0".encode())[0].command == "КОМАНДА"


def test_spaces_are_kept(codec: ModuleType) -> None:
    (frame,) = decode_all_ways(codec, b"SEND\n x : padded value  \nempty:\nspaces:   \n\n\0")
    assert frame.headers == ((" x ", " padded value  "), ("empty", ""), ("spaces", "   "))


def test_crlf_and_lf_lines_mixed(codec: ModuleType) -> None:
    (frame,) = decode_all_ways(codec, b"SEND\r\na:1\nb:2\r\n\n\0")
    assert frame.headers == (("a", "1"), ("b", "2"))
    (frame,) = decode_all_ways(codec, b"SEND\na:1\r\n\r\n\0")
    assert frame.headers == (("a", "1"),)


def test_escapes_decoded_on_every_path(codec: ModuleType) -> None:
    data = b"MESSAGE\nx\\cname:a\\cb\\nc\\rd\\\\e\n\nbody\0"
    (frame,) = decode_all_ways(codec, data)
    assert frame.headers == (("x:name", "a:b\nc\rd\\e"),)


def test_default_header_count_limit_is_generous(codec: ModuleType) -> None:
    head = b"SEND\n" + b"".join(b"h%d:%d\n" % (i, i) for i in range(1000)) + b"\n"
    (frame,) = decode_all_ways(codec, head + b"\0")
    assert len(frame.headers) == 1000
    assert frame.get("h999") == "999"


def test_long_head_lines(codec: ModuleType) -> None:
    value = "v" * 10000
    (frame,) = decode_all_ways(codec, b"SEND\nx:" + value.encode() + b"\n\n\0")
    assert frame.get("x") == value


@pytest.mark.parametrize("size", [8180, 8190, 8191, 8192, 8193, 8200, 10000])
def test_heads_around_8_kib(codec: ModuleType, size: int) -> None:
    # heads (blank line included) of about the size the Python twin parses in one go
    head = b"SEND\nx:" + b"v" * (size - 14) + b"\ny:\\c\n\n"
    assert len(head) == size
    whole = codec.decode(head + b"body\0")
    assert whole == [codec.Frame("SEND", [("x", "v" * (size - 14)), ("y", ":")], b"body")]
    decoder = codec.Decoder()
    pieces = feed_chunks(decoder, head + b"body\0", [1000] * 20)
    assert events_key(pieces) == events_key(whole)


def test_types_of_decoded_frames(codec: ModuleType) -> None:
    (frame,) = codec.decode(b"SEND\na:b\n\nx\0")
    assert isinstance(frame, codec.Frame)
    assert type(frame.command) is str
    assert type(frame.headers) is tuple
    assert all(type(h) is tuple and len(h) == 2 for h in frame.headers)
    assert type(frame.headers[0][0]) is str and type(frame.headers[0][1]) is str


# --------------------------------------------------------------------------- feeding


STREAM = (
    b"\n"
    b"CONNECTED\nversion:1.2\nsession:a:b\n\n\0\n"
    b"MESSAGE\r\ndestination:/q\r\ncontent-length:4\r\n\r\n\0\0\n\0\0\r\n\r\n"
    b"MESSAGE\ndestination:/q\nx\\c:\\\\\\n\n\ntext\nbody\0"
    b"RECEIPT\nreceipt-id:77\n\n\0\n"
)


def test_multi_frame_stream_any_chunking(codec: ModuleType) -> None:
    whole = codec.Decoder(heartbeat_events=True)
    expected = whole.feed(STREAM)
    whole.close()
    assert [getattr(e, "command", None) for e in expected] == [
        None, "CONNECTED", None, "MESSAGE", None, None, "MESSAGE", "RECEIPT", None
    ]  # fmt: skip
    assert expected[3].body == b"\0\0\n\0"
    assert expected[6].headers == (("destination", "/q"), ("x:", "\\\n"))
    for size in (1, 2, 3, 5, 8, 13, 64):
        decoder = codec.Decoder(heartbeat_events=True)
        events = feed_chunks(decoder, STREAM, [size] * len(STREAM))
        decoder.close()
        assert events_key(events) == events_key(expected)
        assert decoder.heartbeats == whole.heartbeats == 5
    decode_all_ways(codec, STREAM, heartbeat_events=True)


def test_every_split_point(codec: ModuleType) -> None:
    expected = events_key(codec.decode(STREAM, heartbeat_events=True))
    for cut in range(1, len(STREAM)):
        for second in (cut, min(cut + 3, len(STREAM))):
            decoder = codec.Decoder(heartbeat_events=True)
            events = decoder.feed(STREAM[:cut]) + decoder.feed(STREAM[cut:second]) + decoder.feed(STREAM[second:])
            decoder.close()
            assert events_key(events) == expected, cut


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "memoryview-slice"])
def test_bytes_like_input(codec: ModuleType, kind: str) -> None:
    data = b"SEND\na:b\n\nbody\0"
    source: Any = {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "memoryview-slice": memoryview(b"xx" + data + b"yy")[2:-2],
    }[kind]
    assert codec.decode(source) == [codec.Frame("SEND", [("a", "b")], b"body")]
    decoder = codec.Decoder()
    assert decoder.feed(source[:7]) == []
    assert decoder.feed(source[7:]) == [codec.Frame("SEND", [("a", "b")], b"body")]


def test_input_buffers_are_copied(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    chunk = bytearray(b"SEND\na:b\n\nbo")
    assert decoder.feed(chunk) == []
    chunk[:] = b"XXXXXXXXXXXX"  # the caller reuses its receive buffer
    (frame,) = decoder.feed(memoryview(bytearray(b"dy\0")))
    assert frame == codec.Frame("SEND", [("a", "b")], b"body")


def test_empty_feed(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(b"SEND\n") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n\0") == [codec.Frame("SEND")]


def test_offsets_across_feeds(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    first = decoder.feed(b"\n\nSEND\n\n\0\n")
    second = decoder.feed(b"\r\nMESSAGE\n\nab")
    third = decoder.feed(b"c\0RECEIPT\n\n\0")
    assert [f.offset for f in first + second + third] == [2, 12, 25]
    # a hand-made frame has no offset
    assert codec.Frame("SEND").offset is None


def test_bytes_fed_and_buffered(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    assert (decoder.bytes_fed, decoder.buffered) == (0, 0)
    decoder.feed(b"SEND\nde")
    assert (decoder.bytes_fed, decoder.buffered) == (7, 7)
    decoder.feed(b"st:x\n\nhel")
    assert (decoder.bytes_fed, decoder.buffered) == (16, 16)
    decoder.feed(b"lo\0\n")
    assert (decoder.bytes_fed, decoder.buffered) == (20, 0)
    decoder.feed(b"SEND\n\n\0SE")
    assert (decoder.bytes_fed, decoder.buffered) == (29, 2)
    decoder.reset()
    assert (decoder.bytes_fed, decoder.buffered, decoder.heartbeats) == (0, 0, 0)
    assert decoder.feed(b"SEND\n\n\0")[0].offset == 0


def test_decoder_is_reusable_after_close(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    decoder.feed(b"SEND\n\n\0")
    decoder.close()
    decoder.reset()
    assert decoder.feed(b"MESSAGE\n\n\0") == [codec.Frame("MESSAGE")]


def test_decode_function(codec: ModuleType) -> None:
    frames = codec.decode(bytearray(b"SEND\n\n\0\nSEND\n\n\0"), "1.1")
    assert frames == [codec.Frame("SEND"), codec.Frame("SEND")]
    assert codec.decode(b"") == []
    assert codec.decode(b"\n\n") == []
    assert codec.decode(b"\n\n", heartbeat_events=True) == [codec.Heartbeat(0, b"\n"), codec.Heartbeat(1, b"\n")]
    assert codec.Decoder("1.0").version == "1.0"
    assert codec.Decoder().version == "1.2"
