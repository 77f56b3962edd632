"""What subscriptions yield, the subscriptions themselves (bounded queues), and transactions.

They reach the client through :class:`ClientLike`, the client's public calls they make, so this
module does not import the client's (which imports this one).
"""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING, Any, Deque, Dict, List, Optional, Protocol, Tuple, Type, Union

from .. import spec
from ..protocol import Message as MessageEvent
from ._errors import ConnectionClosedError

if TYPE_CHECKING:
    from types import TracebackType


__all__ = ["ClientLike", "Message", "Subscription", "Transaction"]


class SessionLike(Protocol):
    """What messages and subscriptions call on the session that read them (``_transport.ClientSession``, which
    imports this module to build the messages it reads)."""

    def pause_reading(self, reason: object, *, hard: bool = False) -> None:
        """Stop reading from the socket until ``reason`` is withdrawn."""

    def resume_reading(self, reason: object) -> None:
        """Withdraw ``reason`` to pause reading."""


class ClientLike(Protocol):
    """What messages, subscriptions and transactions call on their client (:class:`fastframe.aio.Client`):
    its public methods."""

    @property
    def is_connected(self) -> bool:
        """Whether a session is connected now."""

    async def send(
        self,
        destination: str,
        body: Union[bytes, str] = b"",
        headers: Optional[Dict[str, str]] = None,
        *,
        content_type: Optional[str] = None,
        transaction: Optional[str] = None,
    ) -> None:
        """SEND."""

    async def ack(
        self, message: Message, *, transaction: Optional[str], receipt: bool, timeout: Optional[float]
    ) -> None:
        """ACK ``message``."""

    async def nack(
        self, message: Message, *, transaction: Optional[str], receipt: bool, timeout: Optional[float]
    ) -> None:
        """NACK ``message``."""

    async def unsubscribe(self, sub: Subscription, *, receipt: bool, timeout: Optional[float]) -> None:
        """UNSUBSCRIBE ``sub``."""

    async def begin(self, tx: str, *, timeout: Optional[float]) -> None:
        """BEGIN ``tx``."""

    async def commit(self, tx: str, *, timeout: Optional[float]) -> None:
        """COMMIT ``tx``."""

    async def abort(self, tx: str, *, timeout: Optional[float]) -> None:
        """ABORT ``tx``."""


class Message(MessageEvent):
    """A MESSAGE delivered to a subscription: the :class:`fastframe.protocol.Message` event itself
    (``frame``, ``subscription``, ``message_id``, ``ack_id``, ``destination``), plus ``body`` (bytes),
    header lookups and ``ack()``/``nack()``. The client's connection builds it as its
    ``message_class``, bound to the client and the session that read it: one object per message."""

    __slots__ = ("_client", "_session")
    # one delivery is one object: compared and hashed by identity, not by its fields
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def __init__(
        self,
        frame: Any,
        subscription: Optional[str] = None,
        message_id: Optional[str] = None,
        ack_id: Optional[str] = None,
        destination: Optional[str] = None,
        *,
        client: ClientLike,
        session: SessionLike,
    ) -> None:
        MessageEvent.__init__(self, frame, subscription, message_id, ack_id, destination)
        self._client, self._session = client, session

    @property
    def event(self) -> MessageEvent:
        """The :class:`fastframe.protocol.Message` event: this message itself."""
        return self

    @property
    def session(self) -> SessionLike:
        """The session (one TCP connection) that read the message."""
        return self._session

    @property
    def body(self) -> bytes:
        """The body, NULs included."""
        return self._frame.body  # type: ignore[no-any-return]

    @property
    def headers(self) -> Tuple[Tuple[str, str], ...]:
        """The headers in wire order, repeats kept."""
        return tuple(self._frame.headers)

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """The first value of header ``name``."""
        value = self._frame.get(name)
        return default if value is None else str(value)

    def text(self, default_charset: Optional[str] = None) -> str:
        """The body decoded by its content-type (see :func:`fastframe.spec.body_text`)."""
        return spec.body_text(self._frame, default_charset)

    async def ack(
        self, *, transaction: Optional[str] = None, receipt: bool = False, timeout: Optional[float] = None
    ) -> None:
        """Acknowledge (``client`` mode: this and the older messages of the subscription)."""
        await self._client.ack(self, transaction=transaction, receipt=receipt, timeout=timeout)

    async def nack(
        self, *, transaction: Optional[str] = None, receipt: bool = False, timeout: Optional[float] = None
    ) -> None:
        """Refuse the message (STOMP 1.1 and later)."""
        await self._client.nack(self, transaction=transaction, receipt=receipt, timeout=timeout)

    def __repr__(self) -> str:
        return f"<Message {self.message_id!r} on {self.destination!r}, {len(self.body)} bytes>"


