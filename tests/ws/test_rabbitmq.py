"""Reconnecting over WebSocket through RabbitMQ Web-STOMP (ws://127.0.0.1:15674/ws) after the connection
drops, both clients. The drop is made by a TCP relay on 127.0.0.1 in front of the broker that aborts every
connection it carries (RabbitMQ 3.10's rabbitmqctl does not list Web-STOMP connections, so it cannot close
one; closing them all would close other programs' connections on the shared broker). Every other live
scenario runs over Web-STOMP in tests/interop and tests/sync (``rabbitmq-ws``)."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import List, Optional

import pytest

import fastframe.sync
from fastframe import aio
from interop._live import BROKERS, require_broker

pytestmark = pytest.mark.interop

BROKER = BROKERS["rabbitmq-ws"]


class Relay:
    """A TCP relay 127.0.0.1:port -> 127.0.0.1:15674 whose ``drop()`` aborts every connection it carries."""

    def __init__(self) -> None:
        self.port = 0
        self.links: List[asyncio.StreamWriter] = []
        self.server: Optional[asyncio.Server] = None

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._link, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", BROKER.port)
        self.links += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def drop(self) -> None:
        for writer in self.links:
            writer.transport.abort()
        self.links.clear()

    async def close(self) -> None:
        self.drop()
        if self.server is not None:
            self.server.close()


def queue() -> str:
    return f"/queue/ff-ws-reconnect-{os.urandom(4).hex()}"


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_the_asyncio_client_reconnects_and_resubscribes_over_websocket(version: str) -> None:
    require_broker(BROKER)
    destination = queue()

    async def main() -> List[bytes]:
        relay = Relay()
        await relay.start()
        try:
            client = await aio.connect(
                "ws://127.0.0.1:9/ws",  # nothing listens: the next server of the list is tried
                servers=[f"ws://127.0.0.1:{relay.port}/ws"],
                versions=(version,), heartbeat=(1000, 1000), timeout=10, connect_timeout=5,
                reconnect=aio.Reconnect(attempts=20, initial_delay=0.05, max_delay=0.5),
                **BROKER.options(version),
            )  # fmt: skip
            sub = await client.subscribe(destination)
            await client.send(destination, b"before\0drop", receipt=True)
            got = [(await sub.get(timeout=10)).body]
            relay.drop()
            for _ in range(200):  # the drop is seen, then the reconnect
                if client.connections == 2 and client.is_connected:
                    break
                await asyncio.sleep(0.05)
            assert client.connections == 2
            await client.send(destination, b"after\xffdrop", receipt=True)
            got.append((await sub.get(timeout=10)).body)
            await client.disconnect()
            return got
        finally:
            await relay.close()

    assert asyncio.run(asyncio.wait_for(main(), 60)) == [b"before\0drop", b"after\xffdrop"]


def test_the_blocking_client_reconnects_and_resubscribes_over_websocket() -> None:
    require_broker(BROKER)
    destination = queue()
    loop = asyncio.new_event_loop()
    relay = Relay()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(relay.start(), loop).result(10)
        with fastframe.sync.connect(
            f"ws://127.0.0.1:{relay.port}/ws", versions=("1.2",), heartbeat=(1000, 1000), timeout=10,
            reconnect=aio.Reconnect(attempts=20, initial_delay=0.05, max_delay=0.5), **BROKER.options("1.2"),
        ) as client:  # fmt: skip
            sub = client.subscribe(destination)
            client.send(destination, b"before", receipt=True)
            assert sub.get(timeout=10).body == b"before"
            loop.call_soon_threadsafe(relay.drop)
            for _ in range(200):
                if client.connections == 2 and client.is_connected:
                    break
                threading.Event().wait(0.05)
            assert client.connections == 2
            client.send(destination, b"after", receipt=True)
            assert sub.get(timeout=10).body == b"after"
    finally:
        asyncio.run_coroutine_threadsafe(relay.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
