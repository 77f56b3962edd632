"""Streaming from a broker into Parquet, against the two ceilings, in one run (live RabbitMQ needed).

    python -m bench.spark_stream_bench                          # 200,000 messages of 200 bytes, local[2]
    python -m bench.spark_stream_bench --messages 20000 --batch 5000   # quick
    sudo python -m bench.spark_stream_bench --broker-core       # RabbitMQ on one core, Spark on the other
    python -m bench.spark_stream_bench --available-now          # a method that runs on PySpark 4.0/4.1 too
    PYTHONPATH=$PWD/src out/venv-pyspark-4.0/bin/python -m bench.spark_stream_bench --available-now  # (.ci/pyspark-floor's venv)

Source (messages/s, on one RabbitMQ stream queue filled beforehand):

1. **asyncio client alone**: ``fastframe.aio`` draining the stream from its first offset in this process
   (``ack:client``, the same prefetch as the source's tasks): the client's ceiling on this machine;
2. **Spark's rate source into Parquet**: ``rate-micro-batch`` rows with the stomp rows' schema (the
   same body size, nine headers as array and map), the same rows per batch, after an untimed run of
   half as many rows that warms the JVM: Spark's ceiling for a micro-batch of these rows into Parquet;
3. **a Python streaming source of prebuilt rows into Parquet**: the stomp rows of the same stream, made
   beforehand into an Arrow IPC file, emitted by a trivial ``DataSourceStreamReader`` (two tasks per
   batch): what Spark's Python streaming path itself costs for these rows;
4. **stomp source into Parquet**: ``spark.readStream.format("stomp")`` with ``consume=stream`` and
   ``maxMessagesPerTrigger`` = ``--batch``, into a checkpointed Parquet sink.

Spark rates are rows over the summed ``triggerExecution`` time of every batch but the first two
(they pay for starting the Python workers): the steady state. For the two Python sources the same steady
state's CPU seconds per batch (Linux): RabbitMQ's ``beam.smp``, the Spark JVM, its Python workers; a
batch can take no less than their sum over the cores. The stomp source reads its one
destination with ``minPartitions`` = 2 (two tasks, each subscribed at its own offset). The target (issue 20): the stomp source at
70% or more of the lower ceiling.

``--broker-core`` caps RabbitMQ's ``beam.smp`` at one core and this process with all it starts (the
asyncio client, Spark's JVM, its Python workers) at the other (``bench/cgroups.py``: cgroup v1
quotas, root), as when the broker has a machine of its own, which is how a broker is deployed: both
ceilings and the stomp source are then measured with the same core for Spark, and RabbitMQ's CPU no
longer competes with Spark's.

``--available-now`` is the method that runs the same on PySpark 4.0, 4.1 and 4.2+ (those before 4.2 have
no admission control for Python streaming sources: no ``maxMessagesPerTrigger`` with ``consume=stream``,
no ``latestOffset(start, limit)``): each Python source is one ``availableNow`` query over the whole
backlog, which with no limit is one batch, after an untimed run of the same kind on half as many rows
(the JVM's compiler, Spark's Python workers): the rate source the first batch of a query with
``rowsPerBatch`` = ``--messages`` (stopped after it), the prebuilt
rows' source a reader with the old ``latestOffset()`` (no limit, one batch of ``--messages`` rows, on
every version), the stomp source ``consume=stream`` with no ``maxMessagesPerTrigger``. Rates are the
rows over that batch's ``triggerExecution``; CPU seconds are the whole query's, per 20,000 rows.
The sink is not measured in this mode.

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
import threading
import time
from typing import Any, Dict, Iterator, List, Tuple

import fastframe.aio as aio

from .cgroups import CpuCaps

HOST, PORT = "127.0.0.1", 61613
HEADERS = ("subscription", "destination", "message-id", "redelivered", "ack", "n", "x-stream-offset", "receipt",
           "content-length")  # fmt: skip
CLIENT = {"login": "guest", "passcode": "guest", "host_header": "/", "escapes": "1.2"}


QUEUES: List[str] = []
ONE_BATCH_CPU_ROWS = 20_000  # --available-now: CPU seconds per this many rows, as a batch of the default mode


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


def _descends_from_us(pid: str) -> bool:
    for _ in range(16):
        with open(f"/proc/{pid}/stat") as f:
            pid = f.read().rsplit(")", 1)[1].split()[1]  # the parent
        if int(pid) == os.getpid():
            return True
        if int(pid) <= 1:
            return False
    return False


def _processes() -> Iterator[Tuple[str, bytes, bytes]]:
    """(pid, program name, whole command line) of every process (Linux /proc)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue  # ended meanwhile
        yield pid, os.path.basename(command.split(b"\0")[0]), command


