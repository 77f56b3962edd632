"""Brokers under the same client and load, in one run: the fastframe broker, coilmq and RabbitMQ.

    python -m bench.brokers                         # 50,000 SENDs of 256 B through each, a markdown table
    python -m bench.brokers --messages 50000 --only fastframe,coilmq

The client is the same for every broker: two raw sockets speaking STOMP 1.0 (the version all three
speak; login guest/guest), a consumer (SUBSCRIBE ``ack:auto`` on a fresh queue) and a producer that
SENDs N bodies, each SEND exactly ``--frame`` bytes (256), in writes of 32 KiB with at most 4 writes
not yet delivered; the run ends when the consumer has every body, each checked byte for byte.
The shape is coilmq's doing: its reader takes 4 KiB per ``recv`` and a frame that a ``recv``
boundary cuts through its head is lost (``parse_headers`` reads the partial lines as a whole head,
``BodyNotTerminated`` escapes, the connection stops), so an arbitrary stream stalls it after a few
dozen messages. Frames that tile 4 KiB, sent in whole 32 KiB writes (one loopback segment each),
keep every ``recv`` on a frame boundary. Every broker gets the same bytes in the same writes. Messages/s is N over the wall time from the first SEND to
the last MESSAGE. Broker CPU is the broker process's user+system time over the same span, read from
``/proc/<pid>/stat``: the fastframe broker and coilmq run as child processes started here, RabbitMQ
is the running ``beam.smp`` on 127.0.0.1:61613 (started by ``.ci/brokers start rabbitmq``; skipped
when absent). The goal: the fastframe broker handles at least 10x coilmq's messages per broker
CPU-second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

import fastframe

GOAL = 10.0
RABBITMQ = ("127.0.0.1", 61613)


class Unavailable(Exception):
    """The broker cannot run here."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _wait_port(port: int, proc: Optional[subprocess.Popen[bytes]], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise Unavailable(f"exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise Unavailable(f"nothing listens on {port} after {seconds} s")


def _rabbitmq_pid() -> int:
    try:
        out = subprocess.run(["pgrep", "-f", "beam.smp"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        raise Unavailable(str(error)) from None
    pids = [int(p) for p in out.split()]
    if not pids:
        raise Unavailable("RabbitMQ is not running (.ci/brokers start rabbitmq)")
    _wait_port(RABBITMQ[1], None, 2)
    return pids[0]


def _body(token: bytes, i: int, size: int) -> bytes:
    head = token + b"%08d:" % i
    return head + bytes(32 + (i + k) % 95 for k in range(max(0, size - len(head))))


def _body_size(queue: str, frame: int) -> int:
    """The body size that makes every SEND exactly ``frame`` bytes."""
    size = frame
    for _ in range(5):  # the content-length digits depend on the size: settle in a few steps
        size = frame - (len(fastframe.encode("SEND", {"destination": queue}, b"x" * size, version="1.0")) - size)
    return size


async def _connect(port: int) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter, fastframe.Decoder]:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
    writer.write(b"CONNECT\nlogin:guest\npasscode:guest\n\n\0")
    decoder = fastframe.Decoder("1.0", escapes="1.2", keep_undefined_escapes=True)
    frames: List[fastframe.Frame] = []
    while not frames:
        data = await asyncio.wait_for(reader.read(65536), 10)
        if not data:
            raise Unavailable("closed during CONNECT")
        frames = decoder.feed(data)
    if frames[0].command != "CONNECTED":
        raise Unavailable(f"CONNECT answered with {frames[0].command}: {frames[0].get('message')}")
    return reader, writer, decoder


async def _load(port: int, pid: int, messages: int, frame_size: int) -> Tuple[float, float]:
    """(seconds, broker CPU seconds) to move ``messages`` bodies through the broker on ``port``."""
    token = b"%x:" % time.monotonic_ns()
    queue = "/queue/bench-" + token.decode()[:-1]
    c_reader, c_writer, c_decoder = await _connect(port)
    c_writer.write(fastframe.encode("SUBSCRIBE", {"destination": queue, "ack": "auto", "receipt": "s"}, version="1.0"))
    while not c_decoder.feed(await asyncio.wait_for(c_reader.read(65536), 10)):
        pass
    p_reader, p_writer, _ = await _connect(port)
    size = _body_size(queue, frame_size)
    bodies = [_body(token, i, size) for i in range(messages)]
    frames = [fastframe.encode("SEND", {"destination": queue}, body, version="1.0") for body in bodies]
    assert {len(f) for f in frames} == {frame_size}
    per_write = 32 * 1024 // frame_size
    received = asyncio.Event()
    got = 0

    async def produce() -> None:
        for start in range(0, messages, per_write):
            while start - got > 3 * per_write:  # at most 4 writes on their way
                received.clear()
                await asyncio.wait_for(received.wait(), 60)
            p_writer.write(b"".join(frames[start : start + per_write]))

    async def consume() -> None:
        nonlocal got
        while got < messages:
            data = await asyncio.wait_for(c_reader.read(1 << 20), 60)
            if not data:
                raise RuntimeError(f"the broker closed after {got} messages")
            for frame in c_decoder.feed(data):
                if frame.command != "MESSAGE":
                    raise RuntimeError(f"{frame.command}: {frame.get('message')}")
                if frame.body != bodies[got]:
                    raise RuntimeError(f"body {got} differs")
                got += 1
            received.set()

    cpu = _cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.gather(produce(), consume())
    elapsed = time.perf_counter() - started
    cpu = _cpu_seconds(pid) - cpu
    for writer in (p_writer, c_writer):
        writer.close()
    return elapsed, cpu


def _start(name: str) -> Tuple[Optional[subprocess.Popen[bytes]], int, int]:
    if name == "rabbitmq":
        return None, RABBITMQ[1], _rabbitmq_pid()
    port = _free_port()
    if name == "fastframe":
        command = [sys.executable, "-m", "fastframe", "broker", "--port", str(port)]
    else:
        command = [os.path.join(os.path.dirname(sys.executable), "coilmq"), "-b", "127.0.0.1", "-p", str(port)]
        if not os.path.exists(command[0]):
            raise Unavailable("coilmq is not installed (pip install -e '.[bench]')")
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port, proc)
    except Unavailable:
        proc.kill()
        proc.wait(10)
        raise
    return proc, port, proc.pid


