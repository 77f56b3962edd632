"""STOMP clients end to end through a real RabbitMQ on loopback, in one run.

    python -m bench.clients                      # 100,000 x 200 B per client, a markdown table
    python -m bench.clients --only fastframe,fastframe.sync,stomp.py --messages 20000 --markdown out/clients.md

Each client runs in a child process of its own (``--child NAME``), so no client shares an interpreter,
an import or a garbage collector with another. The child opens two connections with the client's
public API, a consumer (SUBSCRIBE ``ack:auto`` on ``/queue/fastframe-bench-<client>``) and a producer,
sends N bodies of the given size as fast as the client lets it while the consumer receives them, and
stops when the consumer has all N. ``fastframe`` runs with its defaults, so after a read that
brought several frames the socket rests ``coalesce_reads`` (2 ms) and a stream arrives in fewer,
larger reads; ``fastframe-no-rest`` is the same client with ``coalesce_reads=0`` (every frame read
as soon as it arrives). ``fastframe.sync`` is the blocking client (:mod:`fastframe.sync`): a consumer
thread iterates the subscription while the main thread sends (it rests 20 ms between the reads of a
stream). What a rest could cost is latency, so the three fastframe rows also time
``--round-trips`` SEND-to-MESSAGE round trips, one message at a time, after the timed region: sent and
received on one connection, then sent on one and received on another (median / p99 ms). The timed region runs from the first connect to the last body
received (connects, subscribe, every SEND and MESSAGE, closes); ``time.process_time()`` over that
region is the client's own CPU time, all its threads included (the broker's CPU is not counted: it is
another process). Each client's package is imported before the timed region: an import is start-up
work, not per-message work (25-80 ms of CPU, 0.5-1.6 µs per message of a 50,000-message run). Bodies are built before and checked after the timed region: every body must arrive
exactly once and byte for byte. Each body starts with a per-run token, so messages left in the queue
by an aborted earlier run are drained and ignored (reported as ``stale``).

The rows ending in ``-ws`` run the same over STOMP over WebSocket, through RabbitMQ Web-STOMP
(``ws://127.0.0.1:15674/ws``, ``--ws-port``): ``fastframe-ws`` (the asyncio client),
``fastframe.sync-ws`` and ``stomp.py-ws`` (stomp.py's ``WSStompConnection``, on websocket-client).
Their goals: at least 4x ``stomp.py-ws``, and within 1.5x of the same client's TCP row.

RabbitMQ is started by ``.ci/brokers start rabbitmq`` (STOMP on 127.0.0.1:61613, Web-STOMP on 15674).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

CLIENTS = (
    "fastframe", "fastframe-no-rest", "fastframe.sync", "stomp.py", "stompman", "aiostomp",
    "fastframe-ws", "fastframe.sync-ws", "stomp.py-ws",
)  # fmt: skip
#: the rows over WebSocket -> the baseline over WebSocket, and the same client's row over TCP
WS_ROWS = {"fastframe-ws": "fastframe", "fastframe.sync-ws": "fastframe.sync", "stomp.py-ws": "stomp.py"}
WS_GOAL, WS_TCP_GOAL = 4.0, 1.5
FASTFRAME_REST = {"fastframe": None, "fastframe-no-rest": 0.0}  # connect(coalesce_reads=...); None: the default
BASELINES = ("stomp.py", "stompman")
GOAL = 5.0  # fastframe's messages per client CPU-second, as a multiple of each baseline's
GOAL_ROWS = (*FASTFRAME_REST, "fastframe.sync")  # the rows the goal is for
DIST = {
    "fastframe": "fastframe",
    "fastframe-no-rest": "fastframe",
    "fastframe.sync": "fastframe",
    "stomp.py": "stomp.py",
    "stompman": "stompman",
    "aiostomp": "aiostomp",
    "fastframe-ws": "fastframe",
    "fastframe.sync-ws": "fastframe",
    "stomp.py-ws": "stomp.py",
}
MODULES = {
    "fastframe": "fastframe.aio",
    "fastframe-no-rest": "fastframe.aio",
    "fastframe.sync": "fastframe.sync",
    "stomp.py": "stomp",
    "stompman": "stompman",
    "aiostomp": "aiostomp",
    "fastframe-ws": "fastframe.aio",
    "fastframe.sync-ws": "fastframe.sync",
    "stomp.py-ws": "stomp",
}
LOGIN, PASSCODE = "guest", "guest"
QUEUE = "/queue/fastframe-bench-{}"  # each client's queue (its name); bench/sync_clients.py has its own
# fastframe's connect() options: RabbitMQ takes CONNECT's host header as the vhost; escapes="1.2" is
# what it speaks on every version
FASTFRAME_OPTIONS: Dict[str, Any] = {"login": LOGIN, "passcode": PASSCODE, "host_header": "/", "escapes": "1.2"}


class Unavailable(Exception):
    """The client cannot run here (not installed, or its API is missing)."""


# -- bodies ---------------------------------------------------------------------------------------------
_FILLER = bytes(range(32, 127)) * 8


def body_for(token: bytes, i: int, size: int) -> bytes:
    """The i-th body of a run: the run token, the index, then printable filler (rotated by i)."""
    head = token + b"%08d:" % i
    if size < len(head):
        raise ValueError(f"--size must be at least {len(head)} bytes")
    start = i % 95
    filler = _FILLER[start : start + size - len(head)]
    while len(filler) < size - len(head):
        filler += _FILLER[: size - len(head) - len(filler)]
    return head + filler


def check(token: bytes, received: Sequence[bytes], n: int, size: int) -> Dict[str, int]:
    """Count the current run's bodies that are intact and unique, duplicates, corrupt and stale ones."""
    seen = bytearray(n)
    counts = {"ok": 0, "duplicate": 0, "corrupt": 0, "stale": 0}
    width = len(token)
    for body in received:
        if body[:width] != token:
            counts["stale"] += 1
            continue
        try:
            i = int(body[width : width + 8])
        except ValueError:
            counts["corrupt"] += 1
            continue
        if not 0 <= i < n or body != body_for(token, i, size):
            counts["corrupt"] += 1
        elif seen[i]:
            counts["duplicate"] += 1
        else:
            seen[i] = 1
            counts["ok"] += 1
    return counts