def _cpu_seconds() -> Dict[str, float]:
    """CPU seconds so far (Linux /proc; {} elsewhere) of RabbitMQ's beam.smp, of this run's Spark JVM
    and of its Python workers (Spark's and the driver's Python processes it started)."""
    if not os.path.isdir("/proc/self"):
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    out = {"rabbitmq": 0.0, "spark_jvm": 0.0, "python_workers": 0.0}
    for pid, program, command in _processes():
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            seconds = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
            if program == b"beam.smp":
                out["rabbitmq"] += seconds
            elif program == b"java" and _descends_from_us(pid):
                out["spark_jvm"] += seconds
            elif b"pyspark" in command and _descends_from_us(pid):
                out["python_workers"] += seconds
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
    return out


class _SteadyCpu:
    """CPU seconds per batch of a query's steady state: from the end of its second batch with rows (as
    :func:`_steady_rate`) to the end, polled from a thread while the caller waits for the query."""

    def __init__(self, query: Any, batch: int) -> None:
        self.query, self.batch, self.stop = query, batch, threading.Event()
        self.start: Dict[str, float] = {}
        self.rows_at_start = 0
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.stop.wait(0.05):
            progress = [p for p in self.query.recentProgress if p["numInputRows"]]
            if len(progress) >= 2:
                self.start, self.rows_at_start = _cpu_seconds(), sum(p["numInputRows"] for p in progress)
                return

    def result(self) -> Dict[str, float]:
        end = _cpu_seconds()
        self.stop.set()
        self.thread.join(10)
        rows = sum(p["numInputRows"] for p in self.query.recentProgress) - self.rows_at_start
        if not self.start or rows <= 0:
            return {}
        return {name: round((end[name] - self.start[name]) * self.batch / rows, 3) for name in end}


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


def _one_batch(query: Any, started: float, cpu_start: Dict[str, float], per_rows: int) -> Dict[str, Any]:
    """An availableNow query's one batch with rows: its rate, the wall rate from the query's start, and
    the whole query's CPU seconds per ``per_rows`` rows."""
    if not query.awaitTermination(900):
        raise SystemExit("an availableNow query did not end within 15 minutes")
    wall = time.perf_counter() - started
    cpu_end = _cpu_seconds()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    millis = sum(p["durationMs"]["triggerExecution"] for p in progress)
    details = [[p["numInputRows"], p["durationMs"]["triggerExecution"], p["durationMs"].get("latestOffset", 0)]
               for p in progress]  # fmt: skip
    cpu = {name: round((cpu_end[name] - cpu_start[name]) * per_rows / rows, 3) for name in cpu_end} if rows else {}
    rate = rows / (millis / 1000.0) if millis else 0.0
    return {"rate": rate, "batches": len(progress), "rows": rows, "details": details, "wall": wall, "cpu": cpu}


