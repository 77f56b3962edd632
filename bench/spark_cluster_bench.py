"""The convert job on a Spark standalone cluster: one worker, then two, and Spark's own ceiling on each.

    python -m bench.spark_cluster_bench                     # 8 files x 50,000 frames, repeat 3
    python -m bench.spark_cluster_bench --files 4 --frames 10000 --repeat 1   # quick
    sudo python -m bench.spark_cluster_bench --worker-cpu 0.5 --no-noop      # each Worker capped at half a core

For 1 and then 2 Workers (one core each, on 127.0.0.1, started from the
installed PySpark by :class:`fastframe.spark.standalone.StandaloneCluster`),
one driver in this process reads the same archive (uncompressed sample broker
streams) into Parquet, as ``fastframe convert`` does, and into the ``noop``
sink (the read alone). Beside the stomp read runs Spark's ceiling for this
schema from ``bench.spark_bench``: a source that emits the stomp reader's own
Arrow batches, made beforehand and memory-mapped, so nothing is decoded. The
two alternate, ``--repeat`` times after a warm-up; best of.

Reported: frames/s (wall clock) with 1 and 2 workers and the ratio (the
target: 1.7x), the read over the ceiling on each cluster, and the CPU seconds
per frame spent by the executors (JVM and Python workers, from /proc) and by
the driver, which show where the time goes when the ratio falls short: the
executors' cost per frame stays the same when a worker is added, so what is
missing is wall-clock time the executors did not get (the machine's cores
are shared with the driver, the daemons and any other load).

``--worker-cpu CORES`` starts each Worker, and everything it starts (its
executors and their Python workers), in its own cgroup v1 ``cpu`` cgroup whose
quota is CORES (``cpu.cfs_quota_us`` = CORES x ``cpu.cfs_period_us``), with a
``cpuacct`` cgroup beside it that counts all they used. On a 2-core machine,
one and two Workers of half a core each leave the driver and the Master a free
core, so the ratio measures the cluster, not the machine. The cgroup's
``cpu.shares`` is the highest, so that the cap is also what a Worker gets on a
loaded machine: each process of the root cgroup weighs as much as a default
cgroup, and with a load average of 7 a capped Worker would get about an eighth
of a core. Needs root and cgroup v1 (``/sys/fs/cgroup/cpu`` and
``/sys/fs/cgroup/cpuacct``); the cgroups are removed at the end. Reported
beside the frames/s: the share of the Workers' quota they used during the read
(100%: busy all the time; less: they waited for the driver, for a task, or
for the last task of the job) and the share of periods in which they were
throttled.

``--stream`` reads a RabbitMQ stream instead (see docs/benchmarks.md); beside
each ``availableNow`` query's numbers it reports the broker's CPU (its
``beam.smp``), the machine's busy share of all its cores over the query and
the share of 0.1 s windows in which the machine was at least 90% busy: when
two Workers leave quota unused, these say whether the machine or the broker
kept them waiting.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

import fastframe

from .cgroups import CpuCaps
from .spark_bench import _tree_cpu, ceiling_source, finish, make_archive, write_ipc


def wait_for_executors(spark: Any, count: int, timeout: float = 180.0) -> None:
    jsc = spark.sparkContext._jsc.sc()
    deadline = time.monotonic() + timeout
    while jsc.getExecutorMemoryStatus().size() < count + 1:  # the driver counts itself
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} executors did not join in {timeout:.0f} s")
        time.sleep(0.5)


def run_cluster(
    workers: int, archive: Dict[str, Any], ipc: Dict[str, str], args: Any, tmp: str, caps: Optional[CpuCaps]
) -> Dict[str, Any]:
    from fastframe.spark import get_session
    from fastframe.spark.standalone import StandaloneCluster

    frames = archive["frames"]
    sinks = ["parquet"] if args.no_noop else ["parquet", "noop"]
    prefix = caps.prefix if caps is not None else None
    with StandaloneCluster(workers=workers, cores=1, memory="1g", worker_prefix=prefix) as cluster:
        spark = get_session(cluster.url, app_name=f"fastframe cluster bench ({workers})",
                            conf={"spark.cores.max": str(workers)})  # fmt: skip
        try:
            wait_for_executors(spark, workers)
            sc = spark.sparkContext
            spark.dataSource.register(ceiling_source(ipc))
            options = {"minPartitions": str(2 * workers)}
            sources = {
                "ceiling": spark.read.format("stomp_ceiling").options(**options).load(archive["paths"]),
                "read": spark.read.format("stomp").options(**options).load(archive["paths"]),
            }
            assert sources["read"].count() == sources["ceiling"].count() == frames
            partitions = sources["read"].rdd.getNumPartitions()
            driver_pid = sc._gateway.proc.pid
            worker_pids = [p.pid for p in cluster.procs[1:]]
            best: Dict[str, Dict[str, Dict[str, float]]] = {
                sink: {n: {"wall": float("inf")} for n in sources} for sink in sinks
            }
            for sink in sinks:
                for df in sources.values():  # warm-up: Python workers started, sources looked up
                    write(df, sink, os.path.join(tmp, "parquet"))
                for _ in range(args.repeat):
                    for name, df in sources.items():  # alternate, so that a change in load hits both alike
                        cpu0 = sum(_tree_cpu(p) for p in worker_pids), _tree_cpu(driver_pid)
                        capped0 = caps.usage() if caps is not None else {}
                        start = time.perf_counter()
                        write(df, sink, os.path.join(tmp, "parquet"))
                        wall = time.perf_counter() - start
                        cpu1 = sum(_tree_cpu(p) for p in worker_pids), _tree_cpu(driver_pid)
                        capped1 = caps.usage() if caps is not None else {}
                        if wall < best[sink][name]["wall"]:
                            best[sink][name] = {
                                "wall": wall,
                                "executors_cpu": cpu1[0] - cpu0[0],
                                "driver_cpu": cpu1[1] - cpu0[1],
                                **{f"capped_{k}": capped1[k] - capped0[k] for k in capped1},
                            }
        finally:
            spark.stop()
    out: Dict[str, Any] = {"workers": workers, "partitions": partitions}
    for sink in sinks:
        ceiling, read = best[sink]["ceiling"], best[sink]["read"]
        out[sink] = {
            "read_frames_per_s": round(frames / read["wall"]),
            "ceiling_frames_per_s": round(frames / ceiling["wall"]),
            "read_over_ceiling": round(ceiling["wall"] / read["wall"], 3),
            "read_executors_cpu_us_per_frame": round(read["executors_cpu"] * 1e6 / frames, 2),
            "read_driver_cpu_us_per_frame": round(read["driver_cpu"] * 1e6 / frames, 2),
            "ceiling_executors_cpu_us_per_frame": round(ceiling["executors_cpu"] * 1e6 / frames, 2),
            "read_seconds": round(read["wall"], 2),
        }
        if caps is not None:
            allowed = caps.cores * workers * read["wall"]
            out[sink]["read_quota_used"] = round(read["capped_cpu_s"] / allowed, 3)
            out[sink]["read_periods_throttled"] = round(read["capped_throttled"] / max(1.0, read["capped_periods"]), 3)
            out[sink]["read_workers_cpu_us_per_frame"] = round(read["capped_cpu_s"] * 1e6 / frames, 2)
    return out


STREAM_DURATIONS = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def _driver_cpu(spark: Any) -> float:
    """CPU seconds of the driver so far: this process and its JVM with the JVM's Python workers (planning)."""
    return time.process_time() + _tree_cpu(spark.sparkContext._gateway.proc.pid)


