"""The server role: client frames as events, and the frames a broker sends."""

from __future__ import annotations

import pytest

import fastframe
from fastframe.protocol import (
    Abort,
    Ack,
    Begin,
    Disconnect,
    FrameEvent,
    LocalProtocolError,
    Nack,
    RemoteProtocolError,
    Send,
    ServerConnection,
    State,
    Subscribe,
    Unsubscribe,
    plain_error,
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
    # only DISCONNECT's receipt is the connection's: the others are the broker's to answer
    assert server.pending_receipts == {"bye": "DISCONNECT"} and server.state is State.DISCONNECTING
    assert server.receipt("r1") == b"RECEIPT\nreceipt-id:r1\n\n\0" and server.state is State.DISCONNECTING
    assert server.receipt("bye") == b"RECEIPT\nreceipt-id:bye\n\n\0"
    assert server.state is State.CLOSED


@pytest.mark.parametrize(("version", "ack_header"), [("1.2", True), ("1.1", False), ("1.0", False)])
def test_message_carries_the_ack_header_in_1_2_only_and_escapes(version, ack_header):
    client, server = pair(version)
    relay(client.subscribe("s", "/q", ack="client-individual" if version != "1.0" else "client"), server)
    data = ServerConnection.message(server, "s", b"x", destination="/q", message_id="m:1", ack_id="m:1")
    (frame,) = fastframe.decode(data, version)
    assert (frame.get("ack") == "m:1") is ack_header and frame.get("subscription") == "s"
    assert (b"message-id:m\\c1" in data) is (version != "1.0")
    (message,) = relay(data, client)
    assert message.ack_id == "m:1" and client.unacked == {"m:1": ("s", "m:1")}
    if version != "1.0":
        (nack,) = relay(client.nack(message), server)
        assert isinstance(nack, Nack) and isinstance(nack, Ack) and nack.id == "m:1"


def test_message_without_a_subscription_is_1_0s_shape():
    client, server = pair("1.0")
    data = ServerConnection.message(server, None, "hi", destination="/queue/a")
    (frame,) = fastframe.decode(data, "1.0")
    assert frame.get("subscription") is None and frame.get("content-type") == "text/plain;charset=utf-8"


@pytest.mark.parametrize(
    ("wire", "event", "fields"),
    [
        (b"SUBSCRIBE\nid:s\ndestination:/q\nack:sometimes\n\n\0", Subscribe, ("s", "/q", "sometimes")),
        (b"UNSUBSCRIBE\nid:x\n\n\0", Unsubscribe, ("x",)),
        (b"ACK\nid:m-9\n\n\0", Ack, ("m-9", None, None)),
        (b"COMMIT\ntransaction:t\n\n\0", Begin, ("t",)),
        (b"SEND\ndestination:/q\ntransaction:t\n\n\0", Send, ("/q", "t")),
        (b"SEND\nx:1\n\n\0", Send, ("", None)),
        (b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:s\n\n\0", FrameEvent, ()),
    ],
)
def test_client_frames_are_looked_up_not_judged(wire, event, fields):
    # whether a subscription, a message or a transaction exists is the broker's knowledge
    client, server = pair()
    (got,) = relay(wire, server)
    assert isinstance(got, event) and got.frame.command == wire.split(b"\n")[0].decode()
    names = {Subscribe: ("id", "destination", "ack"), Unsubscribe: ("id",), Ack: ("id", "subscription", "transaction"),
             Begin: ("transaction",), Send: ("destination", "transaction"), FrameEvent: ()}[event]  # fmt: skip
    assert tuple(getattr(got, name) for name in names) == fields
    assert server.state is State.CONNECTED


def test_the_protocol_is_still_judged_after_the_handshake():
    client, server = pair()
    relay(client.disconnect(receipt="bye"), server)
    with pytest.raises(RemoteProtocolError, match="in state disconnecting") as info:
        server.receive_data(b"SEND\ndestination:/q\n\n\0")
    assert info.value.frame.command == "SEND" and server.state is State.CLOSED


def test_server_misuse_is_a_local_error_and_changes_nothing():
    client, server = pair()
    with pytest.raises(LocalProtocolError, match="no CONNECT to answer"):
        server.accept()
    assert server.state is State.CONNECTED
    with pytest.raises(LocalProtocolError, match="state idle"):
        ServerConnection().message("s", destination="/q")


def test_1_0_subscription_without_id_uses_the_destination():
    server = ServerConnection()
    server.receive_data(b"CONNECT\n\n\0")  # no accept-version: STOMP 1.0
    assert b"version:1.0" in server.accept()
    (sub,) = relay(b"SUBSCRIBE\ndestination:/queue/a\n\n\0", server)
    assert sub.id == "/queue/a"
    (unsub,) = relay(b"UNSUBSCRIBE\ndestination:/queue/a\n\n\0", server)
    assert unsub.id == "/queue/a"


def test_error_frame_after_connected_escapes_and_closes():
    client, server = pair()
    relay(client.send("/q", receipt="r"), server)
    data = server.error("bad: thing\nhappened", receipt_id="r", body="details")
    assert b"message:bad\\c thing\\nhappened" in data and server.state is State.CLOSED
    (error,) = relay(data, client)
    assert error.message == "bad: thing\nhappened" and error.receipt_id == "r"
    assert client.pending_receipts == {}  # the ERROR answered the receipt


def test_plain_error_is_rabbitmqs_shape_and_what_error_takes():
    message, body, headers = plain_error("Too many connections", "at most 2 connections, café\n")
    assert body == "at most 2 connections, café\n".encode("utf-8")
    assert headers == (("content-type", "text/plain"), ("version", "1.0,1.1,1.2"), ("content-length", str(len(body))))
    client, server = pair()
    (error,) = relay(server.error(message, body=body, headers=headers), client)
    assert (error.message, error.frame.body, error.frame.get("version")) == (message, body, "1.0,1.1,1.2")
    assert error.frame.get("content-length") == str(len(body)) and server.state is State.CLOSED


def test_server_rejects_an_unparseable_heartbeat_in_connect():
    with pytest.raises(RemoteProtocolError, match="bad heart-beat"):
        ServerConnection().receive_data(b"CONNECT\naccept-version:1.2\nhost:h\nheart-beat:x\n\n\0")
