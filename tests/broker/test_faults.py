"""The broker facing bad input and its own handler's failures: every connection ends with an
ERROR (after the answers to what came before), and no exception ever reaches the event loop."""

from __future__ import annotations

import asyncio
import logging
import random
from pathlib import Path
from typing import Any, Awaitable, Callable, List

import pytest
from _broker_wire import Wire

import fastframe
from fastframe.server import Broker, serve


def run_watched(test: Callable[[], Awaitable[None]], timeout: float = 60.0) -> List[Any]:
    """Run ``test`` with a loop exception handler that records what reached the loop (returned)."""
    reached: List[Any] = []

    async def bounded() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reached.append(context))
        await asyncio.wait_for(test(), timeout)

    asyncio.run(bounded())
    return reached


def test_frames_before_bad_bytes_are_answered_then_the_error_then_the_close() -> None:
    async def test() -> None:
        async with Broker() as broker:
            wire = await Wire.connected(broker.port)
            head = len(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
            good = b"SEND\ndestination:/queue/f\nreceipt:r1\n\none\0SUBSCRIBE\nid:s\ndestination:/queue/f\nreceipt:r2\n\n\0"
            wire.write(good + b"SEND\ndestination:/queue/f\nbad\n\n\0")
            frames = await wire.until_eof()
            assert [f.get("receipt-id") for f in frames if f.command == "RECEIPT"] == ["r1", "r2"]
            assert frames[-1].command == "ERROR" and frames[-1].get("message") == "Malformed frame"
            offset = head + len(good) + len(b"SEND\ndestination:/queue/f\n")
            assert f"at offset {offset} " in frames[-1].body.decode()
            # and the stored "one" reached the subscription made before the bad bytes
            assert [f.body for f in frames if f.command == "MESSAGE"] == [b"one"]
            await wire.close()

    assert run_watched(test) == []


def test_a_handler_that_raises_ends_its_connection_with_an_error_not_the_loop(caplog) -> None:
    class Faulty:
        def connection_made(self, conn: Any) -> None:
            pass

        def frame_received(self, conn: Any, frame: Any) -> None:
            if frame.command == "CONNECT":
                conn.accept("1.2")
            else:
                raise KeyError("a bug in the handler")

        def connection_lost(self, conn: Any, cause: Any) -> None:
            raise RuntimeError("and another one")

    async def test() -> None:
        server = await serve(Faulty())
        async with server:
            wire = await Wire.connected(server.port)
            wire.write(b"SEND\ndestination:/q\n\n\0")
            (error,) = await wire.until_eof()
            assert error.command == "ERROR" and error.get("message") == "Internal error"
            assert b"KeyError" in error.body
            await wire.close()
            other = await Wire.connected(server.port)  # the server goes on
            await other.close()

    with caplog.at_level(logging.ERROR, logger="fastframe.server"):
        assert run_watched(test) == []
    assert "a bug in the handler" in caplog.text and "and another one" in caplog.text


def _client_streams(corpus: Path) -> List[bytes]:
    return [path.read_bytes() for path in sorted(corpus.glob("rabbitmq/*.c2s.stomp"))]


def test_mutated_client_streams_in_random_pieces_never_reach_the_loop(corpus_dir, caplog) -> None:
    # bounded: 300 mutated real client streams, up to three connections at once, each a few seconds at most
    rng = random.Random(1919)
    streams = _client_streams(corpus_dir)
    assert streams

    async def one(port: int, data: bytes) -> None:
        wire = await Wire.open(port)
        for start, end in _cuts(rng, len(data)):
            wire.write(data[start:end])
            await asyncio.sleep(0)
        try:
            await asyncio.wait_for(wire.until_eof(timeout=2.0), 3.0)
        except (asyncio.TimeoutError, fastframe.DecodeError, AssertionError):
            pass  # a valid-looking stream the broker keeps open, or garbage the test's decoder refuses
        await wire.close()

    async def test() -> None:
        async with Broker(users={"guest": "guest"}, frame_timeout=1.0, handshake_timeout=1.0) as broker:
            for _ in range(100):
                inputs = [_mutate(rng, rng.choice(streams)) for _ in range(3)]
                await asyncio.gather(*(one(broker.port, data) for data in inputs))
                healthy = await Wire.connected(broker.port, headers="login:guest\npasscode:guest\n")
                healthy.write(b"SEND\ndestination:/queue/h\nreceipt:ok\n\n\0")
                assert (await healthy.read(1))[0].get("receipt-id") == "ok"
                await healthy.close()

    with caplog.at_level(logging.ERROR, logger="fastframe.server"):
        assert run_watched(test, timeout=240.0) == []
    assert "failed; the connection is closed" not in caplog.text  # the broker never failed on its own


def _mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(0, 4)):
        kind = rng.random()
        at = rng.randrange(len(out) + 1)
        if kind < 0.4 and out:
            out[min(at, len(out) - 1)] = rng.choice(b"\0\n\r:\\xAZ\xff")
        elif kind < 0.7:
            out[at:at] = bytes(rng.choice(b"\0\n:\\ab") for _ in range(rng.randint(1, 4)))
        elif out:
            del out[at : at + rng.randint(1, 8)]
    return bytes(out)


def _cuts(rng: random.Random, size: int) -> List[Any]:
    points = sorted(rng.sample(range(1, size), min(size - 1, rng.randint(0, 6)))) if size > 1 else []
    edges = [0, *points, size]
    return list(zip(edges, edges[1:]))


@pytest.mark.parametrize("pieces", [1, 3])
def test_the_error_is_the_last_frame_whatever_the_pieces(pieces) -> None:
    async def test() -> None:
        async with Broker() as broker:
            wire = await Wire.connected(broker.port)
            data = b"BEGIN\ntransaction:t\nreceipt:b\n\n\0COMMIT\ntransaction:t\nreceipt:c\n\n\0SEND\nno-colon\n\n\0"
            step = -(-len(data) // pieces)
            for start in range(0, len(data), step):
                wire.write(data[start : start + step])
                await asyncio.sleep(0.01)
            frames = await wire.until_eof()
            assert [f.command for f in frames] == ["RECEIPT", "RECEIPT", "ERROR"]
            await wire.close()

    assert run_watched(test) == []
