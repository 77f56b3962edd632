"""The blocking client: ``with connect(...) as client``; a :class:`fastframe.aio.Client` on a private loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import random
import ssl as _ssl
import threading
import time
from typing import Any, Awaitable, Callable, List, Optional, Sequence, Tuple, Type, TypeVar, Union

from .. import aio
from ..protocol import Headers, LocalProtocolError, header_list
from ._loop import CallTimeout, ConnectionClosedLater, LoopThread, Outbox, blocking_timeout, keep
from ._subscription import Message, Subscription, Transaction

__all__ = ["Client", "connect"]

T = TypeVar("T")
_JOIN = 5.0  # seconds to wait for the I/O thread and callback workers to end when closing
_VERDICT = 1.0  # seconds a caller whose call started waits past its timeout for the loop's own verdict


class Client:
    """A STOMP client whose calls block; make one with :func:`connect`. Every method may be called from
    any thread; the frames go out whole, in the order of the calls."""

    def __init__(self, runner: LoopThread, outbox_limit: int, hooked: bool, timeout: float) -> None:
        # (made by connect(), before its asyncio client, which builds every message bound to this one)
        self._runner = runner
        self._hooked = hooked  # a frame_hook or wire_hook is set
        self._released = False
        self._inner: aio.Client = None  # type: ignore[assignment]  # (set by _attach, before any use)
        self._outbox = Outbox(runner, outbox_limit, self._send_one, self._send_batch)
        self._subscriptions: List[Subscription] = []
        self._over = threading.Event()  # the asyncio client is over: no reconnect left
        self._cause: Optional[BaseException] = None
        self._lock = threading.Lock()
        self._ids = 0
        self.timeout = timeout

    def _attach(self, inner: aio.Client) -> None:
        self._inner = inner
        self._runner.loop.call_soon_threadsafe(self._start_watch)

    async def _send_one(self, *args: Any, **kwargs: Any) -> None:
        await self._inner.send(*args, **kwargs)

    def _start_watch(self) -> None:
        keep(self._runner.loop.create_task(self._watch()))

    async def _watch(self) -> None:
        self._ended(await self._inner.wait_closed())

    def _ended(self, cause: Optional[BaseException]) -> None:
        if not self._over.is_set():
            self._cause = cause
            self._over.set()

    # ------------------------------------------------------------------ state

    @property
    def async_client(self) -> aio.Client:
        """The :class:`fastframe.aio.Client` underneath (call its coroutines on :attr:`loop` only)."""
        return self._inner

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The private event loop (its thread runs the socket, heart-beats, hooks)."""
        return self._runner.loop

    @property
    def is_connected(self) -> bool:
        """Whether a session is connected now."""
        return not self._over.is_set() and self._inner.is_connected

    @property
    def version(self) -> Optional[str]:
        """The negotiated STOMP version of the current session."""
        return self._inner.version

    @property
    def connections(self) -> int:
        """How many sessions reached CONNECTED (1 after connect, +1 per reconnect)."""
        return self._inner.connections

    @property
    def server(self) -> Optional[Any]:
        """The ``Connected`` event of the current session (its ``frame``, ``version``, ``heartbeat``)."""
        session = self._inner.session
        if session is None or not session.connected.done() or session.connected.exception() is not None:
            return None
        return session.connected.result()

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}{self._ids}"

    # ------------------------------------------------------------------ the road to the loop

    def _check(self) -> None:
        failure, self._outbox.failure = self._outbox.failure, None
        if failure is not None:
            raise failure
        if self._over.is_set():
            raise self._closed_error()

    def _closed_error(self) -> aio.ConnectionClosedError:
        cause = self._cause
        if isinstance(cause, aio.ConnectionClosedError):
            return cause
        error = aio.ConnectionClosedError(f"the client is closed: {cause}" if cause else "the client is closed")
        error.__cause__ = cause
        return error

    def _post(self, call: Callable[..., Awaitable[Any]], /, *args: Any, **kwargs: Any) -> None:
        """Queue ``call(*args, **kwargs)`` (a coroutine function the loop runs) nobody waits for; a
        failure is raised by the next call."""
        self._check()
        try:
            self._outbox.put(call, args, kwargs, None, self.timeout)
        except ConnectionClosedLater:
            raise self._closed_error() from None

    def _call(self, timeout: Optional[float], call: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """Queue ``call(*args, **kwargs)`` (a coroutine function the loop runs) and wait for its
        result (at most ``timeout``, the client's when None)."""
        if self._runner.in_loop:
            raise RuntimeError("a blocking fastframe.sync call from the client's own I/O thread (a hook?)")
        self._check()
        limit = self.timeout if timeout is None else timeout
        waiter: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            self._outbox.put(call, args, kwargs, waiter, limit)
        except ConnectionClosedLater:
            raise self._closed_error() from None
        try:
            try:
                return waiter.result(limit)
            except concurrent.futures.TimeoutError:
                if waiter.done():
                    raise  # the call's own verdict (a CallTimeout), not the end of this wait
                if waiter.cancel():  # not run yet: it never will
                    raise CallTimeout(written=False) from None
                return waiter.result(_VERDICT)  # it runs with the same deadline: its verdict is due
        except CallTimeout as exc:
            if exc.written:
                raise TimeoutError(f"no answer within {limit} s (the frame was sent)") from exc.__cause__
            raise TimeoutError(f"not sent: the connection did not take the call within {limit} s") from None
        except BaseException as exc:
            error = blocking_timeout(exc)
            if error is exc:
                raise
            raise error from exc

    # ------------------------------------------------------------------ the API

    def send(
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
        """SEND. Without a receipt it returns once the frame is queued for the I/O thread (as a socket
        write returns once the kernel has the bytes); with ``receipt=True`` once the server confirmed it.
        ``content_length=False``: no ``content-length`` header (ActiveMQ makes a TextMessage; see
        :meth:`fastframe.aio.Client.send`); a body holding a NUL is refused at once."""
        if not content_length:
            if isinstance(body, str):
                body = body.encode("utf-8")
                content_type = content_type or "text/plain;charset=utf-8"
            if b"\0" in body:  # (refused here, not by the next call: the frame never leaves)
                raise LocalProtocolError("cannot SEND a body holding a NUL with content_length=False", None)
            if not receipt:
                self._post(
                    self._inner.send, destination, body, headers,
                    content_type=content_type, transaction=transaction, content_length=False,
                )  # fmt: skip
                return
        if not receipt:
            outbox = self._outbox
            if outbox.failure is not None or self._over.is_set():
                self._check()
            try:
                outbox.post_send((destination, body, headers, content_type, transaction), self.timeout)
            except ConnectionClosedLater:
                raise self._closed_error() from None
            return
        self._call(
            timeout, self._inner.send, destination, body, headers,
            content_type=content_type, transaction=transaction, receipt=True, timeout=timeout,
            content_length=content_length,
        )  # fmt: skip

    def _send_batch(self, batch: List[Tuple[Any, ...]], failed: Callable[[BaseException], None]) -> int:
        """(On the loop) SENDs nobody waits for, ``(destination, body, headers, content_type, transaction)``
        each, written as one write when the session takes them at once; how many were handled (sent,
        or failed to ``failed``): the rest must wait (a reconnect runs, the write buffer is full)."""
        inner = self._inner
        session = inner.session
        if self._hooked or session is None or not inner.is_connected or not session.writable:
            # frame and wire hooks see one write per frame: send_nowait's own path, one by one
            for done, (destination, body, headers, content_type, tx) in enumerate(batch):
                try:
                    if not inner.send_nowait(destination, body, headers, content_type=content_type, transaction=tx):
                        return done
                except Exception as exc:
                    failed(exc)
            return len(batch)
        data, refused = session.conn.send_many(batch)  # (a frame the connection refuses: the others go)
        for _, error in refused:
            failed(error)
        if data:
            try:
                session.write(data)
            except Exception as exc:
                failed(exc)
        return len(batch)

    def subscribe(
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
        on_message: Optional[Callable[[Message], Any]] = None,
        on_error: Optional[Callable[[BaseException], Any]] = None,
    ) -> Subscription:
        """SUBSCRIBE and return the :class:`Subscription` (an iterator of :class:`Message`).

        With ``on_message`` a worker thread of the subscription calls it for each message, in order
        (an exception it raises is logged, the next message follows); ``on_error(exc)`` is called
        once if the subscription ends with an error (logged when it is not given). ``columns=True``:
        each read's messages come as one :class:`fastframe.Columns` instead (see
        :meth:`fastframe.aio.Client.subscribe`), to iteration and ``on_message`` alike.
        """
        sub = Subscription(
            self, id or self._new_id("sub-"), destination, ack, header_list(headers), max_queue or self._inner.max_queue,
            self._runner.loop, self._ended, columns,
        )  # fmt: skip
        self._call(timeout, self._inner.subscribe_into, sub, receipt=receipt, timeout=timeout)
        self._subscriptions.append(sub)
        if on_message is not None:
            sub.start_worker(on_message, on_error)
        return sub

    def unsubscribe(self, sub: Subscription, *, receipt: bool = True, timeout: Optional[float] = None) -> None:
        """UNSUBSCRIBE ``sub`` (what ``sub.unsubscribe()`` does); its iteration stops after the queued messages."""
        self._call(timeout, self._inner.unsubscribe, sub, receipt=receipt, timeout=timeout)
        sub.join_worker(_JOIN)

    def ack(
        self,
        message: Union[Message, str],
        *,
        subscription: Optional[str] = None,
        transaction: Optional[str] = None,
        receipt: bool = False,
        timeout: Optional[float] = None,
    ) -> None:
        """ACK ``message`` (what ``message.ack()`` does), or an id kept from one: its ``ack_id`` or
        ``message-id`` (stomp.py's ``conn.ack(id, subscription)``; see :meth:`fastframe.aio.Client.ack`).
        Without a receipt an id this connection does not know is refused by the next call."""
        self._settle(self._inner.ack, message, subscription, transaction, receipt, timeout)

    def nack(
        self,
        message: Union[Message, str],
        *,
        subscription: Optional[str] = None,
        transaction: Optional[str] = None,
        receipt: bool = False,
        timeout: Optional[float] = None,
    ) -> None:
        """NACK ``message`` (what ``message.nack()`` does; STOMP 1.1 and later); ids as for :meth:`ack`."""
        self._settle(self._inner.nack, message, subscription, transaction, receipt, timeout)

    def _settle(
        self, method: Any, message: Union[Message, str], subscription: Optional[str], tx: Optional[str],
        receipt: bool, timeout: Any,
    ) -> None:  # fmt: skip
        if isinstance(message, Message):
            if message.session is not self._inner.session:  # (checked again on the loop)
                raise aio.StaleMessageError("cannot settle a message of an earlier connection; it will be redelivered")
        target = message
        if receipt:
            self._call(
                timeout, method, target, subscription=subscription, transaction=tx, receipt=True, timeout=timeout
            )
        else:
            self._post(method, target, subscription=subscription, transaction=tx, receipt=False, timeout=timeout)

    def request(
        self,
        destination: str,
        body: Union[bytes, str] = b"",
        headers: Headers = None,
        *,
        content_type: Optional[str] = None,
        content_length: bool = True,
        timeout: Optional[float] = None,
    ) -> Message:
        """SEND a request with ``reply-to`` and ``correlation-id`` and return the reply; what
        :meth:`fastframe.aio.Client.request` does (a reply after ``timeout`` goes to ``on_unrouted``,
        never to another request; :class:`TimeoutError` then). Any number of threads may wait at once:
        the SEND goes out in call order with the others, and the wait for the reply is the caller's
        alone (no other call waits behind it)."""
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        reply: asyncio.Future[Message] = self._call(
            limit, self._inner.start_request,  # type: ignore[arg-type]  # (replies: built by our message_class)
            destination, body, headers,
            content_type=content_type, content_length=content_length, timeout=limit,
        )  # fmt: skip
        arrived: concurrent.futures.Future[Message] = concurrent.futures.Future()
        self._runner.loop.call_soon_threadsafe(reply.add_done_callback, functools.partial(_hand_over, arrived))
        try:
            return arrived.result(max(0.0, deadline - time.monotonic()))  # (the connection built it: one of ours)
        except concurrent.futures.TimeoutError:
            self._runner.loop.call_soon_threadsafe(reply.cancel)  # its reply, if it comes, is unrouted
            raise TimeoutError(f"no reply within {limit} s") from None

    def transaction(self, *, id: Optional[str] = None, timeout: Optional[float] = None) -> Transaction:
        """``with client.transaction() as tx``: BEGIN, then COMMIT (or ABORT when the block raises)."""
        return Transaction(self, id or self._new_id("tx-"), timeout)

    def begin(self, tx: str, *, timeout: Optional[float] = None) -> None:
        """BEGIN transaction ``tx`` (queued like a SEND: nothing to wait for)."""
        self._post(self._inner.begin, tx, timeout=timeout)

    def commit(self, tx: str, *, timeout: Optional[float] = None) -> None:
        """COMMIT ``tx``, waiting for its receipt."""
        self._call(timeout, self._inner.commit, tx, timeout=timeout)

    def abort(self, tx: str, *, timeout: Optional[float] = None) -> None:
        """ABORT ``tx``, waiting for its receipt."""
        self._call(timeout, self._inner.abort, tx, timeout=timeout)

    def flush(self, *, timeout: Optional[float] = None) -> None:
        """Wait until every call made before this one has been handed to the connection."""
        self._call(timeout, _nothing)

    # ------------------------------------------------------------------ ending

    def disconnect(self, *, timeout: Optional[float] = None) -> bool:
        """What was queued goes out, then DISCONNECT with a receipt, then the socket and the I/O thread
        close; whether the RECEIPT confirmed it (see :meth:`fastframe.aio.Client.disconnect`)."""
        limit = self.timeout if timeout is None else timeout
        if self._over.is_set() or not self._runner.running:
            self.close()
            return False
        try:
            return self._call(limit, self._disconnect, limit)
        finally:
            self._shut_down()

    async def _disconnect(self, limit: float) -> bool:
        return await self._inner.disconnect(timeout=limit)

    def close(self) -> None:
        """Close the socket now, without DISCONNECT: every waiter (a thread blocked in ``get()`` too)
        fails at once with :class:`fastframe.aio.ConnectionClosedError`."""
        self._outbox.close()  # (calls still queued fail with the connection: the user knows why)
        if self._runner.running:
            try:
                self._runner.run(self._inner.close(), self.timeout + 1.0)
            except (aio.ConnectionClosedError, TimeoutError, RuntimeError):
                pass
        self._shut_down()

    def _shut_down(self) -> None:
        self._outbox.close()
        self._over.set()
        with self._lock:
            released, self._released = self._released, True
        if not released:
            self._runner.release(_JOIN)
        error = self._closed_error()
        for sub in self._subscriptions:
            sub.end(error)  # (when the loop's end cut the client's own short: its consumers wake all the same)
            sub.join_worker(_JOIN)

    def wait_closed(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """Wait (at most ``timeout``: :class:`TimeoutError`) until the client is over (no reconnect
        left); return the cause (``None``: disconnected)."""
        if not self._over.wait(timeout):
            raise TimeoutError(f"the client is still open after {timeout} s")
        return self._cause

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Any) -> None:
        if exc_type is None and self.is_connected:
            self.disconnect()
        else:
            self.close()


async def _nothing() -> None:
    return None


def _hand_over(arrived: concurrent.futures.Future[T], reply: asyncio.Future[T]) -> None:
    """(On the loop) what an asyncio future came to, to the future a thread waits on."""
    if reply.cancelled():
        arrived.cancel()
    elif reply.exception() is not None:
        arrived.set_exception(reply.exception())
    else:
        arrived.set_result(reply.result())


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
    max_queue: int = 1000,
    reconnect: Optional[aio.Reconnect] = None,
    servers: Optional[Sequence[Union[Tuple[str, int], str]]] = None,
    frame_hook: Optional[Callable[[str, Optional[Any]], None]] = None,
    wire_hook: Optional[Callable[[str, bytes], None]] = None,
    rng: Optional[random.Random] = None,
    coalesce_reads: float = 0.02,
    outbox: int = 10_000,
    headers: Headers = None,
    on_unrouted: Optional[Callable[[Message], Any]] = None,
    reply_to: Optional[str] = None,
    **options: Any,
) -> Client:
    """Connect to a STOMP server and return the :class:`Client` (``with connect(...) as client``).

    The options are :func:`fastframe.aio.connect`'s, with the same meaning (``reconnect``,
    ``servers``, ``heartbeat``, ``ssl``, the hooks, and the :class:`fastframe.protocol.ClientConnection`
    options such as ``escapes`` and the decoder's tolerances), except two defaults. ``coalesce_reads``
    is 20 ms (the asyncio client's is 2 ms): each read of a stream costs this client a hand-over to
    the consumer's thread (wake-ups and the GIL passed), so longer rests between the reads of a
    stream save more here; a lone message and the answer to what the process just sent are still
    read at once. ``max_queue`` is 1,000 (the asyncio client's is 100): a subscription holds at most
    1,000 messages, as ActiveMQ's clients prefetch 1,000 (twice that while a receipt is awaited,
    plus the rest of one socket read: see :attr:`Subscription.held`), so what arrives during a
    rest is taken in few wake-ups. ``frame_hook`` and ``wire_hook`` run
    in the client's I/O thread: they must not block nor call the client. ``outbox``: how many calls
    nobody waits for (SEND, ACK without a receipt) may wait for the I/O thread before a caller blocks
    (at most ``timeout``). Raises what :func:`fastframe.aio.connect` raises (``ServerError`` for an
    ERROR answer to CONNECT, :class:`TimeoutError`, ``ConnectionClosedError``). Each attempt waits at
    most ``connect_timeout``; with a ``reconnect`` policy of unlimited attempts, connecting goes on
    until one succeeds (Ctrl-C stops it), as with :func:`fastframe.aio.connect`. ``host`` (and any
    entry of ``servers``) may be a ``ws://`` or ``wss://`` URL: STOMP over WebSocket, as with
    :func:`fastframe.aio.connect` (the ``ws`` extra).

    ``headers`` (on every CONNECT), ``reply_to`` (:meth:`Client.request`'s replies) and
    ``on_unrouted`` are :func:`fastframe.aio.connect`'s; ``on_unrouted(message)`` gets a
    :class:`Message` of this client, in the I/O thread: it must not block nor wait for the client
    (the default logs a WARNING and drops the message).
    """
    runner = LoopThread.acquire()
    client = Client(runner, outbox, frame_hook is not None or wire_hook is not None, timeout)

    async def opening() -> aio.Client:
        return await aio.connect(
            host, port, ssl=ssl, login=login, passcode=passcode, host_header=host_header, versions=versions,
            heartbeat=heartbeat, timeout=timeout, connect_timeout=connect_timeout, max_queue=max_queue,
            reconnect=reconnect, servers=servers, frame_hook=frame_hook, wire_hook=wire_hook, rng=rng,
            coalesce_reads=coalesce_reads, headers=headers, reply_to=reply_to,
            on_unrouted=on_unrouted,  # type: ignore[arg-type]  # (it gets this client's messages: message_class)
            message_class=functools.partial(Message, client=client), **options,
        )  # fmt: skip

    try:
        inner = runner.run(opening(), None)  # (each attempt is bounded by connect_timeout)
    except BaseException:
        runner.release(_JOIN)
        raise
    client._attach(inner)
    return client
