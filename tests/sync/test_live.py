"""The live interop scenarios through the blocking client: RabbitMQ (127.0.0.1:61613), ActiveMQ
(127.0.0.1:61614) and the in-memory fastframe broker (in a thread, a free port), STOMP 1.0, 1.1, 1.2.

The brokers' quirks are answered by the documented client options in ``tests/interop/_live.py``
(``Broker.options``), the same ones the asyncio client's interop tests use. RabbitMQ and ActiveMQ are
shared: these tests never stop them (the broker stopped mid-run is ``test_client.py``'s killed
fastframe broker).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Iterator, List, Tuple

import pytest

import fastframe.sync
from fastframe import aio
from interop._live import BROKERS, Broker, require_broker, unique

from ._servers import BrokerThread

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def memory_broker() -> Iterator[BrokerThread]:
    with BrokerThread(users={"guest": "guest"}) as running:
        yield running


@pytest.fixture(params=["activemq", "memory", "rabbitmq", "rabbitmq-ws"])
def broker(request: pytest.FixtureRequest) -> Broker:
    if request.param == "memory":
        running: BrokerThread = request.getfixturevalue("memory_broker")
        return dataclasses.replace(BROKERS["fastframe"], name="memory", port=running.port)
    found = BROKERS[request.param]
    require_broker(found)
    return found


@pytest.fixture(params=["1.0", "1.1", "1.2"])
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def open_client(broker: Broker, version: str, **options: Any) -> fastframe.sync.Client:
    return fastframe.sync.connect(
        broker.address, broker.port, versions=(version,), timeout=20.0, **{**broker.options(version), **options}
    )


BODIES = [
    "Grüße, ☃ — line one\nline two\r\n".encode(),
    bytes(range(256)) * 2 + b"\0\0SEND\ndestination:/fake\n\n\0\n",
    b"\0",
    b"",
]


def special_headers_for(broker: Broker, version: str) -> List[Tuple[str, str]]:
    """Names and values with ':', LF, CR, '\\' and non-ASCII, as far as the broker carries them (see
    ``tests/interop/test_live.py``: each special character is followed by ``z``)."""
    names = "".join(f"{c}z" for c in sorted(broker.name_chars[version]))
    values = "".join(f"{c}z" for c in sorted(broker.value_chars[version]))
    return [("x-name" + names + "é☃", "plain"), ("x-value", "v" + values + "é☃"), ("x-empty", "")]


def test_bodies_and_escaped_headers_round_trip(broker: Broker, version: str) -> None:
    destination = unique("sync-bodies", broker, version)
    headers = special_headers_for(broker, version)
    with open_client(broker, version) as client:
        assert client.version == version
        sub = client.subscribe(destination)
        for body in BODIES:
            client.send(destination, body, headers)
        got = [sub.get(timeout=10) for _ in BODIES]
    assert [m.body for m in got] == BODIES
    for name, value in headers:
        assert got[0].get(name) == value, (name, got[0].headers)


def test_receipts_and_transactions(broker: Broker, version: str) -> None:
    destination = unique("sync-tx", broker, version)
    with open_client(broker, version) as client:
        sub = client.subscribe(destination, receipt=True)
        client.send(destination, b"plain", receipt=True)
        assert sub.get(timeout=10).body == b"plain"
        with client.transaction() as tx:  # COMMIT waits for its receipt
            tx.send(destination, b"tx-1")
            tx.send(destination, b"tx-2")
            with pytest.raises(TimeoutError):
                sub.get(timeout=0.5)  # nothing before COMMIT
        assert [sub.get(timeout=10).body for _ in range(2)] == [b"tx-1", b"tx-2"]
        with pytest.raises(LookupError):
            with client.transaction() as tx:  # ABORT (with a receipt) when the block raises
                tx.send(destination, b"aborted")
                raise LookupError("roll back")
        client.send(destination, b"after", receipt=True)
        assert sub.get(timeout=10).body == b"after"
        with pytest.raises(TimeoutError):
            sub.get(timeout=0.5)
        sub.unsubscribe(receipt=True)
        assert client.disconnect() in (True, False)  # (some brokers close without the RECEIPT)


def _fill(broker: Broker, version: str, destination: str, bodies: List[bytes]) -> None:
    with open_client(broker, version) as producer:
        for body in bodies:
            producer.send(destination, body, receipt=True)


def _drain(broker: Broker, version: str, destination: str, quiet: float = 1.5) -> List[bytes]:
    got = []
    with open_client(broker, version) as client:
        sub = client.subscribe(destination)
        while True:
            try:
                got.append(sub.get(timeout=quiet).body)
            except TimeoutError:
                return got


def test_ack_client_mode_then_redelivery(broker: Broker, version: str) -> None:
    destination = unique("sync-ack", broker, version)
    _fill(broker, version, destination, [b"m1", b"m2", b"m3"])
    with open_client(broker, version) as client:
        sub = client.subscribe(destination, ack="client")
        messages = [sub.get(timeout=10) for _ in range(3)]
        assert [m.body for m in messages] == [b"m1", b"m2", b"m3"]
        messages[1].ack(receipt=True)  # m1 and m2; m3 stays unacknowledged
    assert _drain(broker, version, destination) == [b"m3"]  # redelivered after the session ended


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ack_and_nack_client_individual(broker: Broker, version: str) -> None:
    destination = unique("sync-nack", broker, version)
    _fill(broker, version, destination, [b"m1", b"m2", b"m3"])
    with open_client(broker, version) as client:
        sub = client.subscribe(destination, ack="client-individual")
        messages = [sub.get(timeout=10) for _ in range(3)]
        messages[1].ack(receipt=True)
        messages[0].nack(receipt=True)
        if broker.nack_redelivers:
            again = sub.get(timeout=10)
            assert again.body == b"m1" and again.get("redelivered") == "true"
            again.ack(receipt=True)
    assert _drain(broker, version, destination) == [b"m3"]


def test_a_provoked_error_frame_is_a_server_error(broker: Broker, version: str) -> None:
    frames: List[Any] = []

    def hook(direction: str, frame: Any) -> None:
        if direction == "in" and frame is not None:
            frames.append(frame)

    client = open_client(broker, version, frame_hook=hook)
    try:
        # a SEND without destination, written past the client's own checks (on its I/O thread)
        client.loop.call_soon_threadsafe(client.async_client.session.write, b"SEND\n\nno destination\0")  # type: ignore[union-attr]
        cause = client.wait_closed(timeout=20)
        error = cause if isinstance(cause, aio.ServerError) else getattr(cause, "__cause__", None)
        assert isinstance(error, aio.ServerError), cause
        assert error.message and error.frame is frames[-1]
        with pytest.raises(aio.ConnectionClosedError):
            client.send("/queue/after-error", b"x")
    finally:
        client.close()


def _volume_body(i: int) -> bytes:
    kind = i % 4
    if kind == 0:
        return b""
    if kind == 1:
        return (f"text {i} ☃ " * (i % 40)).encode()
    if kind == 2:
        return bytes((i * 7 + j) % 256 for j in range(i % 1500))
    return b"\0" * (i % 50) + b"tail"


def test_ten_thousand_messages_every_body_verified(broker: Broker) -> None:
    count, version = 10_000, "1.2"
    destination = unique("sync-volume", broker, version)
    started = time.monotonic()
    with open_client(broker, version) as consumer, open_client(broker, version) as producer:
        sub = consumer.subscribe(destination)
        for i in range(count):
            producer.send(destination, _volume_body(i), {"x-seq": str(i)})
        producer.flush()
        got = []
        for _ in range(count):
            message = sub.get(timeout=30)
            got.append((message.get("x-seq"), message.body))
    assert [seq for seq, _ in got] == [str(i) for i in range(count)]
    bad = [seq for seq, body in got if body != _volume_body(int(seq or -1))]
    assert not bad, f"{len(bad)} bodies differ, first x-seq {bad[:5]}"
    assert time.monotonic() - started < 120
