"""The Spark source's ``consume=stream`` against both RabbitMQ and the in-memory broker's stream emulation.

The same scenarios, the same assertions: every message exactly once, byte for byte, in a checkpointed
Parquet sink across a restart; availableNow; a stream truncated by retention under the query fails it
(failOnDataLoss). The in-memory broker runs on a thread of this process
(:class:`fastframe.testing.TestBroker`), reachable from Spark's Python workers over 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, NamedTuple

import pytest

import fastframe.aio as aio

from .stream_helpers import (
    BROKERS,
    HOST,
    RABBIT,
    STREAMS,
    Query,
    check_rows,
    delete_streams,  # noqa: F401  (deletes the streams a session declared)
    message,
    publish_raw,
    read_rows,
    require_broker,
    run,
)

DECLARE = {"x-queue-type": "stream", "durable": "true", "auto-delete": "false", "prefetch-count": "1"}
RABBIT_OPTIONS = {"login": "guest", "passcode": "guest", "host_header": "/", "escapes": "1.2"}


class StreamBroker(NamedTuple):
    name: str
    port: int
    client_options: Dict[str, Any]
    #: the in-memory broker (None: RabbitMQ)
    testing: Any

    def options(self, destination: str, **extra: Any) -> Dict[str, str]:
        """The source's options for this broker."""
        options = {"host": HOST, "port": str(self.port), "login": "guest", "passcode": "guest"}
        options.update(destination=destination, consume="stream", **{k: str(v) for k, v in extra.items()})
        return options

    async def _publish(self, queue: str, numbers: range, declare: Dict[str, str]) -> None:
        async with aio.connect(HOST, self.port, timeout=30, **self.client_options) as client:
            sub = await client.subscribe(f"/queue/{queue}", ack="client", headers=declare, timeout=30)
            await sub.unsubscribe(timeout=30)
            last = numbers[-1] if numbers else None
            for n in numbers:
                body, headers = message(n)
                await client.send(f"/amq/queue/{queue}", body, headers, receipt=n == last or n % 100 == 0)

    async def _first_offset(self, queue: str) -> int:
        async with aio.connect(HOST, self.port, timeout=30, **self.client_options) as client:
            headers = {"x-stream-offset": "first", "prefetch-count": "1"}
            sub = await client.subscribe(f"/amq/queue/{queue}", ack="client", headers=headers, timeout=30)
            return int((await sub.get(timeout=10)).get("x-stream-offset"))

    def wait_truncated(self, queue: str, past: int) -> None:
        """Until the stream's first offset is past ``past`` (RabbitMQ's retention runs in the background)."""
        for _ in range(40):
            if run(self._first_offset(queue), timeout=30) > past:
                return
            run(asyncio.sleep(0.25))
        raise AssertionError(f"retention never removed offset {past} of {queue}")

    def publish(self, queue: str, numbers: range, **arguments: str) -> None:
        """Declare the stream ``queue`` (if new, with ``arguments``) and publish ``message(n)`` for each n."""
        if self.testing is None and queue not in STREAMS:
            STREAMS.append(queue)
        run(self._publish(queue, numbers, {**DECLARE, **arguments}), timeout=120)


@pytest.fixture(params=["fastframe", "rabbitmq"])
def broker(request: pytest.FixtureRequest) -> Iterator[StreamBroker]:
    if request.param == "rabbitmq":
        require_broker(RABBIT)
        yield StreamBroker("rabbitmq", BROKERS["rabbitmq"].port, RABBIT_OPTIONS, None)
        return
    from fastframe.testing import TestBroker

    # (its CONNECTED says fastframe/VERSION, which consume=stream accepts; it keeps header bytes that are not
    # UTF-8 as RabbitMQ does, and its log, which decodes strictly, is off)
    options = {"logging": False, "decoder_options": {"keep_invalid_utf8": True}}
    with TestBroker(**options) as testing:
        yield StreamBroker("fastframe", testing.port, {}, testing)


def new_stream(label: str) -> str:
    return f"ff-{label}-{os.urandom(4).hex()}"


