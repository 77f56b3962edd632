"""Load and faults on loopback: many connections, a big fan-out, clients that vanish, malformed floods.

Every loop is bounded and every wait has a timeout; the slow ones are marked ``slow``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, List

import pytest
from _broker_wire import Wire, wait_for

import fastframe
from fastframe.server import Broker


def run(test: Callable[[], Awaitable[None]], timeout: float = 60.0) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(test(), timeout)

    asyncio.run(bounded())


@pytest.mark.slow
def test_a_thousand_concurrent_connections() -> None:
    async def test() -> None:
        async with Broker(max_connections=1000) as broker:
            sem = asyncio.Semaphore(200)  # connect in waves: the listen backlog is finite

            async def one(i: int) -> Wire:
                async with sem:
                    return await Wire.connected(broker.port, headers=f"login:user-{i}\n")

            wires = await asyncio.gather(*(one(i) for i in range(1000)))
            assert broker.server is not None and broker.server.connections == 1000
            assert broker.core.stats()["sessions"] == 1000
            # every one of them is served: a receipt each, over the same open connections
            for i, wire in enumerate(wires):
                wire.frame("SEND", {"destination": "/queue/many", "receipt": str(i)}, b"x")
            for i, wire in enumerate(wires):
                assert (await wire.read(1))[0].get("receipt-id") == str(i)
            extra = await Wire.open(broker.port)
            assert [f.get("message") for f in await extra.until_eof()] == ["Too many connections"]
            await extra.close()
            await asyncio.gather(*(w.close() for w in wires))
            await wait_for(lambda: broker.core.stats()["sessions"] == 0)
            assert broker.core.stats()["queued"] == 1000

    run(test)


def _body(i: int) -> bytes:
    return b"%08d:" % i + bytes((i + k) % 256 for k in range(i % 48))


@pytest.mark.slow
def test_fan_out_100k_messages_to_10_subscribers_every_body_verified() -> None:
    count, subscribers = 100_000, 10

    async def test() -> None:
        async with Broker(max_outbound_bytes=8 * 1024 * 1024, slow_consumer_timeout=20) as broker:
            subs = [await Wire.connected(broker.port) for _ in range(subscribers)]
            for i, sub in enumerate(subs):
                sub.frame("SUBSCRIBE", {"id": str(i), "destination": "/topic/fan", "receipt": "ok"})
                await sub.read(1)

            expected = [_body(i) for i in range(count)]

            async def consume(sub: Wire) -> int:
                seen = 0
                while seen < count:
                    assert await sub._more(20), f"EOF after {seen}"
                    bodies = [frame.body for frame in sub.frames]
                    assert bodies == expected[seen : seen + len(bodies)], seen  # every body, in order
                    seen += len(bodies)
                    sub.frames = []
                return seen

            consumers = [asyncio.ensure_future(consume(sub)) for sub in subs]
            producer = await Wire.connected(broker.port)
            batch: List[bytes] = []
            for i in range(count):
                batch.append(fastframe.encode("SEND", {"destination": "/topic/fan"}, expected[i]))
                if len(batch) == 500:
                    producer.write(b"".join(batch))
                    batch = []
                    await asyncio.wait_for(producer.writer.drain(), 20)
            producer.write(b"".join(batch))
            assert await asyncio.wait_for(asyncio.gather(*consumers), 50) == [count] * subscribers
            for wire in (*subs, producer):
                await wire.close()

    run(test, timeout=58)


def test_vanishing_clients_leave_nothing_behind() -> None:
    async def test() -> None:
        async with Broker() as broker:
            worker = await Wire.connected(broker.port)
            worker.frame("SUBSCRIBE", {"id": "w", "destination": "/queue/jobs", "ack": "client", "receipt": "r"})
            await worker.read(1)
            producer = await Wire.connected(broker.port)
            for i in range(5):
                producer.frame("SEND", {"destination": "/queue/jobs"}, b"job-%d" % i)
            assert len(await worker.read(5)) == 5
            # the worker disappears in the middle of a frame and of a transaction
            worker.frame("BEGIN", {"transaction": "t"})
            worker.frame("SEND", {"destination": "/queue/jobs", "transaction": "t"}, b"never")
            worker.write(b"ACK\nid:")
            await wait_for(lambda: broker.core.stats()["transactions"] == 1)
            await worker.close()
            await wait_for(lambda: broker.core.stats()["sessions"] == 1)
            stats = broker.core.stats()
            assert (stats["transactions"], stats["subscriptions"], stats["unacked"], stats["queued"]) == (0, 0, 0, 5)
            # a producer vanishing mid-transaction: its SENDs are discarded
            producer.frame("BEGIN", {"transaction": "p"})
            producer.frame("SEND", {"destination": "/queue/jobs", "transaction": "p"}, b"discarded")
            producer.write(b"SEND\ndestination:/queue/jobs\ncontent-length:100\n\npart")
            await wait_for(lambda: broker.core.stats()["transactions"] == 1)
            await producer.close()
            await wait_for(lambda: broker.core.stats()["sessions"] == 0)
            heir = await Wire.connected(broker.port)
            heir.frame("SUBSCRIBE", {"id": "h", "destination": "/queue/jobs"})
            frames = await heir.read(5)
            assert [f.body for f in frames] == [b"job-%d" % i for i in range(5)]
            assert all(f.get("redelivered") == "true" for f in frames)
            heir.frame("DISCONNECT", {"receipt": "bye"})
            assert [f.get("receipt-id") for f in await heir.until_eof()] == ["bye"]
            await heir.close()
            assert broker.core.stats()["queued"] == 0

    run(test)


MALFORMED: List[bytes] = [
    b"SEND\ndestination:/q\nx:tab\\there\n\n\0",  # undefined escape
    b"SEND\ndestination:/q\ncontent-length:abc\n\nx\0",  # bad content-length
    b"SEND\ndestination:/q\ncontent-length:2\n\nabc\0",  # no NUL after the body
    b"SEND\ndestination:/q\nnocolon\n\n\0",  # header line without ':'
    b"SEND\ndestination:/q\n:empty-name\n\n\0",  # empty header name
    b"SEND\n" + b"x" * 20_000 + b":1\n\n\0",  # a line past max_line_length
    b"SEND\ndestination:/q\nx:\xff\xfe\n\n\0",  # invalid UTF-8
    b"FOO\n\n\0",  # unknown command
    b"SEND\n\nbody\0",  # no destination
    b"ACK\nid:nothing\n\n\0",  # unknown ack id
]


@pytest.mark.slow
def test_malformed_flood_each_gets_one_error_and_the_others_are_served() -> None:
    async def test() -> None:
        async with Broker() as broker:
            good = await Wire.connected(broker.port)

            async def attacker(i: int) -> List[Any]:
                wire = await Wire.connected(broker.port)
                wire.write(MALFORMED[i % len(MALFORMED)] + b"SEND\ndestination:/queue/after\n\nlater\0")
                frames = await wire.until_eof()
                await wire.close()
                return frames

            attacks = asyncio.ensure_future(asyncio.gather(*(attacker(i) for i in range(300))))
            served = 0
            while not attacks.done() and served < 10_000:  # the good client is answered throughout
                good.frame("SEND", {"destination": "/queue/good", "receipt": str(served)})
                assert (await good.read(1))[0].get("receipt-id") == str(served)
                served += 1
            results = await asyncio.wait_for(attacks, 30)
            assert all([f.command for f in frames] == ["ERROR"] for frames in results)
            assert broker.core.stats()["sessions"] == 1 and served > 0
            assert broker.core.stats()["queued"] == served  # nothing after a bad frame was taken
            await good.close()

    run(test)
