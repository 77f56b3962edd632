"""The connection layer's edges: ERROR in every state with one escaping rule, and nothing after the end of
the stream. Both roles, decoding with each twin."""

from __future__ import annotations

import pytest

import fastframe
from fastframe.protocol import (
    ClientConnection,
    ConnectionClosed,
    LocalProtocolError,
    RemoteProtocolError,
    ServerConnection,
    State,
    _client,
    _core,
    _server,
)

from .helpers import pair, relay

CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\n\n\0"
AWKWARD = "no\nway: here\r\0"  # what STOMP 1.0 cannot carry in a header value


@pytest.fixture(autouse=True)
def twin_decoder(codec, monkeypatch):
    monkeypatch.setattr(_core, "Decoder", codec.Decoder)
    for module in (_core, _client, _server):
        monkeypatch.setattr(module, "Heartbeat", codec.Heartbeat)
    return codec


def decoded(data: bytes, version: str):
    (frame,) = fastframe.decode(data, version)
    return frame


@pytest.mark.parametrize("state", ["fresh", "connect-waiting", "connected-1.2", "connected-1.0"])
def test_error_in_every_state(state):
    server = ServerConnection()
    version = "1.0"
    if state != "fresh":
        accept = b"1.0" if state == "connected-1.0" else b"1.2"
        server.receive_data(CONNECT.replace(b"1.2", accept))
        assert server.state is State.CONNECTING
    if state.startswith("connected"):
        server.accept()
        version = server.version
    data = server.error(AWKWARD, body=b"why", headers={"x-" + AWKWARD: AWKWARD})
    frame = decoded(data, version)
    assert server.state is State.CLOSED and frame.command == "ERROR" and frame.body == b"why"
    if version == "1.2":  # the negotiated version's escapes: all but the NUL, which no version carries
        assert frame.get("message") == AWKWARD.replace("\0", " ")
    else:  # 1.0's rules, the same whether a CONNECT waits or not: what it cannot carry is a space
        assert frame.get("message") == "no way: here  "
        assert frame.headers[1] == ("x-no way  here  ", "no way: here  ")
        assert b"\\" not in data  # no escape sequence


def test_reject_uses_the_same_rule():
    server = ServerConnection()
    server.receive_data(CONNECT)
    frame = decoded(server.reject("bad\nlogin"), "1.0")
    assert frame.get("message") == "bad login" and server.state is State.CLOSED


def connected_pair():
    return pair()


def test_a_server_gets_nothing_after_the_end_of_the_stream():
    _, server = connected_pair()
    assert [type(e) for e in server.receive_eof()] == [ConnectionClosed]
    assert server.receive_eof() == []  # a second end: no second ConnectionClosed
    whole = fastframe.encode("SEND", {"destination": "/q"}, b"x")
    for data in (whole, b"\n", b"SEN"):  # a whole frame, a heart-beat, a piece: each refused the same way
        with pytest.raises(LocalProtocolError, match="after the end of the stream"):
            server.receive_data(data)
    with pytest.raises(LocalProtocolError, match="after the end of the stream"):
        server.get_buffer(100)


def test_an_end_inside_a_frame_stays_the_peers_violation():
    client, _ = connected_pair()
    client.receive_data(b"MESS")
    for _ in range(2):  # the same error each time, not a clean end the second time
        with pytest.raises(RemoteProtocolError, match="inside a frame"):
            client.receive_eof()


def test_a_client_gets_nothing_after_its_end_either():
    client, server = connected_pair()
    relay(client.subscribe("0", "/q"), server)
    assert [type(e) for e in client.receive_eof()] == [ConnectionClosed]
    assert client.receive_eof() == []
    message = server.message("0", b"late", destination="/q")
    with pytest.raises(LocalProtocolError, match="after the end of the stream"):
        client.receive_data(message)  # not "MESSAGE for unknown subscription": the stream ended
    with pytest.raises(LocalProtocolError, match="after the end of the stream"):
        client.receive_data(b"\n")


def test_a_buffer_lent_before_the_end_is_refused_after_it():
    client, _ = connected_pair()
    buffer = client.get_buffer(64)
    client.receive_eof()
    buffer[:1] = b"\n"
    with pytest.raises(LocalProtocolError, match="after the end of the stream"):
        client.buffer_updated(1)


def test_unused_client_connection_is_fine():
    assert ClientConnection().receive_eof()[-1] == ConnectionClosed()
