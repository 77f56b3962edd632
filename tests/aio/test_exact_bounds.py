"""Issue 32: a subscription's bound as documented: at most ``max_queue`` messages, plus the rest of
the socket read that filled the queue (a read is at most 256 KiB); twice ``max_queue`` (plus one
read) while a receipt is awaited. Then everything arrives, in order, and a server closing while the
queue is full loses nothing it sent."""

from __future__ import annotations

import asyncio

import pytest

from fastframe import aio

from .fake_server import FakeServer

READ = 256 * 1024  # the largest socket read (bytes)
BODY = 2048  # so one read holds at most READ // BODY messages


async def _settled(sub: aio.Subscription) -> int:
    held, last = -1, len(sub)
    while held != last:  # until nothing more comes
        await asyncio.sleep(0.2)
        held, last = len(sub), held
    return held


@pytest.mark.parametrize("during_a_receipt_wait", [False, True])
def test_a_flood_fills_the_queue_to_its_bound_plus_at_most_one_read(run, during_a_receipt_wait):
    async def main():
        async with FakeServer(answer_receipts=not during_a_receipt_wait) as server:
            client = await aio.connect("127.0.0.1", server.port, max_queue=50)
            sub = await client.subscribe("/flood", receipt=False)
            await server.wait_for(lambda: bool(server.connected and server.connected[0].open_subscriptions))
            waiting = None
            if during_a_receipt_wait:  # (its RECEIPT never comes: reading goes on to twice the bound)
                waiting = asyncio.ensure_future(client.send("/elsewhere", b"r", receipt=True, timeout=3))
                await asyncio.sleep(0.1)
            peer = server.connected[0]
            for n in range(2000):  # 4 MB: far more than the queue and the socket buffers hold
                peer.deliver(sub.id, b"%06d" % n + b"f" * (BODY - 6))
            held = await _settled(sub)
            bound = 100 if during_a_receipt_wait else 50
            assert bound <= held <= bound + READ // BODY, held
            assert not client.session.is_reading()
            got = [(await sub.get(timeout=5)).body[:6] for _ in range(2000)]
            assert got == [b"%06d" % n for n in range(2000)]
            if waiting is not None:
                with pytest.raises(asyncio.TimeoutError):
                    await waiting
            await client.close()

    run(main())


def test_a_server_closing_while_the_queue_is_full_loses_nothing_it_sent(run):
    async def main():
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port, max_queue=10)
            sub = await client.subscribe("/flood")
            peer = server.connected[0]
            for n in range(500):
                peer.deliver(sub.id, b"%04d" % n)
            assert await _settled(sub) >= 10
            peer.writer.close()  # the server goes away while the queue is full
            got = []
            with pytest.raises(aio.ConnectionClosedError):
                while True:
                    got.append((await sub.get(timeout=2)).body)
            assert got == [b"%04d" % n for n in range(500)]
            await client.close()

    run(main())
