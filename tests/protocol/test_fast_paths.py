"""The client's fast paths (the everyday SEND, the everyday MESSAGE) agree with the general ones.

``ClientConnection.send`` encodes a SEND without a Frame and without ``spec.frame_problems`` when
the encoders accept it; whatever they refuse goes through the general path. These tests hold the
two to the same bytes, the same errors and the same ``last_frame``, on every version and escape set.
"""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest

from fastframe import Frame
from fastframe.protocol import LocalProtocolError, Message, RemoteProtocolError, State

from .helpers import pair

HEADERS: List[Any] = [
    None,
    {},
    {"x": "1"},
    {"x": "a:b", "y": "\\"},
    {"x": "a\nb"},
    {"x": "a\rb"},
    {"a:b": "v"},
    {"a\nb": "v"},
    {"": "v"},
    {"x": "a\0b"},
    {"x": "\ud800"},  # a lone surrogate: no UTF-8 for it
    {"content-length": "3"},
    {"content-length": "03"},
    {"content-length": "4"},
    {"content-length": "x"},
    {"content-length": "٣"},  # a digit, not an ASCII one
    [("x", "1"), ("x", "2"), ("destination", "/other")],
    {"h": "ü€"},
]
BODIES: List[Any] = [b"abc", "abc", b"a\0c", bytearray(b"abc"), memoryview(b"abc")]


def general(client: Any, destination: Any, body: Any, headers: Any, **kw: Any) -> Tuple[Any, Any]:
    """What the general path (Frame, spec.frame_problems, encode) makes of the same call."""
    content_type = kw.get("content_type")
    if isinstance(body, str):
        body = body.encode("utf-8")
        content_type = content_type or "text/plain;charset=utf-8"
    pairs = [("destination", destination)]
    if content_type is not None:
        pairs.append(("content-type", content_type))
    if kw.get("transaction") is not None:
        pairs.append(("transaction", kw["transaction"]))
    if headers is not None:
        items = headers.items() if isinstance(headers, dict) else headers
        pairs += [(str(n), str(v)) for n, v in items]
    try:
        frame, data = client._build("SEND", pairs, bytes(body))
    except LocalProtocolError as exc:
        return None, (str(exc), exc.frame)
    return (data, frame), None


def fast(client: Any, destination: Any, body: Any, headers: Any, **kw: Any) -> Tuple[Any, Any]:
    try:
        data = client.send(destination, body, headers, **kw)
    except LocalProtocolError as exc:
        return None, (str(exc), exc.frame)
    return (data, client.last_frame), None


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
@pytest.mark.parametrize("escapes", [None, "1.0", "1.2"])
@pytest.mark.parametrize("validate", [True, False])
def test_send_fast_path_gives_the_general_paths_bytes_errors_and_frame(version, escapes, validate):
    client, _ = pair(version, escapes=escapes, validate=validate)
    client.begin("tx")
    options: List[Any] = [{}, {"content_type": "application/json"}, {"transaction": "tx"}]
    for headers in HEADERS:
        for body in BODIES:
            for kw in options:
                expected = general(client, "/q", body, headers, **kw)
                assert fast(client, "/q", body, headers, **kw) == expected, (headers, body, kw)
    for destination in ["/q\nx", "/q:x", "", "/ü"]:
        assert fast(client, destination, b"", None) == general(client, destination, b"", None)


def test_last_frame_is_the_frame_behind_the_last_bytes():
    client, _ = pair("1.2")
    data = client.send("/q", b"x", {"a": "1"})
    assert client.last_frame == Frame("SEND", [("destination", "/q"), ("a", "1")], b"x")
    assert client.last_frame.encode("1.2") == data and client.last_frame is client.last_frame
    client.subscribe("s", "/q")
    assert client.last_frame.command == "SUBSCRIBE"


