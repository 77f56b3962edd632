"""The broker source and sink on every supported PySpark (4.0, 4.1, 4.2+), live on RabbitMQ.

The newest runs in the main venv; ``.ci/pyspark-floor`` runs this module (and the data-loss and error
tests) in a venv with PySpark 4.0, which has no admission control for Python streaming sources and no
``DataSourceStreamArrowWriter``. What differs is documented in the Spark guide ("PySpark 4.0, 4.1 and
4.2+") and checked here on whichever PySpark runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, List

import pytest

from fastframe.spark._stream_compat import ADMISSION_CONTROL, PYSPARK_VERSION

from .stream_helpers import (
    HOST,
    RABBIT,
    Query,
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
    source_options,
)


@pytest.fixture
def rabbitmq() -> None:
    require_broker(RABBIT)


def test_stream_queue_exactly_once_across_a_restart_and_available_now(
    spark: Any, tmp_path: Path, rabbitmq: None
) -> None:
    queue = new_queue("versions")
    publish_stream(queue, range(3000))
    options = source_options("rabbitmq", f"/queue/{queue}", consume="stream", minPartitions=2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with Query(spark, options, out, checkpoint) as query:
        query.processAllAvailable()
    check_rows(read_rows(spark, out), range(3000))

    publish_stream(queue, range(3000, 3500))  # the restart resumes at the checkpoint's offset
    with Query(spark, options, out, checkpoint, availableNow=True) as query:
        assert query.awaitTermination(120)
        assert query.exception() is None
    check_rows(read_rows(spark, out), range(3500))


def test_queue_with_max_messages_acknowledges_what_it_wrote(spark: Any, tmp_path: Path, rabbitmq: None) -> None:
    destination = f"/queue/{new_queue('versions-ack')}"
    publish_queue("rabbitmq", destination, range(1000))
    options = source_options("rabbitmq", destination, maxMessagesPerTrigger=300)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with Query(spark, options, out, checkpoint) as query:
        query.processAllAvailable()  # the batches, then the empty one that acknowledges the last
        query.processAllAvailable()
    check_rows(read_rows(spark, out), range(1000), exactly_once=False)
    assert len(batches(checkpoint, "commits")) >= 4  # 300, 300, 300, 100: the limit holds on every version
    assert drain("rabbitmq", destination, quiet=1.0) == []


def test_max_messages_with_consume_stream_needs_admission_control(spark: Any, rabbitmq: None) -> None:
    options = source_options("rabbitmq", "/queue/x", consume="stream", maxMessagesPerTrigger=100)
    reader = spark.readStream.format("stomp")
    for name, value in options.items():
        reader = reader.option(name, value)
    if ADMISSION_CONTROL:
        reader.load()
        return
    with pytest.raises(Exception, match="needs PySpark 4.2 or later") as caught:
        reader.load()
    assert PYSPARK_VERSION in str(caught.value) and "maxMessagesPerTrigger" in str(caught.value)


def test_the_sink_on_a_stream(spark: Any, tmp_path: Path, rabbitmq: None) -> None:
    """writeStream.format("stomp"): Arrow batches on 4.1+, rows on 4.0; every row a SEND, byte for byte."""
    source = new_queue("versions-sink-in")
    target = f"/queue/{new_queue('versions-sink-out')}"
    publish_stream(source, range(500))
    frame = (
        spark.readStream.format("stomp")
        .options(**source_options("rabbitmq", f"/queue/{source}", consume="stream"))
        .load()
        .select("body", "headers")
    )
    writer = frame.writeStream.format("stomp").option("checkpointLocation", str(tmp_path / "ck"))
    sink = {"host": HOST, "port": str(RABBIT.port), "login": "guest", "passcode": "guest", "destination": target}
    query = writer.options(**sink).trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(120)
        assert query.exception() is None
    finally:
        query.stop()
    got = drain("rabbitmq", target, quiet=1.0)
    numbers: List[int] = sorted(int(m.get("n")) for m in got)
    assert numbers == list(range(500))
    for m in got:
        n = int(m.get("n"))
        assert m.body == message(n)[0]


def test_progress_reports_the_streams_end(spark: Any, tmp_path: Path, rabbitmq: None) -> None:
    """latestOffset in the query's progress: the streams' ends (reportLatestOffset on PySpark 4.2+; before
    it, Spark shows what latestOffset() returned)."""
    queue = new_queue("versions-lag")
    publish_stream(queue, range(200))
    options = source_options("rabbitmq", f"/queue/{queue}", consume="stream")
    with Query(spark, options, tmp_path / "out", tmp_path / "ck") as query:
        query.processAllAvailable()
        progress = [p for p in query.recentProgress if p["numInputRows"]]
    assert progress
    latest = progress[-1]["sources"][0].get("latestOffset")
    assert latest is not None and f"/queue/{queue}" in str(latest), progress[-1]["sources"]


def test_a_batch_read_of_a_stream_range(spark: Any, rabbitmq: None) -> None:
    """spark.read with endingOffsets: a stream's offsets [startingOffsets, endingOffsets), once."""
    queue = new_queue("versions-range")
    publish_stream(queue, range(500))  # a new stream: offset n holds message n
    options = source_options("rabbitmq", f"/queue/{queue}", consume="stream", minPartitions=2)
    ranged = spark.read.format("stomp").options(**options, startingOffsets="100", endingOffsets="300").load()
    rows = ranged.select("offset", "body", "headers", "redelivered").collect()
    assert sorted(row["offset"] for row in rows) == list(range(100, 300))
    check_rows(rows, range(100, 300))
    everything = spark.read.format("stomp").options(**options, endingOffsets="latest").load()
    assert everything.count() == 500
    past = spark.read.format("stomp").options(**options, startingOffsets="450", endingOffsets="9999").load()
    assert past.count() == 50  # an end past the stream's stops at its end


