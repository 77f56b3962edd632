"""Every byte a client makes the broker hold counts: stored messages' headers, SENDs held in open
transactions, queues and subscriptions; an ERROR names the limit; memory returns when clients leave.

The core's accounting is tested without I/O; the table of issue 31 runs against a `fastframe broker`
process whose memory is read from /proc."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
from test_core import Client, error_of

import fastframe
from fastframe.broker import BrokerCore


def send(client: Client, destination: str = "/queue/a", body: bytes = b"", **headers: str) -> None:
    client.do("SEND", {"destination": destination, **headers}, body)


def test_headers_of_stored_messages_count():
    core = BrokerCore(max_stored_bytes=100_000)
    client = Client(core)
    for _ in range(10):  # empty bodies, ~8 KiB of headers each
        send(client, **{"x-big": "h" * 8000})
    assert core.stats()["stored_bytes"] > 80_000 and not client.take()
    send(client, **{"x-big": "h" * 30_000})
    error = error_of(client)
    assert error.get("message") == "Resource limit" and b"100000 bytes" in error.body


def test_transactions_count_until_they_end():
    core = BrokerCore(max_stored_bytes=1_000_000, max_transaction_bytes=50_000)
    client = Client(core)
    client.do("BEGIN", {"transaction": "t"})
    for _ in range(4):
        send(client, body=b"x" * 10_000, transaction="t")
    held = core.stats()["stored_bytes"]
    assert 40_000 < held < 41_000 and client.session.transaction_bytes == held
    client.do("ABORT", {"transaction": "t"})
    assert core.stats()["stored_bytes"] == 0 == client.session.transaction_bytes
    client.do("BEGIN", {"transaction": "u"})
    for _ in range(3):
        send(client, body=b"x" * 10_000, transaction="u")
    client.do("COMMIT", {"transaction": "u"})  # committed to a queue nobody reads: stored now, once
    assert 30_000 <= core.stats()["stored_bytes"] < 31_000 and client.session.transaction_bytes == 0
    client.do("BEGIN", {"transaction": "v"})
    for _ in range(5):
        send(client, body=b"x" * 10_000, transaction="v")
    error = error_of(client)  # the fifth passes the connection's 50,000
    assert error.get("message") == "Resource limit" and b"50000 bytes in open transactions" in error.body
    assert 30_000 <= core.stats()["stored_bytes"] < 31_000  # the open transaction's bytes went with it


def test_a_transaction_past_the_broker_limit_and_a_lost_connection():
    core = BrokerCore(max_stored_bytes=25_000, max_transaction_bytes=1_000_000)
    first, second = Client(core), Client(core)
    first.do("BEGIN", {"transaction": "t"})
    send(first, body=b"x" * 20_000, transaction="t")
    second.do("BEGIN", {"transaction": "t"})
    send(second, body=b"x" * 10_000, transaction="t")  # both connections' together pass the broker's limit
    assert b"25000 bytes of undelivered" in error_of(second).body
    first.lost()
    assert core.stats() == {
        "sessions": 0, "queued": 0, "unacked": 0, "transactions": 0, "subscriptions": 0, "stored_bytes": 0,
    }  # fmt: skip


def test_open_transactions_and_subscriptions_are_bounded():
    core = BrokerCore(max_transactions=3, max_subscriptions=2)
    client = Client(core)
    for tx in "abc":
        client.do("BEGIN", {"transaction": tx})
    client.do("BEGIN", {"transaction": "d"})
    assert b"3 transactions open" in error_of(client).body
    client = Client(core)
    for k in range(2):
        client.do("SUBSCRIBE", {"id": str(k), "destination": f"/queue/{k}"})
    client.do("SUBSCRIBE", {"id": "2", "destination": "/queue/2"})
    assert b"2 subscriptions" in error_of(client).body


@pytest.mark.parametrize("name", ["max_stored_bytes", "max_transaction_bytes", "max_transactions", "max_subscriptions"])
def test_limits_are_checked(name):
    with pytest.raises(ValueError, match=name):
        BrokerCore(**{name: -1})


def test_unused_queues_are_forgotten():
    core = BrokerCore()
    client = Client(core)
    for k in range(1000):
        client.do("SUBSCRIBE", {"id": "s", "destination": f"/queue/q{k}"})
        client.do("UNSUBSCRIBE", {"id": "s"})
    assert core.queues == {} and core.topics == {}
    # a queue holding messages is kept until they are taken, then forgotten with its last subscriber
    send(client, "/queue/kept", b"one")
    assert list(core.queues) == ["/queue/kept"]
    client.do("SUBSCRIBE", {"id": "s", "destination": "/queue/kept", "ack": "client-individual"})
    (message,) = client.messages()
    client.do("UNSUBSCRIBE", {"id": "s"})  # unacknowledged: back in the queue, which stays
    assert list(core.queues) == ["/queue/kept"] and core.stats()["queued"] == 1
    client.do("SUBSCRIBE", {"id": "s", "destination": "/queue/kept"})
    assert [m.body for m in client.messages()] == [b"one"]
    client.lost()
    assert core.queues == {} and core.stats()["stored_bytes"] == 0


def test_a_refused_send_leaves_no_queue_behind():
    core = BrokerCore(max_stored_bytes=10)
    client = Client(core)
    send(client, "/queue/new", b"x" * 100)
    assert error_of(client).get("message") == "Resource limit" and core.queues == {}


# --------------------------------------------------------------------------- a broker process


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


class BrokerProcess:
    def __init__(self, *options: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fastframe", "broker", "--port", "0", *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline() if self.process.stdout else ""
        assert "listening on 127.0.0.1:" in line, (line, self.process.stderr.read() if self.process.stderr else "")
        self.port = int(line.rsplit(":", 1)[1])

    def rss(self) -> int:
        return rss_kib(self.process.pid)

    def close(self) -> None:
        self.process.terminate()
        self.process.communicate(timeout=30)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(fastframe.encode("CONNECT", {"accept-version": "1.2", "host": "/"}))
    assert b"CONNECTED" in sock.recv(4096)
    return sock


def answer(sock: socket.socket) -> bytes:
    """What the broker sent until it closed the connection (bounded by the socket's timeout)."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def write_all(sock: socket.socket, frames: bytes) -> None:
    try:
        sock.sendall(frames)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused on the way: the ERROR is read next


@pytest.fixture
def broker():
    if not os.path.exists("/proc/self/status"):
        pytest.skip("reads the broker's memory from Linux's /proc")
    process = BrokerProcess("--max-stored-bytes", "8m")
    try:
        yield process
    finally:
        process.close()


def settle(broker: BrokerProcess) -> int:
    time.sleep(0.3)
    return broker.rss()


def test_a_transaction_never_committed_is_bounded_by_the_limit(broker):
    before = settle(broker)
    sock = connect(broker.port)
    frames = fastframe.encode("BEGIN", {"transaction": "t"}) + b"".join(
        fastframe.encode("SEND", {"destination": "/queue/t", "transaction": "t"}, b"x" * 65536) for _ in range(1000)
    )
    write_all(sock, frames)
    data = answer(sock)
    sock.close()
    # the broker's 8 MiB is reached before the connection's own 16 MiB of transactions
    assert b"ERROR" in data and b"Resource limit" in data and b"8388608 bytes of undelivered" in data
    assert settle(broker) - before < 40_000  # KiB: the 8 MiB limit and the read buffers, not 62 MB


def test_headers_past_the_limit_are_refused(broker):
    before = settle(broker)
    sock = connect(broker.port)
    big = {"destination": "/queue/h", **{f"x-{k}": "v" * 6000 for k in range(10)}}  # ~60 KiB of headers
    write_all(sock, b"".join(fastframe.encode("SEND", big) for _ in range(1000)))
    data = answer(sock)
    sock.close()
    assert b"ERROR" in data and b"8388608 bytes of undelivered" in data
    assert settle(broker) - before < 40_000


def test_subscriptions_to_distinct_queues_leave_nothing_behind(broker):
    sock = connect(broker.port)
    churn = [
        fastframe.encode("SUBSCRIBE", {"id": "s", "destination": f"/queue/churn-{k}"})
        + fastframe.encode("UNSUBSCRIBE", {"id": "s"})
        for k in range(20_000)
    ]
    write_all(sock, b"".join(churn[:5000]))  # warm: the allocator's pools reach their working size
    write_all(sock, fastframe.encode("SEND", {"destination": "/queue/x", "receipt": "r"}))
    time.sleep(0.5)
    before = broker.rss()
    write_all(sock, b"".join(churn[5000:]) + fastframe.encode("DISCONNECT", {"receipt": "bye"}))
    assert b"RECEIPT" in answer(sock)
    sock.close()
    assert settle(broker) - before < 4_000  # (100,001 queues were kept before: ~1 KiB each)