def measure(name: str, messages: int, frame_size: int) -> Dict[str, float]:
    """Run the load through one broker; its numbers."""
    proc, port, pid = _start(name)
    try:
        elapsed, cpu = asyncio.run(asyncio.wait_for(_load(port, pid, messages, frame_size), 300))
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    return {"rate": messages / elapsed, "cpu_us": cpu / messages * 1e6, "per_cpu_s": messages / cpu if cpu else 0.0}


def main(argv: Optional[List[str]] = None) -> int:
    """Print the markdown table."""
    parser = argparse.ArgumentParser(prog="python -m bench.brokers", description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument(
        "--frame",
        type=int,
        default=256,
        choices=[128, 256, 512, 1024, 2048, 4096],
        help="bytes per SEND frame, a divisor of 4 KiB (default 256)",
    )
    parser.add_argument("--only", default="fastframe,coilmq,rabbitmq")
    args = parser.parse_args(argv)
    results: Dict[str, Dict[str, float]] = {}
    print(f"{args.messages:,} SEND frames of {args.frame} B, one producer and one consumer, STOMP 1.0, loopback\n")
    print("| broker | messages/s | broker CPU µs/message | messages per broker CPU-second |")
    print("|---|---:|---:|---:|")
    for name in args.only.split(","):
        try:
            results[name] = row = measure(name, args.messages, args.frame)
        except Unavailable as why:
            print(f"| {name} | unavailable: {why} | | |")
            continue
        except (RuntimeError, OSError, asyncio.TimeoutError) as error:  # e.g. RabbitMQ restarted mid-run
            print(f"| {name} | failed: {error!r} | | |")
            continue
        print(f"| {name} | {row['rate']:,.0f} | {row['cpu_us']:.1f} | {row['per_cpu_s']:,.0f} |", flush=True)
    if "fastframe" in results and "coilmq" in results and results["coilmq"]["per_cpu_s"]:
        ratio = results["fastframe"]["per_cpu_s"] / results["coilmq"]["per_cpu_s"]
        verdict = "met" if ratio >= GOAL else "NOT met"
        print(
            f"\nfastframe broker / coilmq, messages per broker CPU-second: {ratio:.1f}x (goal {GOAL:.0f}x: {verdict})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
