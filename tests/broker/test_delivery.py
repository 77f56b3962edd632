"""The delivery features tests lean on, through real clients against the in-memory broker: message
expiry (``expires``, ``expiration``, ``x-message-ttl``), redelivery with a count and dead-lettering
(``max_redeliveries``, ``x-delivery-limit``, ``dead_letter``, ``x-dead-letter-exchange``,
``requeue:false``), prefetch for queues (``prefetch-count``, ``activemq.prefetchSize``), and the
``hold``/``release`` fault, as the server guide's "Testing your application" says. What the two big
brokers do live is in ``test_delivery_live.py``."""

from __future__ import annotations

import asyncio
import time
from typing import Any, List

import pytest
from _broker_wire import Wire

import fastframe.sync
from fastframe import aio
from fastframe.broker import BrokerCore
from fastframe.server import Broker
from fastframe.testing import TestBroker

QUIET = 0.2  # seconds a test waits to see that nothing (more) comes


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


async def nothing_more(sub: Any) -> None:
    with pytest.raises(asyncio.TimeoutError):
        await sub.get(timeout=QUIET)


def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------------------------- expiry


def test_expired_messages_are_not_delivered() -> None:
    with TestBroker() as broker:

        async def main() -> None:
            async with aio.connect(broker.host, broker.port) as client:
                now = now_ms()
                for body, headers in (
                    (b"expires-past", {"expires": str(now - 1000)}),  # ActiveMQ's: ms since the epoch
                    (b"expires-soon", {"expires": str(now + 100)}),
                    (b"expires-later", {"expires": str(now + 60_000)}),
                    (b"expires-0", {"expires": "0"}),  # 0: never
                    (b"expiration-100", {"expiration": "100"}),  # RabbitMQ's: a TTL in ms
                    (b"expiration-later", {"expiration": "60000"}),
                    (b"plain", {}),
                ):
                    await client.send("/queue/q", body, headers, receipt=True)
                await asyncio.sleep(0.3)  # (the shortest lives are 100 ms)
                async with await client.subscribe("/queue/q") as sub:
                    got = [await sub.get(timeout=5) for _ in range(4)]
                    await nothing_more(sub)
                assert [m.body for m in got] == [b"expires-later", b"expires-0", b"expiration-later", b"plain"]
                assert got[0].get("expires") == str(now + 60_000)  # the headers go with the message
                assert got[2].get("expiration") == "60000"
                # a topic's message that expired on arrival reaches nobody; a live one everybody
                async with await client.subscribe("/topic/t") as sub:
                    await client.send("/topic/t", b"late", {"expires": str(now - 1)})
                    await client.send("/topic/t", b"live", {"expires": str(now + 60_000)})
                    assert (await sub.get(timeout=5)).body == b"live"
                    await nothing_more(sub)
            assert broker.core.stats()["stored_bytes"] == 0

        run(main())


def test_a_queue_ttl_dead_letters_to_its_exchange_without_a_consumer_on_the_queue() -> None:
    with TestBroker() as broker:

        async def main() -> None:
            async with aio.connect(broker.host, broker.port) as client:
                async with await client.subscribe("/queue/dead") as dead:
                    declare = {
                        "x-message-ttl": "200",
                        "x-dead-letter-exchange": "",
                        "x-dead-letter-routing-key": "dead",
                    }
                    sub = await client.subscribe("/queue/work", ack="client-individual", headers=declare)
                    await sub.unsubscribe()  # (the queue keeps its arguments, as a declared queue does)
                    await client.send("/queue/work", b"ttl", receipt=True)
                    await client.send("/queue/work", b"own", {"expiration": "50"}, receipt=True)
                    started = time.monotonic()
                    got = [await dead.get(timeout=5) for _ in range(2)]
                    assert time.monotonic() - started < 2  # the broker's sweep, not a consumer, found them
                    assert sorted(m.body for m in got) == [b"own", b"ttl"]
                    for message in got:
                        assert message.get("x-first-death-reason") == "expired"
                        assert message.get("x-first-death-queue") == "work"
                        assert message.get("original-destination") == "/queue/work"
                        assert message.get("expiration") is None and message.get("destination") == "/queue/dead"
            assert broker.core.stats()["queued"] == 0

        run(main())