def _machine_ticks() -> List[int]:
    """(busy, all) clock ticks of every core so far, from /proc/stat (idle and iowait are not busy)."""
    with open("/proc/stat") as stat:
        ticks = [int(x) for x in stat.readline().split()[1:]]
    return [sum(ticks) - ticks[3] - ticks[4], sum(ticks)]


def _broker_cpu() -> Optional[float]:
    """CPU seconds so far of the RabbitMQ the stream is read from (None when it is not found here)."""
    from .brokers import Unavailable, _cpu_seconds, _rabbitmq_pid

    try:
        return _cpu_seconds(_rabbitmq_pid())
    except (Unavailable, OSError):
        return None


def _stream_query(spark: Any, options: Dict[str, str], folder: str, first_batch_only: bool = False) -> Dict[str, Any]:
    """One availableNow query from a new checkpoint into Parquet: seconds from start() to its first batch's end
    and to its end, the driver's CPU, the broker's, the machine's busy share (all cores), the batches' Spark
    durations summed (ms)."""
    reader = spark.readStream.format("stomp")
    for name, value in options.items():
        reader = reader.option(name, value)
    shutil.rmtree(folder, ignore_errors=True)
    writer = reader.load().writeStream.format("parquet").option("checkpointLocation", os.path.join(folder, "ck"))
    cpu0, broker0, machine0 = _driver_cpu(spark), _broker_cpu(), _machine_ticks()
    started, started_at = time.perf_counter(), time.time()
    query = writer.trigger(availableNow=True).start(os.path.join(folder, "out"))
    first = None
    samples = [machine0]  # the machine's ticks every 0.1 s: how busy it was moment by moment
    try:
        while query.isActive:
            if first is None and query.lastProgress is not None:
                first = time.perf_counter() - started
                if first_batch_only:
                    break
            time.sleep(0.01)
            if time.perf_counter() - started >= 0.1 * len(samples):
                samples.append(_machine_ticks())
        wall = time.perf_counter() - started
        if query.exception() is not None:
            raise RuntimeError(str(query.exception())[:2000])
    finally:
        query.stop()
    broker1, machine1 = _broker_cpu(), _machine_ticks()
    progress = query.recentProgress
    durations = {k: sum(p["durationMs"].get(k, 0) for p in progress) for k in STREAM_DURATIONS}
    # when Spark began the first trigger (its progress's timestamp, ms): what came before is the query's
    # start (checkpoint folders, the source's Python process on the driver, the source's first offsets)
    trigger = progress[0]["timestamp"] if progress else None
    return {
        "first_trigger_s": round(_epoch(trigger) - started_at, 3) if trigger else None,
        "first_batch_s": round(first if first is not None else wall, 3),
        "first_batch_rows": progress[0]["numInputRows"] if progress else 0,
        "wall_s": round(wall, 3),
        "rows": sum(p["numInputRows"] for p in progress),
        "batches": len(progress),
        "driver_cpu_s": round(_driver_cpu(spark) - cpu0, 3),
        "broker_cpu_s": round(broker1 - broker0, 3) if broker0 is not None and broker1 is not None else None,
        "machine_busy": round((machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1]), 3),
        # the share of its 0.1 s windows in which the machine was at least 90% busy (both cores)
        "machine_saturated": round(
            sum((b[0] - a[0]) >= 0.9 * (b[1] - a[1]) > 0 for a, b in zip(samples, samples[1:]))
            / max(1, len(samples) - 1),
            3,
        ),
        "durations_ms": durations,
    }


