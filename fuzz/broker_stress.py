"""Stress `fastframe broker` with mutated real client streams; check it stays healthy and gives memory back.

    python fuzz/broker_stress.py --seconds 300          # make broker-stress
    python fuzz/broker_stress.py --seconds 20           # make broker-stress-smoke (CI)

A broker process (loopback, `--max-stored-bytes 8m`) gets, over many connections at once, client streams
taken from the RabbitMQ and ActiveMQ recordings of ../shared/corpus/brokers and from generated sessions
(SENDs to many destinations, transactions never committed, large headers, SUBSCRIBE/UNSUBSCRIBE churn),
each mutated (bytes flipped, inserted, dropped, pieces repeated, cut short) and written in random pieces;
some clients stop reading for a while. Every second a health check connects, sends with a receipt and
must get it within 2 s. At the end, once every client has left, the broker's RSS must be within
--rss-slack MiB (10) of what it was after a warm-up round, and its stderr must hold no traceback
(nothing reached the event loop). Exit status 1 on any failure, with what failed.

Why 10 MiB: the broker's Python objects after a run are what they were after the warm-up (tracemalloc:
0.4 MB in all, no growth), but the allocators keep some of what a busy run used: measured here, RSS
grew 5.8 MiB in 30 s, 7.7-8.7 in 60 s and 6.0 in 150 s (it levels off; a leak grows with time). The
leaks this catches are larger: before empty queues were forgotten, 100,000 distinct names held ~98 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import fastframe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _shared import find_shared  # noqa: E402

NAMES = 50  # the generated sessions' queues; a janitor consumes them, so the broker is not simply full


def corpus_streams() -> List[bytes]:
    brokers = find_shared() / "corpus" / "brokers"
    streams = [p.read_bytes() for p in sorted(brokers.glob("*/*.c2s.stomp")) if p.stat().st_size <= 1 << 20]
    if not streams:
        print(f"broker_stress: no client recordings under {brokers}; generated sessions only", file=sys.stderr)
    return streams


def generated(rng: random.Random) -> bytes:
    """A session of the kinds that made the broker hold memory: many destinations, transactions, big headers."""
    out = [fastframe.encode("CONNECT", {"accept-version": "1.2", "host": "/"})]
    kind = rng.randrange(4)
    for k in range(rng.randrange(10, 200)):
        name = f"/queue/s{rng.randrange(NAMES)}"
        if kind == 0:
            out.append(fastframe.encode("SEND", {"destination": name}, rng.randbytes(rng.randrange(2000))))
        elif kind == 1:
            out.append(fastframe.encode("BEGIN", {"transaction": f"t{k}"}))
            out.append(fastframe.encode("SEND", {"destination": name, "transaction": f"t{k}"}, b"x" * 4096))
        elif kind == 2:
            out.append(fastframe.encode("SEND", {"destination": name, "x-big": "h" * rng.randrange(8000)}))
        else:  # churn through names nobody else uses: each must be forgotten again
            name = f"/queue/churn-{rng.randrange(1 << 30)}"
            out.append(fastframe.encode("SUBSCRIBE", {"id": "s", "destination": name}))
            out.append(fastframe.encode("UNSUBSCRIBE", {"id": "s"}))
    if rng.random() < 0.7:
        out.append(fastframe.encode("DISCONNECT", {"receipt": "bye"}))
    return b"".join(out)


def mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randrange(0, 6)):
        if not buf:
            break
        at = rng.randrange(len(buf))
        op = rng.randrange(5)
        if op == 0:
            buf[at] = rng.randrange(256)
        elif op == 1:
            buf[at:at] = rng.choice([b"\0", b"\n", b":", b"\\", b"\r\n", b"content-length:99999999\n"])
        elif op == 2:
            del buf[at : at + rng.randrange(1, 64)]
        elif op == 3:
            buf[at:at] = buf[at : at + rng.randrange(1, 2048)] * rng.randrange(1, 4)
        else:
            del buf[at:]
    return bytes(buf)


async def client(port: int, data: bytes, rng: random.Random, stop_at: float) -> None:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    except (OSError, asyncio.TimeoutError):
        return
    stalls = rng.random() < 0.2  # a client that stops reading for a while
    try:
        at = 0
        while at < len(data) and time.monotonic() < stop_at:
            size = rng.choice([1, 7, 100, 4096, 65536])
            writer.write(data[at : at + size])
            at += size
            await asyncio.wait_for(writer.drain(), 5)
            if rng.random() < 0.05:
                await asyncio.sleep(rng.random() * 0.05)
        if stalls:
            await asyncio.sleep(rng.random() * 2)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            if not await asyncio.wait_for(reader.read(1 << 16), max(0.01, deadline - time.monotonic())):
                break
    except (OSError, asyncio.TimeoutError):
        pass
    finally:
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 2)
        except (OSError, asyncio.TimeoutError):
            pass


async def janitor(port: int, stop: asyncio.Event) -> None:
    """Consumes the generated sessions' queues (auto ack), reconnecting when a mutated name broke nothing."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
        except (OSError, asyncio.TimeoutError):
            await asyncio.sleep(0.1)
            continue
        frames = [fastframe.encode("CONNECT", {"accept-version": "1.2", "host": "/", "heart-beat": "0,0"})]
        frames += [fastframe.encode("SUBSCRIBE", {"id": str(k), "destination": f"/queue/s{k}"}) for k in range(NAMES)]
        writer.write(b"".join(frames))
        try:
            while not stop.is_set():
                try:
                    if not await asyncio.wait_for(reader.read(1 << 18), 0.5):
                        break
                except asyncio.TimeoutError:
                    continue
        except OSError:
            pass
        finally:
            writer.close()


