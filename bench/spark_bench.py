"""The Spark read against Spark's own ceiling, in one run on one archive.

    python -m bench.spark_bench                       # 8 files x 25,000 frames, local[2]
    python -m bench.spark_bench --files 4 --frames 5000 --repeat 2   # quick

Three numbers, measured on the same archive (uncompressed sample broker
streams from ``fastframe.archive.generate_stream``, written to a temporary folder):

1. **bare decoder**: frames/s of ``fastframe.Decoder.feed`` over the files
   in 1 MiB pieces, in this process, on one core (and, beside it, of
   ``fastframe.ColumnDecoder``, which the read runs: rows straight into
   Arrow-layout columns, no Frame objects);
2. **Spark ceiling**: a Python data source that emits exactly the rows the
   stomp source emits (same partitions, the same Arrow record batches, made
   beforehand by the stomp reader and memory-mapped from Arrow IPC files),
   without decoding or building anything: what Spark itself costs for
   this schema;
3. **fastframe Spark read**: ``spark.read.format("stomp")`` on the archive.

Each Spark read is timed into two sinks: ``noop`` (every row crosses from
the Python worker into the JVM and is projected to a row; nothing is
written: the read alone) and Parquet (the ``fastframe convert`` job). The
ceiling and the read alternate, ``--repeat`` times after a warm-up, best of.
Besides wall-clock frames/s, the CPU time of the JVM and all its Python
workers is measured (from /proc): frames per CPU-second is what a frame costs
whatever else runs on the machine. Then the task's own work, decoding
to columns and reading plus wrapping Arrow batches, measured in this process,
shows where the difference goes. The target (issue): the read at 70% of the ceiling.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

import fastframe
from fastframe.archive import generate_stream


def make_archive(folder: str, files: int, frames: int, seed: int) -> Dict[str, Any]:
    os.makedirs(folder, exist_ok=True)
    paths, total_bytes = [], 0
    for i in range(files):
        path = os.path.join(folder, f"conn-{i:03d}.s2c.stomp")
        data = generate_stream(frames, seed=seed + i)
        with open(path, "wb") as out:
            out.write(data)
        paths.append(path)
        total_bytes += len(data)
    return {"paths": paths, "bytes": total_bytes, "frames": files * frames}


def best_of_3(run: Callable[[], int]) -> Dict[str, float]:
    """The fastest of three calls of ``run`` (which returns the frames it handled)."""
    best = float("inf")
    frames = 0
    for _ in range(3):
        start = time.perf_counter()
        frames = run()
        best = min(best, time.perf_counter() - start)
    return {"frames": frames, "seconds": best, "frames_per_s": frames / best}


def read_files(paths: List[str]) -> List[bytes]:
    blobs = []
    for path in paths:
        with open(path, "rb") as f:
            blobs.append(f.read())
    return blobs


def decode_files(paths: List[str], columns: bool, chunk: int = 1 << 20, batch: int = 10_000) -> Dict[str, float]:
    """Single-core decode of every file, already in memory, in ``chunk`` pieces.

    Into Frame objects (``Decoder``), or with ``columns`` straight into
    Arrow-layout columns taken ``batch`` rows at a time (``ColumnDecoder``,
    what the read runs).
    """
    blobs = read_files(paths)

    def run() -> int:
        frames = 0
        for data in blobs:
            decoder = fastframe.ColumnDecoder() if columns else fastframe.Decoder()
            view = memoryview(data)
            for i in range(0, len(data), chunk):
                got = decoder.feed(view[i : i + chunk])
                if not columns:
                    frames += len(got)
                while columns and decoder.rows >= batch:
                    frames += decoder.take(batch).rows
            decoder.close()
            while columns and decoder.rows:
                frames += decoder.take(batch).rows
        return frames

    return best_of_3(run)


def task_breakdown(paths: List[str]) -> Dict[str, float]:
    """The Spark task's own work in this process: read_split over every split (reading, decoding, batches)."""
    from fastframe.spark._file_options import read_options
    from fastframe.spark._file_read import plan, read_split

    opts = read_options({"paths": paths})
    splits = [s for part in plan(opts) for s in part]
    return best_of_3(lambda: sum(b.num_rows for s in splits for b in read_split(s, opts)))


