"""``spark.readStream.format("stomp")`` on live brokers: what the guarantees promise, proven end to end.

consume=stream (RabbitMQ stream queues): every message exactly once, byte for byte, in a checkpointed
Parquet sink, across a clean restart and across a process killed in the middle of a batch; batches
bounded by maxMessagesPerTrigger. consume=ack (RabbitMQ and ActiveMQ): nothing lost when the query's
process is killed before its commit, nothing left in the queue after a clean run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .stream_helpers import (
    BROKERS,
    RABBIT,
    Query,
    QueryProcess,
    batches,
    check_rows,
    delete_streams,  # noqa: F401  (deletes the streams a session declared)
    drain,
    in_flight,
    new_queue,
    publish_queue,
    publish_stream,
    read_rows,
    require_broker,
    source_options,
)


@pytest.fixture
def rabbitmq() -> None:
    require_broker(RABBIT)


def _max_batch_rows(checkpoint: Path) -> int:
    """The largest batch in the offset log of a single-destination consume=stream query."""
    sizes, previous = [], None
    for batch in batches(checkpoint, "offsets"):
        lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
        offset = next(iter(json.loads(lines[-1]).values()))
        if previous is not None:
            sizes.append(offset - previous)
        previous = offset
    return max(sizes, default=0)


def test_stream_queue_exactly_once_across_a_restart(spark: Any, tmp_path: Path, rabbitmq: None) -> None:
    queue = new_queue("stream")
    publish_stream(queue, range(10_000))
    # two tasks per batch, each reading half of its range (minPartitions)
    options = source_options(
        "rabbitmq", f"/queue/{queue}", consume="stream", maxMessagesPerTrigger=2500, minPartitions=2
    )
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with Query(spark, options, out, checkpoint) as query:
        query.processAllAvailable()
    rows = read_rows(spark, out)
    check_rows(rows, range(10_000))
    assert sorted(row["offset"] for row in rows) == list(range(10_000))
    assert _max_batch_rows(checkpoint) == 2500  # admission control: the backlog never empties into one batch
    assert len(batches(checkpoint, "commits")) >= 4

    publish_stream(queue, range(10_000, 11_000))
    with Query(spark, options, out, checkpoint) as query:  # the same checkpoint: resumes at offset 10,000
        query.processAllAvailable()
    check_rows(read_rows(spark, out), range(11_000))


def test_stream_queue_exactly_once_when_killed_mid_batch(spark: Any, tmp_path: Path, rabbitmq: None) -> None:
    queue = new_queue("stream-kill")
    publish_stream(queue, range(10_000))
    options = source_options("rabbitmq", f"/queue/{queue}", consume="stream", maxMessagesPerTrigger=2000)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    child = QueryProcess(options, out, checkpoint)
    try:
        child.wait_for(lambda: in_flight(checkpoint))  # a batch is planned and not committed
        child.kill()
    finally:
        child.close()
    planned, committed = batches(checkpoint, "offsets"), batches(checkpoint, "commits")
    assert len(planned) > len(committed) >= 1, (planned, committed)

    publish_stream(queue, range(10_000, 10_500))
    with Query(spark, options, out, checkpoint) as query:
        query.processAllAvailable()
    check_rows(read_rows(spark, out), range(10_500))


def test_stream_queue_trigger_available_now_and_two_destinations(spark: Any, tmp_path: Path, rabbitmq: None) -> None:
    first, second = new_queue("stream-a"), new_queue("stream-b")
    publish_stream(first, range(0, 600))
    publish_stream(second, range(600, 1000))
    options = source_options(
        "rabbitmq", f"/queue/{first},/amq/queue/{second}", consume="stream", maxMessagesPerTrigger=300
    )
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with Query(spark, options, out, checkpoint, availableNow=True) as query:
        assert query.awaitTermination(120)  # availableNow ends on its own once it read what was there
    rows = read_rows(spark, out)
    check_rows(rows, range(1000))
    by_destination = spark.read.parquet(str(out)).groupBy("destination").count().collect()
    assert {r["destination"]: r["count"] for r in by_destination} == {
        f"/queue/{first}": 600,
        f"/amq/queue/{second}": 400,
    }


@pytest.mark.parametrize("broker", ["rabbitmq", "activemq"])
def test_queue_clean_run_leaves_nothing_and_kill_loses_nothing(spark: Any, tmp_path: Path, broker: str) -> None:
    require_broker(BROKERS[broker])
    destination = f"/queue/{new_queue('ack')}"
    publish_queue(broker, destination, range(1500))
    options = source_options(broker, destination, maxMessagesPerTrigger=300)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    # killed while a batch is planned and not committed: its messages (and any later ones received but not
    # acknowledged) go back to the queue
    child = QueryProcess(options, out, checkpoint)
    try:
        child.wait_for(lambda: in_flight(checkpoint))
        child.kill()
    finally:
        child.close()
    publish_queue(broker, destination, range(1500, 1800))
    with Query(spark, options, out, checkpoint) as query:
        query.processAllAvailable()
    rows = read_rows(spark, out)
    check_rows(rows, range(1800), exactly_once=False)  # at-least-once
    assert any(row["redelivered"] for row in rows) or broker == "activemq"
    # a clean run acknowledged everything it wrote: the queue is empty
    assert drain(broker, destination, quiet=1.0) == []
