"""One stream scenario, the same assertions, against the in-memory broker and the live RabbitMQ.

Offsets, retention truncating whole segments, re-subscribing from an offset, ``last``, ``next`` and a
timestamp, through :func:`fastframe.aio.connect`. RabbitMQ 3.10's STOMP adapter drops
``x-stream-max-segment-size-bytes``, so its small segments come from a policy (``rabbitmqctl``, on this
machine as ``.ci/brokers`` installs it); the in-memory broker takes the SUBSCRIBE's headers. Offsets are
compared by order only: RabbitMQ spends an offset on each new segment, the emulation does not.
Locally RabbitMQ's half skips when it is down; with ``CI=true`` it fails.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from fastframe import aio
from interop._live import BROKERS, HOST, IN_CI, require_broker

COUNT = 60
BODY = 100
RETENTION = {"x-max-length-bytes": "3000", "x-stream-max-segment-size-bytes": "1000"}
DECLARE = {"x-queue-type": "stream", "durable": "true", "auto-delete": "false"}
RABBIT_OPTIONS = {"login": "guest", "passcode": "guest", "host_header": "/", "escapes": "1.2"}


def _rabbitmqctl(*args: str) -> None:
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        if IN_CI:
            pytest.fail("rabbitmqctl is missing: .ci/brokers installs RabbitMQ on this machine")
        pytest.skip("no rabbitmqctl on this machine (a retention policy needs it)")
    subprocess.run([ctl, "-q", *args], capture_output=True, timeout=60, check=True)


@pytest.fixture(params=["fastframe", "rabbitmq"])
def where(request: pytest.FixtureRequest) -> Iterator[Tuple[str, str]]:
    """``(broker name, a new stream's name)``; for RabbitMQ a retention policy on that name, and the stream
    deleted afterwards (STOMP cannot delete a queue)."""
    queue = f"ff-stream-ret-{os.urandom(4).hex()}"
    if request.param == "fastframe":
        yield "fastframe", queue
        return
    require_broker(BROKERS["rabbitmq"])
    policy = '{"max-length-bytes":3000,"stream-max-segment-size-bytes":1000}'
    _rabbitmqctl("set_policy", queue, f"^{queue}$", policy, "--apply-to", "queues")
    try:
        yield "rabbitmq", queue
    finally:
        _rabbitmqctl("clear_policy", queue)
        code = (
            f'case rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, <<"{queue}">>)) of {{ok, Q}} -> '
            'rabbit_amqqueue:delete(Q, false, false, <<"fastframe-tests">>); Other -> Other end.'
        )
        _rabbitmqctl("eval", code)


class Stream:
    def __init__(self, client: Any, queue: str) -> None:
        self.client, self.queue = client, queue
        self.subscriptions = 0

    async def read(self, spec: str, to_the_end: bool = True, quiet: float = 0.5) -> List[Tuple[int, bytes]]:
        """``(offset, body)`` of what a new subscription from ``spec`` gets: up to the last message published
        (each within 10 s: RabbitMQ may pause between segments), or (``to_the_end`` false) what comes
        before nothing more does for ``quiet`` seconds."""
        self.subscriptions += 1
        sub = await self.client.subscribe(
            f"/amq/queue/{self.queue}",
            ack="client",
            headers={"x-stream-offset": spec, "prefetch-count": "1000", "id": f"r{self.subscriptions}"},
            timeout=5,
        )
        got: List[Tuple[int, bytes]] = []
        while not (to_the_end and got and got[-1][1] == body(COUNT - 1)):
            try:
                message = await sub.get(timeout=10 if to_the_end else quiet)
            except asyncio.TimeoutError:
                if to_the_end:
                    raise AssertionError(f"{spec}: nothing within 10 s after {[data[:3] for _, data in got]}") from None
                break
            got.append((int(message.get("x-stream-offset")), bytes(message.body)))
        return got


def _connect(name: str, port: int) -> Any:
    options: Dict[str, Any] = RABBIT_OPTIONS if name == "rabbitmq" else {}
    return aio.connect(HOST, port, timeout=5, **options)


def body(n: int) -> bytes:
    return b"%03d" % n + b"." * (BODY - 3)


async def scenario(name: str, port: int, queue: str) -> None:
    async with _connect(name, port) as client:
        # declare (a SUBSCRIBE; this one reads nothing), then publish each message in a chunk of its own
        declaring = await client.subscribe(
            f"/queue/{queue}",
            ack="client",
            headers={**DECLARE, **RETENTION, "prefetch-count": "1", "x-stream-offset": "next"},
            timeout=5,
        )
        await declaring.unsubscribe(timeout=5)
        before = int(time.time()) - 1
        for n in range(COUNT):
            await client.send(f"/amq/queue/{queue}", body(n), receipt=True, timeout=5)
        stream = Stream(client, queue)

        # retention removed the oldest messages: what is left is the newest ones, in order, none missing
        # (RabbitMQ applies retention in the background, a moment after the segment that triggers it)
        kept, previous = await stream.read("first"), None
        for _ in range(20):
            if kept == previous:
                break
            await asyncio.sleep(0.25)
            kept, previous = await stream.read("first"), kept
        numbers = [int(data[:3]) for _, data in kept]
        assert numbers == list(range(numbers[0], COUNT)), numbers
        assert 0 < numbers[0] < COUNT - 3, f"retention kept {len(kept)} of {COUNT}"
        offsets = [offset for offset, _ in kept]
        assert offsets == sorted(offsets) and offsets[0] >= numbers[0]

        # a new subscription from an offset starts exactly there; one from a removed offset, at the first kept
        third = offsets[2]
        assert await stream.read(f"offset={third}") == kept[2:]
        assert (await stream.read("offset=0"))[0] == kept[0]
        assert (await stream.read(f"timestamp={before}"))[0] == kept[0]

        # last: at least the last message; next and a future timestamp: nothing until a new one
        assert (await stream.read("last"))[-1] == kept[-1]
        assert await stream.read("next", to_the_end=False) == []
        assert await stream.read(f"timestamp={int(time.time()) + 3600}", to_the_end=False) == []
    async with _connect(name, port) as client:  # another connection reads the same log
        assert await Stream(client, queue).read("first") == kept


def test_the_same_stream_scenario_on_both_brokers(where: Tuple[str, str]) -> None:
    name, queue = where

    async def main() -> None:
        if name == "fastframe":
            async with aio.Broker(port=0) as broker:
                await scenario(name, broker.port, queue)
        else:
            await scenario(name, BROKERS["rabbitmq"].port, queue)

    asyncio.run(asyncio.wait_for(main(), 60))
