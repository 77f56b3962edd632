"""What the broker source and sink say when something is wrong: one error naming the option to fix, in
bounded time (broker down, login refused, destination missing, a stream read as a queue and the reverse,
a range that cannot be read within ``timeout``), and the same text in a failed Spark query."""

from __future__ import annotations

import time
from typing import Any, Dict

import pytest

from fastframe.spark._stream_client import BrokerError
from fastframe.spark._stream_options import sink_options, source_options
from fastframe.spark._stream_read import read_range
from fastframe.spark._stream_source import AckQueueReader, StreamQueueReader, stream_reader

from .stream_helpers import (
    BROKERS,
    RABBIT,
    declare_stream,
    delete_streams,  # noqa: F401  (deletes the streams a session declared)
    new_queue,
    publish_queue,
    publish_raw,
    require_broker,
)
from .stream_helpers import source_options as live_options


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens there once the socket is closed


def _fails(reader: Any, *words: str, within: float = 15.0) -> str:
    started = time.monotonic()
    with pytest.raises(BrokerError) as caught:
        try:
            reader.latestOffset(reader.initialOffset(), reader.getDefaultReadLimit())
        finally:
            reader.stop()
    assert time.monotonic() - started < within
    message = str(caught.value)
    for word in words:
        assert word in message, message
    return message


@pytest.mark.parametrize("consume", ["stream", "ack"])
def test_broker_down_names_host_and_port(consume: str) -> None:
    options = {"host": "127.0.0.1", "port": str(_closed_port()), "destination": "/queue/x", "consume": consume}
    _fails(stream_reader(options), "cannot connect", "options host and port")


def test_login_refused_names_login_and_passcode() -> None:
    require_broker(RABBIT)
    options = live_options("rabbitmq", "/queue/x", consume="stream", passcode="wrong")
    _fails(StreamQueueReader(options), "refused the connection", "login, passcode")


def test_missing_stream_names_destination() -> None:
    require_broker(RABBIT)
    options = live_options("rabbitmq", f"/queue/{new_queue('missing')}", consume="stream")
    _fails(StreamQueueReader(options), "does not exist", "option destination")


def test_stream_read_as_queue_and_queue_read_as_stream() -> None:
    require_broker(RABBIT)
    stream = new_queue("is-stream")
    declare_stream(stream)
    _fails(AckQueueReader(live_options("rabbitmq", f"/queue/{stream}")), "is a stream queue", "consume=stream")
    classic = f"/queue/{new_queue('is-classic')}"
    publish_queue("rabbitmq", classic, range(1))
    _fails(StreamQueueReader(live_options("rabbitmq", classic, consume="stream")), "not a stream queue", "consume=ack")


def test_stream_mode_on_activemq_says_use_ack() -> None:
    require_broker(BROKERS["activemq"])
    options = live_options("activemq", "/queue/x", consume="stream")
    _fails(StreamQueueReader(options), "RabbitMQ stream queues", "consume=ack")


def test_a_range_that_never_arrives_ends_at_the_timeout_option() -> None:
    require_broker(RABBIT)
    stream = new_queue("empty")
    declare_stream(stream)
    opts = source_options(live_options("rabbitmq", f"/queue/{stream}", consume="stream", timeout=1))
    started = time.monotonic()
    with pytest.raises(BrokerError, match="option timeout"):
        list(read_range(opts, f"/queue/{stream}", 0, 10))
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"host": "h", "destination": "/queue/a", "consume": "sometimes"}, "option consume"),
        ({"host": "h"}, "option destination"),
        ({"host": "h", "destination": "/queue/a", "bogus": "1"}, "unknown broker source option 'bogus'"),
        ({"host": "h", "destination": "/topic/a", "consume": "stream"}, "option destination"),
        ({"host": "h", "destination": "/queue/a", "timeout": "0"}, "option timeout"),
        ({"host": "h", "destination": "/queue/a", "startingOffsets": "soon"}, "option startingOffsets"),
        ({"host": "h", "port": "99999", "destination": "/queue/a"}, "option port"),
    ],
)
def test_bad_source_options(options: Dict[str, str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        source_options(options)


def test_bad_sink_options() -> None:
    with pytest.raises(ValueError, match="'body' column"):
        sink_options({"host": "h", "destination": "/queue/a"}, ["value"])
    with pytest.raises(ValueError, match="option destination"):
        sink_options({"host": "h"}, ["body"])
    assert sink_options({"host": "h"}, ["body", "destination"]).destination is None


def test_a_failed_query_shows_the_reason(spark: Any, tmp_path: Any) -> None:
    require_broker(RABBIT)
    options = live_options("rabbitmq", f"/queue/{new_queue('missing')}", consume="stream")
    reader = spark.readStream.format("stomp")
    for name, value in options.items():
        reader = reader.option(name, value)
    query = reader.load().writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "ck"))
    started = query.start(str(tmp_path / "out"))
    try:
        with pytest.raises(Exception, match="does not exist on the broker") as caught:
            started.awaitTermination(60)
        assert "option destination" in str(caught.value)
    finally:
        started.stop()


