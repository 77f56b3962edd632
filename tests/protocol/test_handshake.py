"""The handshake: version and heart-beat negotiation, codec switch, frames around it."""

from __future__ import annotations

import pytest

import fastframe
from fastframe.protocol import (
    ClientConnection,
    Connected,
    ConnectRequest,
    Error,
    HeartbeatReceived,
    LocalProtocolError,
    Message,
    RemoteProtocolError,
    Send,
    ServerConnection,
    State,
    Subscribe,
)

from .helpers import feed_bytewise, pair


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_both_roles_negotiate_each_version(version):
    client, server = pair(version)
    assert client.state is server.state is State.CONNECTED


@pytest.mark.parametrize(
    ("accept_version", "versions", "common"),
    [("1.0,1.1,1.2", ("1.0", "1.1", "1.2"), "1.2"), ("1.0,1.1", ("1.0", "1.1", "1.2"), "1.1"),
     (None, ("1.0", "1.1", "1.2"), "1.0"), ("1.2", ("1.0", "1.1"), None)],
)  # fmt: skip
def test_the_version_is_negotiated_once_when_connect_arrives(accept_version, versions, common):
    server = ServerConnection(versions=versions)
    assert server.common_version is None
    head = f"accept-version:{accept_version}\n" if accept_version else ""
    (request,) = server.receive_data(f"CONNECT\n{head}host:/\n\n\0".encode())
    assert isinstance(request, ConnectRequest)
    assert server.common_version == common and server.version is None  # spoken from CONNECTED on
    if common is None:
        with pytest.raises(LocalProtocolError, match="no common version"):
            server.accept()
        return
    (connected,) = fastframe.decode(server.accept())
    assert connected.get("version") == server.version == common


def test_heartbeat_negotiation_is_mirrored():
    client, server = pair(client_beat=(500, 2000), server_beat=(1000, 1000))
    assert client.heartbeat == (1000, 2000)  # (send, receive): max(500, 1000), max(2000, 1000)
    assert server.heartbeat == (2000, 1000)


def test_connect_frame_offers_versions_and_credentials():
    client = ClientConnection()
    data = client.connect("vhost", login="guest", passcode="pw:x", heartbeat=(1, 2), headers={"x": "a:b"})
    (frame,) = fastframe.decode(data)
    assert frame.headers == (
        ("accept-version", "1.0,1.1,1.2"), ("host", "vhost"), ("heart-beat", "1,2"),
        ("login", "guest"), ("passcode", "pw:x"), ("x", "a:b"),
    )  # fmt: skip
    assert b"pw:x" in data  # CONNECT headers are never escaped
    assert client.state is State.CONNECTING


def test_stomp_command_and_byte_by_byte_handshake():
    client, server = ClientConnection(), ServerConnection()
    events = feed_bytewise(server, client.connect("h", command="STOMP"))
    assert [type(e) for e in events] == [ConnectRequest] and events[0].frame.command == "STOMP"
    events = feed_bytewise(client, server.accept(headers={"server": "test/1", "session": "s:1"}) + b"\n")
    assert [type(e) for e in events] == [Connected, HeartbeatReceived]
    assert events[0].frame.get("session") == "s:1"


def test_frames_after_connected_in_the_same_chunk_use_the_negotiated_escaping():
    # 1.2: \c is an escaped colon
    client = ClientConnection()
    client.connect("h")
    wire = b"CONNECTED\nversion:1.2\n\n\0\nERROR\nmessage:a\\cb\n\n\0"
    connected, beat, error = client.receive_data(wire)
    assert isinstance(connected, Connected) and isinstance(beat, HeartbeatReceived)
    assert isinstance(error, Error) and error.message == "a:b"
    # 1.0 has no escapes: the same bytes stay literal
    client = ClientConnection()
    client.connect("h", versions=["1.0"])
    _, _, error = client.receive_data(b"CONNECTED\n\n\0\nERROR\nmessage:a\\cb\n\n\0")
    assert client.version == "1.0" and error.message == "a\\cb"


def test_server_holds_frames_sent_before_accept_and_decodes_them_with_the_version():
    client, server = ClientConnection(), ServerConnection(versions=["1.0", "1.1"])
    pipelined = client.connect("h") + b"SUBSCRIBE\nid:a\\cb\ndestination:/q\n\n\0SEND\ndestination:/q\n\nx\0"
    assert [type(e) for e in server.receive_data(pipelined)] == [ConnectRequest]
    assert server.receive_data(b"") == []  # nothing decoded before the version is known
    server.accept()
    subscribe, send = server.receive_data(b"")
    assert isinstance(subscribe, Subscribe) and subscribe.id == "a:b"  # 1.1 escaping applied
    assert isinstance(send, Send) and send.frame.body == b"x"


def test_server_bounds_what_it_holds_before_accept():
    client, server = ClientConnection(), ServerConnection(max_frame_size=64)
    server.receive_data(client.connect("h"))
    server.receive_data(b"x" * 60)
    with pytest.raises(RemoteProtocolError, match="before the CONNECT was answered"):
        server.receive_data(b"y" * 10)


