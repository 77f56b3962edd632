"""Frame: construction, immutability, header access, equality and hash across twins, repr, pickling."""

from __future__ import annotations

import copy
import pickle
from types import ModuleType
from typing import Any

import pytest

from conftest import TWINS, load_twin

HEADERS = (("destination", "/queue/a"), ("foo", "World"), ("foo", "Hello"), ("empty", ""))


@pytest.fixture(params=TWINS, scope="session")
def other(request: pytest.FixtureRequest) -> ModuleType:
    """The second twin of a cross-twin comparison (every pairing, the same twin included)."""
    return load_twin(request.param)


# --------------------------------------------------------------------------- construction


def test_construct(codec: ModuleType) -> None:
    frame = codec.Frame("SEND", HEADERS, b"body")
    assert frame.command == "SEND"
    assert frame.headers == HEADERS
    assert frame.body == b"body"
    assert frame.offset is None
    bare = codec.Frame("DISCONNECT")
    assert (bare.headers, bare.body) == ((), b"")


@pytest.mark.parametrize(
    "headers",
    [
        lambda: {"a": "1", "b": "2"},
        lambda: [("a", "1"), ("b", "2")],
        lambda: (["a", "1"], ["b", "2"]),
        lambda: iter([("a", "1"), ("b", "2")]),
    ],
    ids=["dict", "list", "lists", "iterator"],
)
def test_header_forms(codec: ModuleType, headers: Any) -> None:
    frame = codec.Frame("SEND", headers())
    assert frame.headers == (("a", "1"), ("b", "2"))
    assert type(frame.headers) is tuple and all(type(h) is tuple for h in frame.headers)


@pytest.mark.parametrize("body", [bytearray(b"abc"), memoryview(b"abc"), memoryview(b"xabcx")[1:4]])
def test_body_forms(codec: ModuleType, body: Any) -> None:
    frame = codec.Frame("SEND", (), body)
    assert frame.body == b"abc"
    assert type(frame.body) is bytes


def test_inputs_are_copied(codec: ModuleType) -> None:
    headers = [("a", "1")]
    body = bytearray(b"abc")
    frame = codec.Frame("SEND", headers, body)
    headers.append(("b", "2"))
    body[0] = ord("X")
    assert frame.headers == (("a", "1"),)
    assert frame.body == b"abc"


@pytest.mark.parametrize(
    "args",
    [
        (b"SEND",),
        (None,),
        (1,),
        ("SEND", [("a",)]),
        ("SEND", [("a", "b", "c")]),
        ("SEND", [("a", 1)]),
        ("SEND", [(1, "a")]),
        ("SEND", [("a", b"b")]),
        ("SEND", {"a": None}),
        ("SEND", [None]),
        ("SEND", 5),
        ("SEND", (), "text"),
        ("SEND", (), 5),
        ("SEND", (), [1, 2]),
    ],
)
def test_constructor_type_errors(codec: ModuleType, args: Any) -> None:
    with pytest.raises(TypeError):
        codec.Frame(*args)


# --------------------------------------------------------------------------- immutability


@pytest.mark.parametrize("attribute", ["command", "headers", "body", "offset", "something_new"])
def test_immutable(codec: ModuleType, attribute: str) -> None:
    frame = codec.Frame("SEND", HEADERS, b"x")
    with pytest.raises(AttributeError):
        setattr(frame, attribute, "MESSAGE")
    assert (frame.command, frame.headers, frame.body) == ("SEND", HEADERS, b"x")


def test_decoded_frame_immutable(codec: ModuleType) -> None:
    (frame,) = codec.decode(b"\nSEND\n\n\0")
    with pytest.raises(AttributeError):
        frame.offset = 0
    assert frame.offset == 1


# --------------------------------------------------------------------------- header access


def test_get(codec: ModuleType) -> None:
    frame = codec.Frame("MESSAGE", HEADERS)
    assert frame.get("foo") == "World"  # the first entry wins
    assert frame.get("empty") == ""
    assert frame.get("empty", "default") == ""
    assert frame.get("missing") is None
    assert frame.get("missing", "default") == "default"
    assert frame.get("FOO") is None  # names are case sensitive


def test_get_matches_names_by_value_whatever_the_object(codec: ModuleType) -> None:
    class Name(str):
        pass

    (decoded,) = codec.decode(b"MESSAGE\nmessage-id:7\nx\xc3\xa9:1\nxe:2\n\n\0")
    for frame in (decoded, codec.Frame("MESSAGE", [("message-id", "7"), ("x\u00e9", "1"), ("xe", "2")])):
        assert frame.get("".join(["message", "-id"])) == "7"  # equal, not the same object
        assert frame.get(Name("message-id")) == "7"  # a str subclass
        assert frame.get("x\u00e9") == "1" and frame.get("xe") == "2"  # same length, other bytes
        assert frame.get("message-i") is None and frame.get("message-idx") is None
        assert frame.get(b"message-id") is None and frame.get(None, "d") == "d"  # not a str: no match


