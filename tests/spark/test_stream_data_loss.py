"""failOnDataLoss on live RabbitMQ: offsets a query still has to read that a stream no longer holds.

Retention really truncating (a policy with ``max-length-bytes`` and a small
``stream-max-segment-size-bytes``: RabbitMQ 3.10's STOMP adapter drops the segment size from a SUBSCRIBE,
see the shared notes), and a stream deleted and declared again shorter than the checkpoint. By default the
query fails with an error naming the option, the stream and both offsets; with ``failOnDataLoss=false`` it
goes on from the first offset there is, and says which offsets it skipped.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from fastframe.spark._stream_options import source_options as check_options
from fastframe.spark._stream_read import DataLossError, read_range
from fastframe.spark._stream_source import StreamQueueReader
from interop._live import IN_CI

from .stream_helpers import (
    RABBIT,
    STREAMS,
    Query,
    delete_streams,  # noqa: F401  (deletes the streams a session declared)
    new_queue,
    publish_stream,
    read_rows,
    require_broker,
    source_options,
)


def _rabbitmqctl(*args: str) -> str:
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        if IN_CI:
            pytest.fail("rabbitmqctl is missing: .ci/brokers installs RabbitMQ on this machine")
        pytest.skip("no rabbitmqctl on this machine (a retention policy needs it)")
    done = subprocess.run([ctl, *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def rabbitmq() -> None:
    require_broker(RABBIT)


def _truncated_stream(label: str, count: int) -> str:
    """A new stream of ``count`` messages whose retention removed the first ones (first offset > 0)."""
    queue = new_queue(label)
    policy = '{"max-length-bytes":60000,"stream-max-segment-size-bytes":20000}'
    _rabbitmqctl("set_policy", queue, f"^{queue}$", policy, "--apply-to", "queues")
    try:
        for first in range(0, count, 100):  # a receipt every 100 sends: many chunks, many segments
            publish_stream(queue, range(first, min(count, first + 100)))
    finally:
        _rabbitmqctl("clear_policy", queue)
    return queue


def _delete(queue: str) -> None:
    code = (
        f'case rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, <<"{queue}">>)) of {{ok, Q}} -> '
        'rabbit_amqqueue:delete(Q, false, false, <<"fastframe-tests">>); Other -> Other end.'
    )
    _rabbitmqctl("eval", code)


def _first_offset(queue: str) -> int:
    reader = StreamQueueReader(source_options("rabbitmq", f"/queue/{queue}", consume="stream"))
    first = reader.latestOffset({f"/queue/{queue}": "timestamp=0"}, reader.getDefaultReadLimit())
    return int(first[f"/queue/{queue}"])


def _truncated_past(queue: str, offset: int, within: float = 60.0) -> int:
    """The stream's first offset once retention removed ``offset`` (RabbitMQ applies it in the background)."""
    deadline = time.monotonic() + within
    first = _first_offset(queue)
    while first <= offset + 1 and time.monotonic() < deadline:
        time.sleep(0.5)
        first = _first_offset(queue)
    assert first > offset + 1, f"retention left offset {offset} in {queue} ({first})"
    return first


def _offsets(opts: Any, destination: str, start: int, end: int) -> List[int]:
    return [
        offset for batch in read_range(opts, destination, start, end) for offset in batch.column("offset").to_pylist()
    ]


def test_retention_past_the_committed_offset_fails_naming_the_option(rabbitmq: None, capfd: Any) -> None:
    queue = _truncated_stream("retention", 1500)
    destination = f"/queue/{queue}"
    first = _truncated_past(queue, 100)  # retention removed the first segments
    reader = StreamQueueReader(source_options("rabbitmq", destination, consume="stream"))
    with pytest.raises(DataLossError) as caught:
        reader.latestOffset({destination: 10}, reader.getDefaultReadLimit())
    message = str(caught.value)
    for word in ("failOnDataLoss", destination, "offset 10", f"offset {first}"):
        assert word in message, message

    # a query that has read nothing (startingOffsets=earliest: offset 0) starts at the first offset there is
    end = reader.latestOffset({destination: 0}, reader.getDefaultReadLimit())
    opts = check_options(source_options("rabbitmq", destination, consume="stream", timeout=5))
    assert min(_offsets(opts, destination, 0, end[destination])) == first

    # a task whose range retention removed since it was planned fails the same way
    opts = check_options(source_options("rabbitmq", destination, consume="stream", timeout=5))
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        _offsets(opts, destination, 10, first + 5)

    # failOnDataLoss=false: the batch goes on from the first offset there is, and says what it skipped
    lenient = source_options("rabbitmq", destination, consume="stream", failOnDataLoss="false")
    reader = StreamQueueReader(lenient)
    end = reader.latestOffset({destination: 10}, reader.getDefaultReadLimit())
    assert end[destination] > first
    offsets = [
        o
        for p in reader.partitions({destination: 10}, end)
        for o in _offsets(check_options(lenient), destination, p.start, p.end)
    ]
    assert offsets and min(offsets) == first
    assert f"going on from offset {first}" in capfd.readouterr().err


