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
    args = parser.parse_args(argv)

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
