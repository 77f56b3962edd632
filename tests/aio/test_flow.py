"""Heart-beats beside user code, and bounded queues that pause reading."""

from __future__ import annotations

import asyncio
import time

import pytest

from fastframe import aio

from .fake_server import FakeServer


def test_slow_handlers_do_not_cause_a_false_heartbeat_timeout(run):
    async def main():
        async with FakeServer(heartbeat=(50, 50)) as server:
            async with aio.connect("127.0.0.1", server.port, heartbeat=(50, 50), max_queue=2) as client:
                assert client.session.conn.heartbeat == (50, 50)
                sub = await client.subscribe("/q")
                for n in range(6):
                    await client.send("/q", str(n))
                async for message in sub:
                    await asyncio.sleep(0.2)  # a slow consumer: 4 x the grace, and the queue stays full
                    time.sleep(0.2)  # a handler that blocks the loop itself
                    if message.body == b"5":
                        break
                assert client.is_connected
                await client.send("/q", receipt=True)
            assert server.peers[0].beats > 0  # our beats kept the server happy meanwhile

    run(main())


def test_a_silent_server_is_a_heartbeat_timeout(run):
    async def main():
        async with FakeServer(heartbeat=(50, 0), send_beats=False) as server:
            client = await aio.connect("127.0.0.1", server.port, heartbeat=(0, 50))
            sub = await client.subscribe("/q")
            with pytest.raises(aio.HeartbeatTimeout):
                await sub.get(timeout=10)
            with pytest.raises(aio.HeartbeatTimeout):
                await client.send("/q")
            await client.close()

    run(main())


def test_a_full_queue_pauses_reading_and_a_drained_one_resumes(run):
    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, max_queue=4) as client:
                sub = await client.subscribe("/q")
                peer = server.connected[0]
                for n in range(200):
                    peer.deliver(sub.id, b"x" * 1000 + str(n).encode())
                await server.wait_for(lambda: not client.session.is_reading())
                await asyncio.sleep(0.05)
                held = len(sub)
                assert 4 <= held < 200  # bounded: the rest waits in the socket, not in memory
                assert client.session.transport.get_write_buffer_size() == 0
                bodies = [(await sub.get(timeout=5)).body for _ in range(200)]
                assert bodies[-1].endswith(b"199") and len(set(bodies)) == 200
                await server.wait_for(client.session.is_reading, 1.0)  # (after a rest of coalesce_reads)

    run(main())


def test_get_batch_and_get_nowait_take_in_order_without_waiting_and_resume_reading(run):
    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, max_queue=8) as client:
                sub = await client.subscribe("/q")
                assert sub.get_batch(5) == []  # nothing queued: no wait
                with pytest.raises(asyncio.QueueEmpty):
                    sub.get_nowait()
                peer = server.connected[0]
                for n in range(40):
                    peer.deliver(sub.id, b"x" * 1000 + str(n).encode())
                await server.wait_for(lambda: not client.session.is_reading())
                held = len(sub)
                assert 8 <= held < 40
                first = sub.get_batch(3)
                assert [m.body[1000:] for m in first] == [b"0", b"1", b"2"] and len(sub) == held - 3
                if len(sub) > 4:
                    assert not client.session.is_reading()  # more than half still queued: still paused
                fourth = sub.get_nowait()
                assert fourth.body[1000:] == b"3" and len(sub) == held - 4
                bodies = [m.body for m in first + [fourth] + sub.get_batch(held)]  # the rest, past the limit asked
                assert len(sub) == 0 and len(bodies) == held
                await server.wait_for(client.session.is_reading, 1.0)  # drained: reading resumes
                while len(bodies) < 40:
                    bodies.append((await sub.get(timeout=5)).body)
                assert [int(b[1000:]) for b in bodies] == list(range(40))  # in order, none lost

    run(main())


def test_queues_are_per_subscription(run):
    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, max_queue=100) as client:
                small = await client.subscribe("/a", max_queue=1)
                big = await client.subscribe("/b")
                peer = server.connected[0]
                peer.deliver(big.id, b"b1")
                peer.deliver(small.id, b"a1")
                await server.wait_for(lambda: not client.session.is_reading())
                assert (await big.get(timeout=5)).body == b"b1"
                assert not client.session.is_reading()  # the small queue is still full
                assert (await small.get(timeout=5)).body == b"a1"
                assert client.session.is_reading()

    run(main())


def test_ack_with_receipt_inside_async_for_over_a_full_queue(run):
    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, max_queue=4) as client:
                sub = await client.subscribe("/q", ack="client-individual")
                for n in range(8):  # the broker pushes all 8: the RECEIPT comes behind 4 unread ones
                    server.connected[0].deliver(sub.id, b"m%d" % n)
                await server.wait_for(lambda: not client.session.is_reading())
                message = await sub.get(timeout=5)
                await message.ack(receipt=True, timeout=5)  # reading resumed for the receipt
                assert message.body == b"m0" and len(sub) == 7
                await server.wait_for(lambda: not client.session.is_reading())  # full again: paused

    run(main())


def test_a_receipt_wait_never_lifts_the_hard_bound(run):
    async def main():
        async with FakeServer(answer_receipts=False) as server:
            async with aio.connect("127.0.0.1", server.port, max_queue=4) as client:
                sub = await client.subscribe("/q", receipt=False)
                await server.wait_for(lambda: server.connected[0].open_subscriptions)
                for _ in range(300):
                    server.connected[0].deliver(sub.id, b"y" * 1000)
                await server.wait_for(lambda: not client.session.is_reading())
                with pytest.raises(asyncio.TimeoutError):
                    await client.send("/other", receipt=True, timeout=0.5)  # reads on, up to 2 x max_queue
                held = len(sub)
                assert not client.session.is_reading() and 8 <= held < 300  # 2 x max_queue, plus one read
            # leaving the block disconnects: the RECEIPT is read past the full queue, no hang,
            # and what arrives meanwhile is not queued past the hard bound
            assert len(sub) == held

    run(main())


def test_heartbeats_both_ways_are_seen_by_the_frame_hook(run):
    async def main():
        seen = []
        async with FakeServer(heartbeat=(30, 30)) as server:
            hook = lambda direction, frame: seen.append((direction, frame))  # noqa: E731
            async with aio.connect("127.0.0.1", server.port, heartbeat=(30, 30), frame_hook=hook) as client:
                await server.wait_for(lambda: ("in", None) in seen and ("out", None) in seen and server.peers[0].beats)
                assert client.is_connected
        assert [f.command for d, f in seen if d == "out" and f is not None] == ["CONNECT", "DISCONNECT"]

    run(main())