def test_ending_offsets_is_for_stream_queues_and_batch_reads() -> None:
    from fastframe.spark._stream_options import source_options as check_options
    from fastframe.spark._stream_source import stream_reader

    with pytest.raises(ValueError, match="endingOffsets .*consume=stream"):
        check_options({"host": "h", "destination": "/queue/a", "endingOffsets": "latest"})
    with pytest.raises(ValueError, match="option endingOffsets"):
        check_options({"host": "h", "destination": "/queue/a", "consume": "stream", "endingOffsets": "soon"})
    with pytest.raises(ValueError, match="a stream reads on"):
        stream_reader({"host": "h", "destination": "/queue/a", "consume": "stream", "endingOffsets": "5"})


def test_queue_available_now_before_admission_control_acknowledges_nothing(
    spark: Any, tmp_path: Path, rabbitmq: None
) -> None:
    """What the guide says of PySpark 4.0/4.1: availableNow with consume=ack is one batch that Spark never
    commits to the source, so nothing is acknowledged and every message comes again (nothing lost)."""
    if ADMISSION_CONTROL:
        pytest.skip(f"PySpark {PYSPARK_VERSION} runs availableNow through the source (test_stream_limits.py)")
    destination = f"/queue/{new_queue('versions-ack-now')}"
    publish_queue("rabbitmq", destination, range(200))
    options = source_options("rabbitmq", destination)
    with Query(spark, options, tmp_path / "out", tmp_path / "ck", availableNow=True) as query:
        assert query.awaitTermination(120)
    written = read_rows(spark, tmp_path / "out")
    assert written
    assert len(drain("rabbitmq", destination, quiet=1.0)) == 200  # all still queued


def test_get_session_registers_the_source_on_every_version(tmp_path: Path) -> None:
    # PySpark 4.0 registers pyspark_stomp's source by itself at start and refuses a second
    # registration of the name (DATA_SOURCE_ALREADY_EXISTS): get_session's default failed there
    from fastframe.spark.session import get_session, register

    session = get_session("local[1]", app_name="fastframe-tests-register")
    assert register(session) is True  # a second time: no error either
    assert "body" in session.read.format("stomp").load(str(tmp_path)).columns  # the source answers
