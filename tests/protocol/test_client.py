"""The client role after the handshake: sending, receipts, subscriptions, acks, transactions, errors."""

from __future__ import annotations

import pytest

import fastframe
from fastframe.protocol import (
    ClientConnection,
    ConnectionClosed,
    LocalProtocolError,
    Message,
    ProtocolError,
    Receipt,
    RemoteProtocolError,
    ServerConnection,
    State,
)

from .helpers import feed_bytewise, pair, relay


def test_send_binary_body_with_nuls_round_trips_byte_by_byte():
    client, server = pair()
    body = b"\0a\0\0b" + bytes(range(256))
    (send,) = [e for e in feed_bytewise(server, client.send("/q", body, {"x": "a:b\nc"})) if e.command == "SEND"]
    assert send.frame.body == body and send.frame.get("x") == "a:b\nc"
    assert send.destination == "/q"


def test_str_body_is_utf8_text():
    client, server = pair()
    (send,) = relay(client.send("/q", "café"), server)
    assert send.frame.body == "café".encode() and send.frame.get("content-type") == "text/plain;charset=utf-8"


def test_receipts_are_tracked_and_resolved():
    client, server = pair()
    rid = client.new_id("r-")
    (send,) = relay(client.send("/q", b"x", receipt=rid), server)
    assert client.pending_receipts == {rid: "SEND"} and send.receipt == rid
    with pytest.raises(LocalProtocolError, match="already pending"):
        client.send("/q", b"y", receipt=rid)
    (receipt,) = relay(server.receipt(rid), client)
    assert isinstance(receipt, Receipt) and (receipt.receipt_id, receipt.for_command) == (rid, "SEND")
    assert client.pending_receipts == {} == server.pending_receipts


def test_unknown_receipt_is_a_remote_error_carrying_the_frame_and_is_fatal():
    client, _ = pair()
    with pytest.raises(RemoteProtocolError, match="unknown receipt id 'zz'") as info:
        client.receive_data(b"\nRECEIPT\nreceipt-id:zz\n\n\0")
    assert info.value.frame.get("receipt-id") == "zz"
    assert [type(e).__name__ for e in info.value.events] == ["HeartbeatReceived"]
    assert client.state is State.CLOSED
    with pytest.raises(RemoteProtocolError, match="unknown receipt"):
        client.receive_data(b"\n")  # dead for good
    with pytest.raises(RemoteProtocolError):
        client.send("/q")


def test_subscription_ids_are_unique_and_messages_carry_them():
    client, server = pair()
    relay(client.subscribe("s1", "/q"), server)
    with pytest.raises(LocalProtocolError, match="already in use"):
        client.subscribe("s1", "/other")
    assert client.subscriptions == {"s1": ("/q", "auto")}
    (message,) = relay(server.message("s1", b"hi", {"k": "v"}), client)
    assert isinstance(message, Message) and (message.subscription, message.destination, message.body) == (
        "s1", "/q", b"hi",
    )  # fmt: skip
    assert client.unacked == {}  # auto mode: nothing to acknowledge
    with pytest.raises(LocalProtocolError, match="not an unacknowledged message"):
        client.ack(message)


