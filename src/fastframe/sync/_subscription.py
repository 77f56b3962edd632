"""What the blocking client's subscriptions yield, the subscriptions (an inbox read from any
thread), the worker thread of ``on_message`` callbacks, and transactions.

A subscription is the asyncio client's rules with a condition instead of a waiter: one
:class:`fastframe.protocol.Inbox` (one bound, ``max_queue``, as the asyncio client's), filled on
the client's I/O thread by the asyncio client's one routing step (this class is its
:class:`fastframe.aio.Receiver`), taken from by any thread. Each message is one object, the
connection's ``message_class``: :class:`Message`.

A consumer takes a queued message without the lock (a deque's popleft is atomic) and the I/O
thread queues one without it too (an append is atomic): a consumer that finds the inbox empty
counts itself among the waiting under the lock, then looks once more; the I/O thread looks at
that count after its append and takes the lock to notify only when someone waits and none was
notified yet, so a message is never missed and nobody is woken per message. The inbox's pause
changes only on the I/O thread: a consumer that took it down to its resume mark asks the loop to
settle it (once), so the asking and the withdrawing of a pause happen in order.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Protocol, Tuple, Type, Union

from .. import aio
from ..protocol import Headers, Inbox, message_columns

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["ClientLike", "Message", "Subscription", "Transaction"]

log = logging.getLogger("fastframe.sync")


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


class Message(aio.BaseMessage):
    """A MESSAGE delivered to a subscription of the blocking client: a :class:`fastframe.aio.BaseMessage`
    (``body``, ``frame``, header lookups, the ids) with blocking ``ack()``/``nack()``, callable from
    any thread. The connection builds it, one object per message."""

    __slots__ = ()
    _client: ClientLike

    def ack(self, *, transaction: Optional[str] = None, receipt: bool = False, timeout: Optional[float] = None) -> None:
        """Acknowledge (``client`` mode: this and the older messages of the subscription)."""
        self._client.ack(self, transaction=transaction, receipt=receipt, timeout=timeout)

    def nack(
        self, *, transaction: Optional[str] = None, receipt: bool = False, timeout: Optional[float] = None
    ) -> None:
        """Refuse the message (STOMP 1.1 and later)."""
        self._client.nack(self, transaction=transaction, receipt=receipt, timeout=timeout)


class Subscription:
    """An iterator of :class:`Message` (``for message in sub``), readable from any thread; ``get(timeout=)``
    waits at most that long (:class:`TimeoutError`) so a loop can wake up. ``with`` unsubscribes on exit.

    It holds at most ``max_queue`` messages (reading pauses until half are taken), twice that while
    a receipt is awaited, plus the rest of the socket read that reached the bound (at most
    256 KiB): the asyncio client's rule (:class:`fastframe.aio.Subscription`).
    Iteration stops after the queued messages once the subscription ends cleanly (unsubscribe,
    disconnect); when the connection ends it raises the cause (:class:`fastframe.aio.ConnectionClosedError`
    and its kinds) after the messages that arrived before it.
    """

    #: whether the messages come as :class:`fastframe.Columns`, one per socket read (the asyncio
    #: client's :class:`fastframe.aio.ColumnSubscription` rule; ``max_queue`` then counts reads)
    columns = False

    def __init__(
        self,
        client: ClientLike,
        id: str,
        destination: str,
        ack: str,
        headers: List[Tuple[str, str]],
        max_queue: int,
        loop: asyncio.AbstractEventLoop,
        client_ended: Callable[[BaseException], None],
        columns: bool = False,
    ) -> None:
        self.columns = columns
        self._inbox: Inbox[Message] = Inbox(max_queue)
        self._inbox.wake = self._queued
        self.id = id  #: the subscription id (the SUBSCRIBE's ``id`` header)
        self.destination = destination  #: what it subscribed to
        self.ack = ack  #: its ack mode: ``auto``, ``client`` or ``client-individual``
        self.headers = headers  #: the SUBSCRIBE's other headers
        self.max_queue = max_queue
        self._client = client
        self._loop = loop
        self._client_ended = client_ended  # an error ends a subscription only when it ends the client
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._ended = False
        self._error: Optional[BaseException] = None
        self._waiting = 0  # consumers waiting (changed under _lock, read by the I/O thread without it)
        self._notified = False  # a waiting consumer was notified and has not woken yet
        self._settling = False  # a settle of the inbox is scheduled on the loop
        self.worker: Optional[threading.Thread] = None  #: the ``on_message`` thread, if any

    def __len__(self) -> int:
        return len(self._inbox)

    @property
    def inbox(self) -> Inbox[Message]:
        """The queue of messages (:class:`fastframe.protocol.Inbox`): the I/O thread fills it."""
        return self._inbox

    @property
    def held(self) -> int:
        """How many messages the subscription holds, not yet taken (at most ``max_queue``, twice that
        while a receipt is awaited, plus the rest of the socket read that reached the bound)."""
        return len(self._inbox)

    # ------------------------------------------------------------------ the I/O thread's side (aio.Receiver)

    def deliver(self, message: aio.BaseMessage, closing: bool) -> None:
        """(The client's routing, on the I/O thread) Queue ``message``; wake a waiting consumer."""
        inbox = self._inbox
        # (a columnar subscription's rows come as events only closing down: one type for every item)
        item = message_columns([message]) if self.columns else message
        if len(inbox.items) < inbox.room:
            inbox.items.append(item)  # type: ignore[arg-type]  # (what put() does below the bound, no call)
        else:
            inbox.put(item, message.session, closing)  # type: ignore[arg-type]
        self._queued()

    def _queued(self) -> None:
        # (also the inbox's wake: the session calls it after a read queued messages into the inbox)
        if self._waiting and not self._notified:  # a consumer announced its wait before its last look
            self._notified = True
            self._loop.call_soon(self._wake)  # once the read's other messages are queued too

    def _wake(self) -> None:
        # (on the loop, after the read that brought messages to a waiting consumer was dispatched:
        # woken at a burst's first message, the consumer would contend for the GIL with its decoding)
        with self._lock:
            self._ready.notify()

    def finish(self, error: Optional[BaseException]) -> None:
        """(The client) No more messages: iteration stops after the queued ones, or raises ``error``."""
        if error is not None:
            self._client_ended(error)  # first: a consumer that wakes finds the client over too
        self.end(error)

    def release(self) -> None:
        """(The client) Withdraw this subscription's pause of reading (it ended)."""
        self._inbox.release()

    def restart(self, session: Any) -> None:
        """(The client, after a reconnect) Unacknowledged messages of the old session are dropped:
        the broker redelivers them on the new one."""
        self._inbox.restart(session, keep=self.ack == "auto")

    def end(self, error: Optional[BaseException]) -> None:
        """End iteration after the queued messages (with ``error``, if not None); any thread."""
        with self._lock:
            if self._ended:
                return
            self._ended, self._error = True, error
            self._ready.notify_all()

    def _settle(self) -> None:
        # (on the loop) the pause changes where it was asked: in order with the I/O thread's puts
        self._settling = False
        inbox = self._inbox
        if len(inbox.items) <= inbox.settle_at:
            inbox.settle()

    def _settle_soon(self) -> None:
        # (a consumer thread) the inbox reached its resume mark: the loop settles it
        if not self._settling:
            self._settling = True
            try:
                self._loop.call_soon_threadsafe(self._settle)
            except RuntimeError:
                pass  # the loop is closed: the subscription has ended

    # ------------------------------------------------------------------ the consumers' side

    def get(self, *, timeout: Optional[float] = None) -> Message:
        """The next message; waits at most ``timeout`` seconds (:class:`TimeoutError`; ``None``: until
        a message comes or the subscription ends). Once the queue is empty after the end, it raises
        the connection's error, or :class:`fastframe.aio.ConnectionClosedError` after a clean end
        (where iteration stops)."""
        inbox = self._inbox
        try:
            message = inbox.items.popleft()  # a queued message takes no lock (a deque's popleft is atomic)
        except IndexError:
            return self._wait(timeout)
        if len(inbox.items) <= inbox.settle_at:
            self._settle_soon()
        return message

    def get_batch(self, limit: int) -> List[Message]:
        """Up to ``limit`` queued messages at once, oldest first, without waiting (an empty list when
        none is queued): what one socket read brought, without a call per message. Any number of
        threads may take at once (each message goes to one of them); wait with :meth:`get` first."""
        inbox = self._inbox
        popleft = inbox.items.popleft
        batch: List[Message] = []
        try:
            for _ in range(min(limit, len(inbox.items))):
                batch.append(popleft())  # (a deque's popleft is atomic: no lock)
        except IndexError:
            pass  # another consumer took the rest
        if len(inbox.items) <= inbox.settle_at:
            self._settle_soon()
        return batch

    def _wait(self, timeout: Optional[float]) -> Message:
        # the inbox was empty: wait under the lock. A message is not missed: the I/O thread looks at
        # _waiting after its append, a consumer looks at the inbox after it raised _waiting
        inbox = self._inbox
        items = inbox.items
        with self._lock:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                try:
                    message = items.popleft()
                    break
                except IndexError:  # (still empty, or a consumer that takes without the lock was first)
                    pass
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
                    if not items:
                        self._ready.wait(left)
                finally:
                    self._waiting -= 1
                    self._notified = False
            if items and self._waiting:
                self._notified = True
                self._ready.notify()  # (another consumer waits: one notify woke this one for many messages)
        if len(inbox.items) <= inbox.settle_at:
            self._settle_soon()
        return message

    def __iter__(self) -> Iterator[Message]:
        inbox = self._inbox
        items = inbox.items
        while True:
            try:
                message = items.popleft()  # (what get() does, without a call per message)
            except IndexError:
                try:
                    message = self._wait(None)
                except aio.ConnectionClosedError:
                    if self._ended and self._error is None:
                        return  # ended cleanly
                    raise
            else:
                if len(inbox.items) <= inbox.settle_at:
                    self._settle_soon()
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

    def start_worker(
        self, on_message: Callable[[Message], Any], on_error: Optional[Callable[[BaseException], Any]]
    ) -> None:
        """Call ``on_message`` for each message in a thread of the subscription's (:attr:`worker`);
        ``on_error`` once if it ends with an error (what ``subscribe(on_message=...)`` does)."""

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

    def join_worker(self, timeout: float) -> None:
        """Wait at most ``timeout`` s for the ``on_message`` thread to end (not from that thread)."""
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
