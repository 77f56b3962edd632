"""``df.write.format("stomp")`` and ``df.writeStream.format("stomp")`` to live brokers, read back by the
asyncio client byte for byte: bodies with NULs, headers that need escaping (repeats kept), a per-row
destination; every SEND confirmed by a receipt before the task reports success."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from .stream_helpers import (
    BROKERS,
    RABBIT,
    delete_streams,  # noqa: F401  (deletes the streams a session declared)
    drain,
    message,
    new_queue,
    publish_stream,
    require_broker,
    source_options,
)


def _sink_options(broker: str, **extra: Any) -> Dict[str, str]:
    options = source_options(broker, "")
    del options["destination"]
    return {**options, **{name: str(value) for name, value in extra.items()}}


def _as_sent(received: List[Any]) -> List[Tuple[bytes, Dict[str, str]]]:
    out = []
    for got in received:
        headers = dict(reversed(got.headers))  # the first of each name
        out.append((got.body, {name: headers[name] for name in ("n", "k", "colon:name")}))
    return sorted(out, key=lambda item: int(item[1]["n"]))


@pytest.mark.parametrize("broker", ["rabbitmq", "activemq"])
def test_batch_write_reaches_the_broker_byte_for_byte(spark: Any, broker: str) -> None:
    require_broker(BROKERS[broker])
    first, second = f"/queue/{new_queue('sink-a')}", f"/queue/{new_queue('sink-b')}"
    rows = []
    for n in range(400):
        body, headers = message(n)
        pairs = [{"name": k, "value": v} for k, v in headers.items()] + [{"name": "n", "value": "repeat"}]
        rows.append((body, pairs, first if n % 2 else second))
    schema = "body binary, headers array<struct<name:string,value:string>>, destination string"
    frame = spark.createDataFrame(rows, schema).repartition(2)
    writer = frame.write.format("stomp").mode("append")
    for name, value in _sink_options(broker, maxInFlight=50).items():
        writer = writer.option(name, value)
    writer.save()  # returns once every task's SENDs were confirmed
    for destination, parity in ((first, 1), (second, 0)):
        received = drain(broker, destination, quiet=1.0)
        expected = [message(n) for n in range(400) if n % 2 == parity]
        assert _as_sent(received) == expected  # (the brokers keep the first of a repeated name)


def test_stream_to_queue_from_a_stream_queue(spark: Any, tmp_path: Path) -> None:
    require_broker(RABBIT)
    stream, target = new_queue("sink-from"), f"/queue/{new_queue('sink-to')}"
    publish_stream(stream, range(1500))
    reader = spark.readStream.format("stomp")
    for name, value in source_options("rabbitmq", f"/queue/{stream}", consume="stream").items():
        reader = reader.option(name, value)
    writer = (
        reader.load()
        .select("body", "headers")
        .writeStream.format("stomp")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
    )
    for name, value in _sink_options("rabbitmq", destination=target).items():
        writer = writer.option(name, value)
    query = writer.start()
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()
    received = drain("rabbitmq", target, quiet=1.0)
    assert _as_sent(received) == [message(n) for n in range(1500)]
    assert all(m.get("x-stream-offset") is not None for m in received)  # the source's headers went along


def test_a_sink_to_a_broker_that_is_down_names_host_and_port(spark: Any) -> None:
    frame = spark.createDataFrame([(b"x",)], "body binary")
    writer = frame.write.format("stomp").mode("append").option("host", "127.0.0.1").option("port", "1")
    with pytest.raises(Exception, match="options host and port"):
        writer.option("destination", "/queue/x").option("connectTimeout", "5").save()
