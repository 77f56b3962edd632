"""subscribe(columns=True): a read's messages come as one fastframe.Columns (the in-memory broker).

The rows are the messages a plain subscription gets, in order; an ACK by a row's id settles it
at the broker; the bound on the queue pauses reading (it counts reads); what does not go with a
columnar subscription is refused before anything is sent.
"""

from __future__ import annotations

import asyncio
from typing import Any, List

import pytest

from fastframe import aio
from fastframe.protocol import LocalProtocolError, frames_of

COUNT = 2000


def bodies(items: List[Any]) -> List[bytes]:
    return [bytes(frame.body) for columns in items for frame in frames_of(columns)]


async def publish(port: int, destination: str, count: int) -> None:
    async with aio.connect("127.0.0.1", port, timeout=10) as producer:
        for n in range(count):
            producer.send_nowait(destination, b"%d" % n, {"x-n": str(n)})
        await producer.send(destination, b"", {"x-n": "end"}, receipt=True)


def test_the_rows_are_the_messages_in_order_and_a_row_acknowledges_them(run: Any) -> None:
    async def main() -> None:
        async with aio.Broker(port=0) as broker:
            async with aio.connect("127.0.0.1", broker.port, timeout=10) as client:
                sub = await client.subscribe("/queue/cols", ack="client", columns=True)
                assert type(sub) is aio.ColumnSubscription and sub.columns
                await publish(broker.port, "/queue/cols", COUNT)
                got: List[Any] = []
                while sum(columns.rows for columns in got) <= COUNT:
                    got.append(await sub.get(timeout=10))
                    got += sub.get_batch(100)
                assert all(type(columns).__name__ == "Columns" for columns in got)
                assert bodies(got) == [b"%d" % n for n in range(COUNT)] + [b""]
                last = got[-1]
                await client.ack(last.header(last.rows - 1, "ack"), subscription=sub.id, receipt=True)
            # acknowledged through the last row (ack=client): nothing comes again to a new subscriber
            async with aio.connect("127.0.0.1", broker.port, timeout=10) as again:
                plain = await again.subscribe("/queue/cols", ack="client")
                with pytest.raises(asyncio.TimeoutError):
                    await plain.get(timeout=0.3)

    run(main())


def test_a_consumer_that_does_not_take_pauses_reading(run: Any) -> None:
    async def main() -> None:
        async with aio.Broker(port=0) as broker:
            async with aio.connect("127.0.0.1", broker.port, timeout=10) as client:
                sub = await client.subscribe("/queue/slow", columns=True, max_queue=2)
                await publish(broker.port, "/queue/slow", COUNT)
                await asyncio.sleep(0.3)
                assert sub.inbox.paused  # two reads queued: the socket is not read further
                queued = len(sub)
                await asyncio.sleep(0.2)
                assert len(sub) == queued
                got: List[Any] = []
                while sum(columns.rows for columns in got) <= COUNT:
                    got.append(await sub.get(timeout=10))
                assert bodies(got) == [b"%d" % n for n in range(COUNT)] + [b""]

    run(main())


def test_what_does_not_go_with_columns_is_refused(run: Any) -> None:
    async def main() -> None:
        async with aio.Broker(port=0) as broker:
            hook = lambda direction, frame: None  # noqa: E731
            async with aio.connect("127.0.0.1", broker.port, frame_hook=hook, timeout=10) as hooked:
                with pytest.raises(ValueError, match="frame_hook"):
                    await hooked.subscribe("/queue/x", columns=True)
            async with aio.connect("127.0.0.1", broker.port, timeout=10) as client:
                await client.subscribe("/queue/x", columns=True)
                with pytest.raises(LocalProtocolError, match="must stay the connection's only one"):
                    await client.subscribe("/queue/y")
            async with aio.connect("127.0.0.1", broker.port, timeout=10) as client:
                await client.subscribe("/queue/y")
                with pytest.raises(LocalProtocolError, match="not the connection's only subscription"):
                    await client.subscribe("/queue/x", columns=True)
                assert len(client._subscriptions) == 1  # (the refused one is not left behind)

    run(main())


def test_a_reconnect_subscribes_again_as_columns(run: Any) -> None:
    from .fake_server import FakeServer

    async def main() -> None:
        async with FakeServer() as server:
            policy = aio.Reconnect(initial_delay=0.01, max_delay=0.05)
            async with aio.connect("127.0.0.1", server.port, reconnect=policy) as client:
                sub = await client.subscribe("/q", ack="client", columns=True)
                await client.send("/q", b"before", receipt=True)
                assert bodies([await sub.get(timeout=5)]) == [b"before"]
                server.connected[0].writer.transport.abort()  # the server drops us
                await server.wait_for(lambda: len(server.connected) == 2 and server.connected[1].subscriptions())
                await client.send("/q", b"after", receipt=True)
                columns = await sub.get(timeout=5)
                assert bodies([columns]) == [b"after"]
                assert client.session.conn._columnar is not None  # the new connection decodes columns too
                await client.ack(columns.header(0, "ack") or columns.header(0, "message-id"), subscription=sub.id)

    run(main())