def _epoch(timestamp: str) -> float:
    """Seconds since the epoch of a progress timestamp (``2026-11-28T17:50:43.283Z``, UTC)."""
    import datetime

    return (
        datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()
    )


def run_stream_cluster(
    workers: int, queues: Dict[str, Any], args: Any, tmp: str, caps: Optional[CpuCaps]
) -> Dict[str, Any]:
    """The stream measurements on a cluster of ``workers`` Workers (see ``--stream``)."""
    from fastframe.spark import get_session
    from fastframe.spark.standalone import StandaloneCluster

    from .spark_stream_bench import HOST, PORT

    base = {"host": HOST, "port": str(PORT), "login": "guest", "passcode": "guest", "minPartitions": "2"}
    stream = {**base, "consume": "stream", "maxMessagesPerTrigger": str(args.batch)}
    prefix = caps.prefix if caps is not None else None
    out: Dict[str, Any] = {"workers": workers}
    with StandaloneCluster(workers=workers, cores=1, memory="1g", worker_prefix=prefix) as cluster:
        started = time.perf_counter()
        spark = get_session(cluster.url, app_name=f"fastframe cluster stream bench ({workers})",
                            conf={"spark.cores.max": str(workers)})  # fmt: skip
        try:
            wait_for_executors(spark, workers)
            out["session_and_executors_s"] = round(time.perf_counter() - started, 2)
            # a new application's first query: the cold start (Python workers, imports, first connections)
            cold = _stream_query(spark, {**stream, "destination": f"/amq/queue/{queues['warm']}"},
                                 os.path.join(tmp, "cold"))  # fmt: skip
            out["cold_query"] = cold
            # a warm cluster: the first batch of a new query, then whole queries
            first = _stream_query(spark, {**stream, "destination": f"/amq/queue/{queues['stream']}",
                                          "maxMessagesPerTrigger": str(args.first_batch)},
                                  os.path.join(tmp, "first"), first_batch_only=True)  # fmt: skip
            out["warm_first_batch"] = first
            runs = []
            for i in range(args.repeat):
                cpu0 = caps.usage() if caps is not None else {}
                run = _stream_query(spark, {**stream, "destination": f"/amq/queue/{queues['stream']}"},
                                    os.path.join(tmp, f"stream-{i}"))  # fmt: skip
                if caps is not None:
                    run["workers_cpu_s"] = round(caps.usage()["cpu_s"] - cpu0["cpu_s"], 3)
                runs.append(run)
            best = min(runs, key=lambda r: r["wall_s"])
            assert best["rows"] == queues["count"], best
            out["stream"] = {**best, "messages_per_s": round(best["rows"] / best["wall_s"]),
                             "driver_cpu_us_per_message": round(best["driver_cpu_s"] * 1e6 / best["rows"], 2),
                             "walls_s": [r["wall_s"] for r in runs]}  # fmt: skip
            if args.ack:
                destination = f"/queue/{queues['ack']}-{workers}"
                asyncio_run(_publish_queue(destination, args.ack, args.size))
                ack_options = {**base, "consume": "ack", "destination": destination,
                               "maxMessagesPerTrigger": str(args.ack_batch)}  # fmt: skip
                try:
                    ack = _stream_query(spark, ack_options, os.path.join(tmp, "ack"))
                except Exception as exc:  # reported, and the other numbers kept
                    out["ack"] = {"error": str(exc).splitlines()[0][:300]}
                else:
                    out["ack"] = {**ack, "messages_per_s": round(ack["rows"] / ack["wall_s"]),
                                  "driver_cpu_us_per_message": round(ack["driver_cpu_s"] * 1e6 / max(1, ack["rows"]), 2)}  # fmt: skip
        finally:
            spark.stop()
        if args.warmed_start:
            # a second application whose Python workers are started ahead, as fastframe's commands do
            from fastframe.spark import warm_python_workers

            spark = get_session(cluster.url, app_name=f"fastframe cluster stream bench ({workers}, warmed)",
                                conf={"spark.cores.max": str(workers)})  # fmt: skip
            try:
                wait_for_executors(spark, workers)
                out["warm_python_workers_s"] = round(warm_python_workers(spark), 2)
                out["warmed_cold_query"] = _stream_query(
                    spark, {**stream, "destination": f"/amq/queue/{queues['warm']}"}, os.path.join(tmp, "warmed")
                )
            finally:
                spark.stop()
    return out