def write_ipc(paths: List[str], folder: str) -> Dict[str, str]:
    """The stomp source's own batches for every file, saved as Arrow IPC files (built once, untimed)."""
    import pyarrow as pa

    from fastframe.spark._file_options import read_options
    from fastframe.spark._file_read import plan, read_split

    opts = read_options({"paths": paths})
    out = {}
    os.makedirs(folder, exist_ok=True)
    for part in plan(opts):
        for split in part:
            target = os.path.join(folder, os.path.basename(split.path) + ".arrow")
            batches = list(read_split(split, opts))
            with pa.OSFile(target, "wb") as sink, pa.ipc.new_file(sink, batches[0].schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)
            out[split.path] = target
    return out


def ceiling_source(ipc: Dict[str, str]) -> Any:
    """A data source class named ``stomp_ceiling``: the stomp source's partitions, rows from IPC files.

    Defined in a function so that Spark pickles it by value: the workers need
    not import this benchmark.
    """
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from fastframe.spark import spark_schema
    from fastframe.spark._file_options import read_options
    from fastframe.spark._file_read import plan

    class CeilingPartition(InputPartition):
        def __init__(self, files: List[str]) -> None:
            self.files = files

    class CeilingReader(DataSourceReader):
        def __init__(self, options: Any) -> None:
            self.opts = read_options(options)

        def partitions(self) -> List[Any]:
            return [CeilingPartition([ipc[s.path] for s in part]) for part in plan(self.opts)]

        def read(self, partition: Any) -> Any:
            import pyarrow as pa

            for name in partition.files:
                with pa.memory_map(name) as source:
                    reader = pa.ipc.open_file(source)
                    for i in range(reader.num_record_batches):
                        yield reader.get_batch(i)

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "stomp_ceiling"

        def schema(self) -> Any:
            return spark_schema()

        def reader(self, schema: Any) -> Any:
            return CeilingReader(self.options)

    return CeilingSource


