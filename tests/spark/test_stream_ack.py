"""consume=ack's acknowledgements: one cumulative ACK per batch for one destination (``ack:client``), an ACK
per message for several; either way what was acknowledged is gone and the rest comes again."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, Iterator, List

import pytest

import fastframe.aio as aio
from fastframe.spark._stream_options import source_options
from fastframe.spark._stream_read import QueueConsumer, to_acknowledge


def test_one_ack_for_a_cumulative_batch() -> None:
    messages = ["m0", "m1", "m2"]
    assert to_acknowledge(messages, True) == ["m2"]
    assert to_acknowledge(messages, False) == messages
    assert to_acknowledge([], True) == []


@pytest.fixture
def broker_port() -> Iterator[int]:
    """fastframe's in-memory broker on a thread of its own (``client`` ACKs cumulative per subscription)."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: Dict[str, Any] = {}

    async def serve() -> None:
        async with aio.Broker(port=0) as broker:
            holder["port"], holder["stop"] = broker.port, asyncio.Event()
            ready.set()
            await holder["stop"].wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield int(holder["port"])
    finally:
        loop.call_soon_threadsafe(holder["stop"].set)
        thread.join(10)
        loop.close()


def _publish(port: int, destination: str, count: int) -> None:
    async def publish() -> None:
        async with aio.connect("127.0.0.1", port, timeout=10) as client:
            for n in range(count):
                await client.send(destination, b"%d" % n, receipt=n == count - 1)

    asyncio.run(publish())


def _receive(consumer: QueueConsumer, counts: Dict[str, int]) -> Dict[str, List[Any]]:
    got: Dict[str, List[Any]] = {name: [] for name in counts}
    for _ in range(50):
        for name, messages in consumer.poll(0, 0).items():
            got[name].extend(messages)
        if all(len(got[name]) >= count for name, count in counts.items()):
            break
    return got


@pytest.mark.parametrize("destinations", [1, 2])
def test_acknowledged_messages_are_gone_and_the_rest_comes_again(broker_port: int, destinations: int) -> None:
    names = [f"/queue/ack-{i}" for i in range(destinations)]
    for name in names:
        _publish(broker_port, name, 10)
    opts = source_options({"host": "127.0.0.1", "port": str(broker_port), "destination": ",".join(names)})
    consumer = QueueConsumer(opts)
    try:
        assert consumer.cumulative == (destinations == 1)
        received = _receive(consumer, {name: 10 for name in names})
        assert all(len(got) == 10 for got in received.values())
        # the first batch: 6 of the first destination's messages (several: none of the second's)
        assert consumer.ack(received[names[0]][:6]) == 0
    finally:
        consumer.close()  # no DISCONNECT: what is not acknowledged goes back
    again = QueueConsumer(opts)
    try:
        got = _receive(again, {name: 10 if name != names[0] else 4 for name in names})
        left = {name: [m.body for m in messages] for name, messages in got.items()}
    finally:
        again.close()
    assert left[names[0]] == [b"6", b"7", b"8", b"9"]
    if destinations == 2:
        assert sorted(left[names[1]], key=int) == [b"%d" % n for n in range(10)]
