"""Instructions per received MESSAGE in each client, counted by callgrind: repeatable on a busy machine.

    python -m bench.instructions                       # both clients, 10,000 and 30,000 messages
    python -m bench.instructions --clients sync --small 5000 --large 15000

Each client reads N MESSAGEs of 200 B from ``bench.aio_read``'s server (a child process streaming
pre-encoded bytes) under ``valgrind --tool=callgrind``; the client process's instructions at two
values of N, subtracted and divided by the difference, are the instructions per message (start-up,
imports and the handshake cancel out). Threads are counted too (the blocking client's I/O thread).
Under callgrind the client is far slower than the server, so its reads are full: the count is that
of a client that keeps up with nothing to spare, and it changes only with the code. Needs valgrind.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from typing import List, Optional


def read(client: str, count: int) -> None:
    """(Under callgrind) read ``count`` messages with ``client`` ("aio" or "sync")."""
    from .aio_read import _serve

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(listener, count, 0, 0), daemon=True)
    server.start()
    listener.close()
    try:
        if client == "aio":
            asyncio.run(_read_aio(port, count))
        else:
            _read_sync(port, count)
    finally:
        server.terminate()


async def _read_aio(port: int, count: int) -> None:
    from fastframe import aio

    async with aio.connect("127.0.0.1", port, timeout=300, versions=("1.2",)) as client:
        sub = await client.subscribe("/queue/small", id="s", receipt=False, max_queue=1000)
        got = 0
        async for _ in sub:
            got += 1
            if got == count:
                break
        await client.close()


def _read_sync(port: int, count: int) -> None:
    from fastframe import sync

    client = sync.connect("127.0.0.1", port, timeout=300, versions=("1.2",))
    try:
        sub = client.subscribe("/queue/small", id="s", receipt=False)
        got = 0
        for _ in sub:
            got += 1
            if got == count:
                break
    finally:
        client.close()


def instructions(client: str, count: int) -> int:
    """The client process's instructions reading ``count`` messages."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.%p")
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "bench.instructions",
        ]
        subprocess.run([*cmd, "--read", client, str(count)], check=True, capture_output=True, timeout=1800)
        totals = []
        for path in glob.glob(os.path.join(folder, "callgrind.*")):  # (the forked server has a file too)
            with open(path) as file:
                for line in file:
                    if line.startswith(("summary:", "totals:")):
                        totals.append(int(line.split()[1]))
                        break
        return max(totals)  # the client's: the server only writes


def main(argv: Optional[List[str]] = None) -> int:
    """Print instructions per message for each client."""
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.split("\n")[0])
    parser.add_argument("--clients", default="aio,sync")
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=30_000)
    parser.add_argument("--read", nargs=2, metavar=("CLIENT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.read:
        read(args.read[0], int(args.read[1]))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is needed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    import fastframe

    print(
        f"| client | instructions per message ({fastframe.IMPLEMENTATION} codec, {args.small:,} and {args.large:,}) |"
    )
    print("|---|---:|")
    for client in args.clients.split(","):
        small, large = instructions(client, args.small), instructions(client, args.large)
        print(f"| fastframe.{client} | {(large - small) / (args.large - args.small):,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