def _tree_cpu(root: int) -> float:
    """CPU seconds used so far by a process and all its descendants (exited ones included)."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: Dict[int, int] = {}
    usage: Dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        # utime, stime, cutime, cstime
        usage[pid] = sum(int(x) for x in fields[11:15]) / ticks
    total = 0.0
    for pid, cpu in usage.items():
        node = pid
        while node not in (0, 1) and node != root:
            node = parents.get(node, 0)
        if node == root:
            total += cpu
    return total


def time_sink(df: Any, sink: str, target: str, jvm_pid: int) -> Dict[str, float]:
    """Wall and CPU seconds (JVM + Python workers) of writing every row of ``df`` to ``sink``."""
    cpu0 = _tree_cpu(jvm_pid)
    start = time.perf_counter()
    if sink == "noop":
        df.write.format("noop").mode("overwrite").save()
    else:
        df.write.mode("overwrite").parquet(target)
    return {"wall": time.perf_counter() - start, "cpu": _tree_cpu(jvm_pid) - cpu0}


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--frames", type=int, default=25_000, help="frames per file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-parquet", action="store_true", help="time the noop sink only")
    parser.add_argument("--json", default=os.path.join("out", "spark_bench.json"), help="write the numbers here")
    args = parser.parse_args(argv)

    from fastframe.spark import get_session

    sinks = ["noop"] if args.no_parquet else ["noop", "parquet"]
    tmp = tempfile.mkdtemp(prefix="fastframe-spark-bench-")
    try:
        archive = make_archive(os.path.join(tmp, "archive"), args.files, args.frames, args.seed)
        frames = archive["frames"]
        print(f"archive: {args.files} files, {frames:,} frames, {archive['bytes'] / 1e6:.1f} MB, "
              f"twin {fastframe.IMPLEMENTATION}", flush=True)  # fmt: skip
        bare = decode_files(archive["paths"], columns=False)
        columnar = decode_files(archive["paths"], columns=True)
        task = task_breakdown(archive["paths"])
        ipc = write_ipc(archive["paths"], os.path.join(tmp, "ipc"))

        spark = get_session(args.master, app_name="fastframe spark bench")
        jvm_pid = spark.sparkContext._gateway.proc.pid
        cores = spark.sparkContext.defaultParallelism
        spark.dataSource.register(ceiling_source(ipc))
        options = {"minPartitions": str(cores)}
        sources = {
            "ceiling": spark.read.format("stomp_ceiling").options(**options).load(archive["paths"]),
            "read": spark.read.format("stomp").options(**options).load(archive["paths"]),
        }
        assert sources["ceiling"].count() == sources["read"].count() == frames
        assert [r[0] for r in sources["read"].select("codec").distinct().collect()] == [fastframe.IMPLEMENTATION]
        partitions = sources["read"].rdd.getNumPartitions()
        best: Dict[str, Dict[str, Dict[str, float]]] = {
            sink: {name: {"wall": float("inf"), "cpu": float("inf")} for name in sources} for sink in sinks
        }
        for sink in sinks:
            for df in sources.values():  # warm-up: workers started, sources looked up
                time_sink(df, sink, os.path.join(tmp, "parquet"), jvm_pid)
            for _ in range(args.repeat):
                # alternate the two, so that a change in machine load hits both alike
                for name, df in sources.items():
                    got = time_sink(df, sink, os.path.join(tmp, "parquet"), jvm_pid)
                    for key in ("wall", "cpu"):
                        best[sink][name][key] = min(best[sink][name][key], got[key])
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    decode_us = 1e6 / columnar["frames_per_s"]
    task_us = 1e6 / task["frames_per_s"]
    results: Dict[str, Any] = {
        "twin": fastframe.IMPLEMENTATION,
        "master": args.master,
        "cores": cores,
        "partitions": partitions,
        "frames": frames,
        "bytes": archive["bytes"],
        "bare_decoder_frames_per_s_per_core": round(bare["frames_per_s"]),
        "column_decoder_frames_per_s_per_core": round(columnar["frames_per_s"]),
        "in_process_us_per_frame": {
            "decode_to_columns": round(decode_us, 2),
            "arrow_batches_and_reading": round(task_us - decode_us, 2),
        },
        "target": 0.70,
    }
    print()
    print(f"bare decoder (in process, 1 core): {bare['frames_per_s']:,.0f} frames/s per core (Frame objects); "
          f"{columnar['frames_per_s']:,.0f} decoding to columns (ColumnDecoder, what the read runs)")  # fmt: skip
    print()
    print(f"| sink | source ({args.master}, {partitions} partitions) | frames/s (wall) | frames per CPU-second "
          "| CPU us per frame |")  # fmt: skip
    print("|---|---|---:|---:|---:|")
    for sink in sinks:
        ceiling, read = best[sink]["ceiling"], best[sink]["read"]
        for label, got in (("Spark ceiling (no decoding)", ceiling), ("fastframe Spark read", read)):
            print(f"| {sink} | {label} | {frames / got['wall']:,.0f} | {frames / got['cpu']:,.0f} "
                  f"| {got['cpu'] * 1e6 / frames:.2f} |")  # fmt: skip
        results[sink] = {
            "spark_ceiling_frames_per_s": round(frames / ceiling["wall"]),
            "fastframe_spark_read_frames_per_s": round(frames / read["wall"]),
            "read_over_ceiling_wall": round(ceiling["wall"] / read["wall"], 3),
            "read_over_ceiling_cpu": round(ceiling["cpu"] / read["cpu"], 3),
            "cpu_us_per_frame": {
                "ceiling": round(ceiling["cpu"] * 1e6 / frames, 2),
                "read": round(read["cpu"] * 1e6 / frames, 2),
            },
        }
    print()
    for sink in sinks:
        r = results[sink]
        extra = r["cpu_us_per_frame"]["read"] - r["cpu_us_per_frame"]["ceiling"]
        print(f"{sink}: read / ceiling = {r['read_over_ceiling_wall']:.0%} by wall clock, "
              f"{r['read_over_ceiling_cpu']:.0%} by CPU time (target 70%); the read costs {extra:.2f} CPU us "
              "more per frame")  # fmt: skip
    print(f"in this process the task's own work per frame: decoding to columns {decode_us:.2f} us + reading "
          f"the file and wrapping Arrow batches {task_us - decode_us:.2f} us = {task_us:.2f} us")  # fmt: skip
    return finish(results, args.json)


def finish(results: Dict[str, Any], json_path: str) -> int:
    """Print the load average (the machine is shared), record it, and write the numbers as JSON when asked."""
    load = os.getloadavg()
    results["load_average"] = [round(x, 2) for x in load]
    print(f"load average at the end: {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f} on {os.cpu_count()} CPUs")
    if json_path:
        os.makedirs(os.path.dirname(json_path) or ".", exist_ok=True)
        with open(json_path, "w") as out:
            json.dump(results, out, indent=1)
        print(f"numbers written to {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
