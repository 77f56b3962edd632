"""Streaming from a broker into Parquet, against the two ceilings, in one run (live RabbitMQ needed).

    python -m bench.spark_stream_bench                          # 200,000 messages of 200 bytes, local[2]
    python -m bench.spark_stream_bench --messages 20000 --batch 5000   # quick

Source (messages/s, on one RabbitMQ stream queue filled beforehand):

1. **asyncio client alone**: ``fastframe.aio`` draining the stream from its first offset in this process
   (``ack:client``, the same prefetch as the source's tasks): the client's ceiling on this machine;
2. **Spark's rate source into Parquet**: ``rate-micro-batch`` rows with the stomp rows' schema (the
   same body size, nine headers as array and map), the same rows per batch: Spark's ceiling for a
   micro-batch of these rows into Parquet;
3. **stomp source into Parquet**: ``spark.readStream.format("stomp")`` with ``consume=stream`` and
   ``maxMessagesPerTrigger`` = ``--batch``, into a checkpointed Parquet sink.

Spark rates are rows over the summed ``triggerExecution`` time of every batch but the first two
(they pay for starting the Python workers): the steady state. The stomp source reads its one
destination with ``minPartitions`` = 2 (two tasks, each subscribed at its own offset). The target (issue 20): the stomp source at
70% or more of the lower ceiling.

Sink (messages/s): the same rows written by ``df.write.format("stomp")`` (every SEND confirmed by a
receipt, ``maxInFlight`` at once) against the asyncio client publishing them with a receipt each (the
same window) and without receipts. Both write to stream queues (nothing to drain afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

import fastframe.aio as aio

HOST, PORT = "127.0.0.1", 61613
HEADERS = ("subscription", "destination", "message-id", "redelivered", "ack", "n", "x-stream-offset", "receipt",
           "content-length")  # fmt: skip
CLIENT = {"login": "guest", "passcode": "guest", "host_header": "/", "escapes": "1.2"}


QUEUES: List[str] = []


def _queue(label: str) -> str:
    QUEUES.append(f"ff-bench-{label}-{os.urandom(4).hex()}")
    return QUEUES[-1]


def _delete_queues() -> None:
    """Delete the run's stream queues with ``rabbitmqctl`` when this machine has it (STOMP cannot)."""
    ctl = shutil.which("rabbitmqctl")
    if not QUEUES or ctl is None:
        return
    names = ", ".join(f'<<"{name}">>' for name in QUEUES)
    code = (
        '[case rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, N)) of {ok, Q} -> '
        f'rabbit_amqqueue:delete(Q, false, false, <<"fastframe-bench">>); Other -> Other end || N <- [{names}]].'
    )
    subprocess.run([ctl, "eval", code], capture_output=True, timeout=60, check=False)


async def _declare(client: Any, queue: str) -> None:
    headers = {"x-queue-type": "stream", "durable": "true", "auto-delete": "false", "prefetch-count": "1"}
    sub = await client.subscribe(f"/queue/{queue}", ack="client", headers=headers)
    await sub.unsubscribe()


def _body(n: int, size: int) -> bytes:
    return (b"%010d" % n + b"\x00" * size)[:size]


