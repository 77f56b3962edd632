"""The server role: client frames as events, tracking, and the frames a broker sends."""

from __future__ import annotations

import pytest

import fastframe
from fastframe.protocol import (
    Abort,
    Ack,
    Begin,
    Disconnect,
    LocalProtocolError,
    Nack,
    RemoteProtocolError,
    ServerConnection,
    State,
    Subscribe,
    Unsubscribe,
)

from .helpers import pair, relay


def test_client_frames_become_typed_events_carrying_the_frame():
    client, server = pair()
    wire = (
        client.subscribe("s", "/q", ack="client", receipt="r1") + client.begin("t") + client.abort("t")
        + client.unsubscribe("s") + client.disconnect(receipt="bye")
    )  # fmt: skip
    events = relay(wire, server)
    assert [type(e) for e in events] == [Subscribe, Begin, Abort, Unsubscribe, Disconnect]
    assert (events[0].id, events[0].destination, events[0].ack, events[0].receipt) == ("s", "/q", "client", "r1")
    assert all(e.frame.command == e.command for e in events)
    assert server.pending_receipts == {"r1": "SUBSCRIBE", "bye": "DISCONNECT"}
    assert server.subscriptions == {} and server.state is State.DISCONNECTING
    server.receipt("r1")
    assert server.receipt("bye") == b"RECEIPT\nreceipt-id:bye\n\n\0"
    assert server.state is State.CLOSED


def test_server_tracks_unacked_messages_and_the_ack_header_in_1_2():
    client, server = pair()
    relay(client.subscribe("s", "/q", ack="client-individual"), server)
    data = server.message("s", b"x", message_id="m:1")
    (frame,) = fastframe.decode(data)
    assert frame.get("ack") == "m:1" and b"message-id:m\\c1" in data
    assert server.unacked == {"m:1": ("s", "m:1")}
    (message,) = relay(data, client)
    (nack,) = relay(client.nack(message), server)
    assert isinstance(nack, Nack) and isinstance(nack, Ack) and nack.id == "m:1" and server.unacked == {}


@pytest.mark.parametrize(
    ("wire", "match"),
    [
        (b"SUBSCRIBE\nid:s\ndestination:/q\n\n\0", "already in use"),
        (b"UNSUBSCRIBE\nid:x\n\n\0", "unknown subscription 'x'"),
        (b"ACK\nid:m-9\n\n\0", "ACK of unknown message 'm-9'"),
        (b"COMMIT\ntransaction:t\n\n\0", "unknown transaction 't'"),
        (b"SEND\ndestination:/q\ntransaction:t\n\n\0", "unknown transaction 't'"),
        (b"SEND\nx:1\n\n\0", "without a 'destination'"),
        (b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:s\n\n\0", "a client must not send MESSAGE"),
        (b"CONNECT\naccept-version:1.2\nhost:h\n\n\0", "a client must not send CONNECT"),
        (b"SUBSCRIBE\nid:t\ndestination:/q\nack:sometimes\n\n\0", "unknown ack mode"),
    ],
)
def test_client_violations_are_remote_errors_with_the_frame(wire, match):
    client, server = pair()
    relay(client.subscribe("s", "/q"), server)
    with pytest.raises(RemoteProtocolError, match=match) as info:
        server.receive_data(wire)
    assert info.value.frame is not None and info.value.frame.command == wire.split(b"\n")[0].decode()
    assert server.state is State.CLOSED


def test_duplicate_pending_receipt_from_the_client_is_a_remote_error():
    client, server = pair()
    relay(client.send("/q", receipt="r"), server)
    with pytest.raises(RemoteProtocolError, match="already pending"):
        server.receive_data(b"SEND\ndestination:/q\nreceipt:r\n\n\0")


def test_server_misuse_is_a_local_error_and_changes_nothing():
    client, server = pair()
    with pytest.raises(LocalProtocolError, match="no subscription 'x'"):
        server.message("x", b"")
    with pytest.raises(LocalProtocolError, match="no pending receipt"):
        server.receipt("r")
    with pytest.raises(LocalProtocolError, match="no CONNECT to answer"):
        server.accept()
    assert server.state is State.CONNECTED


def test_1_0_subscription_without_id_uses_the_destination():
    server = ServerConnection()
    server.receive_data(b"CONNECT\n\n\0")  # no accept-version: STOMP 1.0
    assert b"version:1.0" in server.accept()
    (sub,) = relay(b"SUBSCRIBE\ndestination:/queue/a\n\n\0", server)
    assert sub.id == "/queue/a"
    (unsub,) = relay(b"UNSUBSCRIBE\ndestination:/queue/a\n\n\0", server)
    assert unsub.id == "/queue/a" and server.subscriptions == {}
    with pytest.raises(RemoteProtocolError, match="NACK does not exist"):
        server.receive_data(b"NACK\nmessage-id:1\n\n\0")


def test_error_frame_after_connected_escapes_and_closes():
    client, server = pair()
    relay(client.send("/q", receipt="r"), server)
    data = server.error("bad: thing\nhappened", receipt_id="r", body="details")
    assert b"message:bad\\c thing\\nhappened" in data and server.state is State.CLOSED
    (error,) = relay(data, client)
    assert error.message == "bad: thing\nhappened" and error.receipt_id == "r"
    assert client.pending_receipts == {}  # the ERROR answered the receipt


def test_server_rejects_an_unparseable_heartbeat_in_connect():
    with pytest.raises(RemoteProtocolError, match="bad heart-beat"):
        ServerConnection().receive_data(b"CONNECT\naccept-version:1.2\nhost:h\nheart-beat:x\n\n\0")
