"""The broker source's admission control and where it starts, on live brokers.

consume=stream: ``maxBytesPerTrigger`` bounds each batch's body bytes (the driver measures the range);
``startingOffsets=latest`` is resolved once, by a first batch in the offset log, so a query killed before
its first commit starts again where the first run began. consume=ack: ``trigger(availableNow=True)`` reads
what the queue holds, acknowledges it and ends.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

import fastframe.aio as aio

from .stream_helpers import (
    BROKERS,
    CLIENT_OPTIONS,
    HOST,
    RABBIT,
    Query,
    QueryProcess,
    batches,
    check_rows,
    delete_streams,  # noqa: F401  (deletes the streams a session declared)
    drain,
    message,
    new_queue,
    publish_queue,
    publish_stream,
    read_rows,
    require_broker,
    run,
    source_options,
)


@pytest.fixture
def rabbitmq() -> None:
    require_broker(RABBIT)


def _planned(checkpoint: Path) -> List[Dict[str, Any]]:
    """The source's end offset of every batch in the offset log, in order."""
    return [
        json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])
        for batch in batches(checkpoint, "offsets")
    ]


def test_stream_queue_max_bytes_per_trigger(spark: Any, tmp_path: Path, rabbitmq: None) -> None:
    queue = new_queue("stream-bytes")
    publish_stream(queue, range(2000))
    sizes = [len(message(n)[0]) for n in range(2000)]  # offset n holds message n (a new stream)
    limit = 9000
    options = source_options("rabbitmq", f"/queue/{queue}", consume="stream", maxBytesPerTrigger=limit)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with Query(spark, options, out, checkpoint) as query:
        query.processAllAvailable()
    check_rows(read_rows(spark, out), range(2000))
    ends = [next(iter(offsets.values())) for offsets in _planned(checkpoint)]
    assert ends[-1] == 2000
    starts = [0, *ends[:-1]]
    for start, end in zip(starts, ends):
        assert end > start, ends
        assert sum(sizes[start:end]) <= limit, (start, end)  # never more than the limit
        if end < 2000:
            assert sum(sizes[start : end + 1]) > limit, (start, end)  # and as much as fits
    assert len(ends) >= sum(sizes) // limit


def test_stream_queue_latest_is_resolved_once_when_killed_before_the_first_commit(
    spark: Any, tmp_path: Path, rabbitmq: None
) -> None:
    queue = new_queue("stream-latest")
    publish_stream(queue, range(1000))
    options = source_options("rabbitmq", f"/queue/{queue}", consume="stream", startingOffsets="latest")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    # the first run resolves latest (offset 1000) and is killed while batch 0 is planned, not committed
    child = QueryProcess(options, tmp_path / "first-run", checkpoint, hold_first_batch=True)
    try:
        child.wait_for(lambda: "holding" in child.output())
        child.kill()
    finally:
        child.close()
    assert batches(checkpoint, "commits") == []
    assert _planned(checkpoint) == [{f"/queue/{queue}": 1000}]

    publish_stream(queue, range(1000, 1500))  # "latest" is now 1500: the restart must not start there
    with Query(spark, options, out, checkpoint) as query:
        query.processAllAvailable()
    rows = read_rows(spark, out)
    assert sorted(row["offset"] for row in rows) == list(range(1000, 1500))
    check_rows(rows, range(1000, 1500))


def test_a_first_batch_replays_the_same_range_after_a_restart(rabbitmq: None) -> None:
    """Driver side, no Spark: messages that arrive between initialOffset and the first latestOffset.

    Spark does not log a first batch's start: a restart before the first commit calls initialOffset
    again. A "latest" resolved there would move, and batch 0 replayed from it would not read what it
    read the first time; resolved by the first batch itself, its range is the same on both runs.
    """
    from fastframe.spark._stream_source import StreamQueueReader

    queue = new_queue("stream-replay")
    publish_stream(queue, range(100))
    options = source_options("rabbitmq", f"/queue/{queue}", consume="stream", startingOffsets="latest")
    first = StreamQueueReader(options)
    start = first.initialOffset()
    publish_stream(queue, range(100, 150))
    end = first.latestOffset(start, first.getDefaultReadLimit())  # batch 0, written to the offset log
    planned = [(p.start, p.end) for p in first.partitions(start, end)]

    publish_stream(queue, range(150, 200))  # then the query dies; later it restarts from its checkpoint
    again = StreamQueueReader(options)
    assert [(p.start, p.end) for p in again.partitions(again.initialOffset(), end)] == planned
    following = again.latestOffset(end, again.getDefaultReadLimit())  # batch 1 starts where batch 0 ended
    ranges = [*planned, *[(p.start, p.end) for p in again.partitions(end, following)]]
    assert ranges == [(150, 200)] or ranges == [(100, 200)], ranges  # resolved at 150 (or at 100): no gap


