"""Live brokers for the streaming tests: messages in (through the asyncio client), rows and messages out.

RabbitMQ (127.0.0.1:61613) and ActiveMQ (127.0.0.1:61614) as in tests/interop (``require_broker``: a
skip locally, a failure with CI=true when one is down). Every queue name is new per run; every wait is
bounded; a query started here is stopped by its fixture even when the test fails.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import fastframe.aio as aio
from interop._live import BROKERS, HOST, require_broker, run

__all__ = ["BROKERS", "HOST", "delete_streams", "require_broker", "run"]

HERE = Path(__file__).resolve().parent
RABBIT = BROKERS["rabbitmq"]
CLIENT_OPTIONS = {
    "rabbitmq": {"login": "guest", "passcode": "guest", "host_header": "/", "escapes": "1.2"},
    "activemq": {"login": "guest", "passcode": "guest"},
}


def new_queue(label: str) -> str:
    return f"ff-{label}-{os.urandom(4).hex()}"


def source_options(broker: str, destination: str, **extra: Any) -> Dict[str, str]:
    """The options of ``spark.readStream.format("stomp")`` for a live broker."""
    options = {"host": HOST, "port": str(BROKERS[broker].port), "login": "guest", "passcode": "guest"}
    options["destination"] = destination
    options.update({name: str(value) for name, value in extra.items()})
    return options


def message(n: int) -> Tuple[bytes, Dict[str, str]]:
    """Message ``n``: a binary body with NULs (and every byte value), headers that need escaping."""
    body = b"\x00" + n.to_bytes(4, "big") + bytes(range(256))[n % 7 :: 7] + b"\x00tail:%d\n" % n
    return body, {"n": str(n), "k": f"a:b\nc\\d {n}", "colon:name": "v\r"[: 1 + n % 2]}


#: Stream queues declared by this test session: deleted at its end (they stay on the broker otherwise, and a
#: RabbitMQ holding many streams spends CPU on them).
STREAMS: List[str] = []


@pytest.fixture(scope="session", autouse=True)
def delete_streams() -> Iterator[None]:
    """At the end of the session, delete the stream queues it declared (``rabbitmqctl`` on this machine, when
    there is one; bounded, best effort: STOMP cannot delete a queue)."""
    yield
    ctl = shutil.which("rabbitmqctl")
    if not STREAMS or ctl is None:
        return
    names = ", ".join(f'<<"{name}">>' for name in STREAMS)
    code = (
        '[case rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, N)) of {ok, Q} -> '
        'rabbit_amqqueue:delete(Q, false, false, <<"fastframe-tests">>); Other -> Other end '
        f"|| N <- [{names}]]."
    )
    subprocess.run([ctl, "eval", code], capture_output=True, timeout=60, check=False)


async def _declare_stream(client: Any, queue: str) -> None:
    if queue not in STREAMS:
        STREAMS.append(queue)
    sub = await client.subscribe(
        f"/queue/{queue}",
        ack="client",
        headers={"x-queue-type": "stream", "durable": "true", "auto-delete": "false", "prefetch-count": "1"},
    )
    await sub.unsubscribe()


async def _publish(broker: str, destination: str, numbers: range, declare_stream: Optional[str]) -> None:
    async with aio.connect(HOST, BROKERS[broker].port, timeout=30, **CLIENT_OPTIONS[broker]) as client:
        if declare_stream:
            await _declare_stream(client, declare_stream)
        last = numbers[-1] if numbers else None
        for n in numbers:
            body, headers = message(n)
            if broker == "activemq":
                headers = {**headers, "persistent": "true"}
            await client.send(destination, body, headers, receipt=n == last)


def declare_stream(queue: str) -> None:
    run(_publish("rabbitmq", f"/amq/queue/{queue}", range(0), queue))


def publish_stream(queue: str, numbers: range) -> None:
    """Declare the stream queue (if new) and publish ``message(n)`` for each n to it."""
    run(_publish("rabbitmq", f"/amq/queue/{queue}", numbers, queue), timeout=120)


def publish_queue(broker: str, destination: str, numbers: range) -> None:
    run(_publish(broker, destination, numbers, None), timeout=120)


async def _drain(broker: str, destination: str, quiet: float, headers: Optional[Dict[str, str]]) -> List[Any]:
    out = []
    async with aio.connect(HOST, BROKERS[broker].port, timeout=30, **CLIENT_OPTIONS[broker]) as client:
        sub = await client.subscribe(destination, ack="client-individual", headers=headers, max_queue=5000)
        try:
            while True:
                got = await sub.get(timeout=quiet)
                out.append(got)
                await got.ack()
        except asyncio.TimeoutError:
            pass
    return out  # (DISCONNECT's receipt confirmed the acknowledgements)


def drain(broker: str, destination: str, quiet: float = 2.0, headers: Optional[Dict[str, str]] = None) -> List[Any]:
    """Every message the queue holds (acknowledged), until none arrives for ``quiet`` seconds."""
    return run(_drain(broker, destination, quiet, headers), timeout=300)


def publish_raw(port: int, destination: str, values: List[bytes]) -> None:
    """SENDs written byte for byte, ``x-value`` set to each of ``values`` (a header value that is not UTF-8
    cannot go through the client, whose encoder refuses it), each confirmed by its RECEIPT."""
    import socket

    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\x00")
        assert sock.recv(4096).startswith(b"CONNECTED")
        for n, value in enumerate(values):
            head = b"SEND\ndestination:%s\nn:%d\nx-value:%s\nreceipt:r%d\n\n" % (destination.encode(), n, value, n)
            sock.sendall(head + b"body%d\x00" % n)
        received = b""
        while received.count(b"RECEIPT") < len(values):
            chunk = sock.recv(4096)
            assert chunk, received
            received += chunk


def read_rows(spark: Any, out: Path) -> List[Any]:
    """The rows a checkpointed Parquet sink committed (Spark reads its _spark_metadata log)."""
    if not out.exists():
        return []
    return spark.read.parquet(str(out)).select("offset", "body", "headers", "redelivered").collect()


def check_rows(rows: List[Any], numbers: range, exactly_once: bool = True) -> None:
    """Each ``message(n)`` arrived byte for byte: once (``exactly_once``) or at least once."""
    seen: Dict[int, int] = {}
    for row in rows:
        headers = {h["name"]: h["value"] for h in reversed(row["headers"])}
        n = int(headers["n"])
        body, sent = message(n)
        assert bytes(row["body"]) == body, n
        assert {k: headers[k] for k in sent} == sent, n
        seen[n] = seen.get(n, 0) + 1
    missing = sorted(set(numbers) - set(seen))
    assert not missing, f"{len(missing)} messages lost, e.g. {missing[:5]}"
    assert set(seen) == set(numbers), sorted(set(seen) - set(numbers))[:5]
    if exactly_once:
        twice = sorted(n for n, count in seen.items() if count > 1)
        assert not twice, f"{len(twice)} messages written more than once, e.g. {twice[:5]}"


class Query:
    """``with Query(spark, options, out, ck) as query``: a stream into a checkpointed Parquet sink, always stopped."""

    def __init__(self, spark: Any, options: Dict[str, str], out: Path, checkpoint: Path, **trigger: Any) -> None:
        reader = spark.readStream.format("stomp")
        for name, value in options.items():
            reader = reader.option(name, value)
        writer = reader.load().writeStream.format("parquet").option("checkpointLocation", str(checkpoint))
        if trigger:
            writer = writer.trigger(**trigger)
        self.query = writer.start(str(out))

    def __enter__(self) -> Any:
        return self.query

    def __exit__(self, *exc: Any) -> None:
        self.query.stop()


QUERY_SCRIPT = HERE / "stream_query.py"


class QueryProcess:
    """The same query in a child process (its own session, so the test can kill it and everything it started)."""

    def __init__(self, options: Dict[str, str], out: Path, checkpoint: Path, hold_first_batch: bool = False) -> None:
        import json

        args = [sys.executable, str(QUERY_SCRIPT), json.dumps(options), str(out), str(checkpoint)]
        if hold_first_batch:  # batch 0 is planned and never committed (see stream_query.py)
            args.append("--hold-first-batch")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])),
        }
        self.log = open(checkpoint.parent / f"{checkpoint.name}.log", "w+b")
        self.process = subprocess.Popen(
            args, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def wait_for(self, condition: Any, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                raise AssertionError(f"the query process ended ({self.process.returncode}): {self.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the query process did not get there in {timeout} s: {self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()[-3000:].decode("utf-8", "replace")

    def kill(self) -> None:
        """SIGKILL the process group: the Python driver, its JVM and the JVM's Python workers."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def close(self) -> None:
        self.kill()
        self.log.close()


def batches(checkpoint: Path, kind: str) -> List[int]:
    """The batch ids in a checkpoint's ``offsets`` or ``commits`` log."""
    folder = checkpoint / kind
    if not folder.exists():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def in_flight(checkpoint: Path) -> bool:
    """A batch is planned (in the offset log) but not committed, after at least one committed batch."""
    done = batches(checkpoint, "commits")
    return bool(done) and len(batches(checkpoint, "offsets")) > len(done)
