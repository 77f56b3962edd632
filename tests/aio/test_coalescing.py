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


async def _begin_a_rest(client, server, sub):
    """Deliver a burst (three frames in one write, so one read): a rest begins after it."""
    for n in range(3):
        server.connected[0].deliver(sub.id, b"burst %d" % n)
    for n in range(3):
        assert (await sub.get(timeout=5)).body == b"burst %d" % n
    assert not client.session.is_reading()


@pytest.mark.parametrize("per_write", [3, 1], ids=["bursts", "one-frame-writes"])
def test_a_stream_arrives_in_fewer_reads_with_every_message_in_order(run, per_write):
    rest = 0.05

    async def main():
        reads, hook = _counting_reads()
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, coalesce_reads=rest, wire_hook=hook) as client:
                sub = await client.subscribe("/q")
                peer = server.connected[0]
                await asyncio.sleep(2 * rest)  # quiet first
                first = len(reads)
                started = time.monotonic()
                for n in range(40):  # 40 writes, each its own segment on the wire
                    for k in range(per_write):
                        peer.deliver(sub.id, b"m%d" % (per_write * n + k))
                    await asyncio.sleep(0.002)
                burst = time.monotonic() - started
                count = 40 * per_write
                assert [(await sub.get(timeout=5)).body for _ in range(count)] == [b"m%d" % n for n in range(count)]
                stream_reads = len(reads) - first
                # a read or two at once (one frame after a quiet spell is not yet a stream), then at
                # most one per rest while the stream lasts, however fast or slow the machine is
                assert 1 <= stream_reads <= 3 + burst / rest, (stream_reads, burst)
                assert stream_reads < 40

    run(main())


@pytest.mark.parametrize("connections", [1, 2], ids=["same-connection", "another-connection"])
def test_a_reply_awaited_one_at_a_time_is_never_held(run, connections):
    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, coalesce_reads=1.0) as client:
                sender = client if connections == 1 else await aio.connect("127.0.0.1", server.port)
                sub = await client.subscribe("/q")
                for n in range(5):  # reads close together, but each follows a send of this process
                    started = time.monotonic()
                    await sender.send("/q", b"%d" % n)
                    assert (await sub.get(timeout=5)).body == b"%d" % n
                    assert time.monotonic() - started < 0.5
                    assert client.session.is_reading()
                if sender is not client:
                    await sender.disconnect()

    run(main())


def test_a_message_during_a_rest_waits_for_its_end_and_one_after_it_does_not(run):
    rest = 0.5

    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, coalesce_reads=rest) as client:
                sub = await client.subscribe("/q")
                peer = server.connected[0]
                await _begin_a_rest(client, server, sub)
                sent = time.monotonic()
                peer.deliver(sub.id, b"during")
                assert (await sub.get(timeout=5)).body == b"during"
                during = time.monotonic() - sent
                await asyncio.sleep(rest)  # quiet: that read was of one frame, no rest runs
                assert client.session.is_reading()
                sent = time.monotonic()
                peer.deliver(sub.id, b"after")
                assert (await sub.get(timeout=5)).body == b"after"
                after = time.monotonic() - sent
            assert rest / 2 < during < rest + 2.0, during  # it waited in the socket until the rest ended
            assert after < rest / 2, after

    run(main())


def test_a_receipt_wait_lifts_the_rest(run):
    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, coalesce_reads=1.0) as client:
                sub = await client.subscribe("/q")
                await _begin_a_rest(client, server, sub)
                started = time.monotonic()
                await client.send("/q", b"x", receipt=True, timeout=5)
                assert time.monotonic() - started < 0.5
                assert (await sub.get(timeout=5)).body == b"x"

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
            sub = await client.subscribe("/q")
            await _begin_a_rest(client, server, sub)
            session = client.session
            assert session._rest is not None
            started = time.monotonic()
            await client.disconnect(timeout=5)
            assert time.monotonic() - started < 0.5
            assert session._rest is None or session._rest.cancelled()

    run(main())


@pytest.mark.parametrize("rest", [0.002, 0.005, 0.05])
def test_a_fast_streams_rest_doubles_up_to_20_ms_and_a_slower_read_sets_it_back(run, rest):
    # A read costs the loop's and the kernel's wake-ups however many frames it brings: while reads
    # come with 32 frames or more the rest doubles (up to 20 ms, or coalesce_reads when longer);
    # a read of fewer frames, or a fast read after a quiet spell, starts from coalesce_reads again,
    # and so does a read after the connection wrote (a broker waiting for ACKs or credit).
    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, coalesce_reads=rest) as client:
                session = client.session
                now = asyncio.get_running_loop().time()
                lengths = []

                def read(frames):
                    nonlocal now
                    session._after_read(frames, now)  # (what each read of the socket calls)
                    lengths.append(session._rest_length)
                    now += session._rest_length  # the next read: when this rest ends
                    session._rest.cancel()
                    session._end_rest()

                for frames in (40, 40, 40, 40, 40, 40, 31, 32):
                    read(frames)
                now += 1.0  # quiet
                read(100)
                read(100)
                session.write(b"\n")  # a write on the connection (an ACK, credit): the broker may wait for it
                session._uncork()
                read(100)
                read(100)
                cap = max(0.02, rest)
                grown = [min(rest * 2**n, cap) for n in range(1, 7)]
                two, four = min(2 * rest, cap), min(4 * rest, cap)
                assert lengths == pytest.approx([*grown, rest, two, two, four, rest, two])
                assert session.is_reading()

    run(main())
