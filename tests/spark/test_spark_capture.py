"""A capture (``fastframe.capture``: the recording proxy in front of the in-memory broker) read by Spark: rolled
files split at their ``.ffidx``, rows as the bare decoder decodes them, and SEND -> MESSAGE latency computed
from the ``received_at`` column."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from pyspark.sql import functions as F

import fastframe
from _extras import require
from fastframe import aio
from fastframe.archive import compressed_reader
from fastframe.capture import Archive, serve_proxy

from .helpers import bare_decode, split_rows

N = 300


def collect(df: Any) -> Any:
    return [row.asDict(recursive=True) for row in df.collect()]


async def _session(root: str, compression: Any = None) -> None:
    with Archive(root, "mem", roll_size=96 << 10, index_interval=4 << 10, compression=compression) as archive:
        async with aio.Broker(port=0) as broker:
            async with await serve_proxy(archive, "127.0.0.1", 0, "127.0.0.1", broker.port) as proxy:
                async with aio.connect("127.0.0.1", proxy.port, max_queue=N + 1) as client:
                    async with await client.subscribe("/queue/lat") as sub:
                        for i in range(N):
                            await client.send("/queue/lat", b"\0" * 400 + bytes([i % 256]), {"x-n": str(i)})
                        for _ in range(N):
                            await sub.get(timeout=10)
                await asyncio.sleep(0.1)


def test_a_capture_in_spark_send_to_message_latency(spark: Any, tmp_path: Any) -> None:
    root = str(tmp_path / "archive")
    asyncio.run(asyncio.wait_for(_session(root), 60))
    df = spark.read.format("stomp").option("recursiveFileLookup", True).option("maxPartitionBytes", "32k").load(root)
    assert df.rdd.getNumPartitions() > 2
    expected = {}
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(".stomp"):
                path = os.path.join(folder, name)
                with open(path, "rb") as stream:
                    expected[path] = bare_decode(fastframe, stream.read())  # (the codec's tests cover both twins)
    assert len([p for p in expected if ".s2c" in p]) > 1  # rolled
    assert split_rows(collect(df)) == expected
    sent = df.where("command = 'SEND'").select(F.col("header_map")["x-n"].alias("n"), F.col("received_at").alias("at"))
    got = df.where("command = 'MESSAGE'").select(
        F.col("header_map")["x-n"].alias("n"), F.col("received_at").alias("at2")
    )
    latency = sent.join(got, "n").select((F.unix_micros("at2") - F.unix_micros("at")).alias("us"))
    values = [row["us"] for row in latency.collect()]
    assert len(values) == N and all(value is not None and 0 <= value < 10_000_000 for value in values)


def test_a_zstd_capture_in_spark(spark: Any, tmp_path: Any) -> None:
    """Rolled zstd pieces (``fastframe record --zstd``): each read whole (a compressed file is not split), every
    frame as recorded, with its arrival time."""
    if sys.version_info < (3, 14):
        require("zstandard", "zstd")
    root = str(tmp_path / "archive")
    asyncio.run(asyncio.wait_for(_session(root, "zstd"), 60))
    df = spark.read.format("stomp").option("recursiveFileLookup", True).option("maxPartitionBytes", "32k").load(root)
    expected = {}
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(".stomp.zst"):
                path = os.path.join(folder, name)
                with open(path, "rb") as raw, compressed_reader(raw, "zstd") as stream:
                    expected[path] = bare_decode(fastframe, bytes(stream.read()))
    assert len([p for p in expected if ".s2c" in p]) > 1  # rolled
    rows = collect(df)
    assert split_rows(rows) == expected
    assert all(row["received_at"] is not None for row in rows)