class Subscription:
    """An async iterator of :class:`Message`; ``async with`` unsubscribes on exit.

    The queue holds at most ``max_queue`` messages: when it is full the client stops reading the
    socket and reads again once half of it is consumed, so memory stays bounded. While a receipt is
    awaited reading goes on up to twice ``max_queue`` (the RECEIPT may come behind MESSAGEs); past
    that a receipt wait ends at its deadline: set the broker's prefetch to bound what it sends.
    Each bound holds to one socket read: the read that fills the queue is queued whole, so the
    queue holds at most its bound plus the rest of that read (a read is at most 256 KiB).
    """

    def __init__(
        self, client: ClientLike, id: str, destination: str, ack: str, headers: List[Tuple[str, str]], max_queue: int
    ) -> None:
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        self.id = id  #: The subscription's id (the SUBSCRIBE's ``id`` header; MESSAGEs name it).
        self.destination = destination  #: The destination subscribed to.
        self.ack = ack  #: The ack mode: ``"auto"``, ``"client"`` or ``"client-individual"``.
        self.headers = headers
        self.max_queue = max_queue
        self._client = client
        self._queue: Deque[Message] = collections.deque()
        self._waiter: Optional[asyncio.Future[None]] = None
        self._end: Optional[BaseException] = None
        self._ended = False
        self._hard = False  # the queue reached twice its bound: even a receipt wait does not read on
        self._paused_on: Optional[SessionLike] = None  # the session this queue asked to pause reading

    def __len__(self) -> int:
        return len(self._queue)

    def _put(self, message: Message, closing: bool) -> None:
        queue = self._queue
        if closing and len(queue) >= 2 * self.max_queue:
            return  # disconnecting reads the socket freely: the queue keeps its hard bound, the rest is dropped
        queue.append(message)
        if len(queue) >= self.max_queue:
            hard = len(queue) >= 2 * self.max_queue
            session = message._session
            if session is not self._paused_on or hard is not self._hard:  # asked once per change
                self._hard, self._paused_on = hard, session
                session.pause_reading(self, hard=hard)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None  # woken once: the messages after this one need not look at it
            if not waiter.done():
                waiter.set_result(None)

    def _resume_reading(self) -> None:
        """Withdraw this queue's reason to pause reading (from the session it asked)."""
        session, self._paused_on = self._paused_on, None
        if session is not None:
            session.resume_reading(self)

    def _finish(self, error: Optional[BaseException]) -> None:
        """No more messages: iteration stops (``error`` None) or raises ``error`` once the queue is empty."""
        self._ended, self._end = True, error
        self._wake()

    def _drop_stale(self, session: SessionLike) -> None:
        """After a reconnect: drop unacknowledged messages of the old session; the broker redelivers them."""
        if self.ack != "auto":
            self._queue = collections.deque(m for m in self._queue if m._session is session)
        if len(self._queue) >= self.max_queue:
            self._hard, self._paused_on = False, session
            session.pause_reading(self)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Message:
        queue = self._queue
        if queue and self._paused_on is None and not self._hard:
            return queue.popleft()  # reading is not paused for this queue: _take would do no more
        if not self._hard and len(queue) > self.max_queue // 2 + 1:
            return queue.popleft()  # paused, but not yet half consumed: _take would do no more
        if queue:
            return self._take()  # no wait, no second coroutine
        try:
            return await self.get()
        except _Ended:
            raise StopAsyncIteration from None

    async def get(self, *, timeout: Optional[float] = None) -> Message:
        """The next message; waits at most ``timeout`` seconds (``asyncio.TimeoutError``)."""
        while not self._queue:
            if self._ended:
                if self._end is not None:
                    raise self._end
                raise _Ended("the subscription ended")
            self._waiter = waiter = asyncio.get_running_loop().create_future()
            try:
                if timeout is None:
                    await waiter  # (what wait_for does without a timeout, minus its coroutine)
                else:
                    await asyncio.wait_for(waiter, timeout)
            finally:
                self._waiter = None
        return self._take()

    def get_nowait(self) -> Message:
        """The next queued message without waiting (:class:`asyncio.QueueEmpty` when none is queued,
        whether or not the subscription ended)."""
        if not self._queue:
            raise asyncio.QueueEmpty
        return self._take()

    def get_batch(self, limit: int) -> List[Message]:
        """Up to ``limit`` queued messages at once, oldest first, without waiting (an empty list when
        none is queued): what ``limit`` calls of :meth:`get_nowait` take, with one look at flow control."""
        queue = self._queue
        if limit >= len(queue):
            batch = list(queue)
            queue.clear()
        else:
            popleft = queue.popleft
            batch = [popleft() for _ in range(limit)]
        if batch:
            self._taken(len(queue), batch[-1]._session)
        return batch

    def _take(self) -> Message:
        message = self._queue.popleft()
        self._taken(len(self._queue), message._session)
        return message

    def _taken(self, left: int, session: SessionLike) -> None:
        # messages were taken, ``left`` remain (the last taken was read by ``session``)
        if left <= self.max_queue // 2:
            if self._paused_on is not None:
                self._hard = False
                self._resume_reading()
        elif self._hard and left < 2 * self.max_queue:
            self._hard, self._paused_on = False, session
            session.pause_reading(self)  # below the hard bound: a receipt wait may read on

    async def unsubscribe(self, *, receipt: bool = True, timeout: Optional[float] = None) -> None:
        """UNSUBSCRIBE (waiting for the receipt); iteration stops after the queued messages."""
        await self._client.unsubscribe(self, receipt=receipt, timeout=timeout)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if not self._ended and self._client.is_connected:
            try:
                await self.unsubscribe()
            except ConnectionClosedError:
                pass


