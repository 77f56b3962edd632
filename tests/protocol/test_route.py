"""ClientConnection.route: a routed subscription's MESSAGEs go straight into its inbox.

What lands in the inbox is what an unrouted connection returns as events for the same bytes (the
same Message fields, the same ``unacked`` ledger); everything else still comes back as events, in
order. Run with FASTFRAME_NO_EXTENSIONS=1 too: the connection then routes with the Python twin.
"""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest

from fastframe import LimitExceededError
from fastframe.protocol import (
    ClientConnection,
    HeartbeatReceived,
    Inbox,
    LocalProtocolError,
    Message,
    Receipt,
    RemoteProtocolError,
)

from .helpers import TrackingServer, pair

MODES = [
    (version, mode)
    for version in ("1.0", "1.1", "1.2")
    for mode in ("auto", "client", "client-individual")
    if (version, mode) != ("1.0", "client-individual")  # (client-individual came with 1.1)
]


def subscribed(version: str = "1.2", subs: Tuple[str, ...] = ("s",), mode: str = "auto", **options: Any) -> Any:
    """A connected client with subscriptions ``subs`` to /q/<id>, and its server."""
    client, server = pair(version, **options)
    for sub_id in subs:
        server.receive_data(client.subscribe(sub_id, f"/q/{sub_id}", ack=mode))
    return client, server


def messages(server: TrackingServer, sub_id: str, count: int, first: int = 0) -> bytes:
    return b"".join(server.message(sub_id, f"{sub_id}-{n}") for n in range(first, first + count))


def bodies(items: Any) -> List[bytes]:
    return [message.body for message in items]


def unrouted(version: str, mode: str, data: bytes, subs: Tuple[str, ...] = ("s",), **options: Any) -> Any:
    """What a connection that routes nothing makes of ``data``: its events and its ledger."""
    client, _ = subscribed(version, subs, mode, **options)
    events = client.receive_data(data)
    return events, client.unacked


def test_routed_messages_are_queued_in_order_with_no_event():
    client, server = subscribed()
    inbox: Inbox[Any] = Inbox(100)
    client.route("s", inbox)
    data = messages(server, "s", 5)
    assert client.receive_data(data) == []
    assert bodies(inbox.items) == [f"s-{n}".encode() for n in range(5)]
    assert all(type(message) is Message for message in inbox.items)
    assert list(inbox.items) == unrouted("1.2", "auto", data)[0]  # the same fields, frame and all
    assert list(client.take_filled()) == [inbox]
    assert list(client.take_filled()) == []  # once
    assert client.frames_received == 6  # (CONNECTED and the five)


def test_a_receipt_between_messages_is_an_event_and_the_messages_keep_their_order():
    client, server = subscribed()
    inbox: Inbox[Any] = Inbox(100)
    client.route("s", inbox)
    server.receive_data(client.send("/q/s", b"x", receipt="r-1"))
    data = messages(server, "s", 3) + server.receipt("r-1") + b"\n" + messages(server, "s", 3, first=3)
    events = client.receive_data(data)
    assert [type(event) for event in events] == [Receipt, HeartbeatReceived]
    assert events[0].receipt_id == "r-1"
    assert bodies(inbox.items) == [f"s-{n}".encode() for n in range(6)]
    assert list(client.take_filled()) == [inbox]  # one owner all along: listed once


def test_each_run_of_messages_lists_its_inbox():
    client, server = subscribed(subs=("a", "b"))
    inboxes = {sub_id: Inbox[Any](100) for sub_id in ("a", "b")}
    for sub_id, inbox in inboxes.items():
        client.route(sub_id, inbox)
    data = messages(server, "a", 2) + messages(server, "b", 1) + messages(server, "a", 1, first=2)
    assert client.receive_data(data) == []
    assert bodies(inboxes["a"].items) == [b"a-0", b"a-1", b"a-2"] and bodies(inboxes["b"].items) == [b"b-0"]
    assert list(client.take_filled()) == [inboxes["a"], inboxes["b"], inboxes["a"]]


