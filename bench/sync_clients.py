"""The blocking client (``fastframe.sync``) beside stomp.py and the asyncio client, through RabbitMQ.

    python -m bench.sync_clients                     # 100,000 x 200 B per client, a markdown table
    python -m bench.sync_clients --messages 20000 --designs

The run is ``bench/clients.py``'s (each client in a child process of its own, a consumer connection
and a producer connection, every body verified, ``time.process_time()`` over the timed region: the
client's own CPU, all its threads included), with these rows:

* ``fastframe.sync``: the blocking client, a consumer thread iterating the subscription while the
  main thread sends (``bench/clients.py``'s row of the same name); ``fastframe.sync-callback`` is
  the same with ``subscribe(on_message=...)``.
* ``fastframe.aio`` (the asyncio client) and ``stomp.py-beside-sync`` (stomp.py), run as in
  ``bench/clients.py``, on queues of their own.
* with ``--designs``, ``socket-thread``: the other design issue 23 weighed, a prototype of its
  cheapest possible form: :class:`fastframe.protocol.ClientConnection` on a socket read by a
  thread of its own, sends written under a lock from the caller's thread; no heart-beats, flow
  control, receipts or reconnect (what a complete one would add costs more, not less). Its row
  bounds what that design could save over the private loop.
"""

from __future__ import annotations

import argparse
import collections
import json
import socket
import sys
import threading
from typing import Any, Deque, Dict, List, Optional, Sequence

from bench import clients
from bench.clients import FASTFRAME_OPTIONS, LOGIN, PASSCODE, Collector, Unavailable


def run_sync_callback(host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float) -> None:
    import fastframe.sync

    with (
        fastframe.sync.connect(host, port, **FASTFRAME_OPTIONS) as consumer,
        fastframe.sync.connect(host, port, **FASTFRAME_OPTIONS) as producer,
    ):
        sub = consumer.subscribe(dest, ack="auto", on_message=lambda message: got.add(message.body))
        for body in payloads:
            producer.send(dest, body)
        got.finished.wait(timeout)
        sub.unsubscribe()


class _SocketThreadClient:
    """The prototype of the other design: a thread owns the socket's reading, writes take a lock."""

    def __init__(self, host: str, port: int) -> None:
        from fastframe.protocol import ClientConnection, Connected

        self.conn = ClientConnection(escapes="1.2")
        self.sock = socket.create_connection((host, port), timeout=10)
        self.sock.settimeout(None)
        self.write_lock = threading.Lock()
        self.messages: Deque[Any] = collections.deque()
        self.ready = threading.Condition()
        self.sock.sendall(self.conn.connect("/", login=LOGIN, passcode=PASSCODE))
        while not any(isinstance(event, Connected) for event in self.conn.receive_data(self.sock.recv(65536))):
            pass
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        conn, sock, messages, ready = self.conn, self.sock, self.messages, self.ready
        while True:
            buffer = conn.get_buffer(256 * 1024)
            try:
                n = sock.recv_into(buffer)
            except OSError:
                return
            if not n:
                return
            batch = [e for e in conn.buffer_updated(n) if type(e).__name__ == "Message"]
            if batch:
                with ready:
                    messages.extend(batch)
                    ready.notify()

    def send(self, destination: str, body: bytes) -> None:
        with self.write_lock:
            self.sock.sendall(self.conn.send(destination, body))

    def subscribe(self, destination: str) -> None:
        with self.write_lock:
            self.sock.sendall(self.conn.subscribe("1", destination))

    def get(self) -> Any:
        with self.ready:
            while not self.messages:
                self.ready.wait(1.0)
            return self.messages.popleft()

    def close(self) -> None:
        with self.write_lock:
            self.sock.sendall(self.conn.disconnect())
        self.sock.close()


def run_socket_thread(host: str, port: int, dest: str, payloads: List[bytes], got: Collector, timeout: float) -> None:
    consumer, producer = _SocketThreadClient(host, port), _SocketThreadClient(host, port)
    consumer.subscribe(dest)

    def consume() -> None:
        while not got.add(consumer.get().frame.body):
            pass

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    for body in payloads:
        producer.send(dest, body)
    reader.join(timeout)
    producer.close()
    consumer.close()


# the runs of bench/clients.py, under row names of this table, on queues of their own
# (/queue/fastframe-sync-bench-<name>): not those of a bench/clients.py run at the same time
QUEUE = "/queue/fastframe-sync-bench-{}"
ROWS = {
    "stomp.py-beside-sync": (clients.run_stomp_py, "stomp", "stomp.py"),
    "fastframe.aio": (clients.run_fastframe, "fastframe.aio", "fastframe"),
    "fastframe.sync": (clients.run_fastframe_sync, "fastframe.sync", "fastframe"),
    "fastframe.sync-callback": (run_sync_callback, "fastframe.sync", "fastframe"),
    "socket-thread": (run_socket_thread, "fastframe.protocol", "fastframe"),
}
for _name, (_runner, _module, _dist) in ROWS.items():  # the child of bench/clients.py runs them like its own
    clients.RUNNERS[_name] = _runner
    clients.MODULES[_name] = _module
    clients.DIST[_name] = _dist


def measure(name: str, args: argparse.Namespace) -> Dict[str, Any]:
    return clients.measure(name, args, module="bench.sync_clients")


def table(rows: List[Dict[str, Any]], args: argparse.Namespace) -> str:
    rates = {row["client"]: clients.per_cpu_second(row) for row in rows}
    out = [
        f"{args.messages:,} messages of {args.size} B through RabbitMQ on loopback, each client in its own "
        "process; one run.",
        "",
        "| client | messages/s | client CPU µs/message | messages per client CPU-s | vs stomp.py | vs fastframe (aio) "
        "| result |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        rate = rates[row["client"]]
        if "wall_s" in row:
            speed = f"{row['ok'] / row['wall_s']:,.0f}"
            cpu_us = f"{row['cpu_s'] / max(row['ok'], 1) * 1e6:,.1f}"
            result = "all bodies verified" if rate else f"ok {row['ok']:,}, duplicate {row['duplicate']}"
        else:
            speed = cpu_us = "-"
            result = row.get("unavailable") or row.get("error", "?")
        ratios = [
            f"{rate / rates[b]:.1f}×" if rate and rates.get(b) else "-"
            for b in ("stomp.py-beside-sync", "fastframe.aio")
        ]
        out.append(
            f"| {row['client']} | {speed} | {cpu_us} | {f'{rate:,.0f}' if rate else '-'} | {ratios[0]} | {ratios[1]} "
            f"| {result} |"
        )
    return "\n".join(out) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sync_clients", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=61613)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--designs", action="store_true", help="add the socket-thread prototype's row")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        clients.QUEUE = QUEUE
        print(json.dumps(clients.child(args.child, args.host, args.port, args.messages, args.size, args.timeout)))
        return 0
    names = ["stomp.py-beside-sync", "fastframe.aio", "fastframe.sync", "fastframe.sync-callback"]
    if args.designs:
        names.append("socket-thread")
    return clients.run_all(names, args, measure, table)


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["ROWS", "main", "Unavailable"]
