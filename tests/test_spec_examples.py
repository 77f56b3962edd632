"""Every example frame of the STOMP 1.2 specification, decoded and re-encoded.

The frames are copied from ../shared/spec/stomp-specification-1.2.md with ^@
written as NUL. That rendering of the spec lost the blank lines inside code
blocks; the blank line that ends every head (required by the grammar) is put
back here, so each frame is the one the spec means. The only spec "example"
left out is the heart-beat negotiation sketch (``CONNECT / heart-beat:<cx>,<cy>``
with its placeholders lost), which is no frame.
"""

from __future__ import annotations

from types import ModuleType
from typing import List, NamedTuple, Tuple

import pytest

import fastframe


class Example(NamedTuple):
    name: str
    wire: bytes
    command: str
    headers: List[Tuple[str, str]]
    body: bytes


# The ERROR example's body as printed in the spec (the printed content-length
# of 171 does not match it: see test_error_example_printed_content_length).
_ERROR_BODY = (
    b"The message:\n"
    b"-----\n"
    b"MESSAGE\n"
    b"destined:/queue/a\n"
    b"receipt:message-12345\n"
    b"Hello queue a!\n"
    b"-----\n"
    b"Did not contain a destination header, which is REQUIRED\n"
    b"for message propagation.\n"
)
_ERROR_HEAD = (
    b"ERROR\n"
    b"receipt-id:message-12345\n"
    b"content-type:text/plain\n"
    b"content-length:%d\n"
    b"message: malformed frame received\n"
    b"\n"
)

EXAMPLES = [
    Example(
        "frame-structure",
        b"COMMAND\nheader1:value1\nheader2:value2\n\nBody\0",
        "COMMAND",
        [("header1", "value1"), ("header2", "value2")],
        b"Body",
    ),
    Example(
        "receipt-header",
        b"SEND\ndestination:/queue/a\nreceipt:message-12345\n\nhello queue a\0",
        "SEND",
        [("destination", "/queue/a"), ("receipt", "message-12345")],
        b"hello queue a",
    ),
    Example(
        "repeated-headers",
        b"MESSAGE\nfoo:World\nfoo:Hello\n\n\0",
        "MESSAGE",
        [("foo", "World"), ("foo", "Hello")],
        b"",
    ),
    Example(
        "connect",
        b"CONNECT\naccept-version:1.2\nhost:stomp.github.org\n\n\0",
        "CONNECT",
        [("accept-version", "1.2"), ("host", "stomp.github.org")],
        b"",
    ),
    Example("connected", b"CONNECTED\nversion:1.2\n\n\0", "CONNECTED", [("version", "1.2")], b""),
    Example(
        "connect-negotiation",
        b"CONNECT\naccept-version:1.0,1.1,2.0\nhost:stomp.github.org\n\n\0",
        "CONNECT",
        [("accept-version", "1.0,1.1,2.0"), ("host", "stomp.github.org")],
        b"",
    ),
    Example("connected-negotiation", b"CONNECTED\nversion:1.1\n\n\0", "CONNECTED", [("version", "1.1")], b""),
    Example(
        "error-version-mismatch",
        b"ERROR\nversion:1.2,2.1\ncontent-type:text/plain\n\nSupported protocol versions are 1.2 2.1\0",
        "ERROR",
        [("version", "1.2,2.1"), ("content-type", "text/plain")],
        b"Supported protocol versions are 1.2 2.1",
    ),
    Example(
        "send",
        b"SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\n\0",
        "SEND",
        [("destination", "/queue/a"), ("content-type", "text/plain")],
        b"hello queue a\n",
    ),
    Example(
        "subscribe",
        b"SUBSCRIBE\nid:0\ndestination:/queue/foo\nack:client\n\n\0",
        "SUBSCRIBE",
        [("id", "0"), ("destination", "/queue/foo"), ("ack", "client")],
        b"",
    ),
    Example("unsubscribe", b"UNSUBSCRIBE\nid:0\n\n\0", "UNSUBSCRIBE", [("id", "0")], b""),
    Example("ack", b"ACK\nid:12345\ntransaction:tx1\n\n\0", "ACK", [("id", "12345"), ("transaction", "tx1")], b""),
    Example("begin", b"BEGIN\ntransaction:tx1\n\n\0", "BEGIN", [("transaction", "tx1")], b""),
    Example("commit", b"COMMIT\ntransaction:tx1\n\n\0", "COMMIT", [("transaction", "tx1")], b""),
    Example("abort", b"ABORT\ntransaction:tx1\n\n\0", "ABORT", [("transaction", "tx1")], b""),
    Example("disconnect", b"DISCONNECT\nreceipt:77\n\n\0", "DISCONNECT", [("receipt", "77")], b""),
    Example("receipt-77", b"RECEIPT\nreceipt-id:77\n\n\0", "RECEIPT", [("receipt-id", "77")], b""),
    Example(
        "message",
        b"MESSAGE\nsubscription:0\nmessage-id:007\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\0",
        "MESSAGE",
        [("subscription", "0"), ("message-id", "007"), ("destination", "/queue/a"), ("content-type", "text/plain")],
        b"hello queue a",
    ),
    Example("receipt", b"RECEIPT\nreceipt-id:message-12345\n\n\0", "RECEIPT", [("receipt-id", "message-12345")], b""),
    Example(
        "error-with-body",
        _ERROR_HEAD % len(_ERROR_BODY) + _ERROR_BODY + b"\0",
        "ERROR",
        [
            ("receipt-id", "message-12345"),
            ("content-type", "text/plain"),
            ("content-length", str(len(_ERROR_BODY))),
            # spaces are never trimmed in 1.2
            ("message", " malformed frame received"),
        ],
        _ERROR_BODY,
    ),
]