# ---------------------------------------------------------------------------------- redelivery, DLQ


@pytest.mark.parametrize("kind", ["aio", "sync"])
def test_nacked_messages_come_back_counted_then_go_to_the_dead_letter_queue(kind: str) -> None:
    with TestBroker(max_redeliveries=2, dead_letter="/queue/DLQ") as broker:
        seen: List[Any] = []
        if kind == "sync":
            with fastframe.sync.connect(broker.host, broker.port) as client:
                with (
                    client.subscribe("/queue/DLQ") as dlq,
                    client.subscribe("/queue/w", ack="client-individual") as sub,
                ):
                    client.send("/queue/w", b"poison", receipt=True)
                    for _ in range(3):
                        message = sub.get(timeout=5)
                        seen.append(message)
                        message.nack(receipt=True)
                    dead = dlq.get(timeout=5)
                    with pytest.raises(TimeoutError):
                        sub.get(timeout=QUIET)
        else:

            async def main() -> Any:
                async with aio.connect(broker.host, broker.port) as client:
                    dlq = await client.subscribe("/queue/DLQ")
                    sub = await client.subscribe("/queue/w", ack="client-individual")
                    await client.send("/queue/w", b"poison", receipt=True)
                    for _ in range(3):
                        message = await sub.get(timeout=5)
                        seen.append(message)
                        await message.nack(receipt=True)
                    dead = await dlq.get(timeout=5)
                    await nothing_more(sub)
                    return dead

            dead = run(main())
        assert [(m.get("redelivered"), m.get("x-delivery-count")) for m in seen] == [
            ("false", None),
            ("true", "1"),
            ("true", "2"),
        ]
        assert dead.body == b"poison" and dead.get("x-first-death-reason") == "delivery_limit"
        assert dead.get("original-destination") == "/queue/w"


def test_unacknowledged_on_disconnect_counts_as_a_delivery() -> None:
    with TestBroker(max_redeliveries=1) as broker:

        async def main() -> None:
            async with aio.connect(broker.host, broker.port) as other:
                await other.send("/queue/w", b"m", receipt=True)
                for expected in (("false", None), ("true", "1")):
                    client = await aio.connect(broker.host, broker.port)
                    sub = await client.subscribe("/queue/w", ack="client")
                    message = await sub.get(timeout=5)
                    assert (message.get("redelivered"), message.get("x-delivery-count")) == expected
                    await client.close()  # not acknowledged: back in the queue
                await asyncio.to_thread(broker.wait_for, lambda: broker.connections == 1)
                # the second loss passed the limit: dropped (no dead-letter destination)
                assert broker.core.stats()["queued"] == 0
                async with await other.subscribe("/queue/w", ack="client") as sub:
                    await nothing_more(sub)

        run(main())


def test_without_a_limit_redelivery_never_ends_and_a_queue_limit_overrides_the_broker() -> None:
    with TestBroker() as broker:

        async def main() -> None:
            async with aio.connect(broker.host, broker.port) as client:
                await client.send("/queue/forever", b"m", receipt=True)
                sub = await client.subscribe("/queue/forever", ack="client-individual")
                for count in range(6):
                    message = await sub.get(timeout=5)
                    assert message.get("x-delivery-count") == (str(count) if count else None)
                    await message.nack()
                await (await sub.get(timeout=5)).ack(receipt=True)
                limited = {"x-delivery-limit": "0", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "d"}
                dead = await client.subscribe("/queue/d")
                sub = await client.subscribe("/queue/once", ack="client-individual", headers=limited)
                await client.send("/queue/once", b"m", receipt=True)
                await (await sub.get(timeout=5)).nack()
                assert (await dead.get(timeout=5)).get("x-first-death-reason") == "delivery_limit"
                await nothing_more(sub)

        run(main())