def test_send_outside_the_session_or_with_a_receipt_takes_the_general_path():
    client, _ = pair("1.2")
    client.send("/q", b"", receipt="r-1")
    assert client.pending_receipts == {"r-1": "SEND"}
    with pytest.raises(LocalProtocolError, match="already pending"):
        client.send("/q", b"", receipt="r-1")
    client.disconnect()
    assert client.state is State.CLOSED
    with pytest.raises(LocalProtocolError, match="cannot send SEND in state closed"):
        client.send("/q", b"")


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
@pytest.mark.parametrize("escapes", [None, "1.0", "1.2"])
@pytest.mark.parametrize("validate", [True, False])
def test_send_many_gives_what_send_gives_for_each_and_the_refusals(version, escapes, validate):
    # the same SENDs, every third one unusual (a header, a str body, a transaction, one refused):
    # send_many's bytes are send()'s, back to back, and each refusal is send()'s error, in place
    client, _ = pair(version, escapes=escapes, validate=validate)
    client.begin("tx")
    sends: List[Any] = []
    for n, headers in enumerate(HEADERS):
        sends.append((f"/q/{n}", b"body %d" % n, None, None, None))
        sends.append((f"/q/{n}", BODIES[n % len(BODIES)], headers, None, "tx" if n % 2 else None))
        sends.append((f"/q/{n}", b"", None, "text/plain" if n % 2 else None, "no-such-tx" if n % 5 == 4 else None))
    sends.append(("/q\nx", b"", None, None, None))
    chunks, errors = [], []
    for i, (destination, body, headers, content_type, tx) in enumerate(sends):
        try:
            chunks.append(client.send(destination, body, headers, content_type=content_type, transaction=tx))
        except LocalProtocolError as exc:
            errors.append((i, str(exc)))
    assert errors  # (the case has refusals)
    data, refused = client.send_many(sends)
    assert data == b"".join(chunks)
    assert [(i, str(exc)) for i, exc in refused] == errors
    assert client.last_frame is None


def test_send_many_refuses_an_item_of_another_shape_and_sends_the_rest():
    client, _ = pair("1.2")
    data, refused = client.send_many([("/q", b"1", None, None, None), ("/q", b"2"), ("/q", b"3", None, None, None)])
    assert data == client.send("/q", b"1") + client.send("/q", b"3")
    assert [i for i, _ in refused] == [1] and isinstance(refused[0][1], ValueError)


def test_send_many_outside_the_session_refuses_each():
    client, _ = pair("1.2")
    client.disconnect()
    data, refused = client.send_many([("/q", b"1", None, None, None), ("/q", b"2", None, None, None)])
    assert data == b"" and [i for i, _ in refused] == [0, 1]
    assert all("cannot send SEND in state closed" in str(exc) for _, exc in refused)


def frames_of(version: str, headers: List[Tuple[str, str]], body: bytes = b"m") -> bytes:
    return Frame("MESSAGE", headers, body).encode(version)


# client-individual came with STOMP 1.1
@pytest.mark.parametrize(
    "version, mode",
    [
        (v, m)
        for v in ("1.0", "1.1", "1.2")
        for m in ("auto", "client", "client-individual")
        if (v, m) != ("1.0", "client-individual")
    ],
)
def test_message_fast_path_gives_the_events_and_bookkeeping_of_the_general_one(version, mode):
    client, _ = pair(version)
    client.subscribe("s", "/q", ack=mode)
    headers = [("destination", "/q"), ("message-id", "m1"), ("subscription", "s"), ("ack", "a1")]
    (event,) = [e for e in client.receive_data(frames_of(version, headers)) if isinstance(e, Message)]
    ack_id = "a1" if version == "1.2" else "m1"
    assert event == Message(event.frame, "s", "m1", ack_id, "/q")
    assert (
        type(event) is Message
        and event.body == b"m"
        and hash(event) == hash(Message(event.frame, "s", "m1", ack_id, "/q"))
    )
    with pytest.raises(AttributeError):
        event.subscription = "t"  # still frozen
    assert client.unacked == ({} if mode == "auto" else {ack_id: ("s", "m1")})


@pytest.mark.parametrize(
    "headers, version, match",
    [
        ([("destination", "/q"), ("subscription", "s")], "1.2", "MESSAGE frame without a 'message-id' header"),
        ([("destination", "/q"), ("message-id", "m")], "1.2", "MESSAGE frame without a 'subscription' header"),
        ([("destination", "/q"), ("message-id", "m"), ("subscription", "zz")], "1.2", "unknown subscription 'zz'"),
    ],
)
def test_message_fast_path_refuses_what_the_general_one_refuses(headers, version, match):
    client, _ = pair(version)
    client.unknown_subscriptions = "refuse"
    client.subscribe("s", "/q")
    with pytest.raises(RemoteProtocolError, match=match) as info:
        client.receive_data(frames_of(version, headers))
    assert info.value.frame is not None and info.value.frame.command == "MESSAGE"


def test_message_without_subscription_is_accepted_on_1_0():
    client, _ = pair("1.0")
    (event,) = [e for e in client.receive_data(frames_of("1.0", [("destination", "/q"), ("message-id", "m")]))]
    assert event == Message(event.frame, None, "m", "m", "/q")