def test_reject_sends_error_and_closes_both_sides():
    client, server = ClientConnection(), ServerConnection()
    server.receive_data(client.connect("h", login="bad"))
    data = server.reject("Bad CONNECT", body="bad login")
    assert server.state is State.CLOSED
    (error,) = client.receive_data(data)
    assert isinstance(error, Error) and error.message == "Bad CONNECT" and error.frame.body == b"bad login"
    assert client.state is State.CLOSED


def test_no_common_version_is_our_error_until_we_reject():
    client, server = ClientConnection(), ServerConnection(versions=["1.2"])
    (request,) = server.receive_data(client.connect("h", versions=["1.0", "1.1"]))
    with pytest.raises(LocalProtocolError, match="no common version") as info:
        server.accept()
    assert info.value.frame is request.frame
    assert server.state is State.CONNECTING  # nothing changed
    assert b"Version mismatch" in server.reject("Version mismatch")


def test_server_version_not_offered_is_a_remote_error():
    client = ClientConnection()
    client.connect("h", versions=["1.1"])
    with pytest.raises(RemoteProtocolError, match="chose version '1.2'") as info:
        client.receive_data(b"CONNECTED\nversion:1.2\n\n\0")
    assert info.value.frame.command == "CONNECTED"


def test_frame_before_connect_is_a_remote_error_on_both_sides():
    with pytest.raises(RemoteProtocolError, match="SEND before CONNECT") as info:
        ServerConnection().receive_data(b"SEND\ndestination:/q\n\n\0")
    assert info.value.frame.command == "SEND"
    with pytest.raises(RemoteProtocolError, match="before CONNECT was sent"):
        ClientConnection().receive_data(b"CONNECTED\nversion:1.2\n\n\0")
    client = ClientConnection()
    client.connect("h")
    with pytest.raises(RemoteProtocolError, match="expected CONNECTED"):
        client.receive_data(b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:0\n\n\0")


def test_sending_before_connected_is_a_local_error():
    client = ClientConnection()
    with pytest.raises(LocalProtocolError, match="cannot send SEND in state idle"):
        client.send("/q", b"x")
    client.connect("h")
    with pytest.raises(LocalProtocolError, match="state connecting"):
        client.subscribe("0", "/q")
    assert client.subscriptions == {}
    with pytest.raises(LocalProtocolError):
        client.connect("h")  # only once


def test_accept_passes_heartbeats_and_liveness_starts_at_now():
    client, server = pair(client_beat=(1000, 1000), server_beat=(1000, 1000), now=100.0)
    assert server.next_deadline() == 101.0 and client.next_deadline() == 101.0
    assert server.heartbeat_due(100.5) == b"" and server.heartbeat_due(101.0) == b"\n"


def test_message_right_after_connected_in_one_chunk():
    client = ClientConnection()
    client.connect("h")
    client_events = client.receive_data(b"CONNECTED\nversion:1.2\n\n\0")
    assert isinstance(client_events[0], Connected)
    client.subscribe("0", "/q")
    (message,) = [e for e in client.receive_data(b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:0\n\n\0\n")
                  if isinstance(e, Message)]  # fmt: skip
    assert message.subscription == "0"


def test_every_split_of_a_conversation_gives_the_same_events():
    wire = (
        b"CONNECTED\nversion:1.1\nheart-beat:0,0\n\n\0\n"
        b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:s\nx:a\\cb\ncontent-length:3\n\na\0b\0\r\n"
        b"RECEIPT\nreceipt-id:r\\c1\n\n\0"
    )

    whole_client = ClientConnection()
    whole_client.connect("h", versions=["1.0", "1.1"])
    # subscribe and ask for the receipt as soon as the handshake allows: feed up to CONNECTED first
    head = wire.index(b"MESSAGE")
    whole_client.receive_data(wire[:head])
    whole_client.subscribe("s", "/q", receipt="r:1")
    expected = [(type(e).__name__, getattr(e, "frame", None)) for e in whole_client.receive_data(wire[head:])]
    assert [name for name, _ in expected] == ["Message", "HeartbeatReceived", "Receipt"]
    assert expected[0][1].get("x") == "a:b" and expected[0][1].body == b"a\0b"
    for split in range(head, len(wire) + 1):
        client = ClientConnection()
        client.connect("h", versions=["1.0", "1.1"])
        client.receive_data(wire[:head])
        client.subscribe("s", "/q", receipt="r:1")
        events = client.receive_data(wire[head:split]) + client.receive_data(wire[split:])
        assert [(type(e).__name__, getattr(e, "frame", None)) for e in events] == expected, split
    for split in range(0, head + 1):  # a split inside the handshake: the codec switch stays exact
        client = ClientConnection()
        client.connect("h", versions=["1.0", "1.1"])
        events = client.receive_data(wire[:split]) + client.receive_data(wire[split:head])
        assert client.version == "1.1"
        assert [type(e).__name__ for e in events] == ["Connected", "HeartbeatReceived"], split
        client.subscribe("s", "/q", receipt="r:1")
        assert [(type(e).__name__, getattr(e, "frame", None)) for e in client.receive_data(wire[head:])] == expected
