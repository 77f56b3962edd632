"""Live interop against real brokers: RabbitMQ (127.0.0.1:61613) and ActiveMQ (127.0.0.1:61614).

``.ci/brokers start`` starts both (``.ci/run`` does it before ``make test``). Locally a broker that does
not answer CONNECT makes its tests skip with the reason; with ``CI=true`` it is a failure.

Every broker quirk the tests meet is answered by a documented client option or a documented
capability of the broker (:class:`Broker`), never by a special case in the codec.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Dict, FrozenSet, Optional, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[2]
BROKERS_SCRIPT = REPO / ".ci" / "brokers"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
HOST = "127.0.0.1"
VERSIONS = ("1.0", "1.1", "1.2")

T = TypeVar("T")


@dataclass(frozen=True)
class Broker:
    """One live broker: where it listens, the client options its quirks need, what it does.

    ``options(version)`` gives the keyword arguments for ``fastframe.aio.connect``; each entry is a
    documented option (README, "Tolerances and the brokers that need them" and "Live interop").
    """

    name: str
    port: int
    #: client options on every version
    common: Dict[str, Any] = field(default_factory=dict)
    #: extra client options per version
    per_version: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    #: NACK makes the broker redeliver the message (RabbitMQ); ActiveMQ drops it (its default policy)
    nack_redelivers: bool = False
    #: characters that survive a round trip in header names / values, per version (see the quirk table)
    name_chars: Dict[str, FrozenSet[str]] = field(default_factory=dict)
    value_chars: Dict[str, FrozenSet[str]] = field(default_factory=dict)

    def options(self, version: str) -> Dict[str, Any]:
        return {**self.common, **self.per_version.get(version, {})}

    def host_port(self) -> tuple[str, int]:
        return HOST, self.port


ALL = frozenset(":\n\r\\")
NO_CR = frozenset(":\n\\")
BROKERS = {
    "rabbitmq": Broker(
        name="rabbitmq",
        port=61613,
        # RabbitMQ applies the 1.2 escape set on every version, in both directions, and drops the
        # connection on a backslash that is not a 1.2 escape
        common={"login": "guest", "passcode": "guest", "vhost": "/", "escapes": "1.2"},
        # validate=True checks outgoing frames against the version's own escape set, which cannot carry
        # LF, CR or ':' in names on 1.0 (nor CR on 1.1) even though escapes="1.2" can: see the report
        per_version={"1.0": {"validate": False}, "1.1": {"validate": False}},
        nack_redelivers=True,
        name_chars={v: ALL for v in VERSIONS},
        value_chars={v: ALL for v in VERSIONS},
    ),
    "activemq": Broker(
        name="activemq",
        port=61614,
        common={"login": "guest", "passcode": "guest", "vhost": "/"},
        # 1.0 output is not escaped: a value with LF splits into a line without ':'
        per_version={"1.0": {"allow_missing_colon": True}},
        name_chars={"1.0": frozenset(), "1.1": NO_CR, "1.2": ALL},
        # 1.0: no escapes at all (LF, CR cannot be carried; ActiveMQ unescapes 1.0 input, so '\\' stays
        # only before a letter that is no escape); 1.1 has no CR escape
        value_chars={"1.0": frozenset(":\\"), "1.1": NO_CR, "1.2": ALL},
    ),
}


def stomp_answers(port: int, timeout: float = 5.0) -> bool:
    """True when 127.0.0.1:port answers a STOMP CONNECT with CONNECTED within ``timeout`` seconds."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as sock:
            sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\0")
            data = b""
            while b"\0" not in data and len(data) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            try:
                sock.sendall(b"DISCONNECT\n\n\0")
            except OSError:
                pass
            return data.lstrip(b"\r\n").startswith(b"CONNECTED\n")
    except OSError:
        return False


_seen_up: Dict[str, bool] = {}