class Collector:
    """Keeps every body received; ``done`` when ``n`` of them carry this run's token."""

    def __init__(self, token: bytes, n: int) -> None:
        self.token = token
        self.n = n
        self.bodies: List[bytes] = []
        self.current = 0
        self.finished = threading.Event()  # set from a receiver thread (stomp.py) or the event loop

    def add(self, body: bytes) -> bool:
        self.bodies.append(body)
        if body.startswith(self.token):
            self.current += 1
            if self.current == self.n:
                self.finished.set()
                return True
        return False


# -- one function per client: connect, subscribe, send all, receive all, close ---------------------------
Runner = Callable[[str, int, str, List[bytes], Collector, float], None]


def run_stomp_py(host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float) -> None:
    try:
        import stomp
    except ImportError as exc:
        raise Unavailable(str(exc)) from exc

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            got.add(frame.body)

    # auto_decode=False keeps bodies as bytes; vhost "/" (stomp.py sends the host name as host otherwise)
    consumer = stomp.Connection12([(host, port)], heartbeats=(0, 0), auto_decode=False, vhost="/")
    consumer.set_listener("bench", Listener())
    consumer.connect(LOGIN, PASSCODE, wait=True)
    consumer.subscribe(dest, id="1", ack="auto")
    producer = stomp.Connection12([(host, port)], heartbeats=(0, 0), auto_decode=False, vhost="/")
    producer.connect(LOGIN, PASSCODE, wait=True)
    for body in payloads:
        producer.send(dest, body)
    got.finished.wait(timeout)
    producer.disconnect()
    consumer.disconnect()


