"""Issue 29 against the live brokers: request/reply through temporary queues (a responder written
with stomp.py, as the other side of an RPC often is), 8 requests at once on one connection, a late
reply dropped; ActiveMQ's durable topic subscription by ``client-id`` (a CONNECT header);
``content_length=False`` reaching ActiveMQ as a JMS TextMessage. Both clients.

What the brokers do, measured with raw frames (docs/guides/brokers.md): RabbitMQ rewrites
``reply-to:/temp-queue/NAME`` to ``/reply-queue/amq.gen-...`` and delivers the reply on subscription
``/temp-queue/NAME`` without a SUBSCRIBE (it refuses one); ActiveMQ rewrites it to
``/remote-temp-queue/ID:...`` and delivers only to a SUBSCRIBE of ``/temp-queue/NAME``. A TextMessage
comes out of ActiveMQ without ``content-length``, a BytesMessage with one.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any, Dict, Iterator, List

import pytest

import fastframe.sync
from fastframe import aio

from ._live import BROKERS, HOST, IN_CI, Broker, require_broker, unique

pytestmark = pytest.mark.interop

if IN_CI:
    import stomp  # CI installs the bench extra: a missing stomp.py fails there, as a missing broker does
else:
    stomp = pytest.importorskip("stomp", reason="stomp.py (the bench extra) writes the responder")


class StompPyResponder(stomp.ConnectionListener):  # type: ignore[misc]
    """A stomp.py client answering each request on ``destination`` with ``reply:<body>`` to its
    ``reply-to``, the ``correlation-id`` copied; ``delays[body]`` seconds later (in a timer thread)."""

    def __init__(self, broker: Broker, destination: str, delays: Dict[bytes, float]) -> None:
        port = BROKERS["rabbitmq"].port if broker.name == "rabbitmq-ws" else broker.port  # (the same RabbitMQ)
        self.delays = delays
        self.answered = threading.Event()
        self.conn = stomp.Connection12([(HOST, port)], heartbeats=(0, 0), auto_decode=False, vhost="/")
        self.conn.set_listener("responder", self)
        self.conn.connect("guest", "guest", wait=True)
        self.conn.subscribe(destination, id="responder", ack="auto")
        time.sleep(0.2)  # (stomp.py's subscribe has no receipt here: let the broker register it)

    def on_message(self, frame: Any) -> None:
        body = bytes(frame.body)
        reply_to, correlation = frame.headers["reply-to"], frame.headers.get("correlation-id", "")

        def answer() -> None:
            self.conn.send(reply_to, b"reply:" + body, headers={"correlation-id": correlation})

        delay = self.delays.get(body, 0.0)
        if delay:
            threading.Timer(delay, answer).start()
        else:
            answer()

    def close(self) -> None:
        self.conn.disconnect()


@pytest.fixture
def rpc_broker(broker: Broker) -> Broker:
    return broker


@pytest.fixture
def responder(rpc_broker: Broker) -> Iterator[Any]:
    destination = unique("rpc", rpc_broker)
    made = StompPyResponder(rpc_broker, destination, {b"slow": 1.0})
    made.destination = destination  # type: ignore[attr-defined]
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_aio_request_reply_eight_at_once_and_a_late_reply_dropped(
    rpc_broker: Broker, responder: Any, version: str
) -> None:
    late: List[aio.Message] = []
    destination = responder.destination

    async def main() -> None:
        options = {**rpc_broker.options(version), "versions": (version,), "timeout": 20.0}
        async with aio.connect(rpc_broker.address, rpc_broker.port, on_unrouted=late.append, **options) as client:
            replies = await asyncio.gather(*(client.request(destination, b"%d" % n, timeout=10) for n in range(8)))
            assert [r.body for r in replies] == [b"reply:%d" % n for n in range(8)]
            assert len({r.get("correlation-id") for r in replies}) == 8
            with pytest.raises(asyncio.TimeoutError):
                await client.request(destination, b"slow", timeout=0.3)
            assert (await client.request(destination, b"next", timeout=10)).body == b"reply:next"
            deadline = time.monotonic() + 10
            while not late and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert [m.body for m in late] == [b"reply:slow"]
            assert (await client.request(destination, b"after", timeout=10)).body == b"reply:after"
            assert client.is_connected and client.connections == 1

    asyncio.run(asyncio.wait_for(main(), 60))


def test_sync_request_reply_from_eight_threads_and_a_late_reply_dropped(rpc_broker: Broker, responder: Any) -> None:
    late: List[fastframe.sync.Message] = []
    destination = responder.destination
    options = {**rpc_broker.options("1.2"), "timeout": 20.0}
    with fastframe.sync.connect(rpc_broker.address, rpc_broker.port, on_unrouted=late.append, **options) as client:
        results: Dict[int, bytes] = {}

        def ask(n: int) -> None:
            results[n] = client.request(destination, b"%d" % n, timeout=10).body

        threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        assert results == {n: b"reply:%d" % n for n in range(8)}
        with pytest.raises(TimeoutError):
            client.request(destination, b"slow", timeout=0.3)
        assert client.request(destination, b"next", timeout=10).body == b"reply:next"
        deadline = time.monotonic() + 10
        while not late and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [m.body for m in late] == [b"reply:slow"]


# -- ActiveMQ: a durable topic subscription by client-id, TextMessages without content-length --------------
@pytest.fixture
def activemq() -> Broker:
    found = BROKERS["activemq"]
    require_broker(found)
    return found


def test_activemq_durable_topic_subscription_by_client_id_survives_a_disconnect(activemq: Broker) -> None:
    tag = os.urandom(4).hex()
    topic, client_id, name = f"/topic/ff-durable-{tag}", f"ff-client-{tag}", f"ff-sub-{tag}"
    durable = {"activemq.subscriptionName": name}

    async def main() -> None:
        options: Dict[str, Any] = {**activemq.options("1.2"), "timeout": 20.0}
        async with aio.connect(HOST, activemq.port, headers={"client-id": client_id}, **options) as client:
            sub = await client.subscribe(topic, headers=durable)
            await client.send(topic, b"while here", receipt=True)
            assert (await sub.get(timeout=10)).body == b"while here"
        async with aio.connect(HOST, activemq.port, **options) as publisher:
            for n in range(3):
                await publisher.send(topic, b"away %d" % n, receipt=True)
        async with aio.connect(HOST, activemq.port, headers={"client-id": client_id}, **options) as client:
            sub = await client.subscribe(topic, headers=durable)
            assert [(await sub.get(timeout=10)).body for _ in range(3)] == [b"away %d" % n for n in range(3)]

    asyncio.run(asyncio.wait_for(main(), 60))


def test_sync_client_sends_connect_headers_activemq_acts_on(activemq: Broker) -> None:
    tag = os.urandom(4).hex()
    topic, durable = f"/topic/ff-durable-sync-{tag}", {"activemq.subscriptionName": f"ff-sub-{tag}"}
    options: Dict[str, Any] = {**activemq.options("1.2"), "headers": {"client-id": f"ff-sync-{tag}"}}
    with fastframe.sync.connect(HOST, activemq.port, **options) as client:
        client.subscribe(topic, headers=durable)
    with fastframe.sync.connect(HOST, activemq.port, **activemq.options("1.2")) as publisher:
        publisher.send(topic, b"while away", receipt=True)
    with fastframe.sync.connect(HOST, activemq.port, **options) as client:
        assert client.subscribe(topic, headers=durable).get(timeout=10).body == b"while away"


def test_activemq_makes_a_text_message_of_a_send_without_content_length(activemq: Broker) -> None:
    queue = unique("textmessage", activemq)

    async def main() -> List[aio.Message]:
        async with aio.connect(HOST, activemq.port, **activemq.options("1.2"), timeout=20.0) as client:
            sub = await client.subscribe(queue)
            await client.send(queue, "text ☃", content_length=False, receipt=True)
            await client.send(queue, "bytes ☃", receipt=True)
            return [await sub.get(timeout=10) for _ in range(2)]

    text, binary = asyncio.run(asyncio.wait_for(main(), 60))
    assert (text.body, binary.body) == ("text ☃".encode(), "bytes ☃".encode())
    assert text.get("content-length") is None  # a TextMessage comes back without one
    assert binary.get("content-length") == str(len("bytes ☃".encode()))  # a BytesMessage with it
    with fastframe.sync.connect(HOST, activemq.port, **activemq.options("1.2")) as client:
        sub = client.subscribe(queue)
        client.send(queue, "sync text", content_length=False, receipt=True)
        client.send(queue, b"sync bytes", receipt=True)
        got = [sub.get(timeout=10) for _ in range(2)]
    assert [(m.body, m.get("content-length")) for m in got] == [(b"sync text", None), (b"sync bytes", "10")]