def test_stream_starting_at_a_timestamp(rabbitmq: None) -> None:
    """Driver side, no Spark: timestamp=T starts at the first message published at or after T, resolved by
    the first batch (which reads nothing); the next batch reads from there."""
    import time

    from fastframe.spark._stream_source import StreamQueueReader

    queue = new_queue("stream-time")
    publish_stream(queue, range(100))
    stamp = int(time.time()) + 1
    time.sleep(stamp - time.time() + 0.1)
    publish_stream(queue, range(100, 150))
    reader = StreamQueueReader(
        source_options("rabbitmq", f"/queue/{queue}", consume="stream", startingOffsets=f"timestamp={stamp}")
    )
    start = reader.initialOffset()
    assert start == {f"/queue/{queue}": f"timestamp={stamp}"}
    resolved = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert resolved == {f"/queue/{queue}": 100}
    assert reader.partitions(start, resolved) == []
    end = reader.latestOffset(resolved, reader.getDefaultReadLimit())
    assert [(p.start, p.end) for p in reader.partitions(resolved, end)] == [(100, 150)]


def test_stream_probe_ends_while_a_producer_keeps_publishing(rabbitmq: None) -> None:
    """latest on a stream that never pauses: found in about pollTimeout (the probe does not follow the
    producer to the timeout), and past what was there before."""
    import threading
    import time

    from fastframe.spark._stream_options import source_options as check_options
    from fastframe.spark._stream_read import resolve_start

    queue = new_queue("stream-busy")
    publish_stream(queue, range(100))
    stop = threading.Event()

    async def publish_until_stopped() -> None:  # a message every millisecond or so: never a 50 ms pause
        async with aio.connect(HOST, RABBIT.port, timeout=30, **CLIENT_OPTIONS["rabbitmq"]) as client:
            n = 100
            while not stop.is_set():
                body, headers = message(n)
                await client.send(f"/amq/queue/{queue}", body, headers)
                n += 1
                await asyncio.sleep(0.001)

    def produce() -> None:
        run(publish_until_stopped(), timeout=60)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        time.sleep(0.5)
        opts = check_options(source_options("rabbitmq", f"/queue/{queue}", consume="stream", timeout=10))
        began = time.monotonic()
        end = resolve_start(opts, f"/queue/{queue}", "latest")
        took = time.monotonic() - began
    finally:
        stop.set()
        producer.join(30)
    assert end >= 100
    assert took < 5, took  # pollTimeout (0.2 s) and a connection, not the deadline (timeout=10)


@pytest.mark.parametrize("broker", ["rabbitmq", "activemq"])
def test_queue_trigger_available_now(spark: Any, tmp_path: Path, broker: str) -> None:
    require_broker(BROKERS[broker])
    destination = f"/queue/{new_queue('ack-now')}"
    publish_queue(broker, destination, range(700))
    options = source_options(broker, destination, maxMessagesPerTrigger=300)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with Query(spark, options, out, checkpoint, availableNow=True) as query:
        assert query.awaitTermination(120)  # ends on its own once the queue had nothing more
        assert query.exception() is None
    check_rows(read_rows(spark, out), range(700), exactly_once=False)
    assert len(batches(checkpoint, "commits")) >= 3  # 300 + 300 + 100, and the batch that acknowledged them
    assert drain(broker, destination, quiet=1.0) == []  # every message written was acknowledged

    publish_queue(broker, destination, range(700, 800))  # a rerun takes what came since
    with Query(spark, options, out, checkpoint, availableNow=True) as query:
        assert query.awaitTermination(120)
    check_rows(read_rows(spark, out), range(800), exactly_once=False)


def test_min_offsets_per_trigger_waits_for_enough_or_max_trigger_delay(rabbitmq: None) -> None:
    """Driver side, no Spark: fewer new offsets than minOffsetsPerTrigger plan no batch (the start comes
    back) until maxTriggerDelay passed since the last batch; enough plan one at once."""
    import time

    from fastframe.spark._stream_source import StreamQueueReader

    queue = new_queue("stream-min")
    destination = f"/queue/{queue}"
    publish_stream(queue, range(50))
    options = source_options("rabbitmq", destination, consume="stream", minOffsetsPerTrigger=100, maxTriggerDelay=3)
    reader = StreamQueueReader(options)
    start = {destination: 0}
    assert reader.latestOffset(start, reader.getDefaultReadLimit()) == start  # 50 < 100: no batch yet
    time.sleep(3.2)
    assert reader.latestOffset(start, reader.getDefaultReadLimit()) == {destination: 50}  # the delay passed
    publish_stream(queue, range(50, 80))
    assert reader.latestOffset({destination: 50}, reader.getDefaultReadLimit()) == {destination: 50}
    publish_stream(queue, range(80, 200))
    assert reader.latestOffset({destination: 50}, reader.getDefaultReadLimit()) == {destination: 200}
    with pytest.raises(ValueError, match="more than maxMessagesPerTrigger"):
        StreamQueueReader({**options, "maxMessagesPerTrigger": "10"})
    with pytest.raises(ValueError, match="consume=stream"):
        StreamQueueReader({**options, "consume": "ack"})