def test_a_stream_declared_again_shorter_than_the_checkpoint(rabbitmq: None, capfd: Any) -> None:
    queue = new_queue("recreated")
    destination = f"/queue/{queue}"
    publish_stream(queue, range(300))
    _rabbitmqctl("status")  # (skips early without rabbitmqctl)
    _delete(queue)
    publish_stream(queue, range(20))  # declared again: offsets 0-19
    if queue not in STREAMS:
        STREAMS.append(queue)

    reader = StreamQueueReader(source_options("rabbitmq", destination, consume="stream"))
    started = time.monotonic()
    with pytest.raises(DataLossError) as caught:
        reader.latestOffset({destination: 300}, reader.getDefaultReadLimit())
    assert time.monotonic() - started < 15  # not the 30 s of a read waiting for offsets that never come
    message = str(caught.value)
    for word in ("failOnDataLoss", destination, "offset 300", "declared again"):
        assert word in message, message

    # a task planned before the stream was declared again: the same error, not "no answer within timeout"
    opts = check_options(source_options("rabbitmq", destination, consume="stream", timeout=2))
    started = time.monotonic()
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        _offsets(opts, destination, 250, 300)
    assert time.monotonic() - started < 20

    lenient = source_options("rabbitmq", destination, consume="stream", failOnDataLoss="false")
    reader = StreamQueueReader(lenient)
    end = reader.latestOffset({destination: 300}, reader.getDefaultReadLimit())
    assert end == {destination: 20}
    ranges = [(p.start, p.end) for p in reader.partitions({destination: 300}, end)]
    assert ranges == [(0, 20)]
    assert _offsets(check_options(lenient), destination, 0, 20) == list(range(20))
    assert "declared again" in capfd.readouterr().err


def test_a_query_restarted_past_retention_fails_and_goes_on_with_the_option(
    spark: Any, tmp_path: Path, rabbitmq: None
) -> None:
    """End to end: a checkpoint at offset 200 of a stream that retention truncated far past it."""
    queue = new_queue("retention-query")
    destination = f"/queue/{queue}"
    policy = '{"max-length-bytes":60000,"stream-max-segment-size-bytes":20000}'
    _rabbitmqctl("set_policy", queue, f"^{queue}$", policy, "--apply-to", "queues")  # before the stream exists
    try:
        publish_stream(queue, range(200))  # fewer bytes than the retention keeps
        options: Dict[str, str] = source_options("rabbitmq", destination, consume="stream")
        out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
        with Query(spark, options, out, checkpoint) as query:
            query.processAllAvailable()
        assert len(read_rows(spark, out)) == 200
        for first in range(200, 1500, 100):
            publish_stream(queue, range(first, first + 100))
    finally:
        _rabbitmqctl("clear_policy", queue)
    first = _truncated_past(queue, 201)

    with Query(spark, options, out, checkpoint) as query:
        with pytest.raises(Exception, match="failOnDataLoss") as caught:
            query.awaitTermination(120)
        assert destination in str(caught.value) and f"offset {first}" in str(caught.value)
    assert len(read_rows(spark, out)) == 200

    with Query(spark, {**options, "failOnDataLoss": "false"}, out, checkpoint) as query:
        query.processAllAvailable()
    rows = read_rows(spark, out)
    offsets = sorted(row["offset"] for row in rows)
    assert offsets[199] < 201 and offsets[200] == first  # the first 200, then from the first offset there is


def test_a_short_probe_is_not_taken_for_a_shorter_stream(rabbitmq: None) -> None:
    """The driver's end probe stops at the first gap in the last chunk's delivery (on a busy machine,
    before its end): an end short of the checkpoint's offset is read again, to the chunk's end, before it
    counts as a stream declared again. Here pollTimeout makes the first probe read one message only."""
    queue = new_queue("short-probe")
    destination = f"/queue/{queue}"
    publish_stream(queue, range(2000))  # one receipt at the end: large chunks
    options = source_options("rabbitmq", destination, consume="stream", pollTimeout="0.001")
    reader = StreamQueueReader(options)
    assert reader.latestOffset({destination: 2000}, reader.getDefaultReadLimit()) == {destination: 2000}
