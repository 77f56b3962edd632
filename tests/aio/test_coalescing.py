"""``coalesce_reads``: the socket rests after each read, so a stream arrives in fewer, larger reads."""

from __future__ import annotations

import asyncio
import time

import pytest

from fastframe import aio

from .fake_server import FakeServer


@pytest.mark.parametrize("bad", [-0.001, 1.5, True, "0.01", float("nan")])
def test_coalesce_reads_must_be_seconds_between_0_and_1(bad):
    with pytest.raises(ValueError, match="coalesce_reads"):
        aio.connect("127.0.0.1", 1, coalesce_reads=bad)


def _counting_reads():
    reads = []

    def hook(direction, data):
        if direction == "in":
            reads.append((time.monotonic(), data))

    return reads, hook


def test_a_burst_arrives_in_fewer_reads_with_every_message_in_order(run):
    rest = 0.05

    async def main():
        reads, hook = _counting_reads()
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, coalesce_reads=rest, wire_hook=hook) as client:
                sub = await client.subscribe("/q")
                peer = server.connected[0]
                await asyncio.sleep(2 * rest)  # the rest after the subscription's receipt is over
                first = len(reads)
                started = time.monotonic()
                for n in range(40):  # 40 writes, each its own segment on the wire
                    peer.deliver(sub.id, b"m%d" % n)
                    await asyncio.sleep(0.002)
                burst = time.monotonic() - started
                bodies = [(await sub.get(timeout=5)).body for _ in range(40)]
                assert bodies == [b"m%d" % n for n in range(40)]
                burst_reads = len(reads) - first
                # one read, then at most one per rest while the burst lasts (whatever the machine's speed)
                assert 1 <= burst_reads <= 2 + burst / rest, (burst_reads, burst)
                assert burst_reads < 40

    run(main())


def test_a_message_after_a_quiet_spell_is_read_at_once_and_the_next_waits_for_the_rest(run):
    rest = 0.5

    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, coalesce_reads=rest) as client:
                sub = await client.subscribe("/q")
                peer = server.connected[0]
                await asyncio.sleep(rest + 0.2)  # quiet: no rest is running
                sent = time.monotonic()
                peer.deliver(sub.id, b"first")
                assert (await sub.get(timeout=5)).body == b"first"
                first_latency = time.monotonic() - sent
                sent = time.monotonic()
                peer.deliver(sub.id, b"second")  # during the rest the first read began
                assert (await sub.get(timeout=5)).body == b"second"
                second_latency = time.monotonic() - sent
            assert first_latency < rest / 2, first_latency
            assert second_latency > rest / 2, second_latency  # it waited in the socket until the rest ended
            assert second_latency < rest + 2.0

    run(main())


def test_a_receipt_wait_lifts_the_rest(run):
    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, coalesce_reads=1.0) as client:
                sub = await client.subscribe("/q")  # its RECEIPT's read began a rest of 1 s
                assert not client.session.is_reading()
                started = time.monotonic()
                await client.send("/q", b"x", receipt=True, timeout=5)
                assert time.monotonic() - started < 0.5
                assert (await sub.get(timeout=5)).body == b"x"
            # and the DISCONNECT's receipt did not wait for a rest either (the exit returned)

    run(main())


def test_rests_and_a_full_queue_pause_together_without_losing_a_message(run):
    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, coalesce_reads=0.003, max_queue=3) as client:
                sub = await client.subscribe("/q")
                peer = server.connected[0]
                for n in range(500):
                    peer.deliver(sub.id, b"%d" % n)
                got = []
                async for message in sub:
                    got.append(message.body)
                    if len(got) % 7 == 0:
                        await asyncio.sleep(0.001)  # the queue fills while the socket rests, and the reverse
                    if len(got) == 500:
                        break
                assert got == [b"%d" % n for n in range(500)]
                assert len(sub) == 0

    run(main())


def test_closing_during_a_rest_cancels_it(run):
    async def main():
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port, coalesce_reads=1.0)
            await client.subscribe("/q")
            session = client.session
            assert session._rest is not None  # resting after the subscription's receipt
            started = time.monotonic()
            await client.disconnect(timeout=5)
            assert time.monotonic() - started < 0.5
            assert session._rest is None or session._rest.cancelled()

    run(main())