def test_nack_with_requeue_false_dead_letters_at_once_or_drops() -> None:
    async def main() -> None:
        async with Broker() as broker:
            wire = await Wire.connected(broker.port)
            wire.frame("SUBSCRIBE", (("id", "d"), ("destination", "/queue/dl")))
            args = (("x-dead-letter-exchange", ""), ("x-dead-letter-routing-key", "dl"))
            wire.frame("SUBSCRIBE", (("id", "s"), ("destination", "/queue/w"), ("ack", "client-individual"), *args))
            wire.frame("SUBSCRIBE", (("id", "t"), ("destination", "/queue/x"), ("ack", "client-individual")))
            wire.frame("SEND", (("destination", "/queue/w"),), b"reject me")
            wire.frame("SEND", (("destination", "/queue/x"),), b"drop me")
            first, second = await wire.read(2)
            for message in (first, second):
                wire.frame("NACK", (("id", message.get("ack")), ("requeue", "false")))
            wire.frame("SEND", (("destination", "/queue/x"),), b"next")
            dead, following = sorted(await wire.read(2), key=lambda f: f.get("subscription"))
            assert dead.body == b"reject me" and dead.get("x-first-death-reason") == "rejected"
            assert following.body == b"next" and following.get("redelivered") == "false"
            await wire.close()

    run(main())


@pytest.mark.parametrize("kind", ["aio", "sync"])
def test_without_requeue_on_nack_a_nack_dead_letters_at_once_as_activemq(kind: str) -> None:
    with TestBroker(dead_letter="/queue/ActiveMQ.DLQ", requeue_on_nack=False) as broker:
        if kind == "sync":
            with fastframe.sync.connect(broker.host, broker.port) as client:
                with client.subscribe("/queue/ActiveMQ.DLQ") as dlq, client.subscribe("/queue/w", ack="client") as sub:
                    client.send("/queue/w", b"refused", receipt=True)
                    sub.get(timeout=5).nack()
                    dead = dlq.get(timeout=5)
                    with pytest.raises(TimeoutError):
                        sub.get(timeout=QUIET)
        else:

            async def main() -> Any:
                async with aio.connect(broker.host, broker.port) as client:
                    dlq = await client.subscribe("/queue/ActiveMQ.DLQ")
                    sub = await client.subscribe("/queue/w", ack="client")
                    await client.send("/queue/w", b"refused", receipt=True)
                    await (await sub.get(timeout=5)).nack()
                    dead = await dlq.get(timeout=5)
                    await nothing_more(sub)
                    return dead

            dead = run(main())
        assert dead.body == b"refused" and dead.get("original-destination") == "/queue/w"
        assert dead.get("x-first-death-reason") == "rejected"


def test_the_broker_options_are_checked() -> None:
    with pytest.raises(ValueError, match="max_redeliveries"):
        BrokerCore(max_redeliveries=-1)
    with pytest.raises(ValueError, match="dead_letter"):
        BrokerCore(dead_letter="DLQ")


# ------------------------------------------------------------------------------------------- prefetch


@pytest.mark.parametrize("header", ["prefetch-count", "activemq.prefetchSize"])
def test_prefetch_bounds_the_unacknowledged_messages_of_a_queue_subscription(header: str) -> None:
    with TestBroker() as broker:

        async def main() -> None:
            async with aio.connect(broker.host, broker.port) as client:
                for n in range(6):
                    await client.send("/queue/p", b"m%d" % n, receipt=True)
                sub = await client.subscribe("/queue/p", ack="client-individual", headers={header: "2"})
                got = [await sub.get(timeout=5) for _ in range(2)]
                await nothing_more(sub)
                await got[1].ack()  # one acknowledged: one more
                got.append(await sub.get(timeout=5))
                await nothing_more(sub)
                await got[0].nack()  # a NACK frees a place too; the message comes back first
                again = await sub.get(timeout=5)
                assert again.body == b"m0" and again.get("redelivered") == "true"
                await nothing_more(sub)
                # a second consumer gets what the first has no room for
                other = await client.subscribe("/queue/p", ack="client", headers={header: "1"})
                assert (await other.get(timeout=5)).body == b"m3"
                await nothing_more(other)
                assert [m.body for m in got] == [b"m0", b"m1", b"m2"]

        run(main())


