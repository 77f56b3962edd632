"""``Broker``: the in-memory broker (:mod:`fastframe.broker`) served over TCP by :func:`serve`.

Memory only, one process, no persistence, no clustering: meant for tests, development and demos.

    async with Broker(port=0) as broker:      # a free port on 127.0.0.1
        ...connect to ("127.0.0.1", broker.port)...
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl as _ssl
from typing import Any, Dict, List, Mapping, Optional

from ..broker import (
    DEFAULT_MAX_STORED_BYTES,
    DEFAULT_MAX_SUBSCRIPTIONS,
    DEFAULT_MAX_TRANSACTION_BYTES,
    DEFAULT_MAX_TRANSACTIONS,
    BrokerCore,
)
from ._serve import ServedConnection, Server, serve
from ._signals import stop_on_signals

__all__ = ["Broker", "BrokerHandler", "run_broker"]

#: Seconds between the served broker's looks for expired messages (:meth:`BrokerCore.expire`).
EXPIRY_INTERVAL = 0.1


class BrokerHandler:
    """Connects :func:`serve`'s callbacks to a :class:`fastframe.broker.BrokerCore`: a session per
    connection. :meth:`Broker.make_handler` makes one; a subclass may act before or after each call
    (:mod:`fastframe.testing` logs and injects faults so)."""

    def __init__(self, core: BrokerCore) -> None:
        self.core = core

    def connection_made(self, conn: ServedConnection) -> None:
        conn.context = self.core.open(conn)

    def frame_received(self, conn: ServedConnection, frame: Any) -> None:
        self.core.receive(conn.context, frame)

    def frames_received(self, conn: ServedConnection, frames: List[Any]) -> None:
        self.core.receive_many(conn.context, frames)

    def connection_lost(self, conn: ServedConnection, cause: Optional[BaseException]) -> None:
        self.core.close(conn.context)
        conn.context = None  # the session and the connection refer to each other: freed now, not by the collector


class Broker:
    """An in-memory STOMP 1.0/1.1/1.2 broker that tests start and stop in-process.

    Args:
        host, port: where to listen (``port=0``: a free port, read it from :attr:`port`).
        users: login -> passcode; ``None`` (the default) accepts any login.
        max_stored_bytes: bound on the messages (bodies and headers) held for queues without consumers
            and in open transactions, all connections together (64 MiB).
        max_transaction_bytes, max_transactions, max_subscriptions: per connection, the bytes held in
            its open transactions (16 MiB), the transactions open (100), the subscriptions (10,000).
        dead_letter: where a queue's dead letters (expired, NACKed with ``requeue:false``, past
            ``max_redeliveries``) go, e.g. ``/queue/ActiveMQ.DLQ``; ``None``: dropped.
        max_redeliveries: redeliveries of a NACKed or unacknowledged message before it is
            dead-lettered (``None``: without end).
        requeue_on_nack: ``False``: a NACK dead-letters the message at once (ActiveMQ) rather than
            redelivering it (RabbitMQ). See :class:`fastframe.broker.BrokerCore` for all three.
        ssl: an ``ssl.SSLContext`` to serve TLS.
        decoder_options: :class:`fastframe.Decoder` options (limits) for what clients send.
        **server_options: the options of :func:`fastframe.server.serve` (timeouts, heart-beats, bounds).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        users: Optional[Mapping[str, str]] = None,
        max_stored_bytes: int = DEFAULT_MAX_STORED_BYTES,
        max_transaction_bytes: int = DEFAULT_MAX_TRANSACTION_BYTES,
        max_transactions: int = DEFAULT_MAX_TRANSACTIONS,
        max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS,
        dead_letter: Optional[str] = None,
        max_redeliveries: Optional[int] = None,
        requeue_on_nack: bool = True,
        ssl: Optional[_ssl.SSLContext] = None,
        decoder_options: Optional[Mapping[str, Any]] = None,
        **server_options: Any,
    ) -> None:
        self.host = host
        self._port = port
        self.core = BrokerCore(
            users=users,
            max_stored_bytes=max_stored_bytes,
            max_transaction_bytes=max_transaction_bytes,
            max_transactions=max_transactions,
            max_subscriptions=max_subscriptions,
            dead_letter=dead_letter,
            max_redeliveries=max_redeliveries,
            requeue_on_nack=requeue_on_nack,
        )
        self._ssl = ssl
        self._expiry: Optional[asyncio.Task[None]] = None
        self._decoder_options = decoder_options
        self._server_options: Dict[str, Any] = server_options
        self.server: Optional[Server] = None

    @property
    def port(self) -> int:
        """The port listened on."""
        return self.server.port if self.server is not None else self._port

    @property
    def ws_port(self) -> Optional[int]:
        """The WebSocket port listened on (``ws_port=`` of :func:`fastframe.server.serve`; ``None``: none)."""
        return self.server.ws_port if self.server is not None else self._server_options.get("ws_port")

    def make_handler(self) -> BrokerHandler:
        """The handler :meth:`start` serves (a subclass may return its own :class:`BrokerHandler`)."""
        return BrokerHandler(self.core)

    async def start(self) -> None:
        """Start listening."""
        self.server = await serve(
            self.make_handler(),
            self.host,
            self._port,
            ssl=self._ssl,
            decoder_options=self._decoder_options,
            **self._server_options,
        )
        self._expiry = asyncio.get_running_loop().create_task(self._expire())

    async def _expire(self) -> None:
        """Expired messages leave their queues (for the dead-letter queue) within ``EXPIRY_INTERVAL``."""
        while True:
            await asyncio.sleep(EXPIRY_INTERVAL)
            self.core.expire()  # (nothing to do, and no work, unless a queue holds messages that expire)

    async def close(self, timeout: float = 5.0) -> None:
        """Stop listening, tell the clients, and wait up to ``timeout`` s for them to go."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if self.server is not None:
            await self.server.close(timeout)

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


async def run_broker(host: str, port: int, stop: Optional[asyncio.Event] = None, **options: Any) -> None:
    """Serve until ``stop`` is set; the command line's ``fastframe broker``.

    Without ``stop``, SIGINT (Ctrl-C) or SIGTERM stops it, through handlers of its own in place before
    the "listening" line is printed (:func:`stop_on_signals`). Either way the clients get an ERROR, then
    the close.
    """
    signals: Any = contextlib.nullcontext()
    if stop is None:
        stop = asyncio.Event()
        signals = stop_on_signals(stop)
    with signals:
        async with Broker(host, port, **options) as broker:
            print(f"fastframe broker listening on {broker.host}:{broker.port}", flush=True)
            if broker.ws_port is not None:
                print(f"fastframe broker listening on ws://{broker.host}:{broker.ws_port}/ws", flush=True)
            await stop.wait()
