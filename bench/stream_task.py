"""A Spark stream task's read without Spark: CPU per message of ``read_range`` from a RabbitMQ stream.

    python -m bench.stream_task                        # 40,000 x 200 B, 5 rounds of each path, alternating
    python -m bench.stream_task --instructions         # callgrind: instructions, Python frames, allocations

Two paths read the same offsets of one stream queue: ``columns``, the task's (a columnar
subscription: each read's messages one ``fastframe.Columns``, laid out in Arrow) and
``messages``, the general one (a message object per MESSAGE, then ``to_columns``). The rounds
alternate, so a busy spell of the machine falls on both. CPU is this process's (reads, decoding,
the Arrow batches); wall time includes waiting for RabbitMQ, which delivers a stream at its own
pace. ``--instructions`` runs each path under callgrind at two counts and divides the difference
(start-up, the handshake and imports cancel out). Needs RabbitMQ on 127.0.0.1:61613
(``.ci/brokers start``) and, for ``--instructions``, valgrind.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

from .instructions import COUNTED, callgrind_counts
from .spark_stream_bench import _delete_queues, _publish, _queue

PATHS = {"columns": True, "messages": False}


def read(queue: str, count: int, path: str) -> int:
    """Read offsets ``[0, count)`` of ``queue`` as a task does, by ``path``; the rows read."""
    from fastframe.spark._stream_options import source_options
    from fastframe.spark._stream_read import read_range

    destination = f"/amq/queue/{queue}"
    options = {"host": "127.0.0.1", "port": "61613", "login": "guest", "passcode": "guest"}
    opts = source_options({**options, "destination": destination, "consume": "stream"})
    return sum(batch.num_rows for batch in read_range(opts, destination, 0, count, columns=PATHS[path]))


def timed(queue: str, count: int, path: str) -> Dict[str, float]:
    """CPU and wall µs per message of one read."""
    cpu, wall = time.process_time(), time.perf_counter()
    rows = read(queue, count, path)
    assert rows == count, (rows, count)
    return {"cpu": (time.process_time() - cpu) / count * 1e6, "wall": (time.perf_counter() - wall) / count * 1e6}


def instructions(queue: str, count: int, path: str) -> Dict[str, int]:
    """Callgrind's counts (:data:`bench.instructions.COUNTED`) of a process reading ``count`` messages."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m", "bench.stream_task"]
        subprocess.run([*cmd, "--read", queue, str(count), path], check=True, capture_output=True, timeout=1800)
        (found,) = glob.glob(out)
        return callgrind_counts(found)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stream_task", description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--size", type=int, default=200, help="body bytes")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="count with callgrind instead of timing")
    parser.add_argument("--read", nargs=3, metavar=("QUEUE", "N", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.read:
        read(args.read[0], int(args.read[1]), args.read[2])
        return 0
    if args.instructions and shutil.which("valgrind") is None:
        print("valgrind is needed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    import fastframe

    queue = _queue("task")
    try:
        asyncio.run(_publish(queue, args.messages, args.size, 1000, False))
        read(queue, min(1000, args.messages), "columns")  # (imports, and the stream's first read)
        if args.instructions:
            small = args.messages // 4
            print(f"| path | per message ({fastframe.IMPLEMENTATION} codec, {small:,} and {args.messages:,}): "
                  "instructions | Python frames | allocations |")  # fmt: skip
            print("|---|---:|---:|---:|")
            for path in PATHS:
                low, high = instructions(queue, small, path), instructions(queue, args.messages, path)
                per = {key: (high[key] - low[key]) / (args.messages - small) for key in ("instructions", *COUNTED)}
                print(f"| {path} | {per['instructions']:,.0f} | {per['frames']:,.2f} | {per['allocations']:,.2f} |")
            return 0
        print(f"{args.messages:,} x {args.size} B, {fastframe.IMPLEMENTATION} codec, load {os.getloadavg()[0]:.2f}")
        results: Dict[str, List[Dict[str, float]]] = {path: [] for path in PATHS}
        for round_number in range(args.rounds):
            for path in PATHS if round_number % 2 == 0 else reversed(list(PATHS)):
                results[path].append(timed(queue, args.messages, path))
        for path, runs in results.items():
            cpu = sorted(run["cpu"] for run in runs)
            wall = sorted(run["wall"] for run in runs)
            print(f"{path:>9}: CPU {cpu[len(cpu) // 2]:.2f} µs/msg (best {cpu[0]:.2f}, rounds "
                  f"{', '.join(f'{value:.2f}' for value in cpu)}); wall {wall[len(wall) // 2]:.2f} µs/msg")  # fmt: skip
        ratio = sorted(m["cpu"] / c["cpu"] for c, m in zip(results["columns"], results["messages"]))
        print(f"messages / columns, CPU per message, round by round: {', '.join(f'{r:.2f}x' for r in ratio)}")
        return 0
    finally:
        _delete_queues()


if __name__ == "__main__":
    sys.exit(main())