def test_prefetch_as_the_blocking_client_sees_it() -> None:
    with TestBroker() as broker:
        with fastframe.sync.connect(broker.host, broker.port) as client:
            for n in range(3):
                client.send("/queue/p", b"m%d" % n, receipt=True)
            with client.subscribe("/queue/p", ack="client-individual", headers={"prefetch-count": "1"}) as sub:
                first = sub.get(timeout=5)
                with pytest.raises(TimeoutError):
                    sub.get(timeout=QUIET)
                first.ack()
                assert sub.get(timeout=5).body == b"m1"
            assert broker.core.stats()["queued"] == 2  # m1 unacknowledged went back, m2 never left


def test_prefetch_with_cumulative_acks_and_auto_ack() -> None:
    with TestBroker() as broker:

        async def main() -> None:
            async with aio.connect(broker.host, broker.port) as client:
                for n in range(5):
                    await client.send("/queue/c", b"m%d" % n, receipt=True)
                sub = await client.subscribe("/queue/c", ack="client", headers={"prefetch-count": "2"})
                got = [await sub.get(timeout=5) for _ in range(2)]
                await nothing_more(sub)
                await got[1].ack()  # acknowledges both: two more
                got += [await sub.get(timeout=5) for _ in range(2)]
                await nothing_more(sub)
                assert [m.body for m in got] == [b"m0", b"m1", b"m2", b"m3"]
                # ack:auto has nothing unacknowledged: the header bounds nothing (as in both brokers)
                auto = await client.subscribe("/queue/a", headers={"prefetch-count": "1"})
                for n in range(3):
                    await client.send("/queue/a", b"%d" % n)
                assert [(await auto.get(timeout=5)).body for _ in range(3)] == [b"0", b"1", b"2"]

        run(main())


# ------------------------------------------------------------------------------------ hold / release


@pytest.mark.parametrize("kind", ["aio", "sync"])
def test_hold_keeps_a_destinations_deliveries_until_release(kind: str) -> None:
    with TestBroker() as broker:
        broker.hold("/queue/replies")
        if kind == "sync":
            with fastframe.sync.connect(broker.host, broker.port) as client:
                with client.subscribe("/queue/replies") as sub:
                    client.send("/queue/replies", b"late", receipt=True, timeout=5)  # accepted, receipted
                    with pytest.raises(TimeoutError):
                        sub.get(timeout=QUIET)  # the consumer's timeout is what is exercised
                    broker.release("/queue/replies")
                    assert sub.get(timeout=5).body == b"late"
            return

        async def main() -> None:
            async with aio.connect(broker.host, broker.port) as client:
                async with await client.subscribe("/queue/replies") as sub:
                    await client.send("/queue/replies", b"late", receipt=True, timeout=5)
                    await nothing_more(sub)
                    await asyncio.to_thread(broker.release, "/queue/replies")
                    assert (await sub.get(timeout=5)).body == b"late"
                    await client.send("/queue/replies", b"next")  # released: as usual again
                    assert (await sub.get(timeout=5)).body == b"next"

        run(main())


def test_hold_a_topic_keeps_each_copy_for_the_subscriptions_present() -> None:
    with TestBroker() as broker:

        async def main() -> None:
            async with aio.connect(broker.host, broker.port) as client:
                early = await client.subscribe("/topic/t")
                await asyncio.to_thread(broker.hold, "/topic/t")
                await client.send("/topic/t", b"1", receipt=True)
                await client.send("/topic/t", b"2", receipt=True)
                late = await client.subscribe("/topic/t")
                await nothing_more(early)
                await asyncio.to_thread(broker.release, "/topic/t")
                assert [(await early.get(timeout=5)).body for _ in range(2)] == [b"1", b"2"]
                await nothing_more(late)  # it subscribed after they were sent

        run(main())


def test_hold_with_the_fixture(stomp_broker: Any) -> None:
    stomp_broker.hold("/queue/orders")
    with fastframe.sync.connect(stomp_broker.host, stomp_broker.port) as client:
        client.send("/queue/orders", b"order-1", receipt=True)
        assert stomp_broker.core.stats()["queued"] == 1
        with client.subscribe("/queue/orders") as orders:
            with pytest.raises(TimeoutError):
                orders.get(timeout=QUIET)
            stomp_broker.release("/queue/orders")
            assert orders.get(timeout=5).body == b"order-1"