async def health(port: int) -> float:
    """Seconds for CONNECT, then a SEND's RECEIPT (raises when it takes more than 2 s)."""
    started = time.monotonic()
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
    try:
        writer.write(fastframe.encode("CONNECT", {"accept-version": "1.2", "host": "/"}))
        writer.write(fastframe.encode("SEND", {"destination": "/topic/health", "receipt": "ok"}, b"."))
        writer.write(fastframe.encode("DISCONNECT", {"receipt": "bye"}))
        data = b""
        while b"receipt-id:ok" not in data:
            chunk = await asyncio.wait_for(reader.read(4096), 2 - (time.monotonic() - started))
            if not chunk:
                raise ConnectionError(f"closed before the receipt: {data!r}")
            data += chunk
    finally:
        writer.close()
    return time.monotonic() - started


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


async def stress(port: int, seconds: float, connections: int, rng: random.Random, seeds: List[bytes]) -> List[str]:
    failures: List[str] = []
    stop_at = time.monotonic() + seconds
    stop = asyncio.Event()
    cleaning = asyncio.ensure_future(janitor(port, stop))
    pending: set = set()
    next_check = time.monotonic()
    while time.monotonic() < stop_at:
        while len(pending) < connections:
            base = rng.choice(seeds) if seeds and rng.random() < 0.5 else generated(rng)
            pending.add(asyncio.ensure_future(client(port, mutate(base, rng), rng, stop_at)))
        done, pending = await asyncio.wait(pending, timeout=0.2, return_when=asyncio.FIRST_COMPLETED)
        if time.monotonic() >= next_check:
            next_check = time.monotonic() + 1.0
            try:
                await health(port)
            except Exception as exc:  # noqa: BLE001 - any failure is a finding
                failures.append(f"health check failed at {seconds - (stop_at - time.monotonic()):.1f}s: {exc!r}")
    if pending:
        await asyncio.wait(pending, timeout=15)
    stop.set()
    await asyncio.wait_for(cleaning, 5)
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--connections", type=int, default=30)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--rss-slack", type=float, default=10.0, help="MiB above the warm-up's RSS allowed at the end")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    seeds = corpus_streams()
    broker = subprocess.Popen(
        [sys.executable, "-m", "fastframe", "broker", "--port", "0", "--max-stored-bytes", "8m"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    failures: List[str] = []
    try:
        line = broker.stdout.readline() if broker.stdout else ""
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if match is None:
            print(f"broker_stress: the broker did not start: {line!r}", file=sys.stderr)
            return 1
        port = int(match.group(1))
        warm = min(5.0, args.seconds / 4)  # a round of the same traffic: the allocator reaches its working size
        failures += asyncio.run(stress(port, warm, args.connections, rng, seeds))
        time.sleep(1.0)
        start = rss_mib(broker.pid)
        failures += asyncio.run(stress(port, args.seconds - warm, args.connections, rng, seeds))
        time.sleep(1.0)  # every client has left: its session's state must be gone
        asyncio.run(health(port))
        end = rss_mib(broker.pid)
        print(
            f"broker_stress: seed {seed}, {args.seconds:g} s, RSS {start:.1f} MiB after warm-up, {end:.1f} at the end"
        )
        if end - start > args.rss_slack:
            failures.append(f"RSS grew {end - start:.1f} MiB (more than --rss-slack {args.rss_slack:g}) after all left")
    finally:
        broker.terminate()
        try:
            _, err = broker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            broker.kill()
            _, err = broker.communicate()
    if "Traceback" in err or "Exception in callback" in err or "Fatal error" in err:
        failures.append(f"the broker's stderr holds an exception:\n{err[-4000:]}")
    for failure in failures:
        print(f"broker_stress: FAIL {failure}", file=sys.stderr)
    if failures:
        print(f"broker_stress: reproduce with --seed {seed}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