async def _publish(queue: str, count: int, size: int, window: int, receipts: bool) -> float:
    """Publish ``count`` messages to a (new) stream queue; return messages/s."""
    async with aio.connect(HOST, PORT, timeout=60, **CLIENT) as client:
        await _declare(client, queue)
        started = time.perf_counter()
        pending: List[Any] = []
        for n in range(count):
            send = client.send(f"/amq/queue/{queue}", _body(n, size), {"n": str(n)}, receipt=receipts)
            if receipts:
                pending.append(asyncio.ensure_future(send))
                if len(pending) >= window:
                    await asyncio.gather(*pending[: window // 2])
                    del pending[: window // 2]
            else:
                await send
        await asyncio.gather(*pending)
        if not receipts:
            await client.send(f"/amq/queue/{queue}", b"", {"n": "last"}, receipt=True)
        return count / (time.perf_counter() - started)


async def _drain(queue: str, count: int, prefetch: int) -> float:
    async with aio.connect(HOST, PORT, timeout=60, **CLIENT) as client:
        headers = {"x-stream-offset": "first", "prefetch-count": str(prefetch)}
        started = time.perf_counter()
        sub = await client.subscribe(f"/amq/queue/{queue}", ack="client", headers=headers, max_queue=prefetch + 1)
        got = 0
        async for message in sub:
            got += 1
            if got % (prefetch // 2) == 0:
                await message.ack()
            if got >= count:
                break
        rate = count / (time.perf_counter() - started)
        await sub.unsubscribe()
        return rate


def _steady_rate(query: Any) -> Dict[str, float]:
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    warm = progress[2:] or progress  # the first two batches start the Python workers
    rows = sum(p["numInputRows"] for p in warm)
    millis = sum(p["durationMs"]["triggerExecution"] for p in warm)
    total = sum(p["numInputRows"] for p in progress)
    details = [[p["numInputRows"], p["durationMs"]["triggerExecution"], p["durationMs"].get("latestOffset", 0)]
               for p in progress]  # fmt: skip
    rate = rows / (millis / 1000.0) if millis else 0.0
    return {"rate": rate, "batches": len(progress), "rows": total, "details": details}


def _stomp_source(spark: Any, queue: str, batch: int, folder: str) -> Dict[str, float]:
    reader = spark.readStream.format("stomp")
    options = {"host": HOST, "port": str(PORT), "login": "guest", "passcode": "guest", "consume": "stream"}
    options.update({"destination": f"/queue/{queue}", "maxMessagesPerTrigger": str(batch), "minPartitions": "2"})
    for name, value in options.items():
        reader = reader.option(name, value)
    started = time.perf_counter()
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("checkpointLocation", os.path.join(folder, "stomp-ck"))
        .start(os.path.join(folder, "stomp-out"))
    )
    try:
        query.processAllAvailable()
        wall = time.perf_counter() - started
        return {**_steady_rate(query), "wall": wall}
    finally:
        query.stop()


def _rate_source(spark: Any, count: int, batch: int, size: int, folder: str) -> Dict[str, float]:
    query = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", batch)
        .load()
        .selectExpr(
            "'/queue/bench' as destination",
            "value as offset",
            "cast(value as string) as message_id",
            "'sub-1' as subscription",
            "false as redelivered",
            f"unhex(repeat('00', {size})) as body",
            "timestamp as received_at",
            "'c' as codec",
            # the headers a RabbitMQ stream MESSAGE carries (9 of them), as array and map
            "array("
            + ", ".join(f"named_struct('name', '{name}', 'value', cast(value as string))" for name in HEADERS)
            + ") as headers",
        )  # fmt: skip
        .selectExpr("*", "map_from_entries(headers) as header_map")
        .writeStream.format("parquet")
        .option("checkpointLocation", os.path.join(folder, "rate-ck"))
        .start(os.path.join(folder, "rate-out"))
    )
    try:
        deadline = time.monotonic() + 600
        while sum(p["numInputRows"] for p in query.recentProgress) < count and time.monotonic() < deadline:
            time.sleep(0.2)
        return _steady_rate(query)
    finally:
        query.stop()


def _stomp_sink(spark: Any, count: int, size: int, window: int) -> float:
    rows = spark.range(count).selectExpr(
        f"concat(lpad(cast(id as string), 10, '0'), unhex(repeat('00', {size - 10}))) as body"
    )
    rows = rows.repartition(2).cache()
    rows.count()
    queue = _queue("sink")
    asyncio.run(_publish(queue, 0, size, window, False))  # declares the stream
    started = time.perf_counter()
    writer = rows.write.format("stomp").mode("append")
    options = {"host": HOST, "port": str(PORT), "login": "guest", "passcode": "guest"}
    options.update({"destination": f"/amq/queue/{queue}", "maxInFlight": str(window)})
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save()
    rate = count / (time.perf_counter() - started)
    rows.unpersist()
    return rate


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=20_000, help="maxMessagesPerTrigger and rowsPerBatch")
    parser.add_argument("--size", type=int, default=200, help="body bytes")
    parser.add_argument("--prefetch", type=int, default=1000)
    parser.add_argument("--window", type=int, default=1000, help="receipts awaited at once (sink)")
    parser.add_argument("--sink-messages", type=int, default=50_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from fastframe.spark import get_session

    queue = _queue("source")
    publish = asyncio.run(_publish(queue, args.messages, args.size, args.window, False))
    client_drain = asyncio.run(_drain(queue, args.messages, args.prefetch))
    spark = get_session("local[2]", app_name="fastframe-stream-bench", conf={"spark.sql.shuffle.partitions": "2"})
    with tempfile.TemporaryDirectory(prefix="ff-stream-bench-") as folder:
        rate = _rate_source(spark, args.messages, args.batch, args.size, folder)
        stomp = _stomp_source(spark, queue, args.batch, folder)
    sink = _stomp_sink(spark, args.sink_messages, args.size, args.window)
    client_receipts = asyncio.run(_publish(_queue("pub"), args.sink_messages, args.size, args.window, True))
    client_plain = asyncio.run(_publish(_queue("pub"), args.sink_messages, args.size, args.window, False))
    spark.stop()
    _delete_queues()
    ceiling = min(client_drain, rate["rate"])
    result = {
        "messages": args.messages, "batch": args.batch, "body_bytes": args.size,
        "source": {
            "asyncio_client_drain": round(client_drain), "spark_rate_source_to_parquet": round(rate["rate"]),
            "stomp_stream_to_parquet": round(stomp["rate"]), "stomp_wall_incl_startup": round(args.messages / stomp["wall"]),
            "stomp_batches": stomp["batches"], "of_lower_ceiling": round(stomp["rate"] / ceiling, 3),
            "stomp_batch_rows_ms_latestoffset_ms": stomp["details"], "rate_batch_rows_ms": rate["details"],
        },
        "sink": {
            "stomp_write_with_receipts": round(sink), "asyncio_client_with_receipts": round(client_receipts),
            "asyncio_client_no_receipts": round(client_plain), "of_client_with_receipts": round(sink / client_receipts, 3),
        },
        "publish_fill_no_receipts": round(publish),
    }  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    src, snk = result["source"], result["sink"]
    print(f"source, messages/s ({args.messages} messages of {args.size} bytes, {args.batch} per batch, local[2]):")
    print(f"  asyncio client draining the stream   {src['asyncio_client_drain']:>10,}")
    print(f"  Spark rate source -> Parquet         {src['spark_rate_source_to_parquet']:>10,}")
    print(f"  stomp stream source -> Parquet       {src['stomp_stream_to_parquet']:>10,}"
          f"   ({src['of_lower_ceiling']:.0%} of the lower ceiling; {src['stomp_wall_incl_startup']:,}/s wall incl. start)")  # fmt: skip
    print(f"sink, messages/s ({args.sink_messages} rows):")
    print(f"  df.write.format('stomp') (receipts)  {snk['stomp_write_with_receipts']:>10,}")
    print(f"  asyncio client, receipts             {snk['asyncio_client_with_receipts']:>10,}"
          f"   (stomp sink at {snk['of_client_with_receipts']:.0%})")  # fmt: skip
    print(f"  asyncio client, no receipts          {snk['asyncio_client_no_receipts']:>10,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
