"""Expiry, redelivery, dead-lettering and prefetch: the same assertions against the live broker and the
in-memory one configured as the server guide says to stand in for it.

Measured (RabbitMQ 3.10, ActiveMQ 5.17) and asserted here:

* RabbitMQ drops a message whose ``expiration`` (a TTL in ms) ran out, or dead-letters it to the
  queue's ``x-dead-letter-exchange`` (with ``x-first-death-reason:expired``); ``expires`` means nothing
  to it. ActiveMQ drops a message whose ``expires`` (ms since the epoch, ``0``: never) passed, or,
  sent ``persistent:true``, moves it to ``/queue/ActiveMQ.DLQ`` (with ``original-destination``);
  ``expiration`` means nothing to it. (The in-memory broker honours both headers, whoever it stands
  for: the one difference, documented in the server guide.)
* A NACK: RabbitMQ redelivers (``redelivered:true``), and dead-letters on ``requeue:false``
  (``x-first-death-reason:rejected``); ActiveMQ moves the message to ``ActiveMQ.DLQ`` at once.
  A message left unacknowledged by a lost connection comes again with ``redelivered:true`` from both
  (from ActiveMQ without end: nine times in a row measured, none dead-lettered).
* ``prefetch-count`` (RabbitMQ) and ``activemq.prefetchSize`` (ActiveMQ) bound the unacknowledged
  messages of a subscription.

The in-memory broker runs each scenario twice: as RabbitMQ (its defaults) and as ActiveMQ
(``dead_letter="/queue/ActiveMQ.DLQ"``, ``requeue_on_nack=False``). Locally a live broker that is down
skips its half; with ``CI=true`` it fails.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from typing import Any, Iterator, List, Tuple

import pytest
from _broker_wire import Wire

from fastframe.testing import TestBroker
from interop._live import BROKERS, IN_CI, require_broker

LIVE_PORTS = {BROKERS["rabbitmq"].port, BROKERS["activemq"].port}
LOGIN = "login:guest\npasscode:guest\n"
AS_ACTIVEMQ = {"dead_letter": "/queue/ActiveMQ.DLQ", "requeue_on_nack": False}
_rabbit_queues: List[str] = []


@pytest.fixture(scope="module", autouse=True)
def _delete_rabbitmq_queues() -> Iterator[None]:
    """RabbitMQ keeps a STOMP client's queues: the ones these tests made are deleted at the end (not in
    CI, whose broker goes with the run: rabbitmqctl takes seconds)."""
    yield
    ctl = shutil.which("rabbitmqctl")
    if ctl is None or not _rabbit_queues or IN_CI:
        return
    names = ",".join(f'<<"{name}">>' for name in _rabbit_queues)
    code = (
        f'[case rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, N)) of {{ok, Q}} -> '
        f'rabbit_amqqueue:delete(Q, false, false, <<"fastframe-tests">>); O -> O end || N <- [{names}]].'
    )
    subprocess.run([ctl, "-q", "eval", code], capture_output=True, timeout=60)


@pytest.fixture(
    params=[("rabbitmq", "rabbitmq"), ("fastframe", "rabbitmq"), ("activemq", "activemq"), ("fastframe", "activemq")],
    ids=["rabbitmq", "fastframe-as-rabbitmq", "activemq", "fastframe-as-activemq"],
)
def where(request: pytest.FixtureRequest) -> Iterator[Tuple[str, int]]:
    """``(the broker stood for, its port)``: the live one, or the in-memory one configured as it."""
    real, kind = request.param
    if real == "fastframe":
        with TestBroker(**(AS_ACTIVEMQ if kind == "activemq" else {})) as broker:
            yield kind, broker.port
        return
    require_broker(BROKERS[real])
    yield kind, BROKERS[real].port


def queue(kind: str, what: str) -> str:
    name = f"ff-{what}-{os.urandom(4).hex()}"
    if kind == "rabbitmq":
        _rabbit_queues.append(name)
    return name


async def frames_until_quiet(wire: Wire) -> List[Any]:
    """Every frame that comes until none does for a while (0.5 s from a live broker, 0.2 s from ours)."""
    quiet = 0.5 if wire.writer.get_extra_info("peername")[1] in LIVE_PORTS else 0.2
    got: List[Any] = []
    while True:
        try:
            got += await wire.read(1, timeout=quiet)
        except asyncio.TimeoutError:
            return got


async def next_with_body(wire: Wire, body: bytes, timeout: float = 10.0) -> Any:
    """The first frame with this body (others are skipped: ActiveMQ.DLQ holds other runs' letters)."""
    deadline = time.monotonic() + timeout
    while True:
        (frame,) = await wire.read(1, timeout=max(0.1, deadline - time.monotonic()))
        if frame.body == body:
            return frame


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_expired_messages_are_not_delivered(where: Tuple[str, int]) -> None:
    kind, port = where

    async def main() -> None:
        wire = await Wire.connected(port, headers=LOGIN)
        name = queue(kind, "expiry")
        now = int(time.time() * 1000)
        if kind == "rabbitmq":
            sends = [("gone", "expiration", "100"), ("kept", "expiration", "60000")]
        else:
            sends = [("gone", "expires", str(now - 1000)), ("soon", "expires", str(now + 100))]
            sends += [("kept", "expires", str(now + 60_000)), ("never", "expires", "0")]
        for body, header, value in sends:
            wire.frame("SEND", (("destination", f"/queue/{name}"), (header, value)), body.encode())
        wire.frame("SEND", (("destination", f"/queue/{name}"), ("receipt", "r")), b"plain")
        (receipt,) = await wire.read(1)
        assert receipt.command == "RECEIPT"
        await asyncio.sleep(0.3)  # (the shortest lives are 100 ms)
        wire.frame("SUBSCRIBE", (("id", "s"), ("destination", f"/queue/{name}")))
        expected = [b"kept", b"plain"] if kind == "rabbitmq" else [b"kept", b"never", b"plain"]
        got = await wire.read(len(expected))  # (each within 10 s: a loaded broker is slow) and no more
        got += await frames_until_quiet(wire)
        assert [f.body for f in got] == expected
        assert got[0].get("expiration" if kind == "rabbitmq" else "expires") is not None
        await wire.close()

    run(main())


def test_expired_messages_are_dead_lettered(where: Tuple[str, int]) -> None:
    kind, port = where

    async def main() -> None:
        wire = await Wire.connected(port, headers=LOGIN)
        name, body = queue(kind, "ttl"), os.urandom(6).hex().encode()
        if kind == "rabbitmq":
            dead = queue(kind, "dead")
            wire.frame("SUBSCRIBE", (("id", "d"), ("destination", f"/queue/{dead}")))
            declare = (("x-message-ttl", "200"), ("x-dead-letter-exchange", ""), ("x-dead-letter-routing-key", dead))
            wire.frame("SUBSCRIBE", (("id", "s"), ("destination", f"/queue/{name}"), *declare))
            wire.frame("UNSUBSCRIBE", (("id", "s"), ("receipt", "r")))
            await wire.read(1)
            wire.frame("SEND", (("destination", f"/queue/{name}"),), body)
        else:
            wire.frame("SUBSCRIBE", (("id", "d"), ("destination", "/queue/ActiveMQ.DLQ"), ("receipt", "r")))
            await wire.read(1)
            expires = str(int(time.time() * 1000) + 200)
            wire.frame("SEND", (("destination", f"/queue/{name}"), ("expires", expires), ("persistent", "true")), body)
            await asyncio.sleep(0.4)  # (ActiveMQ finds it expired when it would dispatch it, or every 30 s)
            wire.frame("SUBSCRIBE", (("id", "s"), ("destination", f"/queue/{name}")))
        letter = await next_with_body(wire, body)
        if kind == "rabbitmq":
            assert letter.get("x-first-death-reason") == "expired" and letter.get("x-first-death-queue") == name
        else:
            assert letter.get("original-destination") == f"/queue/{name}"
        await wire.close()

    run(main())


def test_nack_and_disconnect(where: Tuple[str, int]) -> None:
    kind, port = where

    async def main() -> None:
        name, body = queue(kind, "nack"), os.urandom(6).hex().encode()
        watcher = await Wire.connected(port, headers=LOGIN)
        dead = queue(kind, "dead") if kind == "rabbitmq" else "ActiveMQ.DLQ"
        declare: Tuple[Tuple[str, str], ...] = ()
        if kind == "rabbitmq":
            declare = (("x-dead-letter-exchange", ""), ("x-dead-letter-routing-key", dead))
        watcher.frame("SUBSCRIBE", (("id", "d"), ("destination", f"/queue/{dead}"), ("receipt", "r")))
        await watcher.read(1)
        wire = await Wire.connected(port, headers=LOGIN)
        sub = (("id", "s"), ("destination", f"/queue/{name}"), ("ack", "client-individual"), *declare)
        wire.frame("SUBSCRIBE", sub)
        for n in (b"1", b"2"):
            wire.frame("SEND", (("destination", f"/queue/{name}"), ("persistent", "true")), body + n)
        first, second = await wire.read(2)
        wire.frame("NACK", (("id", first.get("ack")),))
        if kind == "rabbitmq":  # redelivered; with requeue:false dead-lettered
            (again,) = await wire.read(1)
            assert again.body == body + b"1" and again.get("redelivered") == "true"
            wire.frame("NACK", (("id", again.get("ack")), ("requeue", "false")))
            letter = await next_with_body(watcher, body + b"1")
            assert letter.get("x-first-death-reason") == "rejected"
        else:  # to ActiveMQ.DLQ at once
            letter = await next_with_body(watcher, body + b"1")
            assert letter.get("original-destination") == f"/queue/{name}"
            assert await frames_until_quiet(wire) == []
        await wire.close()  # the second, unacknowledged, comes again
        other = await Wire.connected(port, headers=LOGIN)
        other.frame(
            "SUBSCRIBE", (("id", "s"), ("destination", f"/queue/{name}"), ("ack", "client-individual"), *declare)
        )
        (again,) = await other.read(1)
        assert again.body == body + b"2" and again.get("redelivered") == "true"
        other.frame("ACK", (("id", again.get("ack")), ("receipt", "a")))
        await other.read(1)
        await other.close()
        await watcher.close()

    run(main())


def test_prefetch_bounds_the_unacknowledged(where: Tuple[str, int]) -> None:
    kind, port = where
    header = "prefetch-count" if kind == "rabbitmq" else "activemq.prefetchSize"

    async def main() -> None:
        wire = await Wire.connected(port, headers=LOGIN)
        name = queue(kind, "prefetch")
        for n in range(5):
            wire.frame("SEND", (("destination", f"/queue/{name}"),), b"m%d" % n)
        wire.frame(
            "SUBSCRIBE", (("id", "s"), ("destination", f"/queue/{name}"), ("ack", "client-individual"), (header, "2"))
        )
        got = await wire.read(2)  # (each within 10 s: a loaded broker is slow) and no more
        got += await frames_until_quiet(wire)
        assert [f.body for f in got] == [b"m0", b"m1"]
        wire.frame("ACK", (("id", got[0].get("ack")),))
        more = await wire.read(1)
        more += await frames_until_quiet(wire)
        assert [f.body for f in more] == [b"m2"]
        for frame in (got[1], more[0]):
            wire.frame("ACK", (("id", frame.get("ack")),))
        assert [f.body for f in await wire.read(2) + await frames_until_quiet(wire)] == [b"m3", b"m4"]
        await wire.close()

    run(main())
