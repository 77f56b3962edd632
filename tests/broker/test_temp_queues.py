"""The broker's temporary queues (request/reply as RabbitMQ does it), without I/O."""

from __future__ import annotations

from typing import List

from test_core import Client  # (rootdir-relative, as the other broker tests import their helpers)

from fastframe.broker import BrokerCore


def request(requester: Client, responder: Client, name: str = "/temp-queue/replies") -> str:
    """The requester SENDs with ``reply-to: name``; the reply-to the responder sees."""
    requester.do("SEND", {"destination": "/queue/rpc", "reply-to": name, "correlation-id": "c1"}, b"ping")
    (message,) = responder.messages()
    assert message.get("correlation-id") == "c1" and message.body == b"ping"
    return str(message.get("reply-to"))


def pair(core: BrokerCore) -> List[Client]:
    requester, responder = Client(core), Client(core)
    responder.do("SUBSCRIBE", {"id": "r", "destination": "/queue/rpc"})
    return [requester, responder]


def test_a_reply_to_temp_queue_reaches_its_session_on_a_subscription_it_never_made() -> None:
    core = BrokerCore()
    requester, responder = pair(core)
    reply_to = request(requester, responder)
    assert reply_to == f"/queue/fastframe.temp.{requester.session.name}.replies"
    responder.do("SEND", {"destination": reply_to, "correlation-id": "c1"}, b"pong")
    (reply,) = requester.messages()
    assert (reply.get("subscription"), reply.get("destination"), reply.body) == (
        "/temp-queue/replies",
        reply_to,
        b"pong",
    )
    assert reply.get("correlation-id") == "c1" and reply.get("ack") is None
    assert request(requester, responder) == reply_to  # the same queue for the session's next requests
    assert responder.messages() == [] and not requester.closed


def test_temp_queues_are_private_to_their_session() -> None:
    core = BrokerCore()
    first, responder = pair(core)
    second = Client(core)
    one, two = request(first, responder), request(second, responder)
    assert one != two
    responder.do("SEND", {"destination": two}, b"for the second")
    assert first.messages() == [] and [m.body for m in second.messages()] == [b"for the second"]


def test_a_temp_queue_ends_with_its_session_and_a_late_reply_is_dropped() -> None:
    core = BrokerCore()
    requester, responder = pair(core)
    reply_to = request(requester, responder)
    requester.lost()
    assert reply_to not in core.queues
    responder.do("SEND", {"destination": reply_to}, b"too late" * 100)
    assert reply_to not in core.queues and core.stored_bytes == 0 and not responder.closed


def test_the_hot_path_rewrites_reply_to_too() -> None:
    import fastframe

    core = BrokerCore()
    requester, responder = pair(core)
    frame = fastframe.Frame("SEND", [("destination", "/queue/rpc"), ("reply-to", "/temp-queue/x")], b"ping")
    core.receive_many(requester.session, [frame])
    (message,) = responder.messages()
    assert message.get("reply-to") == f"/queue/fastframe.temp.{requester.session.name}.x"


def test_temp_queues_count_against_max_subscriptions() -> None:
    core = BrokerCore(max_subscriptions=3)
    requester, responder = pair(core)
    requester.do("SUBSCRIBE", {"id": "s", "destination": "/queue/mine"})
    for n in range(2):
        request(requester, responder, f"/temp-queue/q{n}")
    request(requester, responder, "/temp-queue/q0")  # an existing one costs nothing
    requester.do("SEND", {"destination": "/queue/rpc", "reply-to": "/temp-queue/one-too-many"}, b"x")
    error = requester.take()[-1]
    assert error.command == "ERROR" and requester.closed and responder.messages() == []
    assert not [d for d in core.queues if d.startswith("/queue/fastframe.temp.")]


def test_unsubscribing_a_temp_queue_and_using_it_again_holds_no_more() -> None:
    core = BrokerCore()
    requester, responder = pair(core)
    for _ in range(50):
        request(requester, responder)
        requester.do("UNSUBSCRIBE", {"id": "/temp-queue/replies"})
    assert len(requester.session.temp_queues) == 1 and not requester.closed
