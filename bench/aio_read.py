"""The asyncio client's reading path: ``asyncio.BufferedProtocol`` against a plain ``Protocol``, one run.

    python -m bench.aio_read                        # 200,000 MESSAGEs of 200 B; 8 of 8 MiB
    python -m bench.aio_read --messages 50000 --large 2 --rounds 1

A server in a child process (plain blocking sockets, so none of its CPU is the client's) answers
CONNECT and SUBSCRIBE, then streams pre-encoded bytes in 256 KiB writes: N MESSAGE frames with
200-byte bodies, or (a second load) a few large bodies. The client is ``fastframe.aio``'s
(``async for`` over the subscription, every body's size checked); the two reading paths alternate
for ``--rounds`` rounds, each going first in half of them, and the best round of each counts.
Client CPU is ``time.process_time()`` of this process from SUBSCRIBE to the last message.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import sys
import time
from typing import Dict, List, Optional, Tuple

import fastframe
from fastframe import aio
from fastframe.aio._transport import ClientSession

SMALL = 200
CHUNK = 256 * 1024


def _stream(count: int, size: int, rabbitmq: bool = False) -> bytes:
    """``count`` MESSAGEs of ``size`` B for subscription "s"; ``rabbitmq``: in RabbitMQ's shape (its
    headers, its long message ids, and the EOL it writes after each frame, as in the corpus)."""
    encoder = fastframe.Encoder("1.2")
    body = b"m" * size
    if rabbitmq:
        session = "session-cOY0yn4-RqhM-QRjWRNo8Q"
        return b"".join(
            encoder.encode(
                fastframe.Frame(
                    "MESSAGE",
                    (
                        ("subscription", "s"),
                        ("destination", "/queue/bench"),
                        ("message-id", f"T_s@@{session}@@{i}"),
                        ("redelivered", "false"),
                    ),
                    body,
                )
            )
            + b"\n"
            for i in range(count)
        )
    head = (("destination", "/queue/bench"), ("subscription", "s"))
    return b"".join(
        encoder.encode(fastframe.Frame("MESSAGE", (*head, ("message-id", str(i))), body)) for i in range(count)
    )


def _read_frame(conn: socket.socket, pending: bytes) -> Tuple[bytes, bytes]:
    """Read up to the next NUL: (one client frame, what came after it)."""
    while b"\0" not in pending:
        data = conn.recv(65536)
        if not data:
            raise ConnectionError("the client left")
        pending += data
    frame, rest = pending.split(b"\0", 1)
    return frame, rest


def _serve(listener: socket.socket, messages: int, large: int, large_size: int, rabbitmq: bool = False) -> None:
    """Serve each connection its stream until the parent goes (or nobody comes for a minute): the
    small MESSAGEs (in RabbitMQ's shape with ``rabbitmq``), or the large ones when the SUBSCRIBE's
    destination says ``large``."""
    streams = {False: _stream(messages, SMALL, rabbitmq), True: _stream(large, large_size)}
    listener.settimeout(60)
    while True:
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            return
        with conn:
            conn.settimeout(60)
            try:
                _, rest = _read_frame(conn, b"")  # CONNECT
                conn.sendall(b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0")
                subscribe, _ = _read_frame(conn, rest)
                stream = streams[b"large" in subscribe]
                for start in range(0, len(stream), CHUNK):
                    conn.sendall(stream[start : start + CHUNK])
                while conn.recv(65536):  # until the client closes
                    pass
            except OSError:
                pass


async def _client(port: int, count: int, size: int) -> Tuple[float, float]:
    """(wall s, client CPU s) from SUBSCRIBE to the last of ``count`` messages of ``size`` bytes."""
    async with aio.connect("127.0.0.1", port, timeout=120, versions=("1.2",)) as client:
        wall, cpu = time.perf_counter(), time.process_time()
        destination = "/queue/small" if size == SMALL else "/queue/large"
        sub = await client.subscribe(destination, id="s", receipt=False, max_queue=1000)
        received = 0
        async for message in sub:
            if len(message.body) != size:
                raise AssertionError(f"a body of {len(message.body)} bytes, not {size}")
            received += 1
            if received == count:
                break
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await client.close()
    return wall, cpu


def measure(port: int, buffered: bool, count: int, size: int) -> Tuple[float, float]:
    """One round with one reading path."""
    ClientSession.reads_into_buffer = buffered
    try:
        return asyncio.run(asyncio.wait_for(_client(port, count, size), 300))
    finally:
        ClientSession.reads_into_buffer = True


def main(argv: Optional[List[str]] = None) -> int:
    """Print the markdown table."""
    parser = argparse.ArgumentParser(prog="python -m bench.aio_read", description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--large", type=int, default=8, help="how many large bodies")
    parser.add_argument("--large-size", type=int, default=8 * 1024 * 1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    server = multiprocessing.get_context("fork").Process(
        target=_serve, args=(listener, args.messages, args.large, args.large_size), daemon=True
    )
    server.start()
    listener.close()
    loads = {"small": (args.messages, SMALL), "large": (args.large, args.large_size)}
    best: Dict[Tuple[str, bool], Tuple[float, float]] = {}
    try:
        for round_ in range(args.rounds):
            for load, (count, size) in loads.items():
                for buffered in (True, False) if round_ % 2 else (False, True):  # neither always first
                    wall, cpu = measure(port, buffered, count, size)
                    if (load, buffered) not in best or cpu < best[load, buffered][1]:
                        best[load, buffered] = (wall, cpu)
    finally:
        server.terminate()
        server.join(10)

    print(
        f"MESSAGEs to the asyncio client on loopback, best of {args.rounds} rounds each,"
        f" {fastframe.IMPLEMENTATION} codec, one run.\n"
    )
    print("| load | reading path | messages/s | MiB/s | client CPU µs/message | client CPU vs Protocol |")
    print("|---|---|---:|---:|---:|---:|")
    for load, (count, size) in loads.items():
        label = f"{count:,} x {size:,} B"
        for buffered, name in ((True, "`BufferedProtocol`"), (False, "`Protocol`")):
            wall, cpu = best[load, buffered]
            mib = count * size / 2**20
            ratio = cpu / best[load, False][1]
            print(
                f"| {label} | {name} | {count / wall:,.0f} | {mib / wall:,.0f} | {cpu / count * 1e6:,.1f} | {ratio:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