class _Ended(ConnectionClosedError):
    """Internal: a subscription ended cleanly."""


class Transaction:
    """A transaction: BEGIN on entry, COMMIT on a normal exit, ABORT when the block raises."""

    def __init__(self, client: ClientLike, id: str, timeout: Optional[float]) -> None:
        self.id = id
        self._client = client
        self._timeout = timeout

    async def send(
        self,
        destination: str,
        body: Union[bytes, str] = b"",
        headers: Optional[Dict[str, str]] = None,
        *,
        content_type: Optional[str] = None,
    ) -> None:
        """SEND inside the transaction."""
        await self._client.send(destination, body, headers, content_type=content_type, transaction=self.id)

    async def ack(self, message: Message) -> None:
        """ACK inside the transaction."""
        await message.ack(transaction=self.id)

    async def nack(self, message: Message) -> None:
        """NACK inside the transaction."""
        await message.nack(transaction=self.id)

    async def __aenter__(self) -> Transaction:
        await self._client.begin(self.id, timeout=self._timeout)
        return self

    async def __aexit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if exc_type is None:
            await self._client.commit(self.id, timeout=self._timeout)
        elif self._client.is_connected:
            try:
                await self._client.abort(self.id, timeout=self._timeout)
            except ConnectionClosedError:
                pass