def test_message_for_a_subscription_never_made_is_a_remote_error_when_refused():
    client, _ = pair()
    client.unknown_subscriptions = "refuse"  # (the default delivers it: tests/protocol/test_unknown_and_ids.py)
    with pytest.raises(RemoteProtocolError, match="unknown subscription 'nope'") as info:
        client.receive_data(b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:nope\n\n\0")
    assert info.value.frame.command == "MESSAGE"


def test_message_in_flight_after_unsubscribe_is_delivered_but_not_tracked():
    client, server = pair()
    relay(client.subscribe("s", "/q", ack="client"), server)
    late = server.message("s", b"late")
    relay(client.unsubscribe("s"), server)
    (message,) = relay(late, client)
    assert message.subscription == "s" and client.unacked == {}


@pytest.mark.parametrize(
    ("version", "headers"),
    [
        ("1.2", (("id", "m-1"),)),
        ("1.1", (("message-id", "m-1"), ("subscription", "s"))),
        ("1.0", (("message-id", "m-1"),)),
    ],
)
def test_ack_frame_follows_the_version(version, headers):
    client, server = pair(version)
    relay(client.subscribe("s", "/q", ack="client" if version == "1.0" else "client-individual"), server)
    (message,) = relay(server.message("s", b"x", message_id="m-1"), client)
    assert client.unacked == {"m-1": ("s", "m-1")}
    (frame,) = fastframe.decode(client.ack(message), version)
    assert frame.command == "ACK" and frame.headers == headers
    assert client.unacked == {}


def test_client_mode_ack_is_cumulative_and_individual_is_not():
    client, server = pair()
    relay(client.subscribe("c", "/a", ack="client"), server)
    relay(client.subscribe("i", "/b", ack="client-individual"), server)
    c_msgs = [relay(server.message("c", str(n)), client)[0] for n in range(3)]
    i_msgs = [relay(server.message("i", str(n)), client)[0] for n in range(3)]
    (ack,) = relay(client.ack(c_msgs[1]), server)
    assert ack.id == c_msgs[1].ack_id
    assert list(client.unacked) == [c_msgs[2].ack_id] + [m.ack_id for m in i_msgs]
    relay(client.nack(i_msgs[1].ack_id), server)
    assert list(client.unacked) == [c_msgs[2].ack_id, i_msgs[0].ack_id, i_msgs[2].ack_id]
    with pytest.raises(LocalProtocolError):
        client.ack(c_msgs[0])  # already settled by the cumulative ACK


def test_transactions_must_be_open_to_be_used():
    client, server = pair()
    relay(client.begin("t1"), server)
    with pytest.raises(LocalProtocolError, match="already open"):
        client.begin("t1")
    with pytest.raises(LocalProtocolError, match="no open transaction 't2'"):
        client.send("/q", b"x", transaction="t2")
    (send,) = relay(client.send("/q", b"x", transaction="t1"), server)
    assert send.transaction == "t1"
    (commit,) = relay(client.commit("t1"), server)
    assert commit.transaction == "t1" and client.transactions == {}
    with pytest.raises(LocalProtocolError):
        client.abort("t1")


def test_outgoing_frames_are_validated_for_the_version():
    client, _ = pair("1.0")
    relay_sub = client.subscribe("s", "/q", ack="client")
    assert b"ack:client" in relay_sub
    with pytest.raises(LocalProtocolError, match="client-individual") as info:
        client.subscribe("t", "/q", ack="client-individual")  # not in 1.0
    assert info.value.frame.command == "SUBSCRIBE" and "t" not in client.subscriptions
    client11, _ = pair("1.1")
    with pytest.raises(LocalProtocolError, match="cannot be written"):
        client11.send("/q", b"", {"x": "a\rb"})  # 1.1 has no escape for CR


def test_escapes_option_writes_and_reads_rabbitmq_style_on_1_0():
    client, server = pair("1.0", escapes="1.2")
    (send,) = relay(client.send("/q", b"", {"path": "C:\\tmp"}), server)
    assert b"path:C\\c\\\\tmp" in client.send("/q", b"", {"path": "C:\\tmp"})
    assert send.frame.get("path") == "C:\\tmp"


def test_disconnect_with_receipt_closes_when_the_receipt_arrives():
    client, server = pair()
    (disconnect,) = relay(client.disconnect(receipt="bye"), server)
    assert client.state is State.DISCONNECTING and server.state is State.DISCONNECTING
    with pytest.raises(LocalProtocolError):
        client.send("/q")
    relay(server.receipt("bye"), client)
    assert client.state is State.CLOSED is server.state and disconnect.receipt == "bye"


def test_undecodable_bytes_are_a_remote_error_after_the_frames_before_them():
    client, _ = pair(strict=False)
    with pytest.raises(RemoteProtocolError, match="undecodable") as info:
        client.receive_data(b"ERROR\nmessage:m\n\n\0\nERROR\nx:\\t\n\n\0")
    assert [e.command for e in info.value.events if hasattr(e, "frame")] == ["ERROR"]
    assert isinstance(info.value.__cause__, fastframe.InvalidEscapeError)
    assert isinstance(info.value, ProtocolError) and isinstance(info.value, fastframe.FrameError)


def test_tolerances_pass_through_to_the_decoder():
    client, _ = pair(keep_undefined_escapes=True)
    (error,) = relay(b"ERROR\nx:\\t\n\n\0", client)
    assert error.frame.get("x") == "\\t"


def test_invalid_utf8_is_kept_with_the_option_and_the_message_acknowledged():
    # RabbitMQ passes on a header value that is not UTF-8: by default the connection's error, kept on request
    head = b"MESSAGE\nmessage-id:1\nsubscription:0\ndestination:/q\nack:a1\nx:a\xffb\n\n\0"
    client, server = pair()
    relay(client.subscribe("0", "/q", ack="client-individual"), server)
    with pytest.raises(RemoteProtocolError, match="invalid UTF-8"):
        client.receive_data(head)
    client, server = pair(keep_invalid_utf8=True)
    relay(client.subscribe("0", "/q", ack="client-individual"), server)
    (message,) = relay(head, client)
    assert message.frame.get("x") == "a\udcffb"
    assert message.frame.get("x").encode("utf-8", "surrogateescape") == b"a\xffb"
    (ack,) = relay(client.ack(message), server)
    assert ack.frame.get("id") == "a1"
    # strict checks incoming frames against the spec, which wants UTF-8: the frame is still refused
    client, server = pair(keep_invalid_utf8=True, strict=True)
    relay(client.subscribe("0", "/q", ack="client-individual"), server)
    with pytest.raises(RemoteProtocolError, match="cannot encode as UTF-8"):
        client.receive_data(head)


def test_decoder_limits_apply():
    client, _ = pair(max_body_size=4)
    with pytest.raises(RemoteProtocolError) as info:
        client.receive_data(b"ERROR\ncontent-length:5\n\n12345\0")
    assert isinstance(info.value.__cause__, fastframe.LimitExceededError)


def test_strict_checks_incoming_frames_against_the_spec():
    client, server = pair(strict=True)
    relay(client.subscribe("0", "/q"), server)
    with pytest.raises(RemoteProtocolError, match="MESSAGE requires header 'destination'"):
        client.receive_data(b"MESSAGE\nmessage-id:1\nsubscription:0\n\n\0")
    lenient, server = pair()
    relay(lenient.subscribe("0", "/q"), server)
    (message,) = relay(b"MESSAGE\nmessage-id:1\nsubscription:0\n\n\0", lenient)
    assert message.destination is None


def test_end_of_stream_between_frames_and_inside_one():
    client, _ = pair()
    assert [type(e) for e in client.receive_eof()] == [ConnectionClosed]
    assert client.state is State.CLOSED
    client, _ = pair()
    with pytest.raises(RemoteProtocolError, match="inside a frame"):
        client.receive_data(b"MESSAGE\ndestination:/q\n")
        client.receive_eof()
    errors = ClientConnection()
    errors.connect("h")
    with pytest.raises(RemoteProtocolError, match="inside a frame"):
        errors.receive_data(b"CONNECTED\nversion:1.2\n\n\0MESSAGE\nmessage-id:1")
        errors.receive_eof()


def test_local_errors_carry_the_frame_the_refused_call_would_have_sent():
    client, server = pair()
    relay(client.subscribe("s", "/q"), server)
    refused = ServerConnection()
    refused.receive_data(ClientConnection().connect("h"))
    refused.reject("no")  # nothing but that ERROR goes out
    cases = [
        (lambda: client.subscribe("s", "/other"), "SUBSCRIBE", ("id", "s")),
        (lambda: client.unsubscribe("nope"), "UNSUBSCRIBE", ("id", "nope")),
        (lambda: client.ack("m-404"), "ACK", ("id", "m-404")),
        (lambda: client.nack("m-404"), "NACK", ("id", "m-404")),
        (lambda: client.commit("t"), "COMMIT", ("transaction", "t")),
        (lambda: client.send("/q", transaction="t"), "SEND", ("transaction", "t")),
        (lambda: ServerConnection().message("x", destination="/q"), "MESSAGE", ("destination", "/q")),
        (lambda: refused.receipt("r"), "RECEIPT", ("receipt-id", "r")),
    ]
    for call, command, header in cases:
        with pytest.raises(LocalProtocolError) as info:
            call()
        assert info.value.frame.command == command and header in info.value.frame.headers
    fresh = ClientConnection()
    with pytest.raises(LocalProtocolError) as info:
        fresh.send("/q", b"early")
    assert info.value.frame.command == "SEND" and info.value.frame.body == b"early"
