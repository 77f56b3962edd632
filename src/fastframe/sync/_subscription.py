"""What the blocking client's subscriptions yield, the subscriptions (bounded queues read from any
thread), the worker thread of ``on_message`` callbacks, and transactions.

A subscription has two halves: the :class:`fastframe.aio.Subscription` on the client's loop, whose
bounded queue pauses reading from the socket when full, and a queue here that user threads take
from. A pump task on the loop moves messages from the first to the second in batches (one
``get_batch`` call each), and stops moving them while the second is full: the first then fills and
reading pauses, so memory stays bounded while a consumer sleeps: at most twice ``max_queue``
messages per subscription, a quarter of ``max_queue`` on the loop (:func:`loop_share`), the rest
here (a quarter more while a receipt is awaited, when the asyncio half reads on to twice its bound
for the RECEIPT), plus the rest of the socket read that filled the asyncio half (a read is at
most 256 KiB: the read is queued whole); ``held`` counts both halves. The larger thread half makes
each wake-up of a pump waiting for room move more messages: every wake-up crosses threads.

A consumer takes a queued message without the lock (a deque's popleft is atomic), and the pump
hands a batch over without it too (a deque's extend of a list is atomic): a consumer that finds
the queue empty counts itself among the waiting under the lock, then looks once more; the pump
looks at that count after its extend and takes the lock to notify only when someone waits, so a
batch is never missed and nobody is woken per message. The pump's check for room happens under
the lock, where a consumer wakes it, so a pump waiting for room is not missed either. When the
client ends, the pump takes what the asyncio half still holds past the bound, then ends.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, Iterator, List, Optional, Protocol, Tuple, Type, Union

from .. import aio
from ._loop import keep

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["ClientLike", "Message", "Subscription", "Transaction", "loop_share"]

log = logging.getLogger("fastframe.sync")
Headers = Optional[Union[Dict[str, str], List[Tuple[str, str]]]]


class ClientLike(Protocol):
    """What messages, subscriptions and transactions call on their client (:class:`fastframe.sync.Client`):
    its public methods (this module does not import the client's, which imports this one)."""

    @property
    def is_connected(self) -> bool:
        """Whether a session is connected now."""

    def send(
        self,
        destination: str,
        body: Union[bytes, str] = b"",
        headers: Headers = None,
        *,
        content_type: Optional[str] = None,
        transaction: Optional[str] = None,
    ) -> None:
        """SEND."""

    def ack(self, message: Message, *, transaction: Optional[str], receipt: bool, timeout: Optional[float]) -> None:
        """ACK ``message``."""

    def nack(self, message: Message, *, transaction: Optional[str], receipt: bool, timeout: Optional[float]) -> None:
        """NACK ``message``."""

    def unsubscribe(self, sub: Subscription, *, receipt: bool, timeout: Optional[float]) -> None:
        """UNSUBSCRIBE ``sub``."""

    def begin(self, tx: str, *, timeout: Optional[float]) -> None:
        """BEGIN ``tx``."""

    def commit(self, tx: str, *, timeout: Optional[float]) -> None:
        """COMMIT ``tx``."""

    def abort(self, tx: str, *, timeout: Optional[float]) -> None:
        """ABORT ``tx``."""


class Message:
    """A MESSAGE delivered to a subscription: ``body`` (bytes), ``frame``, header lookups, the ids, and
    blocking ``ack()``/``nack()`` (callable from any thread)."""

    __slots__ = ("_message", "_client", "body")
    body: bytes  #: The body, NULs included.

    def __init__(self, message: aio.Message, client: ClientLike) -> None:
        self._message = message
        self._client = client
        self.body = message.frame.body  # (a slot: read by the consumer thread without a property call)

    @property
    def event(self) -> aio.Message:
        """The :class:`fastframe.aio.Message` (the protocol's ``Message`` event) under this one."""
        return self._message

    @property
    def frame(self) -> Any:
        """The :class:`fastframe.Frame`."""
        return self._message.frame

    @property
    def headers(self) -> Tuple[Tuple[str, str], ...]:
        """The headers in wire order, repeats kept."""
        return self._message.headers

    @property
    def subscription(self) -> Optional[str]:
        """The ``subscription`` header: the id of the subscription it came to (``None`` in STOMP 1.0)."""
        return self._message.subscription

    @property
    def message_id(self) -> Optional[str]:
        """The ``message-id`` header."""
        return self._message.message_id

    @property
    def ack_id(self) -> Optional[str]:
        """What an ACK or NACK of this message names (STOMP 1.2's ``ack`` header, else ``message-id``)."""
        return self._message.ack_id

    @property
    def destination(self) -> Optional[str]:
        """The ``destination`` header."""
        return self._message.destination

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """The first value of header ``name``."""
        return self._message.get(name, default)

    def text(self, default_charset: Optional[str] = None) -> str:
        """The body decoded by its content-type (see :func:`fastframe.spec.body_text`)."""
        return self._message.text(default_charset)

    def ack(self, *, transaction: Optional[str] = None, receipt: bool = False, timeout: Optional[float] = None) -> None:
        """Acknowledge (``client`` mode: this and the older messages of the subscription)."""
        self._client.ack(self, transaction=transaction, receipt=receipt, timeout=timeout)

    def nack(
        self, *, transaction: Optional[str] = None, receipt: bool = False, timeout: Optional[float] = None
    ) -> None:
        """Refuse the message (STOMP 1.1 and later)."""
        self._client.nack(self, transaction=transaction, receipt=receipt, timeout=timeout)

    def __repr__(self) -> str:
        return f"<Message {self.message_id!r} on {self.destination!r}, {len(self.body)} bytes>"


def loop_share(max_queue: int) -> int:
    """The bound of a subscription's asyncio half: a quarter of ``max_queue`` (at least 1). The
    thread half holds the rest of twice ``max_queue``, so a consumer that wakes the pump moves more
    than half a ``max_queue`` across threads per wake-up (each one a wake of the I/O thread)."""
    return max(1, max_queue // 4)


class Subscription:
    """An iterator of :class:`Message` (``for message in sub``), readable from any thread; ``get(timeout=)``
    waits at most that long (:class:`TimeoutError`) so a loop can wake up. ``with`` unsubscribes on exit.

    Iteration stops after the queued messages once the subscription ends cleanly (unsubscribe,
    disconnect); when the connection ends it raises the cause (:class:`fastframe.aio.ConnectionClosedError`
    and its kinds) after the messages that arrived before it.
    """

    def __init__(
        self,
        client: ClientLike,
        inner: aio.Subscription,
        max_queue: int,
        loop: asyncio.AbstractEventLoop,
        client_ended: Callable[[BaseException], None],
        on_message: Optional[Callable[[Message], Any]] = None,
        on_error: Optional[Callable[[BaseException], Any]] = None,
    ) -> None:
        # (made on the loop, by the client: the pump starts with it, and the worker of ``on_message``)
        self._client = client
        self._loop = loop
        self._client_ended = client_ended  # an error ends a subscription only when it ends the client
        self._inner = inner
        self.max_queue = max_queue
        self._bound = 2 * max_queue - loop_share(max_queue)  # this half's (the asyncio half has the rest)
        self._low = self._bound // 2  # a waiting pump is woken once the consumers took half of it
        self._queue: Deque[Message] = collections.deque()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._ended = False
        self._error: Optional[BaseException] = None
        self._waiting = 0  # consumers waiting for a batch (changed under _lock, read by the pump without it)
        self._pump_waits = False  # the pump waits for room (set under _lock, cleared under _room_lock)
        self._room_lock = threading.Lock()  # one consumer wakes a waiting pump, once
        self._ending = False  # the client is ending: the pump no longer waits for room
        self._room = asyncio.Event()  # (the loop's)
        self._pump: Optional[asyncio.Task[None]] = keep(loop.create_task(self._run_pump()))
        self.worker: Optional[threading.Thread] = None  #: the ``on_message`` thread, if any
        if on_message is not None:
            self._start_worker(on_message, on_error)

    @property
    def id(self) -> str:
        """The subscription's id (the SUBSCRIBE's ``id`` header; MESSAGEs name it)."""
        return self._inner.id

    @property
    def destination(self) -> str:
        """The destination subscribed to."""
        return self._inner.destination

    @property
    def ack(self) -> str:
        """The ack mode: ``"auto"``, ``"client"`` or ``"client-individual"``."""
        return self._inner.ack

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def held(self) -> int:
        """How many messages the subscription holds, not yet taken: its queue here and its asyncio
        half (at most twice ``max_queue``, plus a quarter of ``max_queue`` while a receipt is awaited,
        plus the rest of the socket read that filled the asyncio half: at most 256 KiB)."""
        return len(self._queue) + len(self._inner)

    # ------------------------------------------------------------------ the loop's half

    async def _run_pump(self) -> None:
        inner, client, queue = self._inner, self._client, self._queue
        take, take_batch = inner.__anext__, inner.get_batch
        room = self._room
        try:
            while True:
                with self._lock:
                    space = self._bound - len(queue)
                    full = space <= 0 and not self._ending
                    if full:
                        room.clear()
                        self._pump_waits = True
                if full:
                    await room.wait()  # the consumer sets it once half the queue is taken
                    continue
                batch = take_batch(space)  # what is queued, up to the room left (no wait, no coroutine)
                if not batch:
                    batch = [await take()]
                    batch += take_batch(space - 1)
                queue.extend([Message(message, client) for message in batch])  # (atomic, as popleft is)
                if self._waiting:  # a consumer waits: it announced so under the lock before its last look
                    with self._lock:
                        self._ready.notify()
        except StopAsyncIteration:
            self._end(None)
        except asyncio.CancelledError:
            self._end(aio.ConnectionClosedError("the client was closed"))
            raise
        except BaseException as exc:
            self._client_ended(exc)  # first: a consumer that wakes finds the client over too
            self._end(exc)

    def _last_batch(self) -> None:
        """(On the loop) The client is ending, so the asyncio half gets no more messages: the pump
        takes what it holds without waiting for room (at most twice ``max_queue``), then ends."""
        self._ending = True
        if self._room is not None:
            self._room.set()

    def _end(self, error: Optional[BaseException]) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended, self._error = True, error
            self._ready.notify_all()

    # ------------------------------------------------------------------ the consumers' half

    def get(self, *, timeout: Optional[float] = None) -> Message:
        """The next message; waits at most ``timeout`` seconds (:class:`TimeoutError`; ``None``: until
        a message comes or the subscription ends). Once the queue is empty after the end, it raises
        the connection's error, or :class:`fastframe.aio.ConnectionClosedError` after a clean end
        (where iteration stops)."""
        try:
            message = self._queue.popleft()  # a queued message takes no lock (a deque's popleft is atomic)
        except IndexError:
            return self._wait(timeout)
        if self._pump_waits and len(self._queue) <= self._low:
            self._wake_pump()
        return message

    def _wait(self, timeout: Optional[float]) -> Message:
        # the queue was empty: wait under the lock, where the pump's check for room happens too, so a
        # pump waiting for room is not missed; a batch is not missed either: the pump looks at
        # _waiting after it queued the batch, a consumer looks at the queue after it raised _waiting
        with self._lock:
            queue = self._queue
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                try:
                    message = queue.popleft()
                    break
                except IndexError:  # (still empty, or a consumer that takes without the lock was first)
                    pass
                if self._pump_waits:
                    self._wake_pump()  # (emptied without a look at the pump: others took it)
                if self._ended:
                    raise self._error or aio.ConnectionClosedError("the subscription ended")
                if deadline is None:
                    left = None
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"no message within {timeout} s")
                self._waiting += 1
                try:
                    if not queue:
                        self._ready.wait(left)
                finally:
                    self._waiting -= 1
            if queue and self._waiting:
                self._ready.notify()  # (another consumer waits: a batch came with one notify)
            if self._pump_waits and len(queue) <= self._low:
                self._wake_pump()
        return message

    def _wake_pump(self) -> None:
        with self._room_lock:
            if not self._pump_waits:
                return  # (another consumer woke it)
            self._pump_waits = False
        room = self._room
        assert room is not None
        try:
            self._loop.call_soon_threadsafe(room.set)
        except RuntimeError:
            pass  # the loop is closed: the subscription has ended

    def __iter__(self) -> Iterator[Message]:
        queue, low = self._queue, self._low
        while True:
            try:
                message = queue.popleft()  # (what get() does, without a call per message)
            except IndexError:
                try:
                    message = self._wait(None)
                except aio.ConnectionClosedError:
                    if self._ended and self._error is None:
                        return  # ended cleanly
                    raise
            else:
                if self._pump_waits and len(queue) <= low:
                    self._wake_pump()
            yield message

    def unsubscribe(self, *, receipt: bool = True, timeout: Optional[float] = None) -> None:
        """UNSUBSCRIBE (waiting for the receipt); iteration stops after the queued messages."""
        self._client.unsubscribe(self, receipt=receipt, timeout=timeout)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if not self._ended and self._client.is_connected:
            try:
                self.unsubscribe()
            except aio.ConnectionClosedError:
                pass

    # ------------------------------------------------------------------ callbacks

    def _start_worker(
        self, on_message: Callable[[Message], Any], on_error: Optional[Callable[[BaseException], Any]]
    ) -> None:
        def work() -> None:
            try:
                for message in self:
                    try:
                        on_message(message)
                    except Exception:  # one failing message does not end the subscription (nor its ack)
                        log.exception("on_message failed for %r on %s", message, self.id)
            except Exception as exc:
                if on_error is None:
                    log.error("subscription %s ended: %r", self.id, exc)
                    return
                try:
                    on_error(exc)
                except Exception:
                    log.exception("on_error failed on %s", self.id)

        self.worker = threading.Thread(target=work, name=f"fastframe-sync-{self.id}", daemon=True)
        self.worker.start()

    def _join_worker(self, timeout: float) -> None:
        worker = self.worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout)


class Transaction:
    """``with client.transaction() as tx``: BEGIN on entry, COMMIT on a normal exit (waiting for its
    receipt), ABORT when the block raises."""

    def __init__(self, client: ClientLike, id: str, timeout: Optional[float]) -> None:
        self.id = id
        self._client = client
        self._timeout = timeout

    def send(
        self,
        destination: str,
        body: Union[bytes, str] = b"",
        headers: Headers = None,
        *,
        content_type: Optional[str] = None,
    ) -> None:
        """SEND inside the transaction."""
        self._client.send(destination, body, headers, content_type=content_type, transaction=self.id)

    def ack(self, message: Message) -> None:
        """ACK inside the transaction."""
        message.ack(transaction=self.id)

    def nack(self, message: Message) -> None:
        """NACK inside the transaction."""
        message.nack(transaction=self.id)

    def __enter__(self) -> Transaction:
        self._client.begin(self.id, timeout=self._timeout)
        return self

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if exc_type is None:
            self._client.commit(self.id, timeout=self._timeout)
        elif self._client.is_connected:
            try:
                self._client.abort(self.id, timeout=self._timeout)
            except aio.ConnectionClosedError:
                pass
