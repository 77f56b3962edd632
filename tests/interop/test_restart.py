"""RabbitMQ stopped in the middle of a run: the client reports it, reconnects, re-subscribes, and
nothing it acknowledged is delivered again.

The test stops and starts the broker with ``.ci/brokers`` (about 15 s in all) and always leaves it
running. Messages are persistent on a durable queue, so the broker keeps what was not acknowledged.
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Set, Tuple

import pytest

from ._live import BROKERS, Broker, brokers_cmd, open_session, require_broker, run, stomp_answers, unique

pytestmark = pytest.mark.interop

COUNT, ACKED = 20, 8


async def _until(condition: Any, timeout: float, what: str) -> None:
    """Poll ``condition()`` every 0.1 s until it is true; fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.1)


def test_broker_restart_reconnects_resubscribes_and_keeps_acks() -> None:
    import fastframe.aio

    broker: Broker = BROKERS["rabbitmq"]
    require_broker(broker)
    version = "1.2"
    destination = unique("restart", broker, version)
    bodies = [b"persistent %d" % i for i in range(COUNT)]

    async def main() -> Tuple[List[bytes], List[bytes], Dict[str, Any]]:
        async with open_session(broker, version) as producer:
            for body in bodies:
                await producer.send(destination, body, {"persistent": "true"}, receipt=True)
        policy = fastframe.aio.Reconnect(attempts=200, initial_delay=0.2, max_delay=1.0)
        seen: Dict[str, Any] = {}
        async with open_session(broker, version, reconnect=policy, heartbeat=(1000, 1000)) as session:
            client = session.client
            sub = await session.subscribe(destination, ack="client-individual")
            acked = []
            for _ in range(ACKED):
                message = await session.next_message(sub)
                await message.ack(receipt=True)  # the broker confirmed the ACK before it stops
                acked.append(message.body)
            first_session = client.session
            try:
                await asyncio.to_thread(brokers_cmd, "stop", "rabbitmq")
                await _until(lambda: not client.is_connected, 30, "the client notices the broker is gone")
                seen["disconnected"] = first_session.closed.done()
                seen["cause"] = first_session.error
                await asyncio.to_thread(brokers_cmd, "start", "rabbitmq")
            finally:
                if not stomp_answers(broker.port):
                    await asyncio.to_thread(brokers_cmd, "start", "rabbitmq")
            await _until(lambda: client.connections >= 2 and client.is_connected, 60, "the client reconnects")
            seen["connections"] = client.connections
            after = []
            while True:  # the same subscription object goes on, re-established on the new connection
                try:
                    message = await session.next_message(sub, timeout=3.0)
                except asyncio.TimeoutError:
                    break
                await message.ack(receipt=True)
                after.append(message.body)
        return acked, after, seen

    try:
        acked, after, seen = run(main(), timeout=240)
    finally:
        if not stomp_answers(broker.port):
            brokers_cmd("start", "rabbitmq")
    assert seen["disconnected"], "the first connection should have ended"
    assert isinstance(seen["cause"], fastframe.aio.ConnectionClosedError), seen["cause"]
    assert seen["connections"] == 2
    assert acked == bodies[:ACKED]
    again: Set[bytes] = set(acked) & set(after)
    assert not again, f"acknowledged messages delivered again: {sorted(again)}"
    assert sorted(after) == sorted(bodies[ACKED:]), "every unacknowledged message arrives once after the restart"
