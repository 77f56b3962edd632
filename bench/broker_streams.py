"""Stream-queue delivery through the fastframe broker's emulation and through RabbitMQ, side by side.

    python -m bench.broker_streams                  # 50,000 messages of 256 B, a markdown table
    python -m bench.broker_streams --messages 20000 --only fastframe

The load of ``bench.brokers`` (raw sockets speaking STOMP 1.0, login guest/guest, SENDs of exactly
``--frame`` bytes in 32 KiB writes with at most 4 writes not yet delivered, every body checked byte for
byte), on a stream queue: a SUBSCRIBE with ``x-queue-type:stream`` declares it, the producer SENDs to
``/amq/queue/NAME``, the consumer reads with ``ack:client`` and ``prefetch-count`` 1,000 and a
cumulative ACK every 500 messages. Two scenarios:

* ``live``: the consumer subscribed from ``next`` before the first SEND; from the first SEND to the
  last MESSAGE (the broker writes and delivers);
* ``replay``: the stream already holds the messages; from the SUBSCRIBE with ``x-stream-offset:first``
  to the last MESSAGE (the broker only delivers).

Broker CPU is the broker process's user+system time over the same span (``/proc/<pid>/stat``): the
fastframe broker as a child process started here, RabbitMQ's running ``beam.smp`` on 127.0.0.1:61613
(skipped when absent; its streams are deleted afterwards with ``rabbitmqctl`` when there is one). The
goal (issue 34): the fastframe broker at least 5x RabbitMQ's messages per broker CPU-second.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

import fastframe

from .brokers import Unavailable, _body, _body_size, _connect, _cpu_seconds, _start

GOAL = 5.0
PREFETCH = 1000
DECLARE = {"x-queue-type": "stream", "durable": "true", "auto-delete": "false"}


async def _receipt(reader: asyncio.StreamReader, decoder: fastframe.Decoder) -> None:
    while True:
        data = await asyncio.wait_for(reader.read(65536), 30)
        if not data:
            raise RuntimeError("the broker closed the connection")
        for frame in decoder.feed(data):
            if frame.command == "ERROR":
                raise RuntimeError(f"ERROR {frame.get('message')}: {bytes(frame.body)[:200]!r}")
            if frame.command == "RECEIPT":
                return


async def _load(port: int, pid: int, messages: int, frame_size: int, replay: bool) -> Tuple[float, float, str]:
    """(seconds, broker CPU seconds, the stream's name) to move ``messages`` bodies through a stream."""
    token = b"%x:" % time.monotonic_ns()
    name = "bench-stream-" + token.decode()[:-1]
    p_reader, p_writer, p_decoder = await _connect(port)
    # the producer declares the stream (its subscription reads nothing and goes)
    declare = {"id": "d", "destination": f"/queue/{name}", "ack": "client", "prefetch-count": "1", **DECLARE}
    p_writer.write(fastframe.encode("SUBSCRIBE", {**declare, "x-stream-offset": "next"}, version="1.0"))
    p_writer.write(fastframe.encode("UNSUBSCRIBE", {"id": "d", "receipt": "d"}, version="1.0"))
    await _receipt(p_reader, p_decoder)
    destination = f"/amq/queue/{name}"
    size = _body_size(destination, frame_size)
    bodies = [_body(token, i, size) for i in range(messages)]
    frames = [fastframe.encode("SEND", {"destination": destination}, body, version="1.0") for body in bodies]
    assert {len(f) for f in frames} == {frame_size}
    per_write = 32 * 1024 // frame_size
    c_reader, c_writer, c_decoder = await _connect(port)
    subscribe = {"id": "s", "destination": destination, "ack": "client", "prefetch-count": str(PREFETCH)}

    async def subscribe_from(offset: str) -> None:
        headers = {**subscribe, "x-stream-offset": offset, "receipt": "s"}
        c_writer.write(fastframe.encode("SUBSCRIBE", headers, version="1.0"))

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
            last_id = None
            for frame in c_decoder.feed(data):
                if frame.command == "RECEIPT":
                    continue
                if frame.command != "MESSAGE":
                    raise RuntimeError(f"{frame.command}: {frame.get('message')} {bytes(frame.body)[:200]!r}")
                if frame.body != bodies[got]:
                    raise RuntimeError(f"body {got} differs")
                got += 1
                if got % (PREFETCH // 2) == 0 or got == messages:
                    last_id = frame.get("message-id")
            if last_id is not None:  # cumulative: this one and every one before it
                c_writer.write(fastframe.encode("ACK", {"message-id": last_id, "subscription": "s"}, version="1.0"))
            received.set()

    if replay:
        for start in range(0, messages, 4 * per_write):  # (bounded: a receipt closes every 4 writes)
            stop = min(start + 4 * per_write, messages)
            last = fastframe.encode(
                "SEND", {"destination": destination, "receipt": "w"}, bodies[stop - 1], version="1.0"
            )
            p_writer.write(b"".join(frames[start : stop - 1]) + last)
            await _receipt(p_reader, p_decoder)
        p_writer.write(fastframe.encode("DISCONNECT", {"receipt": "end"}, version="1.0"))
        await _receipt(p_reader, p_decoder)
        cpu = _cpu_seconds(pid)
        started = time.perf_counter()
        await subscribe_from("first")
        await consume()
    else:
        await subscribe_from("next")
        await _receipt(c_reader, c_decoder)
        cpu = _cpu_seconds(pid)
        started = time.perf_counter()
        await asyncio.gather(produce(), consume())
    elapsed = time.perf_counter() - started
    cpu = _cpu_seconds(pid) - cpu
    for writer in (p_writer, c_writer):
        writer.close()
    return elapsed, cpu, name


def _delete_rabbitmq_streams(names: List[str]) -> None:
    ctl = shutil.which("rabbitmqctl")
    if not names or ctl is None:
        return
    quoted = ", ".join(f'<<"{name}">>' for name in names)
    code = (
        '[case rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, N)) of {ok, Q} -> '
        f'rabbit_amqqueue:delete(Q, false, false, <<"bench">>); Other -> Other end || N <- [{quoted}]].'
    )
    subprocess.run([ctl, "eval", code], capture_output=True, timeout=60, check=False)


def measure(name: str, messages: int, frame_size: int, replay: bool) -> Dict[str, float]:
    """Run one scenario through one broker; its numbers."""
    proc, port, pid = _start(name)
    streams: List[str] = []
    try:
        elapsed, cpu, stream = asyncio.run(asyncio.wait_for(_load(port, pid, messages, frame_size, replay), 300))
        streams.append(stream)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if name == "rabbitmq":
            _delete_rabbitmq_streams(streams)
    return {"rate": messages / elapsed, "cpu_us": cpu / messages * 1e6, "per_cpu_s": messages / cpu if cpu else 0.0}


def main(argv: Optional[List[str]] = None) -> int:
    """Print the markdown table."""
    parser = argparse.ArgumentParser(prog="python -m bench.broker_streams", description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument(
        "--frame", type=int, default=256, choices=[128, 256, 512, 1024, 2048, 4096], help="bytes per SEND frame"
    )
    parser.add_argument("--only", default="fastframe,rabbitmq")
    args = parser.parse_args(argv)
    print(f"{args.messages:,} SEND frames of {args.frame} B to a stream queue, one producer and one consumer, "
          f"STOMP 1.0, loopback\n")  # fmt: skip
    print("| broker | scenario | messages/s | broker CPU µs/message | messages per broker CPU-second |")
    print("|---|---|---:|---:|---:|")
    results: Dict[Tuple[str, str], Dict[str, float]] = {}
    for scenario in ("live", "replay"):
        for name in args.only.split(","):
            try:
                results[name, scenario] = row = measure(name, args.messages, args.frame, scenario == "replay")
            except Unavailable as why:
                print(f"| {name} | {scenario} | unavailable: {why} | | |")
                continue
            except (RuntimeError, OSError, asyncio.TimeoutError) as error:
                print(f"| {name} | {scenario} | failed: {error!r} | | |")
                continue
            print(
                f"| {name} | {scenario} | {row['rate']:,.0f} | {row['cpu_us']:.1f} | {row['per_cpu_s']:,.0f} |",
                flush=True,
            )
    for scenario in ("live", "replay"):
        ours, theirs = results.get(("fastframe", scenario)), results.get(("rabbitmq", scenario))
        if ours and theirs and theirs["per_cpu_s"]:
            ratio = ours["per_cpu_s"] / theirs["per_cpu_s"]
            verdict = "met" if ratio >= GOAL else "NOT met"
            print(f"\n{scenario}: fastframe broker / RabbitMQ, messages per broker CPU-second: {ratio:.1f}x "
                  f"(goal {GOAL:.0f}x: {verdict})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