def test_get_all(codec: ModuleType) -> None:
    frame = codec.Frame("MESSAGE", HEADERS)
    assert frame.get_all("foo") == ["World", "Hello"]
    assert frame.get_all("destination") == ["/queue/a"]
    assert frame.get_all("missing") == []


def test_header_map(codec: ModuleType) -> None:
    frame = codec.Frame("MESSAGE", HEADERS)
    mapping = frame.header_map()
    assert mapping == {"destination": "/queue/a", "foo": "World", "empty": ""}
    mapping["foo"] = "changed"
    assert frame.header_map()["foo"] == "World"
    assert codec.Frame("X").header_map() == {}


# --------------------------------------------------------------------------- equality and hash


def test_equality(codec: ModuleType) -> None:
    frame = codec.Frame("SEND", HEADERS, b"x")
    assert frame == codec.Frame("SEND", list(HEADERS), bytearray(b"x"))
    assert not frame != codec.Frame("SEND", HEADERS, b"x")
    assert frame != codec.Frame("MESSAGE", HEADERS, b"x")
    assert frame != codec.Frame("SEND", HEADERS[::-1], b"x")  # order matters
    assert frame != codec.Frame("SEND", HEADERS[:-1], b"x")
    assert frame != codec.Frame("SEND", HEADERS, b"y")
    assert frame != ("SEND", HEADERS, b"x")
    assert frame != "SEND"
    assert frame != None  # noqa: E711


def test_equality_and_hash_across_twins(codec: ModuleType, other: ModuleType) -> None:
    mine = codec.Frame("SEND", HEADERS, b"body")
    theirs = other.Frame("SEND", HEADERS, b"body")
    assert mine == theirs and theirs == mine
    assert not (mine != theirs)
    assert hash(mine) == hash(theirs)
    assert len({mine, theirs}) == 1
    assert mine != other.Frame("SEND", HEADERS, b"other body")
    assert theirs != codec.Frame("SEND", HEADERS[:1], b"body")
    # decoded frames too, whatever their offsets
    data = b"\n\nMESSAGE\nfoo:World\nfoo:Hello\n\nhi\0"
    (a,) = codec.decode(data)
    (b,) = other.decode(data[2:])
    assert (a.offset, b.offset) == (2, 0)
    assert a == b and hash(a) == hash(b)
    assert a == other.Frame("MESSAGE", [("foo", "World"), ("foo", "Hello")], b"hi")


def test_heartbeats_equal_across_twins(codec: ModuleType, other: ModuleType) -> None:
    assert codec.Heartbeat(3, b"\r\n") == other.Heartbeat(3, b"\r\n")
    assert hash(codec.Heartbeat(3, b"\r\n")) == hash(other.Heartbeat(3, b"\r\n"))
    assert codec.Heartbeat(3, b"\n") != other.Heartbeat(4, b"\n")
    assert codec.Heartbeat(0, b"\n") != other.Frame("SEND")


def test_offset_not_part_of_equality(codec: ModuleType) -> None:
    frames = codec.decode(b"SEND\n\n\0SEND\n\n\0")
    assert frames[0] == frames[1]
    assert hash(frames[0]) == hash(frames[1])
    assert [f.offset for f in frames] == [0, 7]
    assert frames[0] == codec.Frame("SEND")


# --------------------------------------------------------------------------- repr and pickling


def test_repr(codec: ModuleType) -> None:
    frame = codec.Frame("SEND", [("a", "b\nc")], b"hi\0")
    text = repr(frame)
    assert text.startswith("Frame(")
    assert repr("SEND") in text
    assert repr("b\nc") in text
    assert repr(b"hi\0") in text


def test_repr_of_a_big_body_is_short(codec: ModuleType) -> None:
    frame = codec.Frame("MESSAGE", [("destination", "/q")], b"x" * 1_000_000)
    text = repr(frame)
    assert len(text) < 300
    assert "1000000" in text
    assert "destination" in text


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_round_trip(codec: ModuleType, protocol: int) -> None:
    frame = codec.Frame("MESSAGE", HEADERS, b"\0body\xff")
    again = pickle.loads(pickle.dumps(frame, protocol))
    assert type(again) is codec.Frame
    assert again == frame
    assert (again.command, again.headers, again.body) == (frame.command, frame.headers, frame.body)
    (decoded,) = codec.decode(b"\nSEND\nx:\\c\n\nb\0")
    assert pickle.loads(pickle.dumps(decoded, protocol)) == decoded


def test_copy(codec: ModuleType) -> None:
    frame = codec.Frame("SEND", HEADERS, b"x")
    assert copy.copy(frame) == frame
    assert copy.deepcopy(frame) == frame
