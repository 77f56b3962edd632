"""What subscriptions yield, the subscriptions themselves (an inbox and a waiter), and transactions.

They reach the client through :class:`ClientLike`, the client's public calls they make, so this
module does not import the client's (which imports this one).
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Protocol, Tuple, Type, Union

from ..protocol import Headers, Inbox, SlotMaker, message_columns, spec
from ..protocol import Message as MessageEvent
from ._errors import ConnectionClosedError

if TYPE_CHECKING:
    from types import TracebackType


__all__ = [
    "BaseMessage",
    "ClientLike",
    "Message",
    "Receiver",
    "SessionLike",
    "Subscription",
    "Transaction",
    "message_maker",
]


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
        headers: Headers = None,
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

    async def unsubscribe(self, sub: Receiver, *, receipt: bool, timeout: Optional[float]) -> None:
        """UNSUBSCRIBE ``sub``."""

    async def begin(self, tx: str, *, timeout: Optional[float]) -> None:
        """BEGIN ``tx``."""

    async def commit(self, tx: str, *, timeout: Optional[float]) -> None:
        """COMMIT ``tx``."""

    async def abort(self, tx: str, *, timeout: Optional[float]) -> None:
        """ABORT ``tx``."""


class BaseMessage(MessageEvent):
    """What both clients' messages are: the :class:`fastframe.protocol.Message` event itself
    (``frame``, ``subscription``, ``message_id``, ``ack_id``, ``destination``), plus ``body``
    (bytes), header lookups and the session that read it. The client's connection builds each
    MESSAGE as its ``message_class`` (one object per message); :class:`Message` (the asyncio
    client's) and :class:`fastframe.sync.Message` (the blocking client's) add ``ack()``/``nack()``."""

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
        client: Any,
        session: SessionLike,
    ) -> None:
        # the event's fields, then ``client`` (what ack() and nack() call: the subclass's client) and
        # the session; every slot set here, in one call (one per message received: no super call)
        self._frame = frame
        self._subscription = subscription
        self._message_id = message_id
        self._ack_id = ack_id
        self._destination = destination
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
        """The body decoded by its content-type (see :func:`fastframe.protocol.spec.body_text`)."""
        return spec.body_text(self._frame, default_charset)


#: the slots BaseMessage.__init__ fills, in the order of its arguments
_SLOTS = ("_frame", "_subscription", "_message_id", "_ack_id", "_destination", "_client", "_session")


def message_maker(message_class: Callable[..., BaseMessage], session: SessionLike) -> Callable[..., BaseMessage]:
    """What a session's connection builds each MESSAGE with: ``message_class`` called with the
    event's fields and ``session=``. The clients' own (``functools.partial(cls, client=...)`` of a
    :class:`BaseMessage` subclass whose ``__init__`` is BaseMessage's) becomes a
    :class:`fastframe.protocol.SlotMaker` filling the same slots, which the compiled codec builds
    without a Python call; anything else is called as given."""
    if (
        SlotMaker.compiled  # (the Python twin's is slower than the partial below)
        and type(message_class) is functools.partial
        and not message_class.args
        and list(message_class.keywords) == ["client"]
        and isinstance(message_class.func, type)
        and issubclass(message_class.func, BaseMessage)
        and message_class.func.__init__ is BaseMessage.__init__
    ):
        return SlotMaker(message_class.func, _SLOTS, (message_class.keywords["client"], session))
    return functools.partial(message_class, session=session)

    def __repr__(self) -> str:
        return f"<Message {self.message_id!r} on {self.destination!r}, {len(self.body)} bytes>"


class Message(BaseMessage):
    """A MESSAGE delivered to a subscription of the asyncio client: a :class:`BaseMessage` with
    ``await ack()`` and ``await nack()``, bound to the client that read it."""

    __slots__ = ()
    _client: ClientLike

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


class Receiver(Protocol):
    """Where the client routes a subscription's messages: :class:`Subscription`, and the blocking
    client's (:meth:`Client.subscribe_into`). The client calls these on its event loop."""

    id: str
    destination: str
    ack: str
    headers: List[Tuple[str, str]]

    @property
    def inbox(self) -> Inbox[Any]:
        """Where the connection queues the messages itself, as ``deliver`` would, then calls the
        inbox's ``wake`` (:meth:`fastframe.protocol.ClientConnection.route`)."""

    def deliver(self, message: BaseMessage, closing: bool) -> None:
        """Queue ``message`` (``closing``: the client is closing down, reading freely)."""

    def finish(self, error: Optional[BaseException]) -> None:
        """No more messages: after the queued ones, iteration stops (``None``) or raises ``error``."""

    def release(self) -> None:
        """Withdraw any pause of reading this subscription asked for (it ended)."""

    def restart(self, session: SessionLike) -> None:
        """A reconnect replaced the session: drop what the broker redelivers, pause ``session`` if full."""


class Subscription:
    """An async iterator of :class:`Message`; ``async with`` unsubscribes on exit.

    The queue (a :class:`fastframe.protocol.Inbox`) holds at most ``max_queue`` messages: when it is
    full the client stops reading the socket and reads again once half of it is consumed, so
    memory stays bounded. While a receipt is awaited reading goes on up to twice ``max_queue`` (the
    RECEIPT may come behind MESSAGEs); past that a receipt wait ends at its deadline: set the
    broker's prefetch to bound what it sends. Each bound holds to one socket read: the read that
    reaches it is queued whole, so the queue holds at most its bound plus the rest of that read (a
    read is at most 256 KiB).
    """

    #: whether the messages come as :class:`fastframe.Columns` (:class:`ColumnSubscription`)
    columns = False

    def __init__(
        self, client: ClientLike, id: str, destination: str, ack: str, headers: List[Tuple[str, str]], max_queue: int
    ) -> None:
        self._inbox: Inbox[Message] = Inbox(max_queue)
        self._inbox.wake = self._wake
        self.id = id  #: The subscription's id (the SUBSCRIBE's ``id`` header; MESSAGEs name it).
        self.destination = destination  #: The destination subscribed to.
        self.ack = ack  #: The ack mode: ``"auto"``, ``"client"`` or ``"client-individual"``.
        self.headers = headers
        self.max_queue = max_queue
        self._client = client
        self._waiter: Optional[asyncio.Future[None]] = None
        self._end: Optional[BaseException] = None
        self._ended = False

    def __len__(self) -> int:
        return len(self._inbox)

    # ------------------------------------------------------------------ the client's side (Receiver)

    @property
    def inbox(self) -> Inbox[Message]:
        """The queue of messages (:class:`fastframe.protocol.Inbox`): the connection fills it."""
        return self._inbox

    def deliver(self, message: BaseMessage, closing: bool) -> None:
        """(The client's routing) Queue ``message``; wake a waiting reader."""
        inbox = self._inbox
        if len(inbox.items) < inbox.room:
            inbox.items.append(message)  # type: ignore[arg-type]  # (what put() does below the bound, no call)
        else:
            inbox.put(message, message._session, closing)  # type: ignore[arg-type]  # (the client's message_class)
        self._wake()

    def _wake(self) -> None:
        # (also the inbox's wake: the session calls it after a read queued messages into the inbox)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None  # woken once: the messages after this one need not look at it
            if not waiter.done():
                waiter.set_result(None)

    def finish(self, error: Optional[BaseException]) -> None:
        """(The client) No more messages: iteration stops (``error`` None) or raises ``error`` once
        the queue is empty."""
        self._ended, self._end = True, error
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def release(self) -> None:
        """(The client) Withdraw this queue's pause of reading (the subscription ended)."""
        self._inbox.release()

    def restart(self, session: SessionLike) -> None:
        """(The client, after a reconnect) Unacknowledged messages of the old session are dropped:
        the broker redelivers them on the new one."""
        self._inbox.restart(session, keep=self.ack == "auto")

    # ------------------------------------------------------------------ the reader's side

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Message:
        inbox = self._inbox
        if inbox.items:
            message = inbox.items.popleft()
            if len(inbox.items) <= inbox.settle_at:
                inbox.settle()
            return message
        try:
            return await self.get()
        except _Ended:
            raise StopAsyncIteration from None

    async def get(self, *, timeout: Optional[float] = None) -> Message:
        """The next message; waits at most ``timeout`` seconds (``asyncio.TimeoutError``)."""
        inbox = self._inbox
        while not inbox.items:
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
        message = inbox.items.popleft()
        if len(inbox.items) <= inbox.settle_at:
            inbox.settle()
        return message

    def get_nowait(self) -> Message:
        """The next queued message without waiting (:class:`asyncio.QueueEmpty` when none is queued,
        whether or not the subscription ended)."""
        inbox = self._inbox
        if not inbox.items:
            raise asyncio.QueueEmpty
        message = inbox.items.popleft()
        if len(inbox.items) <= inbox.settle_at:
            inbox.settle()
        return message

    def get_batch(self, limit: int) -> List[Message]:
        """Up to ``limit`` queued messages at once, oldest first, without waiting (an empty list when
        none is queued): what ``limit`` calls of :meth:`get_nowait` take, with one look at flow control."""
        inbox = self._inbox
        batch = inbox.take_batch(limit)
        if len(inbox.items) <= inbox.settle_at:
            inbox.settle()
        return batch

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


class ColumnSubscription(Subscription):
    """A subscription whose messages come as :class:`fastframe.Columns`: one item per socket read,
    each row a MESSAGE, no Python object per message (``client.subscribe(..., columns=True)``).

    Iteration, :meth:`get`, :meth:`get_nowait` and :meth:`get_batch` return Columns instead of
    :class:`Message` (lay them out in Arrow with ``pyarrow.Array.from_buffers``, as
    :mod:`fastframe.spark` does). The connection decodes with a :class:`fastframe.ColumnDecoder`
    (see :meth:`fastframe.protocol.ClientConnection.route_columns` for what that asks: the
    connection's only subscription, ack mode ``auto`` or ``client``); acknowledge a row with
    ``client.ack(ack_id, subscription=sub.id)``, its ``ack`` header (1.2) or ``message-id``.
    ``max_queue`` counts reads here, not messages: a read is at most 256 KiB.
    """

    columns = True

    def deliver(self, message: BaseMessage, closing: bool) -> None:
        """(The client's routing) A MESSAGE that came as an event (closing down, when the rows are
        frames again): queued as a Columns of one row, so every item has one type."""
        inbox = self._inbox
        inbox.put(message_columns([message]), message._session, closing)  # type: ignore[arg-type]
        self._wake()


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
        headers: Headers = None,
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