def _stomp_source(
    spark: Any, queue: str, batch: int, arrow_rows: int, folder: str, label: str = "stomp"
) -> Dict[str, Any]:
    """``batch`` messages per trigger, or with ``batch`` 0 one availableNow query over the whole stream."""
    reader = spark.readStream.format("stomp")
    options = {"host": HOST, "port": str(PORT), "login": "guest", "passcode": "guest", "consume": "stream"}
    options.update({"destination": f"/queue/{queue}", "minPartitions": "2"})
    if batch:
        options["maxMessagesPerTrigger"] = str(batch)
    if arrow_rows:
        options["maxRecordsPerBatch"] = str(arrow_rows)
    for name, value in options.items():
        reader = reader.option(name, value)
    writer = (
        reader.load().writeStream.format("parquet").option("checkpointLocation", os.path.join(folder, f"{label}-ck"))
    )
    if not batch:
        writer = writer.trigger(availableNow=True)
    cpu_start, started = _cpu_seconds(), time.perf_counter()
    query = writer.start(os.path.join(folder, f"{label}-out"))
    if not batch:
        try:
            return _one_batch(query, started, cpu_start, ONE_BATCH_CPU_ROWS)
        finally:
            query.stop()
    cpu = _SteadyCpu(query, batch)
    try:
        query.processAllAvailable()
        wall = time.perf_counter() - started
        return {**_steady_rate(query), "wall": wall, "cpu": cpu.result()}
    finally:
        query.stop()


def _rate_query(spark: Any, batch: int, size: int, folder: str, label: str, one_batch: bool = False) -> Any:
    writer = (
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
        .option("checkpointLocation", os.path.join(folder, f"{label}-ck"))
    )
    if one_batch:  # the first batch at once, the next one not before the query is stopped
        writer = writer.trigger(processingTime="1 hour")
    return writer.start(os.path.join(folder, f"{label}-out"))


def _rate_source(spark: Any, count: int, batch: int, size: int, folder: str, label: str = "rate") -> Dict[str, float]:
    query = _rate_query(spark, batch, size, folder, label)
    try:
        deadline = time.monotonic() + 600
        while sum(p["numInputRows"] for p in query.recentProgress) < count and time.monotonic() < deadline:
            time.sleep(0.2)
        return _steady_rate(query)
    finally:
        query.stop()


def _rate_one_batch(spark: Any, count: int, size: int, folder: str, label: str = "rate") -> Dict[str, Any]:
    """The rate source's first batch of ``count`` rows (``rowsPerBatch`` = ``count``), the query stopped
    after it: the rows of one availableNow batch."""
    cpu_start, started = _cpu_seconds(), time.perf_counter()
    query = _rate_query(spark, count, size, folder, label, one_batch=True)
    try:
        deadline = time.monotonic() + 900
        while not any(p["numInputRows"] for p in query.recentProgress) and time.monotonic() < deadline:
            time.sleep(0.05)
        query.stop()
        first = next(p for p in query.recentProgress if p["numInputRows"])
        wall = first["durationMs"]["triggerExecution"] / 1000.0
        cpu_end = _cpu_seconds()
        return {"rate": count / wall, "batches": 1, "rows": count, "wall": time.perf_counter() - started,
                "details": [[count, first["durationMs"]["triggerExecution"], 0]],
                "cpu": {k: round((cpu_end[k] - cpu_start[k]) * ONE_BATCH_CPU_ROWS / count, 3) for k in cpu_end}}  # fmt: skip
    finally:
        query.stop()


