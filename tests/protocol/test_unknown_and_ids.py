"""Issue 29's protocol parts: MESSAGEs for subscriptions never made, CONNECT headers, SEND without
content-length, ACK/NACK by a kept id."""

from __future__ import annotations

import pytest

import fastframe
from fastframe.protocol import ClientConnection, LocalProtocolError, Message, RemoteProtocolError

from .helpers import pair, relay

TEMP_REPLY = (
    b"MESSAGE\nsubscription:/temp-queue/foo\ndestination:/queue/amq.gen-T\nmessage-id:T_/temp-queue/foo@@s@@1\n"
    b"redelivered:false\ncorrelation-id:c1\ncontent-length:4\n\npong\0"
)  # what RabbitMQ 3.10 sends a requester (docs/guides/brokers.md, notes/websocket-and-rpc.md)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_message_for_a_subscription_never_made_is_delivered_untracked(version):
    client, _ = pair(version)
    (message,) = relay(TEMP_REPLY, client)
    assert isinstance(message, Message) and message.subscription == "/temp-queue/foo"
    assert message.body == b"pong" and message.frame.get("correlation-id") == "c1"
    assert client.unacked == {} and client.connected  # nothing to acknowledge, the session goes on
    with pytest.raises(LocalProtocolError, match="not an unacknowledged message"):
        client.ack(message)


def test_message_for_a_subscription_never_made_with_refuse_breaks_the_connection():
    client = ClientConnection(unknown_subscriptions="refuse")
    client.connect("h")
    client.receive_data(b"CONNECTED\nversion:1.2\n\n\0")
    with pytest.raises(RemoteProtocolError, match="unknown subscription '/temp-queue/foo'"):
        client.receive_data(TEMP_REPLY)


def test_unknown_subscriptions_policy_is_checked():
    with pytest.raises(ValueError, match="'deliver' or 'refuse'"):
        ClientConnection(unknown_subscriptions="drop")


def test_connect_carries_extra_headers_after_its_own():
    client = ClientConnection()
    frame = fastframe.decode(client.connect("h", login="u", headers={"client-id": "app-1", "x-vendor": "a:b"}))[0]
    assert frame.headers[-2:] == (("client-id", "app-1"), ("x-vendor", "a:b"))
    assert frame.get("login") == "u" and frame.get("accept-version") == "1.0,1.1,1.2"


@pytest.mark.parametrize("name", ["accept-version", "heart-beat", "login", "passcode", "host", "content-length"])
def test_connect_refuses_headers_its_arguments_write(name):
    client = ClientConnection()
    with pytest.raises(LocalProtocolError, match=f"header '{name}' is written by connect"):
        client.connect("h", headers=[(name, "x")])
    assert client.state.value == "idle"  # nothing changed: a corrected call may follow
    client.connect("h")


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_send_without_content_length(version):
    client, server = pair(version)
    data = client.send("/queue/t", "héllo", {"x": "1"}, content_length=False)
    assert b"content-length" not in data
    (send,) = relay(data, server)
    assert send.frame.body == "héllo".encode() and send.frame.get("content-type") == "text/plain;charset=utf-8"
    assert b"content-length:3" in client.send("/queue/t", b"abc")  # the default is unchanged


def test_send_without_content_length_refuses_a_nul_and_a_content_length_header():
    client, _ = pair()
    with pytest.raises(LocalProtocolError, match="a body holding a NUL with content_length=False") as info:
        client.send("/q", b"a\0b", content_length=False)
    assert info.value.frame.command == "SEND"
    with pytest.raises(LocalProtocolError, match="a content-length header with content_length=False"):
        client.send("/q", b"ab", {"content-length": "2"}, content_length=False)
    assert client.connected


def test_send_without_content_length_takes_receipt_and_transaction():
    client, server = pair()
    relay(client.begin("tx"), server)
    data = client.send("/q", b"x", content_length=False, transaction="tx", receipt="r-9")
    (send,) = relay(data, server)
    assert send.frame.get("transaction") == "tx" and send.frame.get("receipt") == "r-9"
    assert client.pending_receipts == {"r-9": "SEND"}


@pytest.mark.parametrize(
    ("version", "wire"),
    [
        ("1.2", (("id", "a-1"),)),
        ("1.1", (("message-id", "m-1"), ("subscription", "s"))),
        ("1.0", (("message-id", "m-1"),)),
    ],
)
@pytest.mark.parametrize("kept", ["ack_id", "message_id"])
def test_ack_and_nack_by_a_kept_id(version, wire, kept):
    client, server = pair(version)
    relay(client.subscribe("s", "/q", ack="client" if version == "1.0" else "client-individual"), server)
    first, second = (relay(server.message("s", b"m", message_id=f"m-{n}", ack_id=f"a-{n}"), client)[0] for n in (1, 2))
    (ack,) = relay(client.ack(getattr(first, kept)), server)
    assert ack.frame.headers == wire
    if version != "1.0":
        nack = relay(client.nack(getattr(second, kept), subscription="s", receipt="r"), server)[0]
        assert nack.frame.command == "NACK"
    assert list(client.unacked) == ([] if version != "1.0" else [second.ack_id])


def test_ack_by_message_id_waiting_on_two_subscriptions_needs_the_subscription():
    client, server = pair("1.2")
    relay(client.subscribe("a", "/topic/t", ack="client"), server)
    relay(client.subscribe("b", "/topic/t", ack="client"), server)
    for sub, ack_id in (("a", "x-1"), ("b", "x-2")):  # one message, delivered to both (ActiveMQ keeps its id)
        relay(server.message(sub, b"m", message_id="ID:1", ack_id=ack_id), client)
    with pytest.raises(LocalProtocolError, match="it waits on subscriptions 'a', 'b'; pass subscription="):
        client.ack("ID:1")
    (ack,) = relay(client.ack("ID:1", subscription="b"), server)
    assert ack.frame.headers == (("id", "x-2"),) and list(client.unacked) == ["x-1"]
    with pytest.raises(LocalProtocolError, match="not an unacknowledged message of subscription 'b'"):
        client.ack("x-1", subscription="b")  # checked when given


def test_ack_of_an_unknown_id_says_why():
    client, _ = pair("1.1")
    with pytest.raises(LocalProtocolError, match="not an unacknowledged message .*earlier connection"):
        client.ack("m-404")