def require_broker(broker: Broker) -> None:
    """Skip (locally) or fail (CI=true) when the broker does not answer CONNECT."""
    if broker.name not in _seen_up or not _seen_up[broker.name]:
        _seen_up[broker.name] = stomp_answers(broker.port)
    if not _seen_up[broker.name]:
        reason = f"{broker.name} does not answer CONNECT on {HOST}:{broker.port} (start it: .ci/brokers start)"
        if IN_CI:
            pytest.fail(reason + "; CI=true requires the live brokers", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(params=sorted(BROKERS), scope="session")
def broker(request: pytest.FixtureRequest) -> Broker:
    """Each live broker in turn (``rabbitmq``, ``activemq``); skips or fails when it is not up."""
    found = BROKERS[request.param]
    require_broker(found)
    return found


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    """Each STOMP version in turn."""
    return str(request.param)


def brokers_cmd(*args: str, timeout: float = 180.0) -> None:
    """Run ``.ci/brokers ARGS`` (bounded); raise with its output when it fails."""
    proc = subprocess.run(
        ["bash", str(BROKERS_SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f".ci/brokers {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")


def run(coro: Awaitable[T], timeout: float = 60.0) -> T:
    """Run a coroutine to completion in a fresh event loop, bounded by ``timeout`` seconds."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def unique(prefix: str, broker: Broker, version: Optional[str] = None) -> str:
    """A queue destination no other test (or earlier run) uses."""
    tag = os.urandom(4).hex()
    return f"/queue/ff-{prefix}-{broker.name}-{(version or 'x').replace('.', '')}-{tag}"


# -- the client under test ------------------------------------------------------------------------------
class Session:
    """One live STOMP session, driven by an asyncio reader task and a heart-beat task.

    A thin test harness over :class:`fastframe.protocol.ClientConnection`: messages queue per
    subscription, receipts resolve futures, ERROR frames queue as typed events, heart-beats are
    counted in both directions. Every wait is bounded.
    """

    def __init__(self, conn: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.conn = conn
        self.reader = reader
        self.writer = writer
        self.loop = asyncio.get_running_loop()
        self.messages: Dict[str, "asyncio.Queue[Any]"] = {}
        self.errors: "asyncio.Queue[Any]" = asyncio.Queue()
        self.receipts: Dict[str, "asyncio.Future[Any]"] = {}
        self.connected: "asyncio.Future[Any]" = self.loop.create_future()
        self.closed = asyncio.Event()
        self.close_cause: Optional[BaseException] = None
        self.heartbeats_received = 0
        self.heartbeats_sent = 0
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def version(self) -> str:
        return str(self.conn.version)

    @property
    def heartbeat(self) -> tuple[int, int]:
        return tuple(self.conn.heartbeat)  # type: ignore[return-value]

    def write(self, data: bytes) -> None:
        if self.closed.is_set():
            raise ConnectionError(f"the session is closed ({self.close_cause!r})")
        self.writer.write(data)
        self.conn.data_sent(self.loop.time())

    async def _read(self) -> None:
        from fastframe import protocol

        try:
            while True:
                data = await self.reader.read(65536)
                events = self.conn.receive_data(data, self.loop.time()) if data else self.conn.receive_eof()
                for event in events:
                    if isinstance(event, protocol.HeartbeatReceived):
                        self.heartbeats_received += 1
                    elif isinstance(event, protocol.Connected):
                        self.connected.set_result(event)
                    elif isinstance(event, protocol.Message):
                        self.messages.setdefault(str(event.subscription), asyncio.Queue()).put_nowait(event)
                    elif isinstance(event, protocol.Receipt):
                        self.receipts.setdefault(event.receipt_id, self.loop.create_future()).set_result(event)
                    elif isinstance(event, protocol.Error):
                        self.errors.put_nowait(event)
                        if not self.connected.done():
                            self.connected.set_exception(ConnectionRefusedError(f"ERROR: {event.message}"))
                if not data:
                    return
        except Exception as exc:  # a protocol error or a reset: the session is over
            self.close_cause = exc
        finally:
            self.closed.set()
            if not self.connected.done():
                self.connected.set_exception(ConnectionError(f"closed before CONNECTED ({self.close_cause!r})"))
            for future in self.receipts.values():
                if not future.done():
                    future.set_exception(ConnectionError("closed before the receipt"))

    async def _beat(self) -> None:
        while not self.closed.is_set():
            deadline = self.conn.next_deadline()
            await asyncio.sleep(0.05 if deadline is None else max(0.0, min(deadline - self.loop.time(), 1.0)))
            beat = self.conn.heartbeat_due(self.loop.time())
            if beat and not self.closed.is_set():
                self.writer.write(beat)
                self.heartbeats_sent += 1

    async def receipt(self, receipt_id: str, timeout: float = 10.0) -> Any:
        future = self.receipts.setdefault(receipt_id, self.loop.create_future())
        return await asyncio.wait_for(future, timeout)

    async def send(
        self,
        destination: str,
        body: bytes = b"",
        headers: Any = None,
        *,
        transaction: Optional[str] = None,
        receipt: bool = False,
        content_type: Optional[str] = None,
    ) -> None:
        receipt_id = self.conn.new_id("r-") if receipt else None
        self.write(
            self.conn.send(
                destination, body, headers, transaction=transaction, receipt=receipt_id, content_type=content_type
            )
        )
        if receipt_id:
            await self.receipt(receipt_id)
        else:
            await self.writer.drain()

    async def subscribe(self, destination: str, ack: str = "auto", headers: Any = None) -> str:
        sub_id = self.conn.new_id("s-")
        receipt_id = self.conn.new_id("r-")
        self.messages.setdefault(sub_id, asyncio.Queue())
        self.write(self.conn.subscribe(sub_id, destination, ack=ack, headers=headers, receipt=receipt_id))
        await self.receipt(receipt_id)
        return sub_id

    async def unsubscribe(self, sub_id: str) -> None:
        receipt_id = self.conn.new_id("r-")
        self.write(self.conn.unsubscribe(sub_id, receipt=receipt_id))
        await self.receipt(receipt_id)

    async def next_message(self, sub_id: str, timeout: float = 10.0) -> Any:
        return await asyncio.wait_for(self.messages[sub_id].get(), timeout)

    async def no_message(self, sub_id: str, wait: float = 1.0) -> bool:
        """True when nothing arrives on ``sub_id`` within ``wait`` seconds."""
        try:
            await asyncio.wait_for(self.messages[sub_id].get(), wait)
        except asyncio.TimeoutError:
            return True
        return False

    async def ack(self, message: Any, nack: bool = False, transaction: Optional[str] = None) -> None:
        receipt_id = self.conn.new_id("r-")
        method = self.conn.nack if nack else self.conn.ack
        self.write(method(message, transaction=transaction, receipt=receipt_id))
        await self.receipt(receipt_id)

    async def tx(self, command: str, transaction: str) -> None:
        receipt_id = self.conn.new_id("r-")
        self.write(getattr(self.conn, command)(transaction, receipt=receipt_id))
        await self.receipt(receipt_id)

    async def next_error(self, timeout: float = 10.0) -> Any:
        return await asyncio.wait_for(self.errors.get(), timeout)

    async def aclose(self) -> None:
        try:
            if not self.closed.is_set() and self.conn.connected:
                receipt_id = self.conn.new_id("bye-")
                self.write(self.conn.disconnect(receipt=receipt_id))
                await self.receipt(receipt_id, timeout=5.0)
        except (ConnectionError, asyncio.TimeoutError, OSError):
            pass
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self.writer.close()
            try:
                await asyncio.wait_for(self.writer.wait_closed(), 5.0)
            except (OSError, asyncio.TimeoutError):
                pass


class open_session:
    """``async with open_session(broker, version, heartbeat=(cx, cy)) as session``: CONNECTED or raises."""

    def __init__(self, broker: Broker, version: str, heartbeat: tuple[int, int] = (0, 0), **options: Any) -> None:
        self.broker, self.version, self.heartbeat = broker, version, heartbeat
        self.options = {**broker.options(version), **options}
        self.session: Optional[Session] = None

    async def __aenter__(self) -> Session:
        from fastframe import protocol

        opts = dict(self.options)
        login, passcode, vhost = opts.pop("login", None), opts.pop("passcode", None), opts.pop("vhost", "/")
        conn = protocol.ClientConnection(**opts)
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.broker.port), 10.0)
        session = self.session = Session(conn, reader, writer)
        session._tasks.append(asyncio.ensure_future(session._read()))
        try:
            session.write(
                conn.connect(vhost, login=login, passcode=passcode, heartbeat=self.heartbeat, versions=(self.version,))
            )
            await asyncio.wait_for(asyncio.shield(session.connected), 10.0)
        except BaseException:
            await session.aclose()
            raise
        session._tasks.append(asyncio.ensure_future(session._beat()))
        return session

    async def __aexit__(self, *exc: Any) -> None:
        if self.session is not None:
            await self.session.aclose()