def _python_source_ceiling(spark: Any, queue: str, count: int, batch: int, folder: str, one_batch: bool = False,
                           label: str = "prebuilt") -> Dict[str, Any]:  # fmt: skip
    """A Python streaming source that emits the stomp rows made beforehand (Arrow IPC, memory-mapped):
    ``batch`` rows per trigger (PySpark 4.2+), or with ``one_batch`` one availableNow query, its one
    batch all ``count`` rows (every version)."""
    from fastframe.spark._stream_options import source_options
    from fastframe.spark._stream_read import read_range

    opts = source_options({"host": HOST, "login": "guest", "passcode": "guest", "destination": f"/queue/{queue}"})
    path = os.path.join(folder, "rows.arrow")
    import pyarrow as pa  # type: ignore[import-untyped]

    if not os.path.exists(path):
        batches = list(read_range(opts._replace(consume="stream"), f"/queue/{queue}", 0, batch // 2))
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, batches[0].schema) as writer:
            for item in batches:
                writer.write_batch(item)
    spark.dataSource.register(__getattr__("PrebuiltSource"))
    writer = (
        spark.readStream.format("stomp_prebuilt")
        .option("path", path)
        .option("total", count)
        .option("batch", 0 if one_batch else batch)
        .load()
        .writeStream.format("parquet")
        .option("checkpointLocation", os.path.join(folder, f"{label}-ck"))
    )
    if one_batch:
        writer = writer.trigger(availableNow=True)
    cpu_start, started = _cpu_seconds(), time.perf_counter()
    query = writer.start(os.path.join(folder, f"{label}-out"))
    if one_batch:
        try:
            return _one_batch(query, started, cpu_start, ONE_BATCH_CPU_ROWS)
        finally:
            query.stop()
    cpu = _SteadyCpu(query, batch)
    try:
        query.processAllAvailable()
        return {**_steady_rate(query), "cpu": cpu.result()}
    finally:
        query.stop()


def _prebuilt_classes() -> Any:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class Piece(InputPartition):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class Reader(DataSourceStreamReader):
        def __init__(self, options: Any) -> None:
            self.path, self.total, self.batch = options["path"], int(options["total"]), int(options["batch"])

        def initialOffset(self) -> Dict[str, int]:
            return {"i": 0}

        def latestOffset(self, start: Dict[str, int], limit: Any) -> Dict[str, int]:
            return {"i": min(self.total, start["i"] + self.batch)}

        def partitions(self, start: Dict[str, int], end: Dict[str, int]) -> List[Any]:
            rows = end["i"] - start["i"]
            return [Piece(rows // 2), Piece(rows - rows // 2)] if rows else []

        def read(self, partition: Any) -> Any:
            import pyarrow as pa

            table = pa.ipc.open_file(pa.memory_map(self.path)).read_all()
            left = partition.rows
            while left:  # the file's rows again and again (one batch may hold more than the file)
                piece = table.slice(0, left)
                yield from piece.to_batches(max_chunksize=10_000)
                left -= piece.num_rows

    class OneBatchReader(Reader):
        # no arguments: Spark gives this reader no read limit on any version (4.2+ reads the signature),
        # so a batch is all there is: one batch of every row
        def latestOffset(self) -> Dict[str, int]:  # type: ignore[override]
            return {"i": self.total}

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "stomp_prebuilt"

        def schema(self) -> Any:
            from fastframe.spark._stream_schema import stream_spark_schema

            return stream_spark_schema()

        def streamReader(self, schema: Any) -> Any:
            return Reader(self.options) if int(self.options["batch"]) else OneBatchReader(self.options)

    return Source


def __getattr__(name: str) -> Any:
    # PrebuiltSource is made on first use (PySpark is imported only when the bench runs); Spark's
    # workers find it here by name
    if name == "PrebuiltSource":
        source = _prebuilt_classes()
        source.__qualname__ = source.__name__ = "PrebuiltSource"
        globals()["PrebuiltSource"] = source
        return source
    raise AttributeError(name)


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
    parser.add_argument("--arrow-rows", type=int, default=0,
                        help="the stomp source's maxRecordsPerBatch (rows per Arrow batch a task yields; "
                             "default: the source's)")  # fmt: skip
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--broker-core", action="store_true",
                        help="RabbitMQ capped at one core and this run (the asyncio client, Spark's JVM and "
                             "Python workers) at the other, as when the broker has a machine of its own "
                             "(cgroup v1, root)")  # fmt: skip
    parser.add_argument("--available-now", action="store_true",
                        help="each source one availableNow query, one batch of all --messages (no "
                             "maxMessagesPerTrigger): the same method on PySpark 4.0, 4.1 and 4.2+; no sink")  # fmt: skip
    args = parser.parse_args(argv)
    if not args.broker_core:
        return _run(args)
    with CpuCaps(1.0, 2, "part", "--broker-core") as caps:
        caps.add(0, _broker_pid())
        caps.add(1, os.getpid())  # (the JVM and its Python workers start later: they are in it too)
        return _run(args)


def _broker_pid() -> int:
    for pid, program, _ in _processes():
        if program == b"beam.smp":
            return int(pid)
    raise SystemExit("--broker-core: no RabbitMQ (beam.smp) runs here")


def _run(args: Any) -> int:
    from fastframe.spark import get_session

    # the workers import this module (the prebuilt-rows source): the repository's root on their path
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))

    queue = _queue("source")
    publish = asyncio.run(_publish(queue, args.messages, args.size, args.window, False))
    client_drain = asyncio.run(_drain(queue, args.messages, args.prefetch))
    # the stomp source registers itself (PySpark finds the pyspark_stomp module); registering it again
    # fails on PySpark 4.0 (DATA_SOURCE_ALREADY_EXISTS)
    spark = get_session(
        "local[2]", app_name="fastframe-stream-bench", register_source=False, conf={"spark.sql.shuffle.partitions": "2"}
    )
    if args.available_now:
        return _run_available_now(args, spark, queue, publish, client_drain)
    with tempfile.TemporaryDirectory(prefix="ff-stream-bench-") as folder:
        # a first, untimed run warms the JVM (its compiler would otherwise slow the measured batches)
        _rate_source(spark, args.messages // 2, args.batch, args.size, folder, "warm-up")
        rate = _rate_source(spark, args.messages, args.batch, args.size, folder)
        # (the JVM warms up on the Python source path during the first of these two: it goes first)
        prebuilt = _python_source_ceiling(spark, queue, args.messages, args.batch, folder)
        stomp = _stomp_source(spark, queue, args.batch, args.arrow_rows, folder)
    sink = _stomp_sink(spark, args.sink_messages, args.size, args.window)
    client_receipts = asyncio.run(_publish(_queue("pub"), args.sink_messages, args.size, args.window, True))
    client_plain = asyncio.run(_publish(_queue("pub"), args.sink_messages, args.size, args.window, False))
    spark.stop()
    _delete_queues()
    ceiling = min(client_drain, rate["rate"])
    result = {
        "messages": args.messages, "batch": args.batch, "body_bytes": args.size, "broker_core": args.broker_core,
        "source": {
            "asyncio_client_drain": round(client_drain), "spark_rate_source_to_parquet": round(rate["rate"]),
            "stomp_stream_to_parquet": round(stomp["rate"]), "stomp_wall_incl_startup": round(args.messages / stomp["wall"]),
            "python_source_prebuilt_rows_to_parquet": round(prebuilt["rate"]),
            "stomp_of_python_source_ceiling": round(stomp["rate"] / prebuilt["rate"], 3),
            "prebuilt_batch_rows_ms": prebuilt["details"],
            "stomp_batches": stomp["batches"], "of_lower_ceiling": round(stomp["rate"] / ceiling, 3),
            "stomp_batch_rows_ms_latestoffset_ms": stomp["details"], "rate_batch_rows_ms": rate["details"],
            "cpu_s_per_batch_stomp": stomp["cpu"], "cpu_s_per_batch_prebuilt": prebuilt["cpu"],
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
    where = "RabbitMQ on a core of its own, this run on the other" if args.broker_core else "2 shared cores"
    print(
        f"source, messages/s ({args.messages} messages of {args.size} bytes, {args.batch} per batch, local[2], {where}):"
    )
    print(f"  asyncio client draining the stream   {src['asyncio_client_drain']:>10,}")
    print(f"  Spark rate source -> Parquet         {src['spark_rate_source_to_parquet']:>10,}")
    print(f"  Python source, prebuilt rows -> Parquet {src['python_source_prebuilt_rows_to_parquet']:>7,}")
    print(f"  stomp stream source -> Parquet       {src['stomp_stream_to_parquet']:>10,}"
          f"   ({src['of_lower_ceiling']:.0%} of the lower ceiling; {src['stomp_wall_incl_startup']:,}/s wall incl. start)")  # fmt: skip
    for name in ("stomp", "prebuilt"):
        cpu = src[f"cpu_s_per_batch_{name}"]
        if cpu:
            print(f"  CPU s per batch, {name:<8}             " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items()))
    print(f"sink, messages/s ({args.sink_messages} rows):")
    print(f"  df.write.format('stomp') (receipts)  {snk['stomp_write_with_receipts']:>10,}")
    print(f"  asyncio client, receipts             {snk['asyncio_client_with_receipts']:>10,}"
          f"   (stomp sink at {snk['of_client_with_receipts']:.0%})")  # fmt: skip
    print(f"  asyncio client, no receipts          {snk['asyncio_client_no_receipts']:>10,}")
    return 0


def _run_available_now(args: Any, spark: Any, queue: str, publish: float, client_drain: float) -> int:
    import pyspark

    warm_queue = _queue("warm")
    asyncio.run(_publish(warm_queue, args.messages // 2, args.size, args.window, False))
    half = args.messages // 2
    with tempfile.TemporaryDirectory(prefix="ff-stream-bench-") as folder:
        # each measured query follows an untimed one of its kind on half the rows (the JVM's compiler)
        _rate_one_batch(spark, half, args.size, folder, "warm-up")
        rate = _rate_one_batch(spark, args.messages, args.size, folder)
        _python_source_ceiling(spark, queue, half, args.batch, folder, one_batch=True, label="prebuilt-warm-up")
        prebuilt = _python_source_ceiling(spark, queue, args.messages, args.batch, folder, one_batch=True)
        _stomp_source(spark, warm_queue, 0, args.arrow_rows, folder, "stomp-warm-up")
        stomp = _stomp_source(spark, queue, 0, args.arrow_rows, folder)
    spark.stop()
    _delete_queues()
    # (the stream ends with the fill's receipted marker: one message more)
    if stomp["rows"] != args.messages + 1 or prebuilt["rows"] != args.messages:
        raise SystemExit(f"read {stomp['rows']} stomp and {prebuilt['rows']} prebuilt rows of {args.messages}")
    ceiling = min(client_drain, rate["rate"])
    result = {
        "pyspark": pyspark.__version__, "method": "available-now", "messages": args.messages,
        "body_bytes": args.size, "broker_core": args.broker_core,
        "source": {
            "asyncio_client_drain": round(client_drain), "spark_rate_source_to_parquet": round(rate["rate"]),
            "python_source_prebuilt_rows_to_parquet": round(prebuilt["rate"]),
            "stomp_stream_to_parquet": round(stomp["rate"]), "of_lower_ceiling": round(stomp["rate"] / ceiling, 3),
            "stomp_of_python_source_ceiling": round(stomp["rate"] / prebuilt["rate"], 3),
            "stomp_wall_incl_startup": round(args.messages / stomp["wall"]),
            "prebuilt_wall_incl_startup": round(args.messages / prebuilt["wall"]),
            "batch_rows_ms_latestoffset_ms": {"rate": rate["details"], "prebuilt": prebuilt["details"],
                                              "stomp": stomp["details"]},
            "cpu_s_per_20000_rows": {"rate": rate["cpu"], "prebuilt": prebuilt["cpu"], "stomp": stomp["cpu"]},
        },
        "publish_fill_no_receipts": round(publish),
    }  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    src = result["source"]
    where = "RabbitMQ on a core of its own, this run on the other" if args.broker_core else "2 shared cores"
    print(f"source, messages/s, PySpark {pyspark.__version__}, one availableNow batch of {args.messages} messages "
          f"of {args.size} bytes, local[2], {where}:")  # fmt: skip
    print(f"  asyncio client draining the stream   {src['asyncio_client_drain']:>10,}")
    print(f"  Spark rate source -> Parquet         {src['spark_rate_source_to_parquet']:>10,}")
    print(f"  Python source, prebuilt rows -> Parquet {src['python_source_prebuilt_rows_to_parquet']:>7,}")
    print(f"  stomp stream source -> Parquet       {src['stomp_stream_to_parquet']:>10,}"
          f"   ({src['of_lower_ceiling']:.0%} of the lower ceiling, {src['stomp_of_python_source_ceiling']:.0%} "
          f"of the prebuilt rows; {src['stomp_wall_incl_startup']:,}/s wall incl. start)")  # fmt: skip
    for name, cpu in src["cpu_s_per_20000_rows"].items():
        if cpu:
            print(f"  CPU s per 20,000 rows, {name:<8}       " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