def test_exactly_once_across_a_restart(spark: Any, tmp_path: Path, broker: StreamBroker) -> None:
    queue = new_stream("streams-restart")
    broker.publish(queue, range(3000))
    options = broker.options(f"/queue/{queue}", maxMessagesPerTrigger=1000, minPartitions=2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with Query(spark, options, out, checkpoint) as query:
        query.processAllAvailable()
    rows = read_rows(spark, out)
    check_rows(rows, range(3000))
    broker.publish(queue, range(3000, 3500))
    with Query(spark, options, out, checkpoint) as query:  # the same checkpoint: goes on where it stopped
        query.processAllAvailable()
    check_rows(read_rows(spark, out), range(3500))


def test_available_now_from_latest_reads_what_came_after_a_poison_message_too(
    spark: Any, tmp_path: Path, broker: StreamBroker
) -> None:
    queue = new_stream("streams-latest")
    broker.publish(queue, range(200))
    options = broker.options(f"/amq/queue/{queue}", startingOffsets="latest")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with Query(spark, options, out, checkpoint, availableNow=True) as query:
        assert query.awaitTermination(120)
    assert read_rows(spark, out) == []
    broker.publish(queue, range(200, 300))
    # a poison message (a header value that is not UTF-8, sent raw: RabbitMQ passes it on): a row, and the
    # query reads on past it
    publish_raw(broker.port, f"/amq/queue/{queue}", [b"a\xffb\xc3"])
    broker.publish(queue, range(300, 310))
    with Query(spark, options, out, checkpoint, availableNow=True) as query:
        assert query.awaitTermination(120)
    rows = spark.read.parquet(str(out)).orderBy("offset").collect()
    check_rows([row for row in rows if row["error_code"] is None], range(200, 310))
    (poison,) = [row for row in rows if row["error_code"] is not None]
    assert poison["error_code"] == "invalid-utf8" and "'x-value'" in poison["error_reason"]
    assert b"\nx-value:a\xffb\xc3\n" in bytes(poison["raw_headers"]) and bytes(poison["body"]) == b"body0"
    assert poison["header_map"]["x-value"] == "a\ufffdb\ufffd"
    assert [row["offset"] for row in rows].index(poison["offset"]) == 100  # after message 299, before 300


def _small_segments(broker: StreamBroker, queue: str) -> Dict[str, str]:
    """Retention that bites at test sizes: the declaration's arguments (in-memory), a policy (RabbitMQ 3.10,
    whose STOMP adapter drops the segment size)."""
    limits = {"x-max-length-bytes": "60000", "x-stream-max-segment-size-bytes": "20000"}
    if broker.testing is not None:
        return limits
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        pytest.skip("no rabbitmqctl on this machine (a retention policy needs it)")
    policy = '{"max-length-bytes":60000,"stream-max-segment-size-bytes":20000}'
    subprocess.run(
        [ctl, "-q", "set_policy", queue, f"^{queue}$", policy, "--apply-to", "queues"],
        capture_output=True,
        timeout=60,
        check=True,
    )
    return {}


def test_retention_under_the_query_fails_it(spark: Any, tmp_path: Path, broker: StreamBroker) -> None:
    queue = new_stream("streams-retention")
    arguments = _small_segments(broker, queue)
    try:
        broker.publish(queue, range(100), **arguments)
        options = broker.options(f"/queue/{queue}")
        out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
        with Query(spark, options, out, checkpoint) as query:
            query.processAllAvailable()
        check_rows(read_rows(spark, out), range(100))
        # while the query is stopped, far more than the retention keeps: its next offset is gone
        broker.publish(queue, range(100, 2100), **arguments)
        broker.wait_truncated(queue, 100)
        with Query(spark, options, out, checkpoint) as query:
            with pytest.raises(Exception, match="failOnDataLoss"):
                query.processAllAvailable()
    finally:
        if broker.testing is None and shutil.which("rabbitmqctl"):
            subprocess.run(["rabbitmqctl", "-q", "clear_policy", queue], capture_output=True, timeout=60, check=False)


def test_the_emulation_is_rabbitmq_for_the_source(broker: StreamBroker) -> None:
    """Without Spark: the driver's probe of a stream's end and a task's read of a range agree on both."""
    from fastframe.spark._stream_options import source_options as parse_options
    from fastframe.spark._stream_read import find_end, read_range

    queue = new_stream("streams-probe")
    broker.publish(queue, range(250))
    opts = parse_options(broker.options(f"/queue/{queue}", maxRecordsPerBatch=100))
    end = find_end(opts, f"/queue/{queue}", 0, 0, settle=True)
    assert end >= 250
    bodies = [
        body for batch in read_range(opts, f"/queue/{queue}", 20, end) for body in batch.column("body").to_pylist()
    ]
    assert bodies == [message(n)[0] for n in range(20, 250)]
