"""One consumer that never reads hurts nobody else: the healthy subscribers keep receiving, the producer keeps
being read, an unrelated client's receipt comes at once; the stuck one fills only its own bound."""

from __future__ import annotations

import asyncio
from typing import Any, List

from _broker_wire import Wire, wait_for

from fastframe.server import Broker

BODY = b"m" * 1024
MESSAGES = 6000  # 6 MiB to each subscriber: the stuck one passes its 1 MiB high-water mark, not its 16 MiB bound


async def subscriber(port: int, destination: str) -> Wire:
    wire = await Wire.connected(port)
    wire.frame("SUBSCRIBE", {"id": "s", "destination": destination, "receipt": "sub"})
    await wire.read(1)
    return wire


async def count_messages(wire: Wire, arrivals: List[float]) -> None:
    loop = asyncio.get_running_loop()
    while len(arrivals) < MESSAGES:
        if not await wire._more(10.0):
            return
        for frame in wire.frames:
            if frame.command == "MESSAGE":
                arrivals.append(loop.time())
        wire.frames.clear()


def test_a_consumer_that_never_reads_freezes_nobody() -> None:
    async def scene() -> None:
        async with Broker(port=0) as broker:  # the default bounds and timeouts
            idle = [await Wire.connected(broker.port) for _ in range(50)]
            stuck = await subscriber(broker.port, "/topic/feed")
            stuck.writer.transport.pause_reading()  # never reads again
            healthy = [await subscriber(broker.port, "/topic/feed") for _ in range(3)]
            arrivals: List[List[float]] = [[] for _ in healthy]
            readers = [asyncio.ensure_future(count_messages(w, a)) for w, a in zip(healthy, arrivals)]
            unrelated = await Wire.connected(broker.port)
            producer = await Wire.connected(broker.port)
            receipt_waits: List[float] = []
            loop = asyncio.get_running_loop()

            async def produce() -> None:
                for k in range(MESSAGES):
                    producer.frame("SEND", {"destination": "/topic/feed"}, BODY)
                    if k % 64 == 63:
                        await asyncio.wait_for(producer.writer.drain(), 5)
                        await asyncio.sleep(0.01)  # ~3 s of messages

            async def ask_receipts() -> None:
                for k in range(8):
                    started = loop.time()
                    unrelated.frame("SEND", {"destination": "/queue/other", "receipt": f"r{k}"})
                    (frame,) = await unrelated.read(1, timeout=5)
                    assert frame.get("receipt-id") == f"r{k}"
                    receipt_waits.append(loop.time() - started)
                    await asyncio.sleep(0.3)

            congested: List[Any] = []

            async def watch() -> None:
                while not all(r.done() for r in readers):
                    congested.append(len(broker.server._congested))  # type: ignore[union-attr]
                    await asyncio.sleep(0.05)

            await asyncio.wait_for(asyncio.gather(produce(), ask_receipts(), watch(), *readers), 30)
            assert max(congested) >= 1  # the stuck client was congested meanwhile
            assert all(len(a) == MESSAGES for a in arrivals)  # every healthy subscriber got everything
            for times in arrivals:  # and never waited: no gap of a second between two messages
                assert max(b - a for a, b in zip(times, times[1:])) < 1.0
            assert max(receipt_waits) < 1.0
            # the stuck one is still connected (its 16 MiB bound not reached), holding only its own bytes
            await wait_for(lambda: broker.core.stats()["sessions"] == 56, message="a session went")
            for wire in [*idle, stuck, *healthy, unrelated, producer]:
                await wire.close()

    asyncio.run(asyncio.wait_for(scene(), 60))


def test_producers_are_held_only_past_max_waiting_bytes() -> None:
    async def scene() -> None:
        limits = {"outbound_high_water": 64 * 1024, "max_waiting_bytes": 512 * 1024, "slow_consumer_timeout": 1.0}
        async with Broker(port=0, **limits) as broker:
            stuck = await subscriber(broker.port, "/topic/feed")
            stuck.writer.transport.pause_reading()
            producer = await Wire.connected(broker.port)
            server: Any = broker.server
            held = False
            for k in range(20_000):
                producer.frame("SEND", {"destination": "/topic/feed"}, BODY)
                if k % 16 == 15:
                    await asyncio.wait_for(producer.writer.drain(), 10)
                    held = held or server._holding_producers
                    if held:
                        break
            assert held  # the congested client's bytes passed 512 KiB: the producer was held...
            await wait_for(lambda: broker.core.stats()["sessions"] == 1, message="the stuck client stayed")
            assert not server._holding_producers  # ...until the stuck client was dropped
            producer.frame("SEND", {"destination": "/topic/feed", "receipt": "alive"})
            assert (await producer.read(1))[0].get("receipt-id") == "alive"
            await stuck.close()
            await producer.close()

    asyncio.run(asyncio.wait_for(scene(), 60))
