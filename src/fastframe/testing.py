"""A broker for your tests: fresh per test, a log of what was sent and received, faults on demand.

:class:`TestBroker` is :class:`fastframe.server.Broker` on a private event loop thread, so tests of
any kind use it (plain functions, threads, asyncio, any client library); installing fastframe gives
pytest the fixtures ``stomp_broker`` and ``stomp_broker_factory`` (:mod:`fastframe.pytest_plugin`)::

    def test_my_consumer(stomp_broker):
        run_my_app(stomp_broker.host, stomp_broker.port)   # or stomp_broker.url
        assert stomp_broker.sent("/queue/orders")[0].body == b"..."
        stomp_broker.drop_connections()                     # does my app reconnect?

Every call may be made from any thread; faults act on the loop thread and return once done.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, TypeVar

from .codec import Decoder
from .server import Broker, BrokerHandler, ServedConnection

__all__ = ["LoggedFrame", "TestBroker"]

T = TypeVar("T")
_CALL_TIMEOUT = 10.0  # seconds a call into the broker's thread may take


class LoggedFrame(NamedTuple):
    """A frame in the broker's log: what, from or to whom, when (``time.time()``)."""

    frame: Any  # the fastframe.Frame
    login: Optional[str]  # the connection's CONNECT login
    client_id: Optional[str]  # the connection's CONNECT client-id header
    at: float

    @property
    def destination(self) -> Optional[str]:
        """The frame's ``destination`` header."""
        return self.frame.get("destination")  # type: ignore[no-any-return]

    @property
    def body(self) -> bytes:
        """The frame's body."""
        return bytes(self.frame.body)


class _Connection:
    """What the test broker knows of one client: who it is and what it was sent."""

    def __init__(self, conn: ServedConnection) -> None:
        self.conn = conn
        self.login: Optional[str] = None
        self.client_id: Optional[str] = None
        self.decoder: Optional[Any] = None  # of what the broker wrote, once the version is known


class _Handle:
    """What the broker core answers through, in front of the served connection: it logs the MESSAGEs a
    client is sent (the core writes nothing else with ``write``) and delays receipts on demand."""

    def __init__(self, broker: TestBroker, entry: _Connection) -> None:
        self._broker = broker
        self._entry = entry
        self._conn = entry.conn

    common_version = property(lambda self: self._conn.common_version)
    version = property(lambda self: self._conn.version)
    closing = property(lambda self: self._conn.closing)

    def accept(self, version: str, headers: Any) -> None:
        self._conn.accept(version, headers)

    def receipt(self, receipt_id: str) -> None:
        delay = self._broker.receipt_delay
        if delay > 0:
            loop = asyncio.get_running_loop()
            loop.call_later(delay, lambda: None if self._conn.closing else self._conn.receipt(receipt_id))
        else:
            self._conn.receipt(receipt_id)

    def error(self, message: str, *, body: bytes, headers: Any) -> None:
        self._conn.error(message, body=body, headers=headers)

    def write(self, data: bytes) -> None:
        entry = self._entry
        if self._broker.logging:
            if entry.decoder is None:
                # (what the broker writes back may hold header bytes it kept: keep_invalid_utf8)
                entry.decoder = Decoder(self._conn.version or "1.2", keep_invalid_utf8=True)
            now = time.time()
            for frame in entry.decoder.feed(data):
                self._broker._log("received", LoggedFrame(frame, entry.login, entry.client_id, now))
        self._conn.write(data)

    def close(self) -> None:
        self._conn.close()


class _FaultyHandler(BrokerHandler):
    def __init__(self, broker: TestBroker) -> None:
        super().__init__(broker.core)
        self._broker = broker

    def connection_made(self, conn: ServedConnection) -> None:
        entry = _Connection(conn)
        self._broker._connections[conn] = entry
        if self._broker.heartbeats_stopped:
            conn.heartbeats_paused = True
        conn.context = self.core.open(_Handle(self._broker, entry))

    def frame_received(self, conn: ServedConnection, frame: Any) -> None:
        self.frames_received(conn, [frame])

    def frames_received(self, conn: ServedConnection, frames: List[Any]) -> None:
        broker, entry = self._broker, self._broker._connections.get(conn)
        for frame in frames:
            if frame.command in ("CONNECT", "STOMP") and entry is not None:
                entry.login, entry.client_id = frame.get("login"), frame.get("client-id")
                if broker._refusals:
                    message = broker._refusals.pop(0)
                    conn.error(message, body=f"{message}\n".encode())
                    conn.close()
                    return
            elif frame.command == "SEND" and broker.logging and entry is not None:
                broker._log("sent", LoggedFrame(frame, entry.login, entry.client_id, time.time()))
        self.core.receive_many(conn.context, frames)

    def connection_lost(self, conn: ServedConnection, cause: Optional[BaseException]) -> None:
        self._broker._connections.pop(conn, None)
        super().connection_lost(conn, cause)