def asyncio_run(work: Any) -> Any:
    import asyncio

    return asyncio.run(work)


async def _publish_queue(destination: str, count: int, size: int, port: int = 0) -> None:
    """``count`` messages to a classic queue, the last with a receipt (so all are queued on return)."""
    import fastframe.aio as aio

    from .spark_stream_bench import CLIENT, HOST, PORT, _body

    async with aio.connect(HOST, port or PORT, timeout=60, **CLIENT) as client:
        for n in range(count):
            await client.send(destination, _body(n, size), {"n": str(n)}, receipt=n == count - 1)


def stream_main(args: Any) -> int:
    """``--stream``: a RabbitMQ stream of ``--messages`` messages read by an availableNow query, 1 then 2 Workers."""
    from .spark_stream_bench import _delete_queues, _publish, _queue

    tmp = tempfile.mkdtemp(prefix="fastframe-cluster-stream-bench-")
    runs: List[Dict[str, Any]] = []
    try:
        # count: _publish adds a last message
        queues: Dict[str, Any] = {"stream": _queue("cluster"), "warm": _queue("cluster-warm"),
                                  "ack": f"ff-bench-ack-{os.getpid()}", "count": args.messages + 1}  # fmt: skip
        asyncio_run(_publish(queues["stream"], args.messages, args.size, 1000, False))
        asyncio_run(_publish(queues["warm"], args.warm, args.size, 1000, False))
        print(f"stream: {args.messages:,} messages of {args.size} bytes; warm-up stream {args.warm:,}", flush=True)
        for workers in (1, 2):
            caps = CpuCaps(args.worker_cpu, workers, "w", "--worker-cpu") if args.worker_cpu else None
            with caps or contextlib.nullcontext():
                runs.append(run_stream_cluster(workers, queues, args, tmp, caps))
            print(f"{workers} worker(s): {json.dumps(runs[-1])}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        _delete_queues()
    one, two = runs
    ratio = one["stream"]["wall_s"] / two["stream"]["wall_s"]
    results: Dict[str, Any] = {"mode": "stream", "messages": args.messages, "worker_cpu": args.worker_cpu,
                               "runs": runs, "two_over_one": round(ratio, 3), "target_ratio": 1.7}  # fmt: skip
    print()
    print(f"each Worker capped at {args.worker_cpu} core" if args.worker_cpu else "Workers not capped")
    print("| workers | availableNow query, messages/s | wall s | batches | driver CPU us/message | warm first batch "
          "s (rows) | new application's first query s (rows) | the same, workers started ahead s (+ warm-up s) "
          "| consume=ack messages/s | ack driver CPU us/message |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        st, first, cold, ack = run["stream"], run["warm_first_batch"], run["cold_query"], run.get("ack", {})
        warmed = run.get("warmed_cold_query", {})
        print(f"| {run['workers']} | {st['messages_per_s']:,} | {st['wall_s']:.2f} | {st['batches']} "
              f"| {st['driver_cpu_us_per_message']:.1f} | {first['first_batch_s']:.2f} ({first['first_batch_rows']:,}; trigger at {first['first_trigger_s']:.2f}) "
              f"| {cold['wall_s']:.2f} ({cold['rows']:,}) | {warmed.get('wall_s', 0):.2f} "
              f"(+{run.get('warm_python_workers_s', 0):.2f}) | {ack.get('messages_per_s', 0):,} "
              f"| {ack.get('driver_cpu_us_per_message', 0):.1f} |")  # fmt: skip
    print(
        "\nDuring the availableNow query (best of the repeats): the Workers' quota used, the broker's CPU, the "
        "machine's busy share of all its cores (near 100%: the machine, not the cluster, is what limits)"
    )
    for run in runs:
        st = run["stream"]
        quota = (
            st.get("workers_cpu_s", 0) / max(1e-9, run["workers"] * args.worker_cpu * st["wall_s"])
            if args.worker_cpu
            else 0
        )
        broker = "-" if st.get("broker_cpu_s") is None else f"{st['broker_cpu_s']:.2f} CPU-s"
        print(f"- {run['workers']} Worker(s): quota used {quota:.0%} over the wall time, broker {broker}, "
              f"machine busy {st.get('machine_busy', 0):.0%} (at least 90% busy in "
              f"{st.get('machine_saturated', 0):.0%} of its 0.1 s windows)")  # fmt: skip
    print(f"\ntwo workers / one = {ratio:.2f}x end to end (target 1.7x)")
    return finish(results, args.json)


def ack_driver_round(port: int, destination: str, count: int, batch: int, cumulative: bool) -> Dict[str, float]:
    """The driver's part of ``consume=ack`` without Spark, as AckQueueReader does it: poll a batch, make it
    Arrow IPC bytes (what Spark ships to the tasks), acknowledge it; CPU and wall time for ``count`` messages."""
    from fastframe.spark._stream_options import source_options
    from fastframe.spark._stream_read import QueueConsumer
    from fastframe.spark._stream_schema import batch_to_bytes, messages_to_batch

    from .spark_stream_bench import HOST

    class Consumer(QueueConsumer):
        def __setattr__(self, name: str, value: Any) -> None:  # the ACK mode under test, from the start
            super().__setattr__(name, cumulative if name == "cumulative" else value)

    options = {"host": HOST, "port": str(port), "login": "guest", "passcode": "guest", "destination": destination}
    consumer = Consumer(source_options(options))
    got = 0
    try:
        cpu, started = time.process_time(), time.perf_counter()
        while got < count:
            received = consumer.poll(batch, 0)
            messages = [m for ms in received.values() for m in ms]
            for dest, ms in received.items():
                if ms:
                    batch_to_bytes(messages_to_batch(dest, ms, None, fastframe.IMPLEMENTATION))
            assert consumer.ack(messages) == 0
            got += len(messages)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - started
    finally:
        consumer.close()
    return {"messages_per_s": round(got / wall), "cpu_us_per_message": round(cpu * 1e6 / got, 2), "wall_s": wall}


def ack_driver_main(args: Any) -> int:
    """``--ack-driver``: the consume=ack driver's ceiling, one cumulative ACK per batch against one per message,
    alternating rounds (A/B/A/B) on a classic queue of ``--ack`` messages each round."""
    from .spark_stream_bench import PORT

    port = args.ack_port or PORT
    rounds: Dict[str, List[Dict[str, float]]] = {"cumulative": [], "per_message": []}
    for mode in rounds:  # warm-up, not counted: imports, the first connection
        destination = f"/queue/ff-bench-ackdrv-{os.getpid()}-warm-{mode}"
        asyncio_run(_publish_queue(destination, 2000, args.size, port))
        ack_driver_round(port, destination, 2000, args.ack_batch, mode == "cumulative")
    for i in range(args.repeat):
        for mode in ("per_message", "cumulative") if i % 2 else ("cumulative", "per_message"):
            destination = f"/queue/ff-bench-ackdrv-{os.getpid()}-{i}-{mode}"
            asyncio_run(_publish_queue(destination, args.ack, args.size, port))
            run = ack_driver_round(port, destination, args.ack, args.ack_batch, mode == "cumulative")
            run["load"] = round(os.getloadavg()[0], 2)
            rounds[mode].append(run)
            print(f"round {i} {mode}: {json.dumps(run)}", flush=True)
    print("\n| ACK | messages/s (best) | driver CPU µs per message (best) | rounds: CPU µs per message (load) |")
    print("|---|---:|---:|---|")
    for mode, runs in rounds.items():
        each = ", ".join(f"{r['cpu_us_per_message']:.1f} ({r['load']:.1f})" for r in runs)
        print(f"| {mode} | {max(r['messages_per_s'] for r in runs):,} "
              f"| {min(r['cpu_us_per_message'] for r in runs):.1f} | {each} |")  # fmt: skip
    ratios = [
        p["cpu_us_per_message"] / c["cpu_us_per_message"] for c, p in zip(rounds["cumulative"], rounds["per_message"])
    ]
    print(f"per-message / cumulative CPU, round by round: {', '.join(f'{r:.2f}' for r in ratios)}")
    return finish({"mode": "ack-driver", "rounds": rounds, "ratios": ratios}, args.json)


def write(df: Any, sink: str, target: str) -> None:
    if sink == "noop":
        df.write.format("noop").mode("overwrite").save()
    else:
        df.write.mode("overwrite").parquet(target)


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--frames", type=int, default=50_000, help="frames per file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-noop", action="store_true", help="time the Parquet sink (the convert job) only")
    parser.add_argument("--json", default=os.path.join("out", "spark_cluster_bench.json"), help="write numbers here")
    parser.add_argument("--worker-cpu", type=float, metavar="CORES",
                        help="cap each Worker (and all it starts) at CORES in its own cgroup v1 cpu cgroup (root)")  # fmt: skip
    parser.add_argument("--stream", action="store_true",
                        help="the stomp stream source instead (live RabbitMQ): an availableNow query, 1 then 2 Workers")  # fmt: skip
    parser.add_argument("--messages", type=int, default=60_000, help="--stream: messages in the stream")
    parser.add_argument("--size", type=int, default=200, help="--stream: body bytes")
    parser.add_argument("--batch", type=int, default=10_000, help="--stream: maxMessagesPerTrigger")
    parser.add_argument("--first-batch", type=int, default=2_000, help="--stream: the warm first batch's messages")
    parser.add_argument("--warm", type=int, default=4_000, help="--stream: the cold start query's messages")
    parser.add_argument("--ack", type=int, default=20_000, help="--stream: consume=ack messages (0: none)")
    parser.add_argument("--no-warmed-start", dest="warmed_start", action="store_false",
                        help="--stream: no second application with its Python workers started ahead")  # fmt: skip
    parser.add_argument("--ack-batch", type=int, default=5_000, help="--stream: consume=ack maxMessagesPerTrigger")
    parser.add_argument("--ack-driver", action="store_true",
                        help="consume=ack's driver alone (no Spark): one cumulative ACK per batch against one per message")  # fmt: skip
    parser.add_argument("--ack-port", type=int, default=0, help="--ack-driver: the broker's STOMP port (RabbitMQ's)")
    args = parser.parse_args(argv)
    if args.ack_driver:
        if args.json == os.path.join("out", "spark_cluster_bench.json"):
            args.json = os.path.join("out", "spark_ack_driver_bench.json")
        return ack_driver_main(args)
    if args.stream:
        if args.json == os.path.join("out", "spark_cluster_bench.json"):
            args.json = os.path.join("out", "spark_cluster_stream_bench.json")
        return stream_main(args)

    tmp = tempfile.mkdtemp(prefix="fastframe-cluster-bench-")
    runs: List[Dict[str, Any]] = []
    try:
        archive = make_archive(os.path.join(tmp, "archive"), args.files, args.frames, args.seed)
        print(f"archive: {args.files} files, {archive['frames']:,} frames, {archive['bytes'] / 1e6:.1f} MB, "
              f"twin {fastframe.IMPLEMENTATION}", flush=True)  # fmt: skip
        ipc = write_ipc(archive["paths"], os.path.join(tmp, "ipc"))
        for workers in (1, 2):
            caps = CpuCaps(args.worker_cpu, workers, "w", "--worker-cpu") if args.worker_cpu else None
            with caps or contextlib.nullcontext():
                runs.append(run_cluster(workers, archive, ipc, args, tmp, caps))
            print(f"{workers} worker(s): {json.dumps(runs[-1])}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    one, two = runs
    results: Dict[str, Any] = {"twin": fastframe.IMPLEMENTATION, "frames": archive["frames"], "bytes": archive["bytes"],
                               "worker_cpu": args.worker_cpu, "runs": runs, "target_ratio": 1.7}  # fmt: skip
    print()
    capped = args.worker_cpu is not None
    print(f"each Worker capped at {args.worker_cpu} core" if capped else "Workers not capped")
    print("| sink | workers | stomp read, frames/s | Spark ceiling, frames/s | read / ceiling "
          "| executors' CPU us per frame (read) | driver's CPU us per frame (read) |"
          + (" Workers' CPU us per frame (cgroup) | quota used | periods throttled |" if capped else ""))  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if capped else ""))
    for sink in [s for s in ("parquet", "noop") if s in one]:
        for run in runs:
            r = run[sink]
            cells = (f" {r['read_workers_cpu_us_per_frame']:.2f} | {r['read_quota_used']:.0%} "
                     f"| {r['read_periods_throttled']:.0%} |") if capped else ""  # fmt: skip
            print(f"| {sink} | {run['workers']} | {r['read_frames_per_s']:,} | {r['ceiling_frames_per_s']:,} "
                  f"| {r['read_over_ceiling']:.0%} | {r['read_executors_cpu_us_per_frame']:.2f} "
                  f"| {r['read_driver_cpu_us_per_frame']:.2f} |{cells}")  # fmt: skip
        ratio = two[sink]["read_frames_per_s"] / one[sink]["read_frames_per_s"]
        ceiling_ratio = two[sink]["ceiling_frames_per_s"] / one[sink]["ceiling_frames_per_s"]
        results[f"{sink}_two_over_one"] = round(ratio, 3)
        results[f"{sink}_ceiling_two_over_one"] = round(ceiling_ratio, 3)
    print()
    for sink in [s for s in ("parquet", "noop") if s in one]:
        print(f"{sink}: two workers / one = {results[f'{sink}_two_over_one']:.2f}x for the stomp read "
              f"(target 1.7x), {results[f'{sink}_ceiling_two_over_one']:.2f}x for Spark's ceiling")  # fmt: skip
    return finish(results, args.json)


if __name__ == "__main__":
    sys.exit(main())
