"""Issue 32: a subscription's queue holds exactly its bound, whatever one socket read brings: the
rest of the read that filled it waits in the session, decoded, until reading resumes (nothing read
is lost)."""

from __future__ import annotations

import asyncio

import pytest

from fastframe import aio

from .fake_server import FakeServer


async def _settled(sub: aio.Subscription) -> int:
    held, last = -1, len(sub)
    while held != last:  # until nothing more comes
        await asyncio.sleep(0.2)
        held, last = len(sub), held
    return held


@pytest.mark.parametrize("during_a_receipt_wait", [False, True])
def test_a_flood_of_small_messages_fills_the_queue_to_its_bound_and_not_one_more(run, during_a_receipt_wait):
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
            for n in range(3000):  # 30 B each: one read holds hundreds
                peer.deliver(sub.id, b"%06d" % n)
            held = await _settled(sub)
            assert held == (100 if during_a_receipt_wait else 50)
            got = [(await sub.get(timeout=5)).body for _ in range(3000)]
            assert got == [b"%06d" % n for n in range(3000)]
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
            assert await _settled(sub) == 10
            peer.writer.close()  # the server goes away while the queue is full
            got = []
            with pytest.raises(aio.ConnectionClosedError):
                while True:
                    got.append((await sub.get(timeout=2)).body)
            assert got == [b"%04d" % n for n in range(500)]  # what waited in the session, then the socket
            await client.close()

    run(main())