@pytest.mark.parametrize(
    "name", ["test_a_poison_message_ends_in_the_dead_letter_queue", "test_a_late_reply_is_a_timeout"]
)
def test_the_server_guides_examples(name: str) -> None:
    """The guide's examples of this file's features, each with its fixture made here."""
    import re

    from conftest import REPO

    text = (REPO / "docs" / "guides" / "server.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S) if f"def {name}(" in b]
    namespace: Any = {}
    exec(compile(block, "server.md", "exec"), namespace)
    brokers: List[TestBroker] = []

    def factory(**options: Any) -> TestBroker:
        brokers.append(TestBroker(**options).start())
        return brokers[-1]

    try:
        namespace[name](factory if "factory" in block else factory())
    finally:
        for broker in brokers:
            broker.close()


# ------------------------------------------------------------------------------ the core, on a fake clock


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0  # seconds since the epoch

    def __call__(self) -> float:
        return self.now


def test_expire_takes_expired_messages_out_of_their_queues_by_the_clock() -> None:
    from test_core import Client

    clock = Clock()
    core = BrokerCore(clock=clock, dead_letter="/queue/dlq")
    client = Client(core)
    at = int(clock.now * 1000)
    client.do("SEND", {"destination": "/queue/q", "expires": str(at + 500)}, b"a")
    client.do("SEND", {"destination": "/queue/q", "expiration": "1000"}, b"b")
    client.do("SEND", {"destination": "/queue/q", "expires": "0"}, b"never")
    assert core.expire() == 0 and core.stats()["queued"] == 3
    clock.now += 0.5  # "a" expires at its time exactly
    assert core.expire() == 1
    clock.now += 0.5
    assert core.expire() == 1 and core.expire() == 0
    client.do("SUBSCRIBE", {"id": "d", "destination": "/queue/dlq"})
    client.do("SUBSCRIBE", {"id": "q", "destination": "/queue/q"})
    got = client.messages()
    assert [(m.get("subscription"), m.body) for m in got] == [("d", b"a"), ("d", b"b"), ("q", b"never")]
    assert got[0].get("expires") is None and got[1].get("expiration") is None  # a dead letter does not expire
    stored = core.stats()["stored_bytes"]
    assert stored == 0, stored


def test_an_expired_message_is_skipped_when_a_consumer_comes_before_the_sweep() -> None:
    from test_core import Client

    clock = Clock()
    core = BrokerCore(clock=clock)
    client = Client(core)
    client.do("SUBSCRIBE", {"id": "q", "destination": "/queue/q", "x-message-ttl": "100"})
    client.do("UNSUBSCRIBE", {"id": "q"})
    client.do("SEND", {"destination": "/queue/q"}, b"old")
    clock.now += 0.2
    client.do("SEND", {"destination": "/queue/q"}, b"new")
    client.do("SUBSCRIBE", {"id": "r", "destination": "/queue/q"})
    assert [m.body for m in client.messages()] == [b"new"]
    assert core.stats()["stored_bytes"] == 0


def test_a_queue_held_before_it_exists_and_released_after_it_was_forgotten() -> None:
    from test_core import Client

    core = BrokerCore()
    client = Client(core)
    core.hold("/queue/h")
    client.do("SUBSCRIBE", {"id": "s", "destination": "/queue/h"})
    client.do("SEND", {"destination": "/queue/h"}, b"1")
    client.do("UNSUBSCRIBE", {"id": "s"})
    client.do("SEND", {"destination": "/queue/h"}, b"2")
    assert client.messages() == [] and core.stats()["queued"] == 2
    client.do("SUBSCRIBE", {"id": "t", "destination": "/queue/h"})
    assert client.messages() == []
    core.release("/queue/h")
    assert [m.body for m in client.messages()] == [b"1", b"2"]
    core.release("/queue/h")  # (released twice: nothing happens)