def test_an_unrouted_subscription_still_gets_events_between_routed_ones():
    client, server = subscribed(subs=("a", "b"))
    inbox: Inbox[Any] = Inbox(100)
    client.route("a", inbox)
    data = messages(server, "a", 1) + messages(server, "b", 1) + messages(server, "a", 1, first=1)
    events = client.receive_data(data)
    assert bodies(events) == [b"b-0"] and bodies(inbox.items) == [b"a-0", b"a-1"]
    assert events == unrouted("1.2", "auto", data, ("a", "b"))[0][1:2]


class Gate:
    """A ReadGate that records what inboxes ask of it."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, bool]] = []

    def pause_reading(self, reason: object, *, hard: bool = False) -> None:
        self.calls.append(("pause", hard))

    def resume_reading(self, reason: object) -> None:
        self.calls.append(("resume", False))


@pytest.mark.parametrize("count", [1, 2, 3, 5, 6, 9])
def test_routing_has_no_bound_and_filled_pauses_as_put_would(count):
    # the inbox's bound holds to one read either way: the whole read is queued, then Inbox.filled
    # asks the gate what put() would have asked for the last message
    client, server = subscribed(mode="client")
    inbox: Inbox[Any] = Inbox(3)
    client.route("s", inbox)
    data = messages(server, "s", count)
    assert client.receive_data(data) == []
    expected, ledger = unrouted("1.2", "client", data)
    assert list(inbox.items) == expected and client.unacked == ledger
    (filled,) = client.take_filled()
    gate, put_gate, put_inbox = Gate(), Gate(), Inbox[Any](3)
    filled.filled(gate)
    for event in expected:
        put_inbox.put(event, put_gate)
    assert (inbox.pause, gate.calls[-1:]) == (put_inbox.pause, put_gate.calls[-1:])


@pytest.mark.parametrize("version, mode", MODES)
def test_the_unacked_ledger_is_the_one_of_an_unrouted_connection(version, mode):
    client, server = subscribed(version, subs=("a", "b"), mode=mode)
    inbox: Inbox[Any] = Inbox(2)  # (full or not, every message of "a" is routed)
    client.route("a", inbox)
    data = (
        messages(server, "a", 2)
        + messages(server, "b", 2)
        + server.message("a", b"own ack id", ack_id="mine", message_id="m-own")
        + server.message("a", b"same ack id", ack_id="mine", message_id="m-own-2" if version == "1.2" else "m-own")
        + messages(server, "a", 3, first=2)
    )
    events = client.receive_data(data)
    expected, ledger = unrouted(version, mode, data, ("a", "b"))
    routed = [i for i, event in enumerate(expected) if event.subscription == "a"]
    assert list(inbox.items) == [expected[i] for i in routed]
    assert events == [event for i, event in enumerate(expected) if i not in routed]
    assert list(client.unacked.items()) == list(ledger.items())
    if mode != "auto":
        assert len(client.unacked) == 8  # (a ledger to compare: "mine" twice in 1.2, "m-own" twice before)
        first = inbox.items[0]
        server.receive_data(client.ack(first))
        assert first.ack_id not in client.unacked


def test_unroute_and_unsubscribe_end_the_routing():
    client, server = subscribed(subs=("s", "t"))
    inbox_s, inbox_t = Inbox[Any](100), Inbox[Any](100)
    client.route("s", inbox_s)
    client.route("t", inbox_t)
    late_t = messages(server, "t", 1)  # (the server forgets t at its UNSUBSCRIBE)
    client.unroute("s")
    client.unroute("s")  # (twice: nothing to do)
    events = client.receive_data(messages(server, "s", 2))
    assert bodies(events) == [b"s-0", b"s-1"] and not inbox_s.items
    client.route("s", inbox_s)  # again
    assert client.receive_data(messages(server, "s", 1, first=2)) == [] and bodies(inbox_s.items) == [b"s-2"]
    server.receive_data(client.unsubscribe("t"))
    events = client.receive_data(late_t)  # in flight when it unsubscribed: an event, as unrouted
    assert bodies(events) == [b"t-0"] and events[0].subscription == "t" and not inbox_t.items
    with pytest.raises(LocalProtocolError, match="no subscription with id 't' to route"):
        client.route("t", inbox_t)
    client.unroute_all()  # (closing down: every MESSAGE an event again)
    assert bodies(client.receive_data(messages(server, "s", 1, first=3))) == [b"s-3"] and len(inbox_s.items) == 1


def test_a_strict_connection_does_not_route():
    client, server = subscribed(strict=True)
    inbox: Inbox[Any] = Inbox(100)
    client.route("s", inbox)
    data = messages(server, "s", 3)
    events = client.receive_data(data)
    assert events == unrouted("1.2", "auto", data, strict=True)[0] and len(events) == 3
    assert not inbox.items and list(client.take_filled()) == []


@pytest.mark.parametrize("version, mode", [("1.2", "client-individual"), ("1.1", "client")])
def test_header_values_that_are_not_utf8_are_kept_as_str_and_routed_like_any(version, mode):
    # keep_invalid_utf8 keeps such bytes as lone surrogates ("surrogateescape"): a header value is
    # always a str (a Frame refuses anything else), so the MESSAGE is an everyday one, routed
    head = b"MESSAGE\nmessage-id:1\xfe\nsubscription:s\ndestination:/q/\xfd\nack:a1\nx:b\xffc\n\n\0"
    client, server = subscribed(version, mode=mode, keep_invalid_utf8=True)
    inbox: Inbox[Any] = Inbox(100)
    client.route("s", inbox)
    data = head + messages(server, "s", 1)
    assert client.receive_data(data) == []
    expected, ledger = unrouted(version, mode, data, keep_invalid_utf8=True)
    assert list(inbox.items) == expected and client.unacked == ledger and len(ledger) == 2
    kept = inbox.items[0]
    assert (kept.message_id, kept.destination, kept.frame.get("x")) == ("1\udcfe", "/q/\udcfd", "b\udcffc")
    assert kept.ack_id == ("a1" if version == "1.2" else "1\udcfe")
    if version == "1.2":  # (an ACK naming the id that is not UTF-8 cannot be written: see test_client)
        (ack,) = server.receive_data(client.ack(kept))
        assert ack.frame.get("id") == "a1" and "a1" not in client.unacked


def test_a_decode_error_after_routed_messages_leaves_them_queued_and_raises():
    client, server = subscribed(max_body_size=10)
    inbox: Inbox[Any] = Inbox(100)
    client.route("s", inbox)
    server.receive_data(client.send("/q/s", b"x", receipt="r-1"))
    data = messages(server, "s", 2) + server.receipt("r-1") + messages(server, "s", 1, first=2)
    data += server.message("s", b"far too long for the limit") + messages(server, "s", 1, first=3)
    with pytest.raises(RemoteProtocolError) as info:
        client.receive_data(data)
    assert isinstance(info.value.__cause__, LimitExceededError)
    assert bodies(inbox.items) == [b"s-0", b"s-1", b"s-2"]  # those before the bad frame, in order
    assert [type(event) for event in info.value.events] == [Receipt]
    assert list(client.take_filled()) == [inbox]


def test_a_read_that_fails_on_a_routed_subscriptions_frame_keeps_what_came_before():
    client, server = subscribed()
    inbox: Inbox[Any] = Inbox(100)
    client.route("s", inbox)
    data = messages(server, "s", 2) + b"MESSAGE\nsubscription:s\ndestination:/q/s\n\n\0"  # no message-id
    with pytest.raises(RemoteProtocolError, match="without a 'message-id' header"):
        client.receive_data(data)
    assert bodies(inbox.items) == [b"s-0", b"s-1"] and list(client.take_filled()) == [inbox]


def test_route_is_for_open_subscriptions_only():
    client = ClientConnection()
    with pytest.raises(LocalProtocolError, match="no subscription with id 's' to route"):
        client.route("s", Inbox(1))
