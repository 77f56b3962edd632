"""The asyncio client's two halves apart: its CPU per message receiving, and sending, against paced peers.

    python -m bench.aio_parts                         # 50,000 x 200 B at 25,000/s, rests of 2 and 10 ms
    python -m bench.aio_parts --messages 20000 --rests 0.002 --rounds 1

``bench.clients`` times one consumer and one producer in one process through RabbitMQ; this splits that
figure without a broker. A child process (plain blocking sockets, so none of its CPU is the client's)
plays the broker at RabbitMQ's pace on loopback (``--rate``, 25,000 messages per second, what RabbitMQ
delivers to ``bench.clients`` here):

- **receiving**: it streams pre-encoded MESSAGEs of 200 B in writes of ten at that rate, and the client
  (``async for`` over the subscription) reads them with each ``coalesce_reads`` of ``--rests``: the
  rest sets how many messages a read brings, so the difference between two rests is the cost of a read
  (the loop's wake-ups, the pause and resume of reading, the rest's timer), not of a message;
- **sending**: it reads the client's SENDs no faster than that rate, and the client ``await``\\ s
  ``send()`` for each, as ``bench.clients``' producer does (its writes wait when the socket's buffer
  is full).

Client CPU is ``time.process_time()`` of this process from the first message to the last; rounds
alternate and the best of each counts.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import sys
import time
from typing import Dict, List, Optional, Tuple

import fastframe
from fastframe import aio

from .aio_read import _read_frame, _stream

SIZE = 200
BURST = 10  # MESSAGEs per write of the paced server
DESTINATION = "/queue/paced"


def _paced_server(listener: socket.socket, messages: int, rate: float) -> None:
    """Answer CONNECT and SUBSCRIBE, then write ``messages`` MESSAGEs, ``BURST`` at a time, at ``rate`` per s."""
    stream = _stream(messages, SIZE)
    ends = [i + 1 for i, byte in enumerate(stream) if byte == 0]  # where each frame ends
    conn, _ = listener.accept()
    with conn:
        _, rest = _read_frame(conn, b"")
        conn.sendall(b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0")
        _read_frame(conn, rest)  # SUBSCRIBE
        start, sent = time.perf_counter(), 0
        for i in range(BURST - 1, messages + BURST - 1, BURST):
            due = start + i / rate
            while time.perf_counter() < due:  # (a spin: a sleep's granularity is coarser than a burst)
                pass
            end = ends[min(i, messages - 1)]
            conn.sendall(stream[sent:end])
            sent = end
        while conn.recv(65536):  # until the client goes
            pass


def _paced_sink(listener: socket.socket, rate: float) -> None:
    """Answer CONNECT, then read what comes no faster than ``rate`` of the client's SENDs per s."""
    send_size = len(fastframe.Encoder("1.2").encode("SEND", [("destination", DESTINATION)], b"m" * SIZE))
    conn, _ = listener.accept()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    with conn:
        _read_frame(conn, b"")
        conn.sendall(b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0")
        start, got = time.perf_counter(), 0
        while True:
            due = start + got / (rate * send_size)
            while time.perf_counter() < due:
                pass
            data = conn.recv(BURST * send_size)
            if not data:
                return
            got += len(data)


def _peer(target: object, *args: object) -> Tuple[multiprocessing.process.BaseProcess, int]:
    """``target(listener, *args)`` in a child process; (the process, its port)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port: int = listener.getsockname()[1]
    peer = multiprocessing.get_context("fork").Process(target=target, args=(listener, *args), daemon=True)
    peer.start()
    listener.close()
    return peer, port


async def _receive(port: int, messages: int, rest: float) -> float:
    client = await aio.connect("127.0.0.1", port, timeout=120, versions=("1.2",), coalesce_reads=rest)
    try:
        subscription = await client.subscribe(DESTINATION, id="s", receipt=False)
        received, cpu = 0, time.process_time()
        async for message in subscription:
            if len(message.body) != SIZE:
                raise AssertionError(f"a body of {len(message.body)} bytes, not {SIZE}")
            received += 1
            if received == messages:
                return time.process_time() - cpu
        raise AssertionError(f"the stream ended after {received} of {messages} messages")
    finally:
        await client.close()  # (no DISCONNECT: the paced peer answers none)


async def _send(port: int, messages: int) -> float:
    client = await aio.connect("127.0.0.1", port, timeout=120, versions=("1.2",))
    try:
        body, cpu = b"m" * SIZE, time.process_time()
        for _ in range(messages):
            await client.send(DESTINATION, body)
        return time.process_time() - cpu
    finally:
        await client.close()


def receiving(messages: int, rate: float, rest: float) -> float:
    """Client CPU µs per message receiving ``messages`` at ``rate`` per s with reads resting ``rest`` s."""
    peer, port = _peer(_paced_server, messages, rate)
    try:
        return asyncio.run(asyncio.wait_for(_receive(port, messages, rest), 300)) / messages * 1e6
    finally:
        peer.terminate()
        peer.join(10)


def sending(messages: int, rate: float) -> float:
    """Client CPU µs per SEND of ``messages`` to a peer that reads at most ``rate`` per s."""
    peer, port = _peer(_paced_sink, rate)
    try:
        return asyncio.run(asyncio.wait_for(_send(port, messages), 300)) / messages * 1e6
    finally:
        peer.terminate()
        peer.join(10)


def main(argv: Optional[List[str]] = None) -> int:
    """Print the markdown table."""
    parser = argparse.ArgumentParser(prog="python -m bench.aio_parts", description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rate", type=float, default=25_000.0, help="messages per second")
    parser.add_argument("--rests", default="0.002,0.01", help="coalesce_reads values to receive with (s)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rests = [float(r) for r in args.rests.split(",")]
    parts = [f"receiving, rest {r * 1e3:g} ms" for r in rests] + ["sending"]
    best: Dict[str, float] = {}
    for round_ in range(args.rounds):
        order = parts if round_ % 2 == 0 else parts[::-1]  # neither always first
        for part in order:
            if part == "sending":
                cpu = sending(args.messages, args.rate)
            else:
                cpu = receiving(args.messages, args.rate, rests[parts.index(part)])
            best[part] = min(cpu, best.get(part, cpu))
    load = os.getloadavg()[0]
    print(
        f"The asyncio client's halves apart, {args.messages:,} x {SIZE} B at {args.rate:,.0f}/s, "
        f"{fastframe.IMPLEMENTATION} codec, best of {args.rounds} rounds (load average {load:.1f}).\n"
    )
    print("| part | client CPU µs per message |")
    print("|---|---:|")
    for part in parts:
        print(f"| {part} | {best[part]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
