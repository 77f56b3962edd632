"""Instructions per received MESSAGE in each client, counted by callgrind: repeatable on a busy machine.

    python -m bench.instructions                       # both clients, 10,000 and 30,000 messages
    python -m bench.instructions --clients sync --small 5000 --large 15000
    python -m bench.instructions --clients aio,sync,stomp.py   # stomp.py's listener beside them
    python -m bench.instructions --clients aio-send,sync-send,stomp.py-send   # N SENDs of 200 B instead
    python -m bench.instructions --clients aio-rabbitmq,sync-rabbitmq   # MESSAGEs as RabbitMQ writes them

Each client reads N MESSAGEs of 200 B from ``bench.aio_read``'s server (a child process streaming
pre-encoded bytes) under ``valgrind --tool=callgrind``; the client process's instructions at two
values of N, subtracted and divided by the difference, are the instructions per message (start-up,
imports and the handshake cancel out). Threads are counted too (the blocking client's I/O thread).
A ``-send`` client sends N SENDs of 200 B to a child process that answers CONNECT and reads on.
Under callgrind the client is far slower than the server, so its reads are full: the count is that
of a client that keeps up with nothing to spare, and it changes only with the code. Beside the
instructions, the same difference of two CPython functions' calls (:data:`COUNTED`): Python frames
made (function calls, coroutines) and pymalloc allocations, per message. Needs valgrind.
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
from typing import Dict, List, Optional


def read(client: str, count: int) -> None:
    """(Under callgrind) read ``count`` messages with ``client`` ("aio", "sync" or "stomp.py"), or
    send them (the same names ending in ``-send``); a name ending in ``-rabbitmq`` reads them in
    RabbitMQ's shape (its headers, and an EOL after each frame)."""
    from .aio_read import _serve

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    if client.endswith("-send"):
        sender = multiprocessing.get_context("fork").Process(target=_sink, args=(listener,), daemon=True)
        sender.start()
        listener.close()
        try:
            SENDERS[client](port, count)
        finally:
            sender.terminate()
        return
    rabbitmq = client.endswith("-rabbitmq")
    client = client.removesuffix("-rabbitmq")
    server = multiprocessing.get_context("fork").Process(
        target=_serve, args=(listener, count, 0, 0, rabbitmq), daemon=True
    )
    server.start()
    listener.close()
    try:
        if client == "aio":
            asyncio.run(_read_aio(port, count))
        elif client == "sync":
            _read_sync(port, count)
        else:
            _read_stomp_py(port, count)
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


def _read_stomp_py(port: int, count: int) -> None:
    import threading

    import stomp

    done, got = threading.Event(), [0]

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: object) -> None:
            got[0] += 1
            if got[0] == count:
                done.set()

    connection = stomp.Connection([("127.0.0.1", port)], heartbeats=(0, 0), auto_decode=False)
    connection.set_listener("count", Listener())
    connection.connect(wait=True)
    connection.subscribe("/queue/small", id="s", ack="auto")
    done.wait(600)
    connection.disconnect(receipt=None)


def _sink(listener: socket.socket) -> None:
    """Answer one client's CONNECT, then read (and drop) what it sends until it goes."""
    from .aio_read import _read_frame

    listener.settimeout(60)
    conn, _ = listener.accept()
    with conn:
        _read_frame(conn, b"")
        conn.sendall(b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0")
        while conn.recv(1 << 20):
            pass


BODY = b"m" * 200


def _send_aio(port: int, count: int) -> None:
    from fastframe import aio

    async def run() -> None:
        client = await aio.connect("127.0.0.1", port, timeout=300, versions=("1.2",))
        for _ in range(count):
            await client.send("/queue/sink", BODY)
        transport = client.session.transport
        while transport is not None and transport.get_write_buffer_size():  # everything written
            await asyncio.sleep(0.01)
        await client.close()

    asyncio.run(run())


def _send_sync(port: int, count: int) -> None:
    from fastframe import sync

    client = sync.connect("127.0.0.1", port, timeout=300, versions=("1.2",))
    try:
        for _ in range(count):
            client.send("/queue/sink", BODY)
        client.flush(timeout=300)
    finally:
        client.close()


def _send_stomp_py(port: int, count: int) -> None:
    import stomp

    connection = stomp.Connection([("127.0.0.1", port)], heartbeats=(0, 0), auto_decode=False)
    connection.connect(wait=True)
    for _ in range(count):
        connection.send("/queue/sink", BODY)
    connection.disconnect(receipt=None)


SENDERS = {"aio-send": _send_aio, "sync-send": _send_sync, "stomp.py-send": _send_stomp_py}


#: What the counts beside the instructions are: callgrind's calls of these CPython functions.
#: ``initialize_locals`` runs once for each Python function frame made (calls, coroutines and generators
#: included); ``_PyObject_Malloc``/``_PyObject_Calloc`` are pymalloc's allocations (objects, and the
#: small buffers inside them).
COUNTED = {"frames": ("initialize_locals",), "allocations": ("_PyObject_Malloc", "_PyObject_Calloc")}


def instructions(client: str, count: int) -> Dict[str, int]:
    """The client process's instructions reading ``count`` messages, with its :data:`COUNTED` calls."""
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
        # (the forked server has a file too) the client's is the larger: the server only writes
        return max(
            (callgrind_counts(path) for path in glob.glob(os.path.join(folder, "callgrind.*"))),
            key=lambda c: c["instructions"],
        )


def callgrind_counts(path: str) -> Dict[str, int]:
    """A callgrind file's total instructions and the calls of each :data:`COUNTED` group."""
    wanted = {name: group for group, names in COUNTED.items() for name in names}
    counts = dict.fromkeys(["instructions", *COUNTED], 0)
    names: Dict[str, str] = {}  # callgrind names a function once, then by its number
    target = None
    with open(path) as file:
        for line in file:
            if line.startswith(("fn=", "cfn=")):
                number, _, name = line.partition("=")[2].strip().partition(" ")
                if name:
                    names[number] = name
                target = wanted.get(names.get(number, "")) if line[0] == "c" else None
            elif line.startswith("calls=") and target is not None:
                counts[target] += int(line[6:].split()[0])
                target = None
            elif line.startswith(("summary:", "totals:")):
                counts["instructions"] = int(line.split()[1])
    return counts


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
        f"| client | per message ({fastframe.IMPLEMENTATION} codec, {args.small:,} and {args.large:,}): instructions "
        "| Python frames | allocations |"
    )
    print("|---|---:|---:|---:|")
    for client in args.clients.split(","):
        small, large = instructions(client, args.small), instructions(client, args.large)
        name = client if client.startswith("stomp.py") else f"fastframe.{client}"
        per = {key: (large[key] - small[key]) / (args.large - args.small) for key in large}
        print(f"| {name} | {per['instructions']:,.0f} | {per['frames']:,.1f} | {per['allocations']:,.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