ids = [example.name for example in EXAMPLES]


@pytest.mark.parametrize("example", EXAMPLES, ids=ids)
def test_decodes_as_the_spec_means(codec: ModuleType, example: Example) -> None:
    (frame,) = codec.decode(example.wire)
    assert frame.command == example.command
    assert frame.headers == tuple(example.headers)
    assert frame.body == example.body
    assert frame.offset == 0


@pytest.mark.parametrize("example", EXAMPLES, ids=ids)
def test_reencodes_to_the_same_frame(codec: ModuleType, example: Example) -> None:
    (frame,) = codec.decode(example.wire)
    again = codec.decode(codec.encode(frame))
    # encode() may add a content-length for a body; everything else is kept as is
    expected = list(example.headers)
    if example.body and not any(name == "content-length" for name, _ in expected):
        expected.append(("content-length", str(len(example.body))))
    assert [(f.command, f.headers, f.body) for f in again] == [(example.command, tuple(expected), example.body)]


@pytest.mark.parametrize("example", EXAMPLES, ids=ids)
def test_reencodes_byte_for_byte_without_added_content_length(codec: ModuleType, example: Example) -> None:
    (frame,) = codec.decode(example.wire)
    assert codec.encode(frame, content_length=False) == example.wire
    assert frame.encode(content_length=False) == example.wire


@pytest.mark.parametrize("example", EXAMPLES, ids=ids)
def test_crlf_and_trailing_eols_give_the_same_frame(codec: ModuleType, example: Example) -> None:
    # 1.2 allows CRLF on every head line and any number of EOLs after the NUL
    head, sep, rest = example.wire.partition(b"\n\n")
    crlf = head.replace(b"\n", b"\r\n") + b"\r\n\r\n" + rest + b"\r\n\n\r\n"
    decoder = codec.Decoder()
    frames = decoder.feed(crlf)
    decoder.close()
    assert [(f.command, f.headers, f.body) for f in frames] == [(example.command, tuple(example.headers), example.body)]
    assert decoder.heartbeats == 3


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.command != "COMMAND"], ids=lambda e: e.name)
def test_spec_examples_pass_strict_mode(codec: ModuleType, example: Example) -> None:
    (frame,) = codec.decode(example.wire, strict=True)
    assert frame == codec.Frame(example.command, example.headers, example.body)


def test_all_examples_as_one_stream(codec: ModuleType) -> None:
    stream = b"\n".join(example.wire for example in EXAMPLES)
    frames = codec.decode(stream)
    assert [(f.command, list(f.headers), f.body) for f in frames] == [(e.command, e.headers, e.body) for e in EXAMPLES]
    offsets, at = [], 0
    for example in EXAMPLES:
        offsets.append(at)
        at += len(example.wire) + 1
    assert [f.offset for f in frames] == offsets


def test_repeated_header_example_first_wins(codec: ModuleType) -> None:
    (frame,) = codec.decode(b"MESSAGE\nfoo:World\nfoo:Hello\n\n\0")
    # "The value of the foo header is just World."
    assert frame.get("foo") == "World"
    assert frame.header_map() == {"foo": "World"}
    assert frame.get_all("foo") == ["World", "Hello"]


def test_error_example_printed_content_length(codec: ModuleType) -> None:
    # The spec prints content-length:171 for a shorter body. content-length
    # wins over NULs, so the decoder reads the NUL as a body octet and waits
    # for more: the stream ends inside the frame.
    wire = _ERROR_HEAD % 171 + _ERROR_BODY + b"\0"
    assert len(_ERROR_BODY) < 171
    decoder = codec.Decoder()
    assert decoder.feed(wire) == []
    with pytest.raises(fastframe.TruncatedError) as info:
        decoder.close()
    assert info.value.offset == len(wire)
    # once enough octets and the NUL arrive, the body is exactly 171 octets
    missing = 171 - len(_ERROR_BODY) - 1
    decoder = codec.Decoder()
    (frame,) = decoder.feed(wire + b"x" * missing + b"\0")
    assert len(frame.body) == 171
    assert frame.body == _ERROR_BODY + b"\0" + b"x" * missing