class _LoggingBroker(Broker):
    def __init__(self, owner: TestBroker, **options: Any) -> None:
        super().__init__(**options)
        self._owner = owner

    def make_handler(self) -> BrokerHandler:
        return _FaultyHandler(self._owner)


class TestBroker:
    """An in-memory STOMP broker on 127.0.0.1 and a free port, on a thread of its own.

    Args:
        logging: keep a log of every SEND the broker got and every MESSAGE it delivered (:meth:`sent`,
            :meth:`received`); False for long load tests.
        **options: :class:`fastframe.server.Broker`'s (``users``, limits, ``heartbeat``,
            ``ws_port=0`` for a WebSocket endpoint at :attr:`ws_url`, the server's timeouts).

    Use as a context manager, or :meth:`start` and :meth:`close`.
    """

    __test__ = False  # (not a test class, whatever its name says to pytest)

    def __init__(self, *, logging: bool = True, **options: Any) -> None:
        self.logging = logging
        #: seconds each RECEIPT waits before it goes out (:meth:`delay_receipts`)
        self.receipt_delay = 0.0
        #: whether heart-beats are stopped (:meth:`stop_heartbeats`)
        self.heartbeats_stopped = False
        self._options = dict(options, host="127.0.0.1", port=options.get("port", 0))
        self._lock = threading.Lock()
        self._logs: Dict[str, List[LoggedFrame]] = {"sent": [], "received": []}
        self._connections: Dict[ServedConnection, _Connection] = {}
        self._refusals: List[str] = []
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self.broker = _LoggingBroker(self, **self._options)
        #: the routing core (:class:`fastframe.broker.BrokerCore`): ``core.stats()`` counts what it holds
        self.core = self.broker.core

    # ------------------------------------------------------------------ life

    def start(self) -> TestBroker:
        """Start the thread and listen (returns once the port is open)."""
        if self._loop is not None:
            return self
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fastframe-test-broker", daemon=True)
        self._thread.start()
        self._run(self.broker.start)
        return self

    def close(self) -> None:
        """Tell the clients, close every connection, stop the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            self._run(lambda: self.broker.close(timeout=2.0))
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_CALL_TIMEOUT)
            loop.close()
            self._loop = None

    def __enter__(self) -> TestBroker:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _run(self, make: Callable[[], Any]) -> Any:
        """Run ``make()`` (a coroutine, or a plain call) on the broker's loop; wait for its result."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the test broker is not started")

        async def call() -> Any:
            result = make()
            return await result if asyncio.iscoroutine(result) else result

        return asyncio.run_coroutine_threadsafe(call(), loop).result(_CALL_TIMEOUT)

    # ------------------------------------------------------------------ where

    @property
    def host(self) -> str:
        """``127.0.0.1``."""
        return "127.0.0.1"

    @property
    def port(self) -> int:
        """The TCP port."""
        return self.broker.port

    @property
    def url(self) -> str:
        """``stomp://127.0.0.1:PORT``."""
        return f"stomp://{self.host}:{self.port}"

    @property
    def ws_url(self) -> Optional[str]:
        """``ws://127.0.0.1:PORT/ws`` with ``ws_port=`` given, else ``None``."""
        port = self.broker.ws_port
        return None if port is None else f"ws://{self.host}:{port}/ws"

    # ------------------------------------------------------------------ the log

    def _log(self, kind: str, entry: LoggedFrame) -> None:
        with self._lock:
            self._logs[kind].append(entry)

    def sent(self, destination: Optional[str] = None) -> List[LoggedFrame]:
        """Every SEND the broker got (in order), or those to ``destination``."""
        with self._lock:
            log = list(self._logs["sent"])
        return [e for e in log if destination is None or e.destination == destination]

    def received(self, login: Optional[str] = None) -> List[LoggedFrame]:
        """Every MESSAGE the broker delivered (in order), or those to the connections of ``login``."""
        with self._lock:
            log = list(self._logs["received"])
        return [e for e in log if login is None or e.login == login]

    def clear_log(self) -> None:
        """Forget what was logged so far."""
        with self._lock:
            for log in self._logs.values():
                log.clear()

    def wait_for(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait until ``condition()`` is true (polled); ``TimeoutError`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not met within {timeout} s")
            time.sleep(0.01)

    # ------------------------------------------------------------------ faults

    def _matching(self, login: Optional[str], client_id: Optional[str]) -> List[ServedConnection]:
        return [
            c.conn
            for c in list(self._connections.values())
            if (login is None or c.login == login) and (client_id is None or c.client_id == client_id)
        ]

    def drop_connections(self, *, login: Optional[str] = None, client_id: Optional[str] = None) -> int:
        """Cut connections without a word (a TCP reset, as a broker crash or a network fault does): all,
        or those whose CONNECT had this ``login`` / ``client-id``. Returns how many. Exercises a
        client's reconnect and re-subscribe, and redelivery of what it had not acknowledged."""

        def drop() -> int:
            conns = self._matching(login, client_id)
            for conn in conns:
                conn.abort(ConnectionResetError("dropped by the test broker"))
            return len(conns)

        return int(self._run(drop))

    def error_and_close(self, message: str = "connection_forced", *, login: Optional[str] = None) -> int:
        """Send an ERROR with ``message`` and close (as RabbitMQ does when an operator closes a
        connection), to every connection or those of ``login``. Returns how many. Exercises a
        client's handling of a server ERROR (``Reconnect.going_away`` words reconnect)."""

        def close() -> int:
            conns = self._matching(login, None)
            for conn in conns:
                conn.error(message, body=f"{message}\n".encode())
                conn.close()
            return len(conns)

        return int(self._run(close))

    def refuse_next_connect(self, message: str = "Bad CONNECT", *, count: int = 1) -> None:
        """Answer the next ``count`` CONNECT frames with an ERROR ``message`` and a close (a refused
        login, a broker starting up). Exercises a client's connect errors and its retry policy."""
        self._run(lambda: self._refusals.extend([message] * count))

    def stop_heartbeats(self) -> None:
        """The broker sends no heart-beat from now on, on every connection and new ones. Exercises a
        client's heart-beat timeout (it must give up on a silent server after its grace)."""

        def stop() -> None:
            self.heartbeats_stopped = True
            for entry in self._connections.values():
                entry.conn.heartbeats_paused = True

        self._run(stop)

    def resume_heartbeats(self) -> None:
        """Heart-beats go out again."""

        def resume() -> None:
            self.heartbeats_stopped = False
            for entry in self._connections.values():
                entry.conn.heartbeats_paused = False

        self._run(resume)

    def delay_receipts(self, seconds: float) -> None:
        """Every RECEIPT goes out ``seconds`` late (0: at once again). Exercises a client's receipt
        timeouts and what it does with a receipt that comes after its wait ended."""
        self._run(lambda: setattr(self, "receipt_delay", float(seconds)))

    def hold(self, destination: str) -> None:
        """Hold the deliveries of ``destination`` (``/queue/NAME`` or ``/topic/NAME``, not a stream): what is sent
        there is accepted, and its RECEIPT sent, but reaches no subscriber until :meth:`release` (a
        queue keeps it; a topic keeps a copy for each subscription present when it was sent). Exercises
        a consumer's receive timeouts and a requester's reply timeout while the broker is up and well,
        then what it does with messages that arrive late."""
        self._run(lambda: self.core.hold(destination))

    def release(self, destination: str) -> None:
        """Deliver what :meth:`hold` kept for ``destination``, in order (expired ones excepted), and its
        messages as they come from now on."""
        self._run(lambda: self.core.release(destination))

    @property
    def connections(self) -> int:
        """How many clients are connected."""
        return len(self._connections)