def test_the_guides_option_table_matches_the_code() -> None:
    import re
    from pathlib import Path

    from fastframe.spark._stream_options import broker_option_names

    guide = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "spark.md").read_text(encoding="utf-8")
    section = re.search(r"^## Streaming from a broker\n(.*?)(?=^## )", guide, re.M | re.S)
    assert section, "the Spark guide has no 'Streaming from a broker' section"
    rows = re.findall(r"^\| (`[^|]+)\|", section.group(1), re.M)
    documented = {name for row in rows for name in re.findall(r"`([A-Za-z]+)`", row)}
    documented.add("destinations")  # (mentioned in the destination row's text)
    documented.add("servers")
    assert documented == set(broker_option_names("source")) | set(broker_option_names("sink"))


def test_ack_mode_on_a_stream_queue_is_an_error_at_once() -> None:
    """/amq/queue/NAME of a stream subscribes fine with consume=ack and delivers nothing: refused instead."""
    require_broker(RABBIT)
    stream = new_queue("ack-on-stream")
    declare_stream(stream)
    _fails(AckQueueReader(live_options("rabbitmq", f"/amq/queue/{stream}")), "is a stream queue", "consume=stream")


def test_ack_mode_on_a_stream_queue_fails_an_available_now_query(spark: Any, tmp_path: Any) -> None:
    require_broker(RABBIT)
    stream = new_queue("ack-on-stream-now")
    declare_stream(stream)
    options = live_options("rabbitmq", f"/amq/queue/{stream}")
    reader = spark.readStream.format("stomp")
    for name, value in options.items():
        reader = reader.option(name, value)
    writer = reader.load().writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "ck"))
    query = writer.trigger(availableNow=True).start(str(tmp_path / "out"))
    try:
        with pytest.raises(Exception, match="is a stream queue") as caught:
            query.awaitTermination(60)
        assert "consume=stream" in str(caught.value)
    finally:
        query.stop()


def test_a_connection_lost_while_polling_fails_the_batch() -> None:
    """consume=ack: the driver's connection ends (here: the broker stops) -> an error, not an empty batch."""
    import asyncio
    import threading

    import fastframe.aio as aio
    from fastframe.spark._stream_read import QueueConsumer

    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: Dict[str, Any] = {}

    async def serve() -> None:
        async with aio.Broker(port=0) as broker:
            holder["port"], holder["stop"] = broker.port, asyncio.Event()
            ready.set()
            await holder["stop"].wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    consumer = QueueConsumer(
        source_options({"host": "127.0.0.1", "port": str(holder["port"]), "destination": "/queue/a"})
    )
    try:
        assert consumer.poll(0, 0) == {"/queue/a": []}  # connected, nothing queued: an empty poll
        loop.call_soon_threadsafe(holder["stop"].set)
        thread.join(10)
        started = time.monotonic()
        with pytest.raises(BrokerError, match="connection ended"):
            for _ in range(50):
                consumer.poll(0, 0)
        assert time.monotonic() - started < 10
    finally:
        consumer.close()
        loop.close()


def test_a_bad_option_fails_at_load(spark: Any) -> None:
    """In the driver, at load(), before any query starts: the reason on one line of its own."""
    reader = spark.readStream.format("stomp")
    for name, value in {"host": "127.0.0.1", "destination": "/queue/a", "consume": "sometimes"}.items():
        reader = reader.option(name, value)
    with pytest.raises(Exception, match="option consume: 'sometimes' is not ack or stream"):
        reader.load()


def test_a_poison_header_is_a_row_and_acknowledged() -> None:
    """consume=ack: a header value that is not UTF-8 (RabbitMQ passes it on) no longer ends the connection:
    the message is a row with error_code and its bytes, the ones after it come too, and all are acknowledged."""
    require_broker(RABBIT)
    from fastframe.spark._stream_read import QueueConsumer
    from fastframe.spark._stream_schema import messages_to_batch

    destination = f"/queue/{new_queue('poison')}"
    publish_raw(RABBIT.port, destination, [b"ok", b"ok", b"\xff\xfe", b"ok"])
    opts = source_options(live_options("rabbitmq", destination))
    consumer = QueueConsumer(opts)
    got: list = []
    try:
        for _ in range(20):
            got.extend(consumer.poll(0, 0)[destination])
            if len(got) >= 4:
                break
        rows = messages_to_batch(destination, got, None, "c").to_pylist()
        assert [row["body"] for row in rows] == [b"body0", b"body1", b"body2", b"body3"]
        assert [row["error_code"] for row in rows] == [None, None, "invalid-utf8", None]
        assert b"x-value:\xff\xfe\n" in rows[2]["raw_headers"]
        assert consumer.ack(got) == 0
    finally:
        consumer.close()
    # acknowledged like any other row: nothing comes again
    again = QueueConsumer(opts)
    try:
        assert again.poll(0, 0)[destination] == []
    finally:
        again.close()
