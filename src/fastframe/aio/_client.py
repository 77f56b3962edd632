"""The asyncio client: ``async with connect(...) as client``; send, subscribe, transactions, reconnect."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import random
import secrets
import ssl as _ssl
import urllib.parse
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Coroutine,
    Dict,
    Generator,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from ..protocol import ClientConnection, Headers, LocalProtocolError, State, header_list
from ._errors import ConnectionClosedError, ServerError, StaleMessageError
from ._subscription import BaseMessage, ColumnSubscription, Message, Receiver, Subscription, Transaction, message_maker
from ._transport import ClientSession, FrameHook, WireHook

__all__ = ["Client", "Reconnect", "connect", "log_unrouted", "start_call"]

_CONNECTED = State.CONNECTED
_ERROR_TEXT = 4096  # bytes of an ERROR's body that Reconnect.retries() reads
#: Ids of subscriptions the client ended, remembered so a MESSAGE still in flight for one is dropped
#: quietly (it is no stranger: on_unrouted is not called for it).
_ENDED_SUBSCRIPTIONS_KEPT = 1024
#: Servers whose ``/temp-queue/`` replies arrive without a SUBSCRIBE (one refuses it: RabbitMQ says
#: "not a valid destination for 'SUBSCRIBE'"), on a subscription named after the temp queue.
_TEMP_QUEUES_WITHOUT_SUBSCRIBE = ("RabbitMQ/", "fastframe/")

log = logging.getLogger("fastframe.aio")

#: (:func:`start_call`) called once the frame of the call running in this context is written
_on_written: contextvars.ContextVar[Optional[Callable[[], None]]] = contextvars.ContextVar("_on_written", default=None)
T = TypeVar("T")


async def start_call(call: Coroutine[Any, Any, T]) -> Tuple[asyncio.Task[T], bool]:
    """Run ``call`` (one of a :class:`Client`'s coroutines) in a task of its own and return the task
    once the call's frame is written, or once the call ended without writing one, with whether the
    frame was written: the wait for its receipt goes on in the task. Calls started one after
    another so write their frames in that order, and none waits for another's receipt: the
    blocking client's I/O thread runs its threads' calls so."""
    loop = asyncio.get_running_loop()
    written: asyncio.Future[None] = loop.create_future()

    def mark() -> None:
        if not written.done():
            written.set_result(None)

    context = contextvars.copy_context()
    context.run(_on_written.set, mark)
    task = context.run(loop.create_task, call)  # (the task runs in a copy of that context)
    await asyncio.wait((task, written), return_when=asyncio.FIRST_COMPLETED)
    return task, written.done()


UnroutedHook = Callable[[Message], Any]


def log_unrouted(message: Message) -> None:
    """The default ``on_unrouted``: log (WARNING, logger ``fastframe.aio``) and drop."""
    log.warning(
        "dropped a MESSAGE no subscription or request takes: subscription %r, destination %r, correlation-id %r",
        message.subscription, message.destination, message.get("correlation-id"),
    )  # fmt: skip


#: A server to connect to: ``(host, port)`` for STOMP over TCP, or a ``ws://``/``wss://`` URL.
ServerAddress = Union[Tuple[str, int], str]


def _is_url(host: str) -> bool:
    return host.startswith(("ws://", "wss://"))


def _address(server: ServerAddress) -> Tuple[str, int, Optional[str]]:
    """``(host, port, url)`` of a server; ``url`` is None for TCP."""
    if isinstance(server, str):
        parts = urllib.parse.urlsplit(server)
        if not _is_url(server) or not parts.hostname:
            raise ValueError(f"a server is (host, port) or a ws:// or wss:// URL, not {server!r}")
        return parts.hostname, parts.port or (443 if parts.scheme == "wss" else 80), server
    host, port = server
    if "://" in host:  # (an http:// or stomp:// URL would otherwise be taken for a host name)
        raise ValueError(f"a server is (host, port) or a ws:// or wss:// URL, not {host!r}")
    return host, port, None


@dataclass(frozen=True)
class Reconnect:
    """Reconnect policy: exponential backoff with jitter over the servers, ``attempts`` in a row (None: forever).

    The client reconnects after the connection drops, and after an ERROR frame that says the
    server is going away (``going_away``), not after one that refuses what the client did.
    """

    attempts: Optional[int] = None
    initial_delay: float = 0.1
    max_delay: float = 10.0
    factor: float = 2.0
    jitter: float = 0.5  # each delay is multiplied by a random factor in [1 - jitter, 1]
    #: Words that mark an ERROR as the server going away (an operator or the broker closing the
    #: connection, a shutdown), not as a refusal of what the client did: found (case-insensitively)
    #: in its ``message`` header or its body, the client reconnects as after a dropped connection.
    #: RabbitMQ closing a STOMP connection by force says ``AMQP channel died`` with AMQP's code 320
    #: in the body (``server_initiated_close,320``), or ``connection_forced``. Any other ERROR ends
    #: the client (retrying a refusal would repeat it).
    going_away: Tuple[str, ...] = ("connection_forced", "server_initiated_close,320")

    def retries(self, error: BaseException) -> bool:
        """Whether the client reconnects after ``error``: not a :class:`ServerError` (a dropped
        connection, a silent server), or an ERROR whose ``message`` or body holds one of ``going_away``."""
        if not isinstance(error, ServerError):
            return True
        body = getattr(error.frame, "body", b"") or b""
        text = f"{error.message or ''}\n{bytes(body[:_ERROR_TEXT]).decode('utf-8', 'replace')}".lower()
        return any(words.lower() in text for words in self.going_away)

    def delays(self, rng: random.Random) -> Iterator[float]:
        """The wait before each attempt: 0 first, then growing to ``max_delay``."""
        delay, count = self.initial_delay, 0
        yield 0.0
        while self.attempts is None or count < self.attempts - 1:
            count += 1
            yield min(delay, self.max_delay) * (1.0 - self.jitter * rng.random())
            delay *= self.factor


class Client:
    """A STOMP client over asyncio; make one with :func:`connect`."""

    def __init__(
        self,
        servers: Sequence[ServerAddress],
        *,
        ssl: Optional[_ssl.SSLContext],
        login: Optional[str],
        passcode: Optional[str],
        host_header: Optional[str],
        versions: Sequence[str],
        heartbeat: Tuple[int, int],
        timeout: float,
        connect_timeout: float,
        max_queue: int,
        reconnect: Optional[Reconnect],
        frame_hook: Optional[FrameHook],
        wire_hook: Optional[WireHook],
        rng: Optional[random.Random],
        options: Dict[str, Any],
        coalesce_reads: float,
        headers: Headers = None,
        on_unrouted: Optional[UnroutedHook] = None,
        reply_to: Optional[str] = None,
        message_class: Optional[Callable[..., BaseMessage]] = None,
    ) -> None:
        if not servers:
            raise ValueError("at least one server is needed")
        if isinstance(coalesce_reads, bool) or not (
            isinstance(coalesce_reads, (int, float)) and 0.0 <= coalesce_reads <= 1.0
        ):
            raise ValueError(f"coalesce_reads must be seconds between 0 and 1, not {coalesce_reads!r}")
        self.coalesce_reads = float(coalesce_reads)
        self.servers = list(servers)
        self._ssl = ssl
        self._credentials = (login, passcode)
        self._host_header = host_header
        self._versions = tuple(versions)
        self._heartbeat = heartbeat
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_queue = max_queue
        self.reconnect_policy = reconnect
        self._hooks = (frame_hook, wire_hook)
        self._rng = rng or random.Random()
        self._options = options
        #: Headers added to every CONNECT, the reconnects' included.
        self.connect_headers = header_list(headers)
        #: Called with each MESSAGE no subscription or request takes (see :func:`connect`).
        self.on_unrouted: UnroutedHook = on_unrouted or log_unrouted
        #: The ``reply-to`` of :meth:`request` (a ``/temp-queue/`` of the client's own by default).
        self.reply_to = reply_to or f"/temp-queue/fastframe-{secrets.token_hex(6)}"
        self._requests: Dict[str, Tuple[asyncio.Future[Message], List[Optional[ClientSession]]]] = {}
        self._reply_session: Optional[ClientSession] = None  # the session whose replies are set up
        self._ended_subscriptions: Dict[str, None] = {}
        self._session: Optional[ClientSession] = None
        self._subscriptions: Dict[str, Receiver] = {}
        #: What the connection builds each MESSAGE with: called with the event's fields and
        #: ``session=`` (the :class:`ClientSession` that read it); a :class:`Message` bound to this
        #: client unless :func:`connect` was given another (the blocking client's).
        self.message_class: Callable[..., BaseMessage] = message_class or functools.partial(Message, client=self)
        self._ready = asyncio.Event()  # set while a session is connected
        self._closing = False
        self._reconnector: Optional[asyncio.Task[None]] = None
        self._error: Optional[BaseException] = None
        self._ids = 0
        #: How many sessions reached CONNECTED (1 after connect, +1 per reconnect).
        self.connections = 0

    # ------------------------------------------------------------------ state

    @property
    def is_connected(self) -> bool:
        """Whether a session is connected now."""
        return self._session is not None and self._session.conn.connected and not self._session.closed.done()

    @property
    def version(self) -> Optional[str]:
        """The negotiated STOMP version of the current session."""
        return None if self._session is None else self._session.conn.version

    @property
    def session(self) -> Optional[ClientSession]:
        """The current :class:`ClientSession` (transport machinery; ``session.is_reading()`` shows flow control)."""
        return self._session

    def _new_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids}"

    # ------------------------------------------------------------------ connecting

    async def _start(self) -> None:
        await self._connect_any(Reconnect(attempts=1) if self.reconnect_policy is None else self.reconnect_policy)

    async def _connect_any(self, policy: Reconnect) -> None:
        last: Optional[BaseException] = None
        for delay in policy.delays(self._rng):
            await asyncio.sleep(delay)
            for server in self.servers:
                if self._closing:
                    raise ConnectionClosedError("the client was closed")
                try:
                    await self._open(*_address(server))
                    return
                except (OSError, asyncio.TimeoutError, ConnectionClosedError) as exc:
                    if isinstance(exc, ServerError) and (self.reconnect_policy is None or not policy.retries(exc)):
                        raise  # refused (bad login, version): retrying will not help
                    last = exc
        raise ConnectionClosedError(f"could not connect to any of {self.servers}: {last}") from last

    async def _open(self, host: str, port: int, url: Optional[str] = None) -> None:
        conn = ClientConnection(**self._options)
        session = ClientSession(
            conn,
            self._route,
            frame_hook=self._hooks[0],
            wire_hook=self._hooks[1],
            coalesce_reads=self.coalesce_reads,
        )
        conn.message_class = message_maker(self.message_class, session)
        login, passcode = self._credentials
        versions: Sequence[str] = self._versions
        started = asyncio.get_running_loop().time()
        if url is not None:  # the upgrade first: the subprotocol the server chose narrows what CONNECT offers
            versions = await asyncio.wait_for(
                session.open_websocket(url, versions=versions, ssl=self._ssl, decoder_options=self._options),
                self.connect_timeout,
            )
        data = conn.connect(
            self._host_header or (host if url is None else "/"),  # (Web-STOMP: the host header is the vhost)
            login=login,
            passcode=passcode,
            heartbeat=self._heartbeat,
            versions=versions,
            headers=self.connect_headers,
        )
        remaining = max(0.0, self.connect_timeout - (asyncio.get_running_loop().time() - started))
        await asyncio.wait_for(
            session.open(host, port, data, ssl=self._ssl, server_hostname=host), remaining
        )  # success means CONNECTED arrived, not that TCP connected (nor the WebSocket upgrade)
        self._session = session
        self.connections += 1
        for sub in self._subscriptions.values():  # re-establish, with the same ids
            sub.restart(session)
            session.write(conn.subscribe(sub.id, sub.destination, ack=sub.ack, headers=sub.headers))
            self._route_into(conn, sub)
        session.closed.add_done_callback(lambda _: self._session_ended(session))
        self._ready.set()

    def _session_ended(self, session: ClientSession) -> None:
        for reply, sent_on in self._requests.values():  # their replies went to that session's temp queue
            if sent_on[0] is session and not reply.done():
                reply.set_exception(ConnectionClosedError(f"the connection ended before the reply: {session.error}"))
        if session is not self._session:
            return
        self._ready.clear()
        cause, policy = session.error, self.reconnect_policy
        if self._closing or cause is None or policy is None or not policy.retries(cause):
            self._end(cause)  # (an ERROR that refused what the client did: reconnecting would repeat it)
        elif self._reconnector is None or self._reconnector.done():
            self._reconnector = asyncio.get_running_loop().create_task(self._reconnect(cause))

    async def _reconnect(self, cause: BaseException) -> None:
        assert self.reconnect_policy is not None
        try:
            await self._connect_any(self.reconnect_policy)
        except asyncio.CancelledError:
            self._end(cause)
            raise
        except BaseException as exc:
            self._end(exc)

    def _end(self, cause: Optional[BaseException]) -> None:
        """The client is over: iterators stop (clean) or raise, waiters fail."""
        self._closing = True
        if cause is not None and not isinstance(cause, ConnectionClosedError):
            error = ConnectionClosedError(f"the connection was lost: {cause}")
            error.__cause__ = cause
            cause = error
        self._error = cause
        for sub in self._subscriptions.values():
            sub.finish(cause)
        self._ready.set()  # wake senders waiting for a reconnect: they see the error

    def _route(self, message: BaseMessage) -> None:
        """The one place a message reaches its subscription (whatever hooks are set), or its request."""
        sub = self._subscriptions.get(message.subscription or "")
        if sub is not None:
            sub.deliver(message, self._closing)
        elif message.subscription not in self._ended_subscriptions:
            self._unrouted(message)

    def _unrouted(self, message: BaseMessage) -> None:
        """A MESSAGE for no subscription of ours: a request's reply, else ``on_unrouted``'s."""
        correlation = message.get("correlation-id")
        waiting = self._requests.get(correlation) if correlation is not None else None
        if waiting is not None and not waiting[0].done():
            waiting[0].set_result(message)  # type: ignore[arg-type]  # (built by message_class)
            return
        try:
            self.on_unrouted(message)  # type: ignore[arg-type]  # (built by message_class)
        except Exception:  # a hook's mistake must not reach the event loop (nor end the session)
            log.exception("on_unrouted raised; the message is dropped")

    async def _live(self, timeout: float) -> ClientSession:
        """The connected session, waiting (at most ``timeout``) while a reconnect runs."""
        while True:
            if self._error is not None or (self._closing and not self.is_connected):
                raise self._error or ConnectionClosedError("the client is closed")
            if self.is_connected and self._session is not None:
                return self._session
            self._ready.clear()  # the session just ended (its callback may not have run): wait for the next
            await asyncio.wait_for(self._ready.wait(), timeout)

    async def _request(self, build: Any, receipt: bool, timeout: Optional[float]) -> ClientSession:
        """Build a frame on the live session, write it, drain, and wait for its receipt if asked."""
        session = self._session
        if session is not None and session.queued_sends:
            session.flush_sends()  # (built before this frame, whatever it does to the connection: DISCONNECT)
        if not receipt and self._error is None and self.is_connected and session is not None and session.writable:
            # the everyday send: nothing to wait for, so no task and no timer (the slow path below would
            # find the same session and return from drain() at once)
            data = build(session.conn, None)
            if data is not None:
                session.write(data)
            return session
        limit = self.timeout if timeout is None else timeout

        async def run() -> ClientSession:
            session = await self._live(limit)
            receipt_id = session.conn.new_id("r-") if receipt else None
            data = build(session.conn, receipt_id)  # built and written in one step: one writer, in order
            if data is None:
                return session
            waiter = session.expect_receipt(receipt_id) if receipt_id is not None else None
            try:
                session.write(data)
                written = _on_written.get()
                if written is not None:
                    written()  # (start_call's caller goes on: the frame is out, in order)
                await session.drain()
                if waiter is not None:
                    await waiter
            finally:
                if receipt_id is not None:
                    session.forget_receipt(receipt_id)  # a receipt that comes late finds no waiter
            return session

        return await asyncio.wait_for(run(), limit)

    # ------------------------------------------------------------------ the API

    async def send(
        self,
        destination: str,
        body: Union[bytes, str] = b"",
        headers: Headers = None,
        *,
        content_type: Optional[str] = None,
        transaction: Optional[str] = None,
        receipt: bool = False,
        timeout: Optional[float] = None,
        content_length: bool = True,
    ) -> None:
        """SEND; with ``receipt=True`` wait (at most ``timeout`` s) until the server confirms it.

        ``content_length=False`` sends no ``content-length`` header: ActiveMQ then makes a JMS
        TextMessage (a BytesMessage otherwise); a body holding a NUL cannot be sent so
        (:class:`fastframe.protocol.LocalProtocolError`).
        """
        # the everyday SEND (no receipt, a session with room to write) is written as send_nowait
        # writes it, without calling it: that call, six arguments, cost 5% of a SEND's instructions;
        # without headers the session takes it in one call (queued, encoded with the others at once)
        if headers is None and content_type is None and transaction is None and content_length and not receipt:
            session = self._session
            if session is not None and self._error is None and session.send_plain(destination, body):
                return
        session = None if receipt else self._session_for_sends()
        if session is None:
            await self._send(destination, body, headers, content_type, transaction, receipt, timeout, content_length)
        else:
            session.write(
                session.conn.send(
                    destination,
                    body,
                    headers,
                    content_type=content_type,
                    transaction=transaction,
                    content_length=content_length,
                )
            )

    def send_nowait(
        self,
        destination: str,
        body: Union[bytes, str] = b"",
        headers: Headers = None,
        *,
        content_type: Optional[str] = None,
        transaction: Optional[str] = None,
        content_length: bool = True,
    ) -> bool:
        """SEND now, without a receipt, if that needs no wait: a session is connected and its write
        buffer is below the high-water mark. ``False`` (nothing sent) when ``send()`` would wait (a
        reconnect runs, the buffer is full) or raise (the client is over): then ``await send(...)``.
        For code that cannot await: a callback, the blocking client's I/O thread."""
        if headers is None and content_type is None and transaction is None and content_length:
            session = self._session
            return session is not None and self._error is None and session.send_plain(destination, body)
        session = self._session_for_sends()
        if session is None:
            return False
        session.write(
            session.conn.send(
                destination,
                body,
                headers,
                content_type=content_type,
                transaction=transaction,
                content_length=content_length,
            )
        )
        return True

    def _session_for_sends(self) -> Optional[ClientSession]:
        # what _request checks before it writes (is_connected, writable), without a closure, a
        # coroutine and property calls: the session a SEND may be written to now, or None
        session = self._session
        if (
            session is None
            or not session.writable
            or session.conn.state is not _CONNECTED
            or self._error is not None
            or session.closed.done()
        ):
            return None
        return session

    async def _send(
        self,
        destination: str,
        body: Union[bytes, str],
        headers: Headers,
        content_type: Optional[str],
        transaction: Optional[str],
        receipt: bool,
        timeout: Optional[float],
        content_length: bool = True,
    ) -> None:
        # send()'s general path, in a function of its own: the closure's cells would otherwise be
        # made on every call of send(), the everyday path included
        await self._request(
            lambda conn, rid: conn.send(
                destination,
                body,
                headers,
                content_type=content_type,
                transaction=transaction,
                receipt=rid,
                content_length=content_length,
            ),
            receipt,
            timeout,
        )

    async def subscribe(
        self,
        destination: str,
        *,
        ack: str = "auto",
        headers: Headers = None,
        id: Optional[str] = None,
        max_queue: Optional[int] = None,
        receipt: bool = True,
        timeout: Optional[float] = None,
        columns: bool = False,
    ) -> Subscription:
        """SUBSCRIBE and return the :class:`Subscription` (an async iterator of :class:`Message`).

        ``columns=True`` returns a :class:`ColumnSubscription` instead: each read's messages come as
        one :class:`fastframe.Columns` (no Python object per message); it must be the connection's
        only subscription, and there must be no ``frame_hook``.
        """
        sub_id = id or self._new_id("sub-")
        kind = ColumnSubscription if columns else Subscription
        sub = kind(self, sub_id, destination, ack, header_list(headers), max_queue or self.max_queue)
        await self.subscribe_into(sub, receipt=receipt, timeout=timeout)
        return sub

    async def subscribe_into(self, sub: Receiver, *, receipt: bool = True, timeout: Optional[float] = None) -> None:
        """SUBSCRIBE for a :class:`Receiver` made elsewhere (the blocking client's subscriptions):
        its ``id``, ``destination``, ``ack`` and ``headers`` make the frame; the client then routes
        its messages into it with ``deliver``, as it does for a :class:`Subscription`. On failure
        ``sub`` is finished (see "When a request fails" in :func:`connect`)."""
        sub_id, destination, ack, pairs = sub.id, sub.destination, sub.ack, sub.headers
        if sub_id in self._subscriptions:
            raise LocalProtocolError(f"subscription id {sub_id!r} is already in use", None)

        def build(conn: ClientConnection, rid: Optional[str]) -> bytes:
            if getattr(sub, "columns", False):  # (refused before anything is sent; a Receiver of one's
                # own, made before columns were, has no such attribute: rows are message objects then)
                if self._hooks[0] is not None:
                    raise ValueError("columns=True does not go with a frame_hook (the hook sees each frame)")
                conn.check_columns(sub_id, ack)
            data = conn.subscribe(sub_id, destination, ack=ack, headers=pairs, receipt=rid)
            self._subscriptions[sub_id] = sub  # from the SUBSCRIBE on: messages route here, reconnects re-send it
            self._route_into(conn, sub)
            return data

        try:
            await self._request(build, receipt, timeout)
        except BaseException as exc:
            self._abandon(sub, exc)
            raise

    def _route_into(self, conn: ClientConnection, sub: Receiver) -> None:
        # the everyday MESSAGE goes from the read straight into the subscription's inbox (the
        # connection's compiled fast path); a frame hook sees every frame, so then _route does it
        if getattr(sub, "columns", False):
            conn.route_columns(sub.id, sub.inbox)
        elif self._hooks[0] is None:
            conn.route(sub.id, sub.inbox)

    def _unroute(self, sub: Receiver) -> None:
        session = self._session
        if session is not None:
            session.conn.unroute(sub.id)

    def _abandon(self, sub: Receiver, error: BaseException) -> None:
        # subscribe() failed (see "When a request fails" in connect()): no subscription is left at
        # the broker, in the protocol connection or among the transport's reasons to pause, and what
        # arrived for it before the failure stays readable from the error's ``subscription``
        if self._subscriptions.get(sub.id) is sub:
            del self._subscriptions[sub.id]
            self._unroute(sub)
        session = self._session
        if session is not None and self.is_connected and sub.id in session.conn.subscriptions:
            session.write(session.conn.unsubscribe(sub.id))  # (no receipt: nothing more to wait for)
        sub.release()
        sub.finish(error if isinstance(error, ConnectionClosedError) else None)
        if isinstance(error, Exception):
            error.subscription = sub  # type: ignore[attr-defined]

    async def unsubscribe(self, sub: Receiver, *, receipt: bool = True, timeout: Optional[float] = None) -> None:
        """UNSUBSCRIBE ``sub`` (what ``sub.unsubscribe()`` does); its iteration stops after the queued messages."""
        if self._subscriptions.pop(sub.id, None) is None:
            return
        self._unroute(sub)  # (messages read from now on are dropped, as _route drops them)
        ended = self._ended_subscriptions
        ended[sub.id] = None
        if len(ended) > _ENDED_SUBSCRIPTIONS_KEPT:
            del ended[next(iter(ended))]
        sub.finish(None)
        sub.release()
        await self._request(
            lambda conn, rid: conn.unsubscribe(sub.id, receipt=rid) if sub.id in conn.subscriptions else None,
            receipt,
            timeout,
        )  # (a reconnect in between did not re-subscribe it: nothing to send)

    async def ack(
        self,
        message: Union[Message, str],
        *,
        subscription: Optional[str] = None,
        transaction: Optional[str] = None,
        receipt: bool = False,
        timeout: Optional[float] = None,
    ) -> None:
        """ACK ``message`` (what ``message.ack()`` does; ``client`` mode: the older ones too).

        ``message`` may be an id kept from a message of the current connection: its ``ack_id`` or
        its ``message-id`` (stomp.py's ``conn.ack(id, subscription)``); the connection knows its
        subscription and writes the headers the STOMP version needs. ``subscription`` is needed
        only when one message-id waits on two subscriptions. An id that names no unacknowledged
        message of this connection is a :class:`fastframe.protocol.LocalProtocolError` (see
        :meth:`fastframe.protocol.ClientConnection.ack`).
        """
        await self._settle("ACK", message, subscription, transaction, receipt, timeout)

    async def nack(
        self,
        message: Union[Message, str],
        *,
        subscription: Optional[str] = None,
        transaction: Optional[str] = None,
        receipt: bool = False,
        timeout: Optional[float] = None,
    ) -> None:
        """NACK ``message`` (what ``message.nack()`` does; STOMP 1.1 and later); ids as for :meth:`ack`."""
        await self._settle("NACK", message, subscription, transaction, receipt, timeout)

    async def _settle(
        self,
        command: str,
        message: Union[Message, str],
        subscription: Optional[str],
        transaction: Optional[str],
        receipt: bool,
        timeout: Optional[float],
    ) -> None:
        if isinstance(message, BaseMessage) and (message.session is not self._session or not self.is_connected):
            raise StaleMessageError(f"cannot {command} a message of an earlier connection; it will be redelivered")
        method = ClientConnection.ack if command == "ACK" else ClientConnection.nack
        await self._request(
            lambda conn, rid: method(conn, message, subscription=subscription, transaction=transaction, receipt=rid),
            receipt,
            timeout,
        )

    async def request(
        self,
        destination: str,
        body: Union[bytes, str] = b"",
        headers: Headers = None,
        *,
        content_type: Optional[str] = None,
        content_length: bool = True,
        timeout: Optional[float] = None,
    ) -> Message:
        """SEND a request with ``reply-to`` and ``correlation-id``; return the reply (a :class:`Message`).

        The reply is the first MESSAGE that carries the request's ``correlation-id`` and arrives on
        no subscription of the client's (the client's :attr:`reply_to`, by default a
        ``/temp-queue/`` of its own: RabbitMQ and ActiveMQ make one per connection, and the
        in-memory broker too). A ``correlation-id`` in ``headers`` is used as given (no other
        request may be waiting with it), otherwise the client makes one; ``reply-to`` is the
        client's. Many requests may wait at once on one connection, each gets its own reply.
        Waits at most ``timeout`` (the client's when None), a reconnect in between included: then
        ``asyncio.TimeoutError``, and a reply that comes later goes to ``on_unrouted``, never to
        another request. The connection ending fails the request with
        :class:`ConnectionClosedError` (the reply would go to that connection's temporary queue,
        which ends with it).
        """
        limit = self.timeout if timeout is None else timeout

        async def run() -> Message:
            reply = await self.start_request(
                destination, body, headers, content_type=content_type, content_length=content_length, timeout=limit
            )
            return await reply  # (cancelled with run(): the request is forgotten)

        return await asyncio.wait_for(run(), limit)

    async def start_request(
        self,
        destination: str,
        body: Union[bytes, str] = b"",
        headers: Headers = None,
        *,
        content_type: Optional[str] = None,
        content_length: bool = True,
        timeout: Optional[float] = None,
    ) -> asyncio.Future[Message]:
        """:meth:`request`'s first half, for code that waits for the reply elsewhere (the blocking
        client): SEND the request (waiting at most ``timeout`` for a connected session) and return
        the future its reply resolves. Cancel the future to give up: its reply then goes to
        ``on_unrouted``. It fails with :class:`ConnectionClosedError` when the connection ends."""
        pairs = header_list(headers)
        if any(name == "reply-to" for name, _ in pairs):
            raise LocalProtocolError("request() sets reply-to itself (connect(reply_to=...) chooses it)", None)
        correlation = next((value for name, value in pairs if name == "correlation-id"), None)
        if correlation is None:
            correlation = f"{self.reply_to.rsplit('/', 1)[-1]}-{self._new_id('')}"
            pairs.append(("correlation-id", correlation))
        if correlation in self._requests:
            raise LocalProtocolError(f"a request with correlation-id {correlation!r} is waiting already", None)
        pairs.append(("reply-to", self.reply_to))
        reply: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        sent_on: List[Optional[ClientSession]] = [None]
        self._requests[correlation] = (reply, sent_on)
        reply.add_done_callback(functools.partial(self._request_over, correlation))  # a later reply is unrouted
        try:
            session = await self._live(self.timeout if timeout is None else timeout)
            self._receive_replies(session)
            session.write(
                session.conn.send(destination, body, pairs, content_type=content_type, content_length=content_length)
            )  # (built and written in one step: the session that carries it is the one it waits on)
        except BaseException:
            reply.cancel()
            raise
        sent_on[0] = session
        return reply

    def _request_over(self, correlation: str, reply: asyncio.Future[Message]) -> None:
        waiting = self._requests.get(correlation)
        if waiting is not None and waiting[0] is reply:
            del self._requests[correlation]

    def _receive_replies(self, session: ClientSession) -> None:
        """Once per connection: SUBSCRIBE to :attr:`reply_to`, unless the server delivers its
        ``/temp-queue/`` replies without one (RabbitMQ refuses such a SUBSCRIBE; ActiveMQ needs it).
        The subscription is none of the client's: its messages take :meth:`_unrouted`'s way."""
        if session is self._reply_session:
            return
        connected = session.connected.result()
        server = str(connected.frame.get("server") or "")
        if not (self.reply_to.startswith("/temp-queue/") and server.startswith(_TEMP_QUEUES_WITHOUT_SUBSCRIBE)):
            session.write(session.conn.subscribe(self._new_id("replies-"), self.reply_to))
        self._reply_session = session

    def transaction(self, *, id: Optional[str] = None, timeout: Optional[float] = None) -> Transaction:
        """``async with client.transaction() as tx``: BEGIN, then COMMIT (or ABORT when the block raises)."""
        return Transaction(self, id or self._new_id("tx-"), timeout)

    async def begin(self, tx: str, *, timeout: Optional[float] = None) -> None:
        """BEGIN transaction ``tx`` (what entering ``client.transaction()`` does)."""
        await self._request(lambda conn, rid: conn.begin(tx, receipt=rid), False, timeout)

    async def commit(self, tx: str, *, timeout: Optional[float] = None) -> None:
        """COMMIT ``tx``, waiting for its receipt."""
        await self._request(lambda conn, rid: conn.commit(tx, receipt=rid), True, timeout)

    async def abort(self, tx: str, *, timeout: Optional[float] = None) -> None:
        """ABORT ``tx``, waiting for its receipt."""
        await self._request(lambda conn, rid: conn.abort(tx, receipt=rid), True, timeout)

    async def disconnect(self, *, timeout: Optional[float] = None) -> bool:
        """DISCONNECT with a receipt, then close the socket; whether the RECEIPT confirmed it.

        ``True``: the server confirmed that it processed everything sent before. ``False``: the
        server closed the connection after DISCONNECT without a RECEIPT (some brokers do): the goal
        is reached, but what was sent just before may not have been processed. The socket is closed
        in every case; raises :class:`ServerError` when the server answered with ERROR and
        ``asyncio.TimeoutError`` when neither came within ``timeout``.
        """
        limit = self.timeout if timeout is None else timeout
        if self._reconnector is not None:
            self._reconnector.cancel()
        session = self._session
        if not self.is_connected or session is None:
            self._closing = True
            self._end(self._error)
            return False
        self._closing = True
        session.closing_down()  # no new messages are queued; the RECEIPT must not wait behind them
        confirmed = False
        try:
            await self._request(lambda conn, rid: conn.disconnect(receipt=rid), True, limit)
            confirmed = True
        except ConnectionClosedError:
            if session.error is not None:
                raise
        finally:
            session.close()
            await session.wait_closed(limit)
            self._end(session.error)
        return confirmed

    async def close(self) -> None:
        """Close the socket now, without DISCONNECT."""
        self._closing = True
        if self._reconnector is not None:
            self._reconnector.cancel()
        if self._session is not None:
            self._session.abort(ConnectionClosedError("closed by the client"))
            await self._session.wait_closed(self.timeout)
        self._end(self._error or ConnectionClosedError("closed by the client"))

    async def wait_closed(self) -> Optional[BaseException]:
        """Wait until the client is over (no reconnect left); return the cause (``None``: disconnected)."""
        while not (self._closing and (self._session is None or self._session.closed.done())):
            if self._session is None and (self._reconnector is None or self._reconnector.done()):
                break
            session = self._session
            if session is not None:
                await asyncio.shield(session.closed)
            await asyncio.sleep(0)
            if self._reconnector is not None and not self._reconnector.done():
                await asyncio.shield(self._reconnector)
        return self._error


class _Connector:
    """What :func:`connect` returns: ``async with`` it, or ``await`` it."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def __await__(self) -> Generator[Any, None, Client]:
        return self._connect().__await__()

    async def _connect(self) -> Client:
        await self._client._start()
        return self._client

    async def __aenter__(self) -> Client:
        return await self._connect()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Any) -> None:
        if exc_type is None and self._client.is_connected:
            await self._client.disconnect()
        else:
            await self._client.close()


def connect(
    host: str = "127.0.0.1",
    port: int = 61613,
    *,
    ssl: Optional[_ssl.SSLContext] = None,
    login: Optional[str] = None,
    passcode: Optional[str] = None,
    host_header: Optional[str] = None,
    versions: Sequence[str] = ("1.0", "1.1", "1.2"),
    heartbeat: Tuple[int, int] = (0, 0),
    timeout: float = 10.0,
    connect_timeout: float = 10.0,
    max_queue: int = 100,
    reconnect: Optional[Reconnect] = None,
    servers: Optional[Sequence[ServerAddress]] = None,
    frame_hook: Optional[FrameHook] = None,
    wire_hook: Optional[WireHook] = None,
    rng: Optional[random.Random] = None,
    coalesce_reads: float = 0.002,
    headers: Headers = None,
    on_unrouted: Optional[UnroutedHook] = None,
    reply_to: Optional[str] = None,
    message_class: Optional[Callable[..., BaseMessage]] = None,
    **options: Any,
) -> _Connector:
    """Connect to a STOMP server: ``async with connect(host, port) as client`` (or ``await connect(...)``).

    Success means CONNECTED arrived within ``connect_timeout``. ``servers`` lists more
    ``(host, port)`` pairs tried in order after ``(host, port)``; ``reconnect`` (a :class:`Reconnect`)
    retries them with backoff, also after the connection drops, and re-subscribes. ``timeout``
    bounds receipts, drains and waits for a reconnect. ``coalesce_reads`` (seconds, default 2 ms, 0 = off):
    while messages stream in (a read of several frames, or reads closer together than this with
    nothing sent by the process between them) the socket rests this long after each read, so the
    stream arrives in fewer, larger reads: about half the CPU per message, for at most that much
    added latency to a message that arrives during a rest. While a stream is fast (its reads bring
    32 frames or more, and the connection writes nothing between them: no ACK or credit the broker
    may wait for) the rest doubles with each such read, up to 20 ms (or ``coalesce_reads`` when
    longer); any other read sets it back. A lone message after a quiet spell, and
    the answer to what the process just sent (on this connection or another), are read as soon as
    they arrive; a receipt wait ends a rest. ``options`` go to
    :class:`fastframe.protocol.ClientConnection` (``strict``, ``escapes``, ``heartbeat_grace``,
    ``unknown_subscriptions``, decoder limits and tolerances).

    ``headers`` go on every CONNECT, a reconnect's too (``client-id`` for ActiveMQ's durable topic
    subscriptions, a vendor's headers; those the other arguments write are refused).
    ``on_unrouted(message)`` is called, in the event loop, with every MESSAGE that no subscription
    of the client and no waiting :meth:`Client.request` takes: a reply that came after its request
    gave up, a message for a subscription the client never made. It must not block; what it raises
    is logged. The default, :func:`log_unrouted`, logs a WARNING and drops the message. Messages
    still in flight for a subscription the client ended are dropped without a call. ``reply_to`` is
    where :meth:`Client.request`'s replies go: by default ``/temp-queue/fastframe-<random>``, a
    temporary queue of the connection on RabbitMQ, ActiveMQ and the in-memory broker; on a broker
    without temporary queues, name a queue only this client reads (the client subscribes to it
    once per connection). ``message_class`` builds each MESSAGE (see :attr:`Client.message_class`;
    the blocking client passes its own :class:`fastframe.sync.Message`, so each message is one
    object whichever client reads it).

    When a request fails (its ``timeout`` passes, it is cancelled, or the connection ends), what is
    left where:

    * ``send(receipt=True)``, ``ack``/``nack`` with a receipt, a transaction's COMMIT or ABORT: the
      frame went out and the broker may have acted on it; the receipt id is forgotten by the
      protocol connection (a RECEIPT that still comes is ignored); the connection stays open.
    * ``subscribe()``: no subscription is left. While connected, an UNSUBSCRIBE goes out (without a
      receipt); the protocol connection and the transport's flow control forget it. The messages
      that arrived for it before the failure are not lost: the exception's ``subscription`` holds
      them (iterate it; it ends after them, or raises the connection's error). In ``ack=client``
      modes they cannot be acknowledged any more: the broker redelivers them.
    * ``unsubscribe()``: the subscription is over locally at once (UNSUBSCRIBE went out).
    * ``disconnect()``: the socket is closed in every case; see its return value.
    * The connection ending fails every waiter at once with :class:`ConnectionClosedError` (its
      ``__cause__`` says why); with ``reconnect`` the client reconnects and re-subscribes.

    Heart-beats are checked while a full queue pauses reading: once the server's deadline passes,
    what waits in the socket is read into a side buffer of at most 64 KiB (not decoded, so no queue
    grows) and proves the server alive; a server that sends nothing within one more deadline is a
    :class:`HeartbeatTimeout`, after the messages already read were queued. Once the side buffer is
    full, the server counts as alive until the consumer catches up.

    STOMP over WebSocket: ``host`` (and any entry of ``servers``) may be a ``ws://`` or ``wss://``
    URL, e.g. ``"ws://127.0.0.1:15674/ws"`` (RabbitMQ Web-STOMP; ``port`` is then unused; ``ssl`` is
    the context for ``wss://``). It needs the ``ws`` extra (``pip install "fastframe[ws]"``). The
    upgrade offers the subprotocols ``v10.stomp``, ``v11.stomp``, ``v12.stomp`` of ``versions``;
    CONNECT then offers the version of the one the server chose, or all of ``versions`` when it
    chose none. Every frame and heart-beat goes out as a WebSocket message of its own (text when
    it is UTF-8, binary otherwise); what comes in may be split in any way, in text or binary
    messages. ``connect_timeout`` covers the upgrade; a message larger than ``max_frame_size`` ends
    the connection with :class:`fastframe.websocket.WebSocketError` (as its ``__cause__``) before
    its payload is read. Everything else (heart-beats, flow control, reconnect, hooks, which see
    the STOMP bytes) works as over TCP.
    """
    all_servers: List[ServerAddress] = [host if _is_url(host) else (host, port), *(servers or ())]
    for server in all_servers:
        _address(server)  # a URL that is not a WebSocket's is refused now, not at the first attempt
    client = Client(
        all_servers, ssl=ssl, login=login, passcode=passcode, host_header=host_header, versions=versions,
        heartbeat=heartbeat, timeout=timeout, connect_timeout=connect_timeout, max_queue=max_queue,
        reconnect=reconnect, frame_hook=frame_hook, wire_hook=wire_hook, rng=rng, options=options,
        coalesce_reads=coalesce_reads, headers=headers, on_unrouted=on_unrouted, reply_to=reply_to,
        message_class=message_class,
    )  # fmt: skip
    return _Connector(client)