async def _stompman(
    host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float, heartbeat: Any = (0, 0)
) -> None:
    try:
        import stompman
    except ImportError as exc:
        raise Unavailable(str(exc)) from exc
    done = asyncio.Event()

    async def handler(frame: Any) -> None:
        if got.add(frame.body):
            done.set()

    def on_suppressed(exc: Exception, frame: Any) -> None:
        print(f"stompman handler error: {exc!r}", file=sys.stderr)

    class VhostConnection(stompman.connection.Connection):  # type: ignore[misc]
        """stompman sends its TCP host as CONNECT's ``host``, which RabbitMQ takes as the vhost
        ("Virtual host '127.0.0.1' access denied"): the CONNECT frame says ``/`` instead."""

        async def write_frame(self, frame: Any) -> None:
            if isinstance(frame, stompman.ConnectFrame):
                frame = stompman.ConnectFrame(headers={**frame.headers, "host": "/"})  # type: ignore[typeddict-item]
            await super().write_frame(frame)

    servers = [stompman.ConnectionParameters(host=host, port=port, login=LOGIN, passcode=PASSCODE)]
    options: Dict[str, Any] = {"heartbeat": stompman.Heartbeat(*heartbeat), "connection_class": VhostConnection}
    async with stompman.Client(servers, **options) as consumer, stompman.Client(servers, **options) as producer:
        subscription = await consumer.subscribe(
            dest, handler, ack="auto", on_suppressed_exception=on_suppressed, receipt_timeout=timeout
        )
        for body in payloads:
            await producer.send(body, dest)
        try:
            await asyncio.wait_for(done.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        await subscription.unsubscribe()  # the client's exit waits until no subscription is left


def run_stompman(
    host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float, heartbeat: Any = (0, 0)
) -> None:
    """``heartbeat``: (ms, ms) as stompman offers them (the benchmark's default: none)."""
    asyncio.run(_stompman(host, port, dest, payloads, got, timeout, heartbeat))


async def _aiostomp(host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float) -> None:
    try:
        from aiostomp import AioStomp
    except ImportError as exc:
        raise Unavailable(str(exc)) from exc
    done = asyncio.Event()

    async def handler(frame: Any, body: Any) -> bool:
        if got.add(bytes(body)):
            done.set()
        return True

    async def on_error(error: Any) -> None:
        print(f"aiostomp error: {error!r}", file=sys.stderr)

    consumer = AioStomp(host, port, heartbeat=False, error_handler=on_error, reconnect_max_attempts=1)
    producer = AioStomp(host, port, heartbeat=False, error_handler=on_error, reconnect_max_attempts=1)
    await consumer.connect(LOGIN, PASSCODE)
    consumer.subscribe(dest, ack="auto", handler=handler)
    await producer.connect(LOGIN, PASSCODE)
    for body in payloads:
        producer.send(dest, body)  # aiostomp writes straight to the transport: no back-pressure
        await asyncio.sleep(0)  # ...so let the consumer's reads run between sends
    try:
        await asyncio.wait_for(done.wait(), timeout)
    except asyncio.TimeoutError:
        pass
    producer.close()
    consumer.close()
    await asyncio.sleep(0)


def run_aiostomp(host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float) -> None:
    asyncio.run(_aiostomp(host, port, dest, payloads, got, timeout))


async def _fastframe(
    host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float, rest: Optional[float]
) -> None:
    try:
        import fastframe.aio
    except ImportError as exc:
        raise Unavailable(f"fastframe.aio is not available ({exc})") from exc
    options = dict(FASTFRAME_OPTIONS)
    if rest is not None:
        options["coalesce_reads"] = rest
    async with (
        fastframe.aio.connect(host, port, **options) as consumer,
        fastframe.aio.connect(host, port, **options) as producer,
    ):
        subscription = await consumer.subscribe(dest, ack="auto")

        async def consume() -> None:
            async for message in subscription:
                if got.add(message.body):
                    return

        reader = asyncio.ensure_future(consume())
        for body in payloads:
            await producer.send(dest, body)
        try:
            await asyncio.wait_for(reader, timeout)
        except asyncio.TimeoutError:
            pass
        await subscription.unsubscribe()


def run_fastframe(host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float) -> None:
    asyncio.run(_fastframe(host, port, dest, payloads, got, timeout, FASTFRAME_REST["fastframe"]))


def run_fastframe_no_rest(
    host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float
) -> None:
    asyncio.run(_fastframe(host, port, dest, payloads, got, timeout, FASTFRAME_REST["fastframe-no-rest"]))


def run_stomp_py_ws(host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float) -> None:
    try:
        import stomp
        import websocket  # noqa: F401  (websocket-client: what WSStompConnection runs on)
    except ImportError as exc:
        raise Unavailable(str(exc)) from exc

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            got.add(frame.body)

    def connection() -> Any:
        made = stomp.WSStompConnection(
            [(host, port)], ws_path="/ws", heartbeats=(0, 0), auto_decode=False, vhost="/"
        )  # (no heart-beats: RabbitMQ Web-STOMP closes fast publishers that have them)
        return made

    consumer = connection()
    consumer.set_listener("bench", Listener())
    consumer.connect(LOGIN, PASSCODE, wait=True)
    consumer.subscribe(dest, id="1", ack="auto")
    producer = connection()
    producer.connect(LOGIN, PASSCODE, wait=True)
    for body in payloads:
        producer.send(dest, body)
    got.finished.wait(timeout)
    producer.disconnect()
    consumer.disconnect()


def run_fastframe_ws(host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float) -> None:
    asyncio.run(_fastframe(f"ws://{host}:{port}/ws", port, dest, payloads, got, timeout, None))


def run_fastframe_sync_ws(
    host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float
) -> None:
    run_fastframe_sync(f"ws://{host}:{port}/ws", port, dest, payloads, got, timeout)


def run_fastframe_sync(host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float) -> None:
    try:
        import fastframe.sync
    except ImportError as exc:
        raise Unavailable(f"fastframe.sync is not available ({exc})") from exc
    with (
        fastframe.sync.connect(host, port, **FASTFRAME_OPTIONS) as consumer,
        fastframe.sync.connect(host, port, **FASTFRAME_OPTIONS) as producer,
    ):
        subscription = consumer.subscribe(dest, ack="auto")

        def consume() -> None:
            for message in subscription:  # (ends when the subscription does, below)
                if got.add(message.body):
                    return

        reader = threading.Thread(target=consume)
        reader.start()
        for body in payloads:
            producer.send(dest, body)
        reader.join(timeout)
        subscription.unsubscribe()
        reader.join(timeout)


async def _fastframe_round_trips(
    host: str, port: int, dest: str, n: int, rest: Optional[float], connections: int
) -> List[float]:
    """Seconds from each SEND to its MESSAGE, one message in flight at a time (what a rest could cost),
    sent and received on one connection, or sent on one and received on another."""
    import fastframe.aio

    options = dict(FASTFRAME_OPTIONS)
    if rest is not None:
        options["coalesce_reads"] = rest
    times = []
    async with fastframe.aio.connect(host, port, **options) as client:
        sender = client if connections == 1 else await fastframe.aio.connect(host, port, **options)
        try:
            async with await client.subscribe(dest + "-rtt") as subscription:
                for i in range(n):
                    body = b"rtt %d" % i
                    started = time.perf_counter()
                    await sender.send(dest + "-rtt", body)
                    while (await subscription.get(timeout=10)).body != body:
                        pass  # left by an aborted earlier run
                    times.append(time.perf_counter() - started)
        finally:
            if sender is not client:
                await sender.disconnect()
    return times


def _sync_round_trips(host: str, port: int, dest: str, n: int, connections: int) -> List[float]:
    """:func:`_fastframe_round_trips` through the blocking client (its longer default rest must not
    delay a reply awaited one at a time)."""
    import fastframe.sync

    times = []
    with fastframe.sync.connect(host, port, **FASTFRAME_OPTIONS) as client:
        sender = client if connections == 1 else fastframe.sync.connect(host, port, **FASTFRAME_OPTIONS)
        try:
            with client.subscribe(dest + "-rtt") as subscription:
                for i in range(n):
                    body = b"rtt %d" % i
                    started = time.perf_counter()
                    sender.send(dest + "-rtt", body)
                    while subscription.get(timeout=10).body != body:
                        pass  # left by an aborted earlier run
                    times.append(time.perf_counter() - started)
        finally:
            if sender is not client:
                sender.disconnect()
    return times


RUNNERS: Dict[str, Runner] = {
    "fastframe": run_fastframe,
    "fastframe-no-rest": run_fastframe_no_rest,
    "fastframe.sync": run_fastframe_sync,
    "stomp.py": run_stomp_py,
    "stompman": run_stompman,
    "aiostomp": run_aiostomp,
    "fastframe-ws": run_fastframe_ws,
    "fastframe.sync-ws": run_fastframe_sync_ws,
    "stomp.py-ws": run_stomp_py_ws,
}


# -- the child: one client, one measurement, one JSON line ------------------------------------------------
def child(name: str, host: str, port: int, n: int, size: int, timeout: float, round_trips: int = 0) -> Dict[str, Any]:
    token = b"%08x:" % (int.from_bytes(os.urandom(4), "big"))
    payloads = [body_for(token, i, size) for i in range(n)]
    got = Collector(token, n)
    dest = QUEUE.format(name.replace(".", "-"))
    result: Dict[str, Any] = {"client": name, "version": _version(name), "messages": n, "size": size}
    try:
        importlib.import_module(MODULES[name])  # before the timed region: start-up, not per-message work
    except ImportError:
        pass  # the runner reports the client as unavailable
    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        RUNNERS[name](host, port, dest, payloads, got, timeout)
    except Unavailable as exc:
        return {**result, "unavailable": str(exc)}
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    counts = check(token, got.bodies, n, size)
    result.update(wall_s=wall, cpu_s=cpu, **counts, finished=got.current >= n)
    if name in GOAL_ROWS and round_trips:  # after the timed region
        for connections in (1, 2):
            if name == "fastframe.sync":
                times = sorted(_sync_round_trips(host, port, dest, round_trips, connections))
            else:
                rest = FASTFRAME_REST[name]
                times = sorted(asyncio.run(_fastframe_round_trips(host, port, dest, round_trips, rest, connections)))
            median, p99 = times[len(times) // 2] * 1e3, times[int(len(times) * 0.99)] * 1e3
            result[f"rtt{connections}_ms"] = [median, p99]
    return result


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DIST[name])
    except PackageNotFoundError:
        return "-"


# -- the parent: every client in turn, then the table ----------------------------------------------------
def broker_answers(host: str, port: int) -> bool:
    """True when host:port answers a STOMP CONNECT with CONNECTED within 5 s."""
    try:
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\0")
            data = b""
            while b"\0" not in data and len(data) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data.lstrip(b"\r\n").startswith(b"CONNECTED\n")
    except OSError:
        return False


def measure(name: str, args: argparse.Namespace, module: str = "bench.clients") -> Dict[str, Any]:
    """Run client ``name`` in a child process (``python -m <module> --child NAME``); its result row."""
    port = getattr(args, "ws_port", 15674) if name in WS_ROWS else args.port
    cmd = [sys.executable, "-m", module, "--child", name, "--host", args.host, "--port", str(port)]
    cmd += ["--messages", str(args.messages), "--size", str(args.size), "--timeout", str(args.timeout)]
    if getattr(args, "round_trips", 0):
        cmd += ["--round-trips", str(args.round_trips)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout + 60)
    except subprocess.TimeoutExpired:
        return {"client": name, "version": _version(name), "error": f"no result within {args.timeout + 60:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        where = [line.strip() for line in lines if line.strip().startswith("File ")][-1:]  # the innermost frame
        tail = "; ".join([*where, lines[-1]])
        return {"client": name, "version": _version(name), "error": f"exit {proc.returncode}: {tail}"}
    result: Dict[str, Any] = json.loads(lines[-1])
    return result


def per_cpu_second(row: Dict[str, Any]) -> Optional[float]:
    if "cpu_s" not in row or row.get("ok") != row.get("messages") or row["cpu_s"] <= 0:
        return None
    return float(row["ok"]) / float(row["cpu_s"])


def table(rows: List[Dict[str, Any]], args: argparse.Namespace) -> str:
    rates = {row["client"]: per_cpu_second(row) for row in rows}
    out = [
        f"{args.messages:,} messages of {args.size} B through RabbitMQ on loopback, each client in its own "
        "process; one run.",
        "",
        "| client | version | messages/s | client CPU µs/message | messages per client CPU-s "
        "| vs stomp.py | vs stompman | round trip ms, one connection | two connections | result |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        rate = rates[row["client"]]
        if "wall_s" in row:
            speed = f"{row['ok'] / row['wall_s']:,.0f}"
            cpu_us = f"{row['cpu_s'] / max(row['ok'], 1) * 1e6:,.1f}"
            result = (
                "all bodies verified"
                if rate is not None
                else (f"ok {row['ok']:,}, duplicate {row['duplicate']}, corrupt {row['corrupt']}")
            )
            if row.get("stale"):
                result += f" ({row['stale']} stale from an earlier run drained)"
        else:
            speed = cpu_us = "-"
            result = row.get("unavailable") or row.get("error", "?")
        ratios = []
        for base in BASELINES:
            base_rate = rates.get(base)
            ratios.append(f"{rate / base_rate:.1f}×" if rate and base_rate else "-")
        per_s = f"{rate:,.0f}" if rate else "-"
        rtts = [
            "{:.2f} / {:.2f}".format(*row[key]) if key in row else "-" for key in ("rtt1_ms", "rtt2_ms")
        ]  # median / p99
        out.append(
            f"| {row['client']} | {row.get('version', '-')} | {speed} | {cpu_us} | {per_s} | "
            f"{ratios[0]} | {ratios[1]} | {rtts[0]} | {rtts[1]} | {result} |"
        )
    ws = [name for name in WS_ROWS if name != "stomp.py-ws" and rates.get(name)]
    if ws:
        out += ["", f"Over WebSocket (RabbitMQ Web-STOMP), goal ≥ {WS_GOAL:.0f}× stomp.py-ws and within "
                f"{WS_TCP_GOAL}× of the same client over TCP (messages per client CPU-second):"]  # fmt: skip
        for name in ws:
            rate, base, tcp = rates[name], rates.get("stomp.py-ws"), rates.get(WS_ROWS[name])
            parts = []
            if rate and base:
                parts.append(f"{rate / base:.1f}× stomp.py-ws ({'met' if rate / base >= WS_GOAL else 'NOT met'})")
            if rate and tcp:
                slower = tcp / rate
                parts.append(f"TCP row {slower:.2f}× faster ({'met' if slower <= WS_TCP_GOAL else 'NOT met'})")
            if parts:
                out.append(f"- {name}: " + "; ".join(parts) + ".")
    out += ["", f"Goal ≥ {GOAL:.0f}× messages per client CPU-second:"]
    for name in GOAL_ROWS:
        ff = rates.get(name)
        goals = [
            f"{base}: {ff / rates[base]:.1f}× ({'met' if ff / rates[base] >= GOAL else 'NOT met'})"  # type: ignore
            for base in BASELINES
            if ff and rates.get(base)
        ]
        if goals:
            out.append(f"- {name}: " + "; ".join(goals) + ".")
    return "\n".join(out) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.clients", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=61613, help="RabbitMQ's STOMP port (default 61613)")
    parser.add_argument("--ws-port", type=int, default=15674, help="RabbitMQ Web-STOMP's port (the -ws rows)")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=200, help="body size in bytes (default 200)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds one client may take")
    parser.add_argument(
        "--round-trips",
        type=int,
        default=500,
        help="fastframe rows: SEND-to-MESSAGE round trips timed one at a time, on one connection and across two",
    )
    parser.add_argument("--only", default=",".join(CLIENTS), help="comma-separated: " + ", ".join(CLIENTS))
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        print(
            json.dumps(
                child(args.child, args.host, args.port, args.messages, args.size, args.timeout, args.round_trips)
            )
        )
        return 0
    names = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(names) - set(CLIENTS))
    if unknown:
        parser.error(f"unknown client(s) {', '.join(unknown)}; choose from {', '.join(CLIENTS)}")
    return run_all(names, args, measure, table)


Measure = Callable[[str, argparse.Namespace], Dict[str, Any]]
Table = Callable[[List[Dict[str, Any]], argparse.Namespace], str]


def run_all(names: Sequence[str], args: argparse.Namespace, measure: Measure, table: Table) -> int:
    """The parent's run: each client in turn (``measure``), then the table on stdout and in ``--markdown``."""
    if not broker_answers(args.host, args.port):
        print(
            f"no STOMP broker answers CONNECT on {args.host}:{args.port}; start one with `.ci/brokers start rabbitmq`",
            file=sys.stderr,
        )
        return 2
    rows = []
    for name in names:
        print(f"{name}: {args.messages:,} messages...", file=sys.stderr, flush=True)
        rows.append(measure(name, args))
    text = table(rows, args)
    print(text)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
