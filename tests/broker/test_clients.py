"""Clients nobody here wrote (stomp.py, stompman, aiostomp) against the in-memory broker.

Each runs send/subscribe/ack/nack/receipt/transaction round trips with text and binary bodies and
headers that need escaping. Where a client deviates from the specification (see the peer notes in
``bench/codecs.py``), the test says so next to the assertion it shapes.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, Iterator, List

import pytest
from _broker_wire import Wire

from _extras import require
from fastframe.server import Broker

BINARY = bytes(range(256)) * 3  # NULs, high bytes, a fake frame end
ESCAPED = {"x-esc": "a:b\nc\\d\re", "x-colon": "12:30"}  # every 1.2 escape, and a raw colon


class BrokerThread:
    """The broker on its own event loop in a thread, for threaded clients."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.port = 0
        self.broker: Any = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.stop = asyncio.Event()
        async with Broker() as broker:
            self.broker, self.port = broker, broker.port
            self.ready.set()
            await self.stop.wait()

    def __enter__(self) -> BrokerThread:
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture()
def broker_thread() -> Iterator[BrokerThread]:
    with BrokerThread() as running:
        yield running


async def _raw_producer(port: int, frames: List[Dict[str, Any]]) -> None:
    """Send frames with fastframe's encoder (correct 1.2 escaping), then DISCONNECT with a receipt."""
    wire = await Wire.connected(port)
    for frame in frames:
        wire.frame("SEND", frame["headers"], frame["body"])
    wire.frame("DISCONNECT", {"receipt": "done"})
    assert [f.get("receipt-id") for f in await wire.until_eof()] == ["done"]
    await wire.close()


# ------------------------------------------------------------------------------------------ stomp.py


def test_stomp_py(broker_thread: BrokerThread) -> None:
    stomp = require("stomp", "bench")
    got: List[Any] = []
    receipts: List[str] = []
    errors: List[Any] = []
    arrived = threading.Condition()

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            with arrived:
                got.append(frame)
                arrived.notify_all()

        def on_receipt(self, frame: Any) -> None:
            with arrived:
                receipts.append(frame.headers["receipt-id"])
                arrived.notify_all()

        def on_error(self, frame: Any) -> None:
            errors.append(frame)

    def wait(predicate: Any) -> None:
        with arrived:
            assert arrived.wait_for(predicate, 10), (got, receipts, errors)

    # auto_decode=False keeps binary bodies as bytes (the default decodes to str with errors="replace")
    conn = stomp.Connection12([("127.0.0.1", broker_thread.port)], heartbeats=(0, 0), auto_decode=False, vhost="/")
    conn.set_listener("t", Listener())
    conn.connect("guest", "guest", wait=True)
    try:
        conn.subscribe("/queue/sp", id="s1", ack="client-individual", headers={"receipt": "sub"})
        wait(lambda: "sub" in receipts)
        # stomp.py's convert_frame does not escape header values: it may send only values without
        # LF, CR, ':' or '\'; what it receives it unescapes (see the escaping check below)
        conn.send("/queue/sp", "text café", headers={"x-plain": "v"}, receipt="r-text")
        conn.send("/queue/sp", BINARY, receipt="r-bin")
        wait(lambda: len(got) == 2 and {"r-text", "r-bin"} <= set(receipts))
        text, binary = got
        assert text.body == "text café".encode() and text.headers["x-plain"] == "v"
        assert binary.body == BINARY
        conn.ack(text.headers["ack"])
        conn.nack(binary.headers["ack"])  # back to the queue, redelivered
        wait(lambda: len(got) == 3)
        assert got[2].body == BINARY and got[2].headers["redelivered"] == "true"
        conn.ack(got[2].headers["ack"], receipt="r-ack")
        wait(lambda: "r-ack" in receipts)
        # escaped headers from a correct 1.2 producer reach stomp.py intact
        asyncio.run(
            _raw_producer(broker_thread.port, [{"headers": {"destination": "/queue/sp", **ESCAPED}, "body": b""}])
        )
        wait(lambda: len(got) == 4)
        assert {k: got[3].headers[k] for k in ESCAPED} == ESCAPED
        conn.ack(got[3].headers["ack"])
        # a transaction: nothing arrives before COMMIT, and ABORT discards
        tx = conn.begin()
        conn.send("/queue/sp", "in tx", transaction=tx)
        aborted = conn.begin()
        conn.send("/queue/sp", "aborted", transaction=aborted)
        conn.abort(aborted)
        conn.commit(tx, receipt="r-commit")
        wait(lambda: "r-commit" in receipts and len(got) == 5)
        assert got[4].body == b"in tx"
        conn.ack(got[4].headers["ack"])
        assert errors == []
    finally:
        conn.disconnect(receipt="bye")
    assert broker_thread.broker.core.stats()["unacked"] == 0


