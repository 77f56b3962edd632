"""The encoder: escaping per version, content-length rules, EOLs, refusals, Encoder and Frame.encode."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Dict, List, Tuple

import pytest

from fastframe import EncodeError, FrameError

SPECIAL = [("a:b\\c", "1\r2\n3:4\\5")]


# --------------------------------------------------------------------------- escaping


def test_escapes_1_2(codec: ModuleType) -> None:
    assert codec.encode("SEND", SPECIAL) == b"SEND\na\\cb\\\\c:1\\r2\\n3\\c4\\\\5\n\n\0"


def test_escapes_1_1(codec: ModuleType) -> None:
    assert codec.encode("SEND", [("a:b\\c", "2\n3:4\\5")], version="1.1") == b"SEND\na\\cb\\\\c:2\\n3\\c4\\\\5\n\n\0"
    # 1.1 has no escape for CR
    for headers in ([("x", "a\rb")], [("x\r", "a")]):
        with pytest.raises(EncodeError):
            codec.encode("SEND", headers, version="1.1")


def test_no_escapes_1_0(codec: ModuleType) -> None:
    # 1.0 sends ':' in values and backslashes as they are
    assert codec.encode("SEND", [("path", "C:\\dir\\n")], version="1.0") == b"SEND\npath:C:\\dir\\n\n\n\0"
    for headers in ([("a:b", "x")], [("a", "x\ny")], [("a", "x\ry")], [("a\n", "x")]):
        with pytest.raises(EncodeError):
            codec.encode("SEND", headers, version="1.0")


def test_1_2_escapes_on_1_0(codec: ModuleType) -> None:
    # what RabbitMQ wants on every version
    for version in ("1.0", "1.1"):
        assert codec.encode("SEND", SPECIAL, version=version, escapes="1.2") == codec.encode("SEND", SPECIAL)


@pytest.mark.parametrize("command", ["CONNECT", "STOMP", "CONNECTED"])
@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_connect_frames_not_escaped(codec: ModuleType, command: str, version: str) -> None:
    headers = [("passcode", "p:a\\ss"), ("host", "/")]
    expected = command.encode() + b"\npasscode:p:a\\ss\nhost:/\n\n\0"
    assert codec.encode(command, headers, version=version) == expected
    assert codec.encode(command, headers, version=version, escapes="1.2") == expected
    for bad in ([("a:b", "x")], [("a", "x\ny")], [("a", "x\ry")], [("a\r", "x")]):
        with pytest.raises(EncodeError):
            codec.encode(command, bad, version=version)


def test_utf8(codec: ModuleType) -> None:
    wire = codec.encode("MESSAGE", [("x-ключ", "☃ 😀")], "тело".encode())
    assert wire == "MESSAGE\nx-ключ:☃ 😀\ncontent-length:8\n\nтело\0".encode()


def test_header_order_and_repeats_kept(codec: ModuleType) -> None:
    headers = [("b", "1"), ("a", "2"), ("b", "3"), ("empty", ""), (" sp ", " v ")]
    assert codec.encode("SEND", headers) == b"SEND\nb:1\na:2\nb:3\nempty:\n sp : v \n\n\0"


# --------------------------------------------------------------------------- content-length


def test_content_length_default(codec: ModuleType) -> None:
    assert codec.encode("SEND", [("d", "/q")], b"") == b"SEND\nd:/q\n\n\0"
    assert codec.encode("SEND", [("d", "/q")], b"abc") == b"SEND\nd:/q\ncontent-length:3\n\nabc\0"


def test_content_length_always(codec: ModuleType) -> None:
    assert codec.encode("SEND", (), b"", content_length=True) == b"SEND\ncontent-length:0\n\n\0"
    assert codec.encode("ACK", (), b"abc", content_length=True) == b"ACK\ncontent-length:3\n\nabc\0"


def test_content_length_only_when_needed(codec: ModuleType) -> None:
    assert codec.encode("SEND", (), b"abc", content_length=False) == b"SEND\n\nabc\0"
    assert codec.encode("SEND", (), b"", content_length=False) == b"SEND\n\n\0"
    # a NUL in the body forces it
    assert codec.encode("SEND", (), b"a\0c", content_length=False) == b"SEND\ncontent-length:3\n\na\0c\0"


@pytest.mark.parametrize("content_length", [None, True, False])
def test_nul_in_body_always_gets_a_length(codec: ModuleType, content_length: Any) -> None:
    wire = codec.encode("SEND", (), b"\0", content_length=content_length)
    assert wire == b"SEND\ncontent-length:1\n\n\0\0"
    assert codec.decode(wire)[0].body == b"\0"


@pytest.mark.parametrize("content_length", [None, True, False])
def test_given_content_length_is_kept(codec: ModuleType, content_length: Any) -> None:
    headers = [("content-length", "3"), ("d", "/q")]
    wire = codec.encode("SEND", headers, b"a\0c", content_length=content_length)
    assert wire == b"SEND\ncontent-length:3\nd:/q\n\na\0c\0"
    assert codec.encode("SEND", [("content-length", "003")], b"abc") == b"SEND\ncontent-length:003\n\nabc\0"
    assert codec.encode("SEND", [("content-length", "0")]) == b"SEND\ncontent-length:0\n\n\0"


@pytest.mark.parametrize("value", ["4", "2", "", "abc", " 3", "3 ", "+3", "-3", "3.0", "٣"])
def test_contradicting_content_length_refused(codec: ModuleType, value: str) -> None:
    with pytest.raises(EncodeError):
        codec.encode("SEND", [("content-length", value)], b"abc")
    with pytest.raises(EncodeError):
        codec.Frame("SEND", [("content-length", value)], b"abc").encode()


# --------------------------------------------------------------------------- EOLs


def test_crlf(codec: ModuleType) -> None:
    wire = codec.encode("SEND", [("a", "b"), ("c", "d")], b"x\ny", eol="\r\n")
    assert wire == b"SEND\r\na:b\r\nc:d\r\ncontent-length:3\r\n\r\nx\ny\0"
    assert codec.decode(wire) == [codec.Frame("SEND", [("a", "b"), ("c", "d"), ("content-length", "3")], b"x\ny")]
    # an escaped CR in a value cannot be mistaken for the EOL
    wire = codec.encode("SEND", [("a", "b\r")], eol="\r\n")
    assert wire == b"SEND\r\na:b\\r\r\n\r\n\0"
    assert codec.decode(wire)[0].get("a") == "b\r"


# --------------------------------------------------------------------------- refusals


REFUSED: List[Tuple[str, Any, Dict[str, Any]]] = [
    ("", (), {}),
    ("SE\nND", (), {}),
    ("SEND\r", (), {}),
    ("SE\0ND", (), {}),
    ("SEND", [("", "x")], {}),
    ("SEND", [("a\0", "x")], {}),
    ("SEND", [("a", "x\0")], {}),
    ("CONNECT", [("a:b", "x")], {}),
    ("CONNECT", [("a", "x\n")], {}),
    ("CONNECTED", [("a", "x\r")], {}),
    ("STOMP", [("a\n", "x")], {}),
    ("SEND", [("a:b", "x")], {"version": "1.0"}),
    ("SEND", [("a", "x\n")], {"version": "1.0"}),
    ("SEND", [("a", "x\r")], {"version": "1.0"}),
    ("SEND", [("a", "x\r")], {"version": "1.1"}),
    ("SEND", [("a\r", "x")], {"version": "1.1"}),
    ("SEND", [("a", "x\r")], {"version": "1.2", "escapes": "1.1"}),
    ("SEND", [("content-length", "1")], {}),
]


@pytest.mark.parametrize("command, headers, options", REFUSED)
def test_encode_errors(codec: ModuleType, command: str, headers: Any, options: Dict[str, Any]) -> None:
    with pytest.raises(EncodeError) as info:
        codec.encode(command, headers, b"", **options)
    assert isinstance(info.value, FrameError) and isinstance(info.value, ValueError)
    assert str(info.value)
    with pytest.raises(EncodeError):
        codec.Encoder(**options).encode(command, headers, b"")
    with pytest.raises(EncodeError):
        codec.Frame(command, headers).encode(**options)


@pytest.mark.parametrize(
    "command, headers", [("SE\ud800ND", ()), ("SEND", [("\udfff", "x")]), ("SEND", [("x", "a\ud83d")])]
)
def test_lone_surrogates_refused(codec: ModuleType, command: str, headers: Any) -> None:
    # no UTF-8 form: the wire cannot carry them
    with pytest.raises(EncodeError):
        codec.encode(command, headers)


def test_type_errors(codec: ModuleType) -> None:
    with pytest.raises(TypeError):
        codec.encode(b"SEND")
    with pytest.raises(TypeError):
        codec.encode(None)
    with pytest.raises(TypeError):
        codec.encode("SEND", [("a", 1)])
    with pytest.raises(TypeError):
        codec.encode("SEND", [("a",)])
    with pytest.raises(TypeError):
        codec.encode("SEND", (), "text body")
    with pytest.raises(TypeError):
        codec.encode(codec.Frame("SEND"), [("a", "b")])
    with pytest.raises(TypeError):
        codec.encode(codec.Frame("SEND"), None, b"x")


@pytest.mark.parametrize(
    "options, exc",
    [
        ({"eol": "\r"}, ValueError),
        ({"eol": b"\n"}, ValueError),
        ({"version": "1.3"}, ValueError),
        ({"escapes": "2.0"}, ValueError),
        ({"content_length": 1}, TypeError),
        ({"content_length": 0}, TypeError),
        ({"content_length": "yes"}, TypeError),
    ],
)
def test_bad_encoder_options(codec: ModuleType, options: Dict[str, Any], exc: type) -> None:
    with pytest.raises(exc):
        codec.Encoder(**options)
    with pytest.raises(exc):
        codec.encode("SEND", **options)


def test_bad_options_refused_whatever_was_encoded_before(codec: ModuleType) -> None:
    # 1 == True and 0 == False: an earlier call with the bool must not make the int acceptable
    codec.encode("SEND", content_length=True)
    codec.encode("SEND", content_length=False)
    with pytest.raises(TypeError):
        codec.encode("SEND", content_length=1)
    with pytest.raises(TypeError):
        codec.encode("SEND", content_length=0)


# --------------------------------------------------------------------------- inputs and entry points


def test_headers_and_body_forms(codec: ModuleType) -> None:
    expected = b"SEND\na:1\nb:2\ncontent-length:2\n\nhi\0"
    assert codec.encode("SEND", {"a": "1", "b": "2"}, b"hi") == expected
    assert codec.encode("SEND", [("a", "1"), ("b", "2")], bytearray(b"hi")) == expected
    assert codec.encode("SEND", (p for p in [("a", "1"), ("b", "2")]), memoryview(b"hi")) == expected
    assert codec.encode("SEND") == b"SEND\n\n\0"
    assert codec.encode("SEND", None, None) == b"SEND\n\n\0"
    assert type(codec.encode("SEND")) is bytes


def test_frame_argument(codec: ModuleType) -> None:
    frame = codec.Frame("MESSAGE", [("a:b", "c")], b"body")
    assert codec.encode(frame) == b"MESSAGE\na\\cb:c\ncontent-length:4\n\nbody\0"
    assert codec.encode(frame, version="1.1", content_length=False) == b"MESSAGE\na\\cb:c\n\nbody\0"
    assert frame.encode() == codec.encode(frame)
    assert frame.encode("1.1", eol="\r\n") == codec.encode(frame, version="1.1", eol="\r\n")
    with pytest.raises(EncodeError):
        frame.encode("1.0")
    assert frame.encode("1.0", escapes="1.2") == codec.encode(frame)
    # a decoded frame re-encodes with the headers it came with
    (decoded,) = codec.decode(b"MESSAGE\ncontent-length:2\nx:\\n\n\nhi\0")
    assert decoded.encode() == b"MESSAGE\ncontent-length:2\nx:\\n\n\nhi\0"


def test_encoder_object(codec: ModuleType) -> None:
    encoder = codec.Encoder("1.1", eol="\r\n", content_length=True)
    assert encoder.version == "1.1"
    options = encoder.options
    assert (options.version, options.escapes, options.content_length, options.eol) == ("1.1", "1.1", True, "\r\n")
    assert encoder.encode("SEND", {"a": "b:c"}) == b"SEND\r\na:b\\cc\r\ncontent-length:0\r\n\r\n\0"
    frame = codec.Frame("SEND", {"a": "b:c"})
    assert encoder.encode(frame) == encoder.encode("SEND", {"a": "b:c"})
    with pytest.raises(EncodeError):
        encoder.encode("SEND", {"a": "\r"})
    assert codec.Encoder().encode("SEND", (), b"x") == codec.encode("SEND", (), b"x")
    assert codec.Encoder("1.0", escapes="1.2").options.escapes == "1.2"


def test_encoded_frames_decode_back(codec: ModuleType) -> None:
    headers = [("destination", "/queue/a"), ("x:y", "a\\b\nc\rd:e"), ("é", "☃")]
    for eol in ("\n", "\r\n"):
        for content_length in (None, True, False):
            wire = codec.encode("MESSAGE", headers, b"b\0dy", eol=eol, content_length=content_length)
            (frame,) = codec.decode(wire)
            assert frame.headers[:3] == tuple(headers)
            assert frame.body == b"b\0dy"
