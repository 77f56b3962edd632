"""Servers that misbehave on purpose, beyond the everyday faults: an ERROR in the middle of a
stream, a close inside a frame under ``reconnect=``, old-version escaping, and mutated real broker
streams. Nothing may reach the event loop; every end is a clear error after what was complete."""

from __future__ import annotations

import asyncio
import random
from typing import Any, List

import pytest

from fastframe import aio

from .fake_server import FakeServer


def run_watched(run, coro) -> List[Any]:
    """Run ``coro`` and return what reached the loop's exception handler."""
    reached: List[Any] = []

    async def watched() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reached.append(context))
        await coro

    run(watched())
    return reached


def test_an_error_frame_while_a_subscription_streams(run):
    async def main():
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port)
            sub = await client.subscribe("/stream")
            peer = server.connected[0]
            for n in range(5):
                peer.deliver(sub.id, b"%d" % n)
            peer.write(b"ERROR\nmessage:queue deleted\ncontent-type:text/plain\n\nthe queue went away\0")
            got = []
            with pytest.raises(aio.ServerError) as info:
                async for message in sub:
                    got.append(message.body)
            assert got == [b"0", b"1", b"2", b"3", b"4"]  # everything before the ERROR, then the ERROR
            assert info.value.message == "queue deleted" and info.value.frame.body == b"the queue went away"
            with pytest.raises(aio.ServerError):
                await client.send("/q", receipt=True)
            assert not client.is_connected
            await client.close()

    assert run_watched(run, main()) == []


def test_reconnect_after_a_close_inside_a_frame(run):
    async def main():
        async with FakeServer() as server:
            policy = aio.Reconnect(initial_delay=0.01, max_delay=0.05)
            async with aio.connect("127.0.0.1", server.port, reconnect=policy) as client:
                sub = await client.subscribe("/mid", receipt=True)
                peer = server.connected[0]
                peer.deliver(sub.id, b"whole")
                peer.write(b"MESSAGE\ndestination:/mid\nmessage-id:cut\nsubscription:" + sub.id.encode() + b"\n\nhal")
                await peer.writer.drain()
                peer.writer.close()
                assert (await sub.get(timeout=5)).body == b"whole"
                await server.wait_for(lambda: len(server.connected) == 2 and server.connected[1].subscriptions())
                server.connected[1].deliver(sub.id, b"after")
                assert (await sub.get(timeout=5)).body == b"after"  # the half frame never shows
                assert client.connections == 2

    assert run_watched(run, main()) == []


@pytest.mark.parametrize(
    ("version", "wire", "value"),
    [
        ("1.0", b"a\\cb\\nc", "a\\cb\\nc"),  # 1.0 has no escapes: backslashes stay
        ("1.1", b"a\\cb\\nc\\\\", "a:b\nc\\"),  # 1.1: \c \n \\
        ("1.2", b"a\\cb\\r\\n", "a:b\r\n"),  # 1.2 adds \r
    ],
)
def test_a_server_of_each_version_escapes_its_own_way(run, version, wire, value):
    async def main():
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port, versions=(version,))
            assert client.version == version
            sub = await client.subscribe("/esc", receipt=version != "1.0")
            peer = server.connected[0]
            peer.write(
                b"MESSAGE\ndestination:/esc\nmessage-id:1\nsubscription:"
                + sub.id.encode()
                + b"\nk:"
                + wire
                + b"\n\nx\0"
            )
            message = await sub.get(timeout=5)
            assert message.get("k") == value
            await client.close()

    run(main())


def test_a_1_1_server_sending_a_1_2_escape_is_a_clear_error(run):
    async def main():
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port, versions=("1.1",))
            sub = await client.subscribe("/esc")
            server.connected[0].write(
                b"MESSAGE\ndestination:/esc\nmessage-id:1\nsubscription:" + sub.id.encode() + b"\nk:a\\rb\n\nx\0"
            )
            with pytest.raises(aio.ConnectionClosedError, match="escape"):
                await sub.get(timeout=5)
            await client.close()

    assert run_watched(run, main()) == []


def test_mutated_real_broker_streams_end_cleanly(run, corpus_dir):
    # 120 real RabbitMQ server streams, mutated and written in random pieces to a connected client
    rng = random.Random(2024)
    streams = [p.read_bytes() for p in sorted(corpus_dir.glob("rabbitmq/*.s2c.stomp"))]
    assert streams

    async def one(data: bytes) -> None:
        done = asyncio.get_running_loop().create_future()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await reader.readuntil(b"\0")
                cut = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 5))))
                for start, end in zip([0, *cut], [*cut, len(data)]):
                    writer.write(data[start:end])
                    await asyncio.sleep(0)
                await asyncio.sleep(0.05)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass  # the client gave up first
            finally:
                writer.close()
                if not done.done():
                    done.set_result(None)

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            client = await aio.connect("127.0.0.1", port, connect_timeout=2, timeout=2)
        except (aio.ConnectionClosedError, asyncio.TimeoutError):
            pass  # refused, cut, or no CONNECTED: a clear error
        else:
            cause = await asyncio.wait_for(client.wait_closed(), 5)
            assert cause is None or isinstance(cause, aio.ConnectionClosedError)
            await client.close()
        await asyncio.wait_for(done, 5)
        server.close()
        await server.wait_closed()

    async def main():
        for _ in range(120):
            data = bytearray(rng.choice(streams))
            for _ in range(rng.randint(0, 3)):
                at = rng.randrange(len(data))
                data[at : at + rng.randint(0, 2)] = bytes(rng.choice(b"\0\n:\\x") for _ in range(rng.randint(0, 2)))
            await one(bytes(data))

    assert run_watched(run, main()) == []