# ------------------------------------------------------------------------------------------ stompman


def test_stompman() -> None:
    stompman = require("stompman", "bench")

    async def test() -> None:
        async with Broker() as broker:
            got: List[Any] = []
            arrived = asyncio.Event()

            async def handler(frame: Any) -> None:
                got.append(frame)
                arrived.set()
                if frame.body == BINARY and frame.headers.get("redelivered") != "true":
                    await frame.nack()  # the first binary delivery goes back and comes again
                else:
                    await frame.ack()

            async def next_message(count: int) -> None:
                while len(got) < count:
                    arrived.clear()
                    await asyncio.wait_for(arrived.wait(), 5)

            servers = [stompman.ConnectionParameters(host="127.0.0.1", port=broker.port, login="u", passcode="p")]
            options: Dict[str, Any] = {"heartbeat": stompman.Heartbeat(0, 0)}
            async with stompman.Client(servers, **options) as consumer, stompman.Client(servers, **options) as producer:
                sub = await consumer.subscribe_with_manual_ack(
                    "/queue/sm", handler, ack="client-individual", receipt_timeout=5
                )
                # stompman escapes header values itself; receipt_timeout makes it wait for the RECEIPT
                await producer.send(b"text \xe2\x98\x83", "/queue/sm", headers=dict(ESCAPED), receipt_timeout=5)
                await producer.send(BINARY, "/queue/sm", receipt_timeout=5)
                await next_message(3)
                assert got[0].body == b"text \xe2\x98\x83" and [f.body for f in got[1:]] == [BINARY, BINARY]
                # stompman's serde escapes LF, ':' and '\\' but drops CR from values it sends
                # (HEADER_ESCAPE_CHARS maps "\r" to ""): the broker gets, and forwards, the value without it
                expected = {k: v.replace("\r", "") for k, v in ESCAPED.items()}
                assert {k: got[0].headers[k] for k in ESCAPED} == expected
                assert got[2].headers["redelivered"] == "true"
                async with producer.begin() as transaction:
                    await transaction.send(b"in tx", "/queue/sm")
                    await asyncio.sleep(0.05)
                    assert len(got) == 3  # held until COMMIT
                await next_message(4)
                assert got[3].body == b"in tx"
                await sub.unsubscribe()
            await asyncio.sleep(0.05)
            assert broker.core.stats()["unacked"] == 0 and broker.core.stats()["sessions"] == 0

    asyncio.run(asyncio.wait_for(test(), 20))


# ------------------------------------------------------------------------------------------ aiostomp


def test_aiostomp() -> None:
    aiostomp = require("aiostomp", "bench")

    async def test() -> None:
        async with Broker() as broker:
            got: List[Any] = []
            arrived = asyncio.Event()
            errors: List[Any] = []

            async def handler(frame: Any, body: Any) -> bool:
                got.append((frame, body))
                arrived.set()
                # aiostomp ACKs when the handler returns True, NACKs on False: the first binary goes back
                return not (body is not None and bytes(body) == BINARY and frame.headers["redelivered"] == "false")

            async def next_message(count: int) -> None:
                while len(got) < count:
                    arrived.clear()
                    await asyncio.wait_for(arrived.wait(), 5)

            async def on_error(error: Any) -> None:
                errors.append(error)

            client = aiostomp.AioStomp(
                "127.0.0.1", broker.port, heartbeat=False, error_handler=on_error, reconnect_max_attempts=1
            )
            await client.connect("u", "p")
            client.subscribe("/queue/as", ack="client-individual", handler=handler)
            await asyncio.sleep(0.05)  # aiostomp's subscribe has no receipt to wait for
            # aiostomp's build_frame escapes nothing either: plain values only
            client.send("/queue/as", b"text body", headers={"x-plain": "v"})
            client.send("/queue/as", BINARY)
            await next_message(3)
            (first, first_body), (second, second_body), (again, again_body) = got
            assert bytes(first_body) == b"text body" and first.headers["x-plain"] == "v"
            assert bytes(second_body) == BINARY == bytes(again_body) and again.headers["redelivered"] == "true"
            await _raw_producer(
                broker.port, [{"headers": {"destination": "/queue/as", "x-colon": "12:30"}, "body": b""}]
            )
            await next_message(4)
            # aiostomp unescapes values; an empty body comes back as None (its documented deviation)
            assert got[3][0].headers["x-colon"] == "12:30" and got[3][1] in (None, b"")
            await asyncio.sleep(0.05)
            assert broker.core.stats()["unacked"] == 0 and errors == []
            client.close()
            await asyncio.sleep(0.05)

    asyncio.run(asyncio.wait_for(test(), 20))
