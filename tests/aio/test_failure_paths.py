"""The client's failure paths: what each failed request leaves at the broker, in the protocol
connection and in the transport (the rule in :func:`fastframe.aio.connect`'s docstring)."""

from __future__ import annotations

import asyncio

import pytest

from fastframe import aio
from fastframe.protocol import Unsubscribe

from .fake_server import FakeServer


async def _delivered_while_subscribing(server, client, count, **options):
    """Start a subscribe whose RECEIPT never comes; deliver ``count`` messages to it meanwhile."""
    task = asyncio.get_running_loop().create_task(client.subscribe("/slow", **options))
    await server.wait_for(lambda: server.connected and server.connected[0].subscriptions())
    peer = server.connected[0]
    sub_id = peer.subscriptions()[-1].id
    for n in range(count):
        peer.deliver(sub_id, f"m{n}".encode())
    return task, peer


def test_a_timed_out_subscribe_unsubscribes_and_keeps_the_connection_reading(run):
    async def main():
        async with FakeServer(answer_receipts=False) as server:
            client = await aio.connect("127.0.0.1", server.port, max_queue=4)
            other = await client.subscribe("/other", receipt=False)
            task, peer = await _delivered_while_subscribing(server, client, 40, timeout=0.5)
            with pytest.raises(asyncio.TimeoutError) as info:
                await task
            # at the broker: UNSUBSCRIBE was sent; in the protocol: no subscription; the transport reads
            await server.wait_for(lambda: any(isinstance(e, Unsubscribe) for e in peer.frames))
            failed = info.value.subscription
            assert failed.id not in client.session.conn.subscriptions
            assert list(client.session.conn.subscriptions) == [other.id]
            await server.wait_for(lambda: client.session.is_reading())
            # the other subscription still receives, and what came for the failed one is readable
            peer.deliver(other.id, b"still here")
            assert (await other.get(timeout=5)).body == b"still here"
            got = [m.body async for m in failed]
            assert got and got == [f"m{n}".encode() for n in range(len(got))]
            assert client.session.conn.pending_receipts == {}
            await client.close()

    run(main())


def test_messages_before_a_subscribe_failed_by_a_closed_connection_are_readable(run):
    async def main():
        async with FakeServer(answer_receipts=False) as server:
            client = await aio.connect("127.0.0.1", server.port)
            task, peer = await _delivered_while_subscribing(server, client, 3)
            await asyncio.sleep(0.05)
            peer.writer.close()
            with pytest.raises(aio.ConnectionClosedError) as info:
                await task
            sub = info.value.subscription
            assert [(await sub.get(timeout=1)).body for _ in range(3)] == [b"m0", b"m1", b"m2"]
            with pytest.raises(aio.ConnectionClosedError):
                await sub.get(timeout=1)  # then the cause, as iteration over any subscription ends
            await client.close()

    run(main())


def test_a_timed_out_receipt_is_forgotten_and_its_late_receipt_is_harmless(run):
    async def main():
        async with FakeServer(answer_receipts=False) as server:
            client = await aio.connect("127.0.0.1", server.port)
            for _ in range(5):
                with pytest.raises(asyncio.TimeoutError):
                    await client.send("/q", b"x", receipt=True, timeout=0.05)
            assert client.session.conn.pending_receipts == {}  # nothing grows on a long-lived connection
            peer = server.connected[0]
            await server.wait_for(lambda: len(peer.frames) >= 6)
            for send in peer.frames[1:]:
                peer.write(b"RECEIPT\nreceipt-id:" + send.receipt.encode() + b"\n\n\0")
            await asyncio.sleep(0.1)
            assert client.is_connected
            await client.send("/q", b"y")
            await client.close()

    run(main())


@pytest.mark.parametrize("answer", ["receipt", "close"])
def test_leaving_async_with_normally_does_not_raise_when_the_server_closes_on_disconnect(run, answer):
    async def main():
        async with FakeServer(answer_disconnect=answer == "receipt") as server:
            async with aio.connect("127.0.0.1", server.port) as client:
                await client.send("/q", b"x")
            assert not client.is_connected
            assert await client.wait_closed() is None

    run(main())


def test_disconnect_says_whether_the_server_confirmed(run):
    async def main():
        for answer, confirmed in ((True, True), (False, False)):
            async with FakeServer(answer_disconnect=answer) as server:
                client = await aio.connect("127.0.0.1", server.port)
                assert await client.disconnect() is confirmed

    run(main())


def test_a_server_that_hangs_while_the_queue_is_full_is_a_heartbeat_timeout(run):
    async def main():
        async with FakeServer(heartbeat=(50, 0)) as server:
            client = await aio.connect("127.0.0.1", server.port, heartbeat=(0, 50), max_queue=3)
            sub = await client.subscribe("/full")
            peer = server.connected[0]
            for n in range(30):
                peer.deliver(sub.id, b"%d" % n)
            await server.wait_for(lambda: not client.session.is_reading())  # the queue is full
            await asyncio.sleep(0.5)  # 5 deadlines: the server is alive (it beats), nothing ends
            assert client.is_connected
            peer.quiet = True  # hangs with its socket open
            with pytest.raises(aio.HeartbeatTimeout):
                await _until_closed(client)
            # nothing read is lost: every message the server sent is in the queue, then the cause
            got = []
            with pytest.raises(aio.HeartbeatTimeout):
                while True:
                    got.append((await sub.get(timeout=1)).body)
            assert got == [b"%d" % n for n in range(30)]
            await client.close()

    run(main())


async def _until_closed(client):
    cause = await asyncio.wait_for(client.wait_closed(), 5)
    if cause is not None:
        raise cause.__cause__ or cause


def test_a_live_server_behind_a_full_queue_is_no_timeout_and_loses_nothing(run):
    async def main():
        async with FakeServer(heartbeat=(30, 0)) as server:
            client = await aio.connect("127.0.0.1", server.port, heartbeat=(0, 30), max_queue=2)
            sub = await client.subscribe("/slow")
            peer = server.connected[0]
            for n in range(20):
                peer.deliver(sub.id, b"%d" % n)
            got = []
            for _ in range(20):
                got.append((await sub.get(timeout=5)).body)
                await asyncio.sleep(0.05)  # slower than the heart-beats: probes keep the server alive
            assert got == [b"%d" % n for n in range(20)] and client.is_connected
            await client.disconnect()

    run(main())
