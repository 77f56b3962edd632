"""The broker's routing core: sessions, subscriptions, ack modes, transactions, redelivery. No I/O.

A transport opens a :class:`Session` for each connection with a :class:`SessionHandle` (how to answer
that client and how to close it), passes every frame the client sends to
:meth:`BrokerCore.receive` (or the frames of one read to :meth:`BrokerCore.receive_many`), and calls
:meth:`BrokerCore.close` when the connection ends. The core answers through the handle's calls:
``accept`` (CONNECTED), ``receipt``, ``error``, ``write`` (MESSAGE bytes), then ``close()`` after an
ERROR or a DISCONNECT; the transport shapes those frames (:class:`fastframe.protocol.ServerConnection`). Nothing here reads a clock or a socket, so every rule is tested by calling it.

Destinations are ``/queue/NAME`` (each message to one subscriber, round robin; kept until one
subscribes) and ``/topic/NAME`` (each message to every subscriber present, dropped when there is none).
Ack modes are ``auto``, ``client`` (cumulative, per subscription) and ``client-individual``; a NACK, an
UNSUBSCRIBE or a lost connection puts a queue's unacknowledged messages back at its head, and they are
delivered again with ``redelivered:true`` and ``x-delivery-count:N`` (a topic's go back to the same
subscription while it lives); past ``max_redeliveries`` (or a queue's ``x-delivery-limit``), after a
NACK with ``requeue:false`` (every NACK with ``requeue_on_nack=False``) or once expired, a queue's
message is dead-lettered: to the queue's ``x-dead-letter-exchange``/``-routing-key``, else to
``dead_letter``, else dropped. A message expires at its ``expires`` (ms since the epoch, ActiveMQ's),
after its ``expiration`` (ms, RabbitMQ's) or its queue's ``x-message-ttl``; an expired message is
never delivered, and :meth:`BrokerCore.expire` (which the server calls every 0.1 s) takes expired ones
out of their queues. ``prefetch-count`` or ``activemq.prefetchSize`` on a SUBSCRIBE with client acks
bounds the subscription's unacknowledged messages. :meth:`BrokerCore.hold` keeps a destination's
deliveries until :meth:`BrokerCore.release` (a test's fault).

Temporary queues, as RabbitMQ makes them: a SEND whose ``reply-to`` is ``/temp-queue/NAME`` makes (once
per session and name) a queue only that session reads, ``/queue/fastframe.temp.<session>.NAME``, and
goes out with that as its ``reply-to``; what is sent there reaches the session as a MESSAGE on
subscription ``/temp-queue/NAME``, which the client never subscribed to. The queue ends with its
session; what is sent to it later is dropped.

Stream queues, as RabbitMQ's: a SUBSCRIBE to ``/queue/NAME`` with ``x-queue-type:stream`` declares an
append-only log read by offset (``x-stream-offset``), published to through ``/amq/queue/NAME``; the
rules are in :mod:`fastframe.broker._streams`, which this core calls at a few points. Its clock (for
``x-max-age`` and ``x-stream-offset:timestamp=T``) is the ``clock`` argument.
"""

from __future__ import annotations

import collections
import time
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from .. import __version__
from ..codec import EncodeError, encode
from ._encoding import DELIVERY, PLAIN_DELIVERY, PLAIN_EMPTY_DELIVERY, forwarded_headers, message_tail
from ._errors import error_parts
from ._streams import AMQ_QUEUE, StreamLog, Streams

__all__ = [
    "BrokerCore",
    "Session",
    "SessionHandle",
    "ACK_MODES",
    "DEFAULT_MAX_STORED_BYTES",
    "DEFAULT_MAX_TRANSACTION_BYTES",
    "DEFAULT_MAX_TRANSACTIONS",
    "DEFAULT_MAX_SUBSCRIPTIONS",
    "TEMP_QUEUE_PREFIX",
]

ACK_MODES = ("auto", "client", "client-individual")
#: Bytes of messages (bodies and headers) the broker holds for queues nobody consumes yet and in open
#: transactions, all connections together.
DEFAULT_MAX_STORED_BYTES = 64 * 1024 * 1024
#: Bytes one connection may hold in its open transactions (within the broker's limit above).
DEFAULT_MAX_TRANSACTION_BYTES = 16 * 1024 * 1024
#: Transactions one connection may have open, and subscriptions it may hold at once.
DEFAULT_MAX_TRANSACTIONS = 100
DEFAULT_MAX_SUBSCRIPTIONS = 10_000
_HEADER_OVERHEAD = 2  # a header's colon and newline: what a held header costs beyond its name and value
_TX_COMMANDS = frozenset({"SEND", "ACK", "NACK"})
_PREFIXES = ("/queue/", "/topic/")
_TEMP_QUEUE = "/temp-queue/"
#: Where the temporary queues live; a SEND to one whose session ended is dropped.
TEMP_QUEUE_PREFIX = "/queue/fastframe.temp."
Headers = Tuple[Tuple[str, str], ...]


class SessionHandle(Protocol):
    """How the core reaches one client: the transport implements these calls.

    The connection negotiates the version and owns it (:class:`fastframe.protocol.ServerConnection`);
    the core reads it here, never keeps its own copy.
    """

    @property
    def common_version(self) -> Optional[str]:
        """The version CONNECTED will fix, negotiated when CONNECT arrived (``None``: none in common)."""

    @property
    def version(self) -> Optional[str]:
        """The version the connection speaks, fixed by CONNECTED (``None`` before)."""

    def accept(self, version: str, headers: Sequence[Tuple[str, str]]) -> None:
        """Answer CONNECT with CONNECTED in ``version`` (fixed for the session), with extra ``headers``."""

    def receipt(self, receipt_id: str) -> None:
        """Queue the RECEIPT of ``receipt_id``."""

    def error(self, message: str, *, body: bytes, headers: Sequence[Tuple[str, str]]) -> None:
        """Queue an ERROR with this ``message`` header, ``body`` and other ``headers``."""

    def write(self, data: bytes) -> None:
        """Queue frames already encoded in the session's version (MESSAGE deliveries); one frame per
        call when the handle has a true ``message_per_write`` (a WebSocket)."""

    def close(self) -> None:
        """Close the connection once what was sent has been written."""


class _Published:
    """One SEND's content: what every delivery of it shares."""

    __slots__ = ("destination", "headers", "body", "tails", "expires", "deliveries")

    def __init__(self, destination: str, headers: Headers, body: bytes, expires: Optional[float] = None) -> None:
        self.destination = destination
        self.headers = headers
        self.body = body
        #: version -> the encoded frame after the per-delivery headers, built once per version
        self.tails: Dict[str, Tuple[bool, bytes]] = {}  # escape set -> (1.2 escapes needed, bytes)
        #: when it expires, in ms since the epoch (``None``: never)
        self.expires = expires
        #: how often a queue delivered it to an acknowledging subscription (its redeliveries' count)
        self.deliveries = 0


def held_size(headers: Sequence[Tuple[str, str]], body: bytes) -> int:
    """What a message held by the broker counts against its limits: its body and its headers."""
    return len(body) + sum(len(name) + len(value) + _HEADER_OVERHEAD for name, value in headers)


class _Subscription:
    __slots__ = (
        "session", "id", "destination", "ack", "unacked", "escapes", "prefix", "prefix_1_2", "ack_header", "prefetch"
    )  # fmt: skip

    def __init__(self, session: Session, sub_id: str, destination: str, ack: str, named: bool) -> None:
        self.session = session
        self.id = sub_id
        self.destination = destination
        self.ack = ack
        #: at most this many unacknowledged deliveries of a queue at once (0: no bound)
        self.prefetch = 0
        #: ack id -> message, in delivery order (cumulative ACK walks it from the front)
        self.unacked: Dict[str, _Published] = {}
        # 1.0 subscriptions without an id get no subscription header (as RabbitMQ does)
        head: Headers = ((("subscription", sub_id),) if named else ()) + (("destination", destination),)
        version = session.version or "1.2"
        #: whether a delivery names its ack id in an ``ack`` header (1.2; the others ACK the message-id)
        self.ack_header = version == "1.2"
        #: MESSAGE's first lines up to the message-id value, in the session's escapes and in 1.2's (a
        #: frame is escaped one way throughout: 1.2 when the version cannot carry any of its values)
        self.prefix_1_2 = encode("MESSAGE", head, version=version, escapes="1.2")[:-2] + b"message-id:"
        try:
            self.prefix = encode("MESSAGE", head, version=version)[:-2] + b"message-id:"
            self.escapes = version
        except EncodeError:
            self.prefix, self.escapes = self.prefix_1_2, "1.2"


class Session:
    """One client connection's state in the core."""

    def __init__(self, handle: SessionHandle, number: int) -> None:
        self.handle = handle
        self.name = f"session-{number}"
        #: whether the core answered CONNECT with CONNECTED (the login passed); the hot path's test
        self.accepted = False
        self.login: Optional[str] = None
        self.subscriptions: Dict[str, _Subscription] = {}
        #: ack id -> subscription, for every unacknowledged delivery of this session
        self.pending: Dict[str, _Subscription] = {}
        #: transaction id -> frames held until COMMIT
        self.transactions: Dict[str, List[Any]] = {}
        #: bytes the frames held in open transactions count against the limits (bodies and headers)
        self.transaction_bytes = 0
        self.closed = False
        #: MESSAGE bytes routed by receive_many() and not yet written (one write per connection and read)
        self.outbox: List[bytes] = []
        #: The destinations of the session's temporary queues (they end with it).
        self.temp_queues: Dict[str, None] = {}

    @property
    def connected(self) -> bool:
        """Whether CONNECT succeeded and the session is not closed."""
        return self.accepted and not self.closed

    @property
    def version(self) -> Optional[str]:
        """The negotiated version, read from the connection that owns it (``None`` before CONNECTED)."""
        return self.handle.version


class _Queue:
    __slots__ = ("messages", "consumers", "next", "ttl", "dead_letter", "delivery_limit", "held", "special")

    def __init__(self, held: bool) -> None:
        self.messages: Deque[Tuple[_Published, bool]] = collections.deque()  # (message, redelivered)
        self.consumers: List[_Subscription] = []
        self.next = 0
        #: the arguments a SUBSCRIBE declared it with (RabbitMQ's): ``x-message-ttl`` in ms, where
        #: ``x-dead-letter-exchange`` and ``-routing-key`` send its dead letters, ``x-delivery-limit``
        self.ttl: Optional[int] = None
        self.dead_letter: Optional[str] = None
        self.delivery_limit: Optional[int] = None
        #: whether its deliveries are held (:meth:`BrokerCore.hold`)
        self.held = held
        #: whether a SEND to it takes the general path (held, a TTL, or a consumer with a prefetch)
        self.special = held

    def restyle(self) -> None:
        """Recompute :attr:`special` after the queue or its consumers changed."""
        self.special = self.held or self.ttl is not None or any(sub.prefetch for sub in self.consumers)

    @property
    def declared(self) -> bool:
        """Whether it has arguments, which keep it (empty and unused) as a declared queue is kept."""
        return self.ttl is not None or self.dead_letter is not None or self.delivery_limit is not None


def _count(*values: Optional[str]) -> Optional[int]:
    """The first of ``values`` that is a whole number (a header's), ``None`` when none is."""
    for value in values:
        if value is not None and value.isdigit():
            return int(value)
    return None


def _declare(queue: _Queue, frame: Any) -> None:
    """The queue arguments of a SUBSCRIBE (RabbitMQ's), for a queue that has none of each yet:
    ``x-message-ttl`` (ms), ``x-delivery-limit``, and ``x-dead-letter-exchange`` with
    ``x-dead-letter-routing-key`` (the default exchange ``""``: ``/queue/KEY``; ``amq.topic``:
    ``/topic/KEY``; any other exchange, or no key, drops dead letters)."""
    if queue.ttl is None:
        queue.ttl = _count(frame.get("x-message-ttl"))
    if queue.delivery_limit is None:
        queue.delivery_limit = _count(frame.get("x-delivery-limit"))
    exchange, key = frame.get("x-dead-letter-exchange"), frame.get("x-dead-letter-routing-key")
    if queue.dead_letter is None and key and exchange in ("", "amq.topic"):
        queue.dead_letter = ("/queue/" if exchange == "" else "/topic/") + key


class BrokerCore:
    """Routing for every session of one broker.

    Args:
        users: login -> passcode; ``None`` accepts any login (or none).
        max_stored_bytes: bound on the messages (bodies and headers) held in queues that nobody consumes
            yet and in open transactions, all connections together; a SEND past it is refused with an
            ERROR that names the limit (the sender is the one refused, never the broker's memory).
        max_transaction_bytes: bound on what one connection holds in its open transactions.
        max_transactions: transactions one connection may have open at once.
        max_subscriptions: subscriptions one connection may hold at once.
        server: the ``server`` header of CONNECTED.
        clock: seconds since the epoch, for stream queues' ``x-max-age`` and ``timestamp=`` offsets and for
            message expiry.
        dead_letter: where a queue's dead letters go (``/queue/NAME`` or ``/topic/NAME``; ActiveMQ's is
            ``/queue/ActiveMQ.DLQ``) when the queue was not declared with a dead-letter exchange of its
            own; ``None`` (the default) drops them, as RabbitMQ does.
        max_redeliveries: how often a queue redelivers a message NACKed or left unacknowledged (its
            connection lost, its subscription ended) before it dead-letters it instead, as RabbitMQ's
            quorum queues' ``x-delivery-limit``; ``None`` (the default) redelivers without end, as
            RabbitMQ's classic queues and ActiveMQ (over STOMP) do. A SUBSCRIBE's ``x-delivery-limit``
            sets it for its queue.
        requeue_on_nack: whether a NACK puts the message back (RabbitMQ; a NACK's ``requeue:false``
            dead-letters it); ``False`` dead-letters every NACKed message at once, as ActiveMQ does.

    A queue that is empty and has no subscriber is forgotten, so memory returns to its baseline when
    clients leave.
    """

    def __init__(
        self,
        *,
        users: Optional[Mapping[str, str]] = None,
        max_stored_bytes: int = DEFAULT_MAX_STORED_BYTES,
        max_transaction_bytes: int = DEFAULT_MAX_TRANSACTION_BYTES,
        max_transactions: int = DEFAULT_MAX_TRANSACTIONS,
        max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS,
        server: str = f"fastframe/{__version__}",
        clock: Callable[[], float] = time.time,
        dead_letter: Optional[str] = None,
        max_redeliveries: Optional[int] = None,
        requeue_on_nack: bool = True,
    ) -> None:
        for name, limit in (
            ("max_stored_bytes", max_stored_bytes),
            ("max_transaction_bytes", max_transaction_bytes),
            ("max_transactions", max_transactions),
            ("max_subscriptions", max_subscriptions),
        ):
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise ValueError(f"{name} must be an int >= 0, not {limit!r}")
        if max_redeliveries is not None and (
            isinstance(max_redeliveries, bool) or not isinstance(max_redeliveries, int) or max_redeliveries < 0
        ):
            raise ValueError(f"max_redeliveries must be None or an int >= 0, not {max_redeliveries!r}")
        if dead_letter is not None and not (dead_letter.startswith(_PREFIXES) and len(dead_letter) > 7):
            raise ValueError(f"dead_letter must be /queue/NAME or /topic/NAME, not {dead_letter!r}")
        self.dead_letter = dead_letter
        self.max_redeliveries = max_redeliveries
        self.requeue_on_nack = requeue_on_nack
        #: held destinations (:meth:`hold`): a topic's deliveries waiting, with their subscriptions
        self.held: Dict[str, List[Tuple[_Subscription, _Published]]] = {}
        #: queues that store messages with an expiry (what :meth:`expire` looks at)
        self._expiring: Dict[str, None] = {}
        self.users = dict(users) if users is not None else None
        self.max_stored_bytes = max_stored_bytes
        self.max_transaction_bytes = max_transaction_bytes
        self.max_transactions = max_transactions
        self.max_subscriptions = max_subscriptions
        self.server = server
        self.sessions: Dict[str, Session] = {}
        self.queues: Dict[str, _Queue] = {}
        self.topics: Dict[str, List[_Subscription]] = {}
        self.stored_bytes = 0
        self.clock = clock
        #: the stream queues (their bytes count in stored_bytes)
        self.streams = Streams(self._deliver_run)
        #: the frames of the read receive_many() is acting on: a stream's chunk is what one read wrote
        self._read: Optional[List[Any]] = None
        self._sessions_opened = 0
        self._message_ids = 0
        self._after_receipt: List[Callable[[], None]] = []
        self._dirty: List[Session] = []  # sessions whose outbox holds bytes
        self._handlers: Dict[str, Callable[[Session, Any], None]] = {
            "SEND": self._send,
            "SUBSCRIBE": self._subscribe,
            "UNSUBSCRIBE": self._unsubscribe,
            "ACK": self._ack,
            "NACK": self._nack,
            "BEGIN": self._begin,
            "COMMIT": self._commit,
            "ABORT": self._abort,
            "DISCONNECT": self._disconnect,
        }

    # ------------------------------------------------------------------ sessions

    def open(self, handle: SessionHandle) -> Session:
        """A new session for a connection that has just been accepted."""
        self._sessions_opened += 1
        session = Session(handle, self._sessions_opened)
        self.sessions[session.name] = session
        return session

    def close(self, session: Session) -> None:
        """The connection ended: drop its transactions and subscriptions, redeliver its unacked messages."""
        if session.closed:
            return
        session.closed = True
        self._end_transactions(session)
        for sub in list(session.subscriptions.values()):
            self._drop_subscription(sub)
        if self.streams.logs:
            self.streams.forget_session(session)
        for destination in session.temp_queues:
            queue = self.queues.pop(destination, None)
            if queue is not None:
                self.stored_bytes -= sum(held_size(message.headers, message.body) for message, _ in queue.messages)
        self.sessions.pop(session.name, None)

    def fail(self, session: Session, kind: str, *args: Any) -> None:
        """Send the ERROR of ``kind`` (a key of :data:`fastframe.broker.ERRORS`, its body formatted
        with ``args``) and close: the ending of every mistake."""
        if not session.closed:
            message, body, headers = error_parts(kind, *args)
            session.handle.error(message, body=body, headers=headers)
            session.handle.close()
            self.close(session)

    # ------------------------------------------------------------------ frames

    def receive(self, session: Session, frame: Any) -> None:
        """Act on one frame the client of ``session`` sent."""
        command = frame.command
        if command == "SEND" and session.accepted and frame.get("transaction") is None:
            if not session.closed:  # the hot path first; the general one below does the same
                self._send(session, frame)
                receipt = frame.get("receipt")
                if receipt is not None and not session.closed:
                    if self._dirty:  # (a stream's deliveries first, as RabbitMQ sends them)
                        self._write_outboxes()
                    session.handle.receipt(receipt)
            return
        if session.closed:
            return
        if not session.accepted:
            if command in ("CONNECT", "STOMP"):
                self._connect(session, frame)
            else:
                self.fail(session, "not-connected")
            return
        handler = self._handlers.get(command)
        if handler is None or (command == "NACK" and session.version == "1.0"):
            if command in ("CONNECT", "STOMP"):
                self.fail(session, "already-connected")
            else:
                self.fail(session, "command", command)
            return
        tx = frame.get("transaction")
        if tx is not None and command in _TX_COMMANDS:
            held = session.transactions.get(tx)
            if held is None:
                self.fail(session, "transaction-unknown", tx)
                return
            if command == "SEND" and not self._check_destination(session, frame):
                return
            if not self._hold(session, frame):
                return
            held.append(frame)
        else:
            handler(session, frame)
        receipt = frame.get("receipt")
        if receipt is not None and not session.closed and command != "DISCONNECT":
            session.handle.receipt(receipt)
        while self._after_receipt:  # redeliveries a NACK caused come after its RECEIPT, as in RabbitMQ
            self._after_receipt.pop(0)()

    def receive_many(self, session: Session, frames: List[Any]) -> None:
        """:meth:`receive` for each of ``frames`` in order (what one read brought), the same answers.

        The broker's hot path: a SEND without receipt or transaction to a queue that has consumers
        and nothing stored, or to a topic that has subscribers, is routed here without the general
        path's calls (a plain auto-acknowledged queue delivery in one flat step: the benchmark's,
        ``python -m bench.brokers``), and the MESSAGE bytes each connection gets from the whole run
        of such SENDs go to its handle in one ``write``, before any other frame is acted on and at
        the end.
        """
        self._read = frames  # (deliveries to stream consumers go to the outboxes meanwhile)
        try:
            self._route_many(session, frames)
        finally:
            self._read = None

    def _route_many(self, session: Session, frames: List[Any]) -> None:
        queues, topics, dirty, held = self.queues, self.topics, self._dirty, self.held
        for frame in frames:
            if session.closed:
                break
            if frame.command != "SEND" or not session.accepted:
                self._receive_one(session, frame)
                continue
            headers = frame.headers
            size = len(headers)
            if (size == 2 and headers[0][0] == "destination" and headers[1][0] == "content-length") or (
                size == 1 and headers[0][0] == "destination"
            ):
                destination: str = headers[0][1]
                headers = ()
            elif (
                frame.get("transaction") is None
                and frame.get("receipt") is None
                and frame.get("reply-to") is None
                and frame.get("expires") is None
                and frame.get("expiration") is None
            ):
                destination = frame.get("destination")
                headers = forwarded_headers(headers)
            else:
                self._receive_one(session, frame)
                continue
            queue = queues.get(destination)  # only valid destinations are keys of queues and topics
            if queue is not None:
                consumers = queue.consumers
                if not consumers or queue.messages or queue.special:
                    self._receive_one(session, frame)  # stored behind what is stored; held, a TTL, a prefetch
                    continue
                index = queue.next if queue.next < len(consumers) else 0  # _next_consumer, inlined
                queue.next = index + 1
                sub = consumers[index]
                if sub.ack == "auto" and not headers:  # the commonest delivery: the one flat step
                    body = frame.body
                    number = self._message_ids = self._message_ids + 1
                    target = sub.session
                    box = target.outbox
                    if not box:
                        dirty.append(target)
                    if body:
                        box.append(PLAIN_DELIVERY % (sub.prefix, number, len(body), body))
                    else:
                        box.append(PLAIN_EMPTY_DELIVERY % (sub.prefix, number))
                    continue
                targets: Any = (sub,)
            else:
                targets = topics.get(destination)
                if targets is None or (held and destination in held):  # a new queue, a held topic, a topic
                    # nobody listens to, a stream, or a mistake
                    log = None
                    if self.streams.logs and destination is not None and destination.startswith(AMQ_QUEUE):
                        log = self.streams.logs.get(destination[len(AMQ_QUEUE) :])
                    if log is not None:  # /amq/queue/NAME of a stream: its deliveries go to the outboxes
                        self._append(session, log, headers, frame.body)
                    else:
                        self._receive_one(session, frame)
                    continue
            message = _Published(destination, headers, frame.body)
            for sub in targets:
                target = sub.session
                box = target.outbox
                if not box:
                    dirty.append(target)
                box.append(self._delivery(sub, message, False))
        if dirty:
            self._write_outboxes()

    def _receive_one(self, session: Session, frame: Any) -> None:
        """receive() inside receive_many(): what was routed before goes out first."""
        if self._dirty:
            self._write_outboxes()
            if getattr(session.handle, "closing", False):  # the transport dropped it meanwhile
                return
        self.receive(session, frame)

    def _write_outboxes(self) -> None:
        dirty = self._dirty
        for target in dirty:
            box = target.outbox
            if not target.closed:
                handle = target.handle
                if len(box) == 1 or not getattr(handle, "message_per_write", False):
                    handle.write(box[0] if len(box) == 1 else b"".join(box))
                else:  # (a WebSocket: each frame is a message of its own)
                    for data in box:
                        handle.write(data)
            box.clear()
        dirty.clear()

    def _connect(self, session: Session, frame: Any) -> None:
        version = session.handle.common_version  # the connection negotiated it (the one rule, its owner)
        if version is None:
            self.fail(session, "version")
            return
        login = frame.get("login")
        if self.users is not None and (login is None or self.users.get(login) != frame.get("passcode")):
            self.fail(session, "login", login or "")
            return
        session.accepted = True
        session.login = login
        session.handle.accept(version, (("server", self.server), ("session", session.name)))

    def _check_destination(self, session: Session, frame: Any) -> Optional[str]:
        destination: Optional[str] = frame.get("destination")
        if destination is None:
            self.fail(session, "destination-missing", frame.command)
            return None
        if (not destination.startswith(("/queue/", "/topic/")) or len(destination) < 8) and not (
            destination.startswith(AMQ_QUEUE) and len(destination) > len(AMQ_QUEUE)
        ):
            self.fail(session, "destination-unknown", destination)
            return None
        return destination

    def _send(self, session: Session, frame: Any) -> None:
        # the hot path of the broker: written out flat, the checks of _check_destination inlined
        destination = frame.get("destination")
        if destination is None or len(destination) < 8 or not destination.startswith(_PREFIXES):
            if self._check_destination(session, frame) is None:
                return  # (refused: the ERROR is sent)
        headers = forwarded_headers(frame.headers)
        reply_to = frame.get("reply-to")
        if reply_to is not None and reply_to.startswith(_TEMP_QUEUE) and len(reply_to) > len(_TEMP_QUEUE):
            private = self._temp_queue(session, reply_to)
            if private is None:
                return  # (refused: the ERROR is sent)
            headers = tuple([(name, private if name == "reply-to" else value) for name, value in headers])
        if destination[1] == "a" or (self.streams.logs and destination[1] == "q"):
            destination = self._send_stream(session, frame, destination, headers)
            if destination is None:
                return
        expires = None
        if frame.get("expires") is not None or frame.get("expiration") is not None:
            expires = self._expiry(frame)
        self.publish(_Published(destination, headers, frame.body, expires), session)

    def _expiry(self, frame: Any) -> Optional[float]:
        """When a SEND's message expires, in ms since the epoch: its ``expires`` (ActiveMQ's: that time,
        ``0`` never), its ``expiration`` (RabbitMQ's per-message TTL: ms from now), the earlier of the
        two; ``None``: never (a value that is no number of ms is ignored)."""
        deadline: Optional[float] = None
        value = frame.get("expires")
        if value is not None and value.isdigit() and int(value) > 0:
            deadline = int(value)
        value = frame.get("expiration")
        if value is not None and value.isdigit():
            at = self.clock() * 1000 + int(value)
            deadline = at if deadline is None else min(deadline, at)
        return deadline

    def _send_stream(self, session: Session, frame: Any, destination: str, headers: Headers) -> Optional[str]:
        """A SEND to ``/amq/queue/NAME`` or to a stream's ``/queue/NAME``: appended to the stream (or
        refused as RabbitMQ refuses it; ``None``), or the queue to publish it to as usual."""
        name = destination[len(AMQ_QUEUE) :] if destination[1] == "a" else destination[len("/queue/") :]
        log = self.streams.logs.get(name)
        if log is None:
            queue = "/queue/" + name
            return queue if destination[1] == "q" or queue in self.queues else None  # (no such queue: dropped)
        if destination[1] == "q" and session not in log.declarers:  # a SEND to /queue/ declares a classic queue
            kind, args = self.streams.inequivalent(name, "x-queue-type", None, "stream")
            self.fail(session, kind, *args)
            return None
        receipt = frame.get("receipt")  # RabbitMQ copies it into the stream's message
        self._append(session, log, ((("receipt", receipt),) if receipt is not None else ()) + headers, frame.body)
        return None

    def _append(self, session: Session, log: StreamLog, headers: Headers, body: bytes) -> None:
        """Write one message to a stream (or refuse it past ``max_stored_bytes``), deliver it where there is credit."""
        stored = headers + (("x-stream-offset", str(log.end)),)
        size = held_size(stored, body)
        if self.stored_bytes + size > self.max_stored_bytes:
            self.fail(session, "full", self.max_stored_bytes)
            return
        # A stream keeps its messages: each keeps its MESSAGE tails, built now for every version (one
        # object when they are equal, as they are without headers that need escaping), and not its body,
        # which they hold: memory stays about what stored_bytes counts.
        message = _Published(log.destination, stored, b"")
        if len(stored) == 1:  # only the offset, which no version escapes
            if body:  # (message_tail's bytes, written out: a test holds them to it)
                tail = b"x-stream-offset:%d\ncontent-length:%d\n\n%b\0" % (log.end, len(body), body)
            else:
                tail = b"x-stream-offset:%d\n\n\0" % log.end
            message.tails = dict.fromkeys(("1.0", "1.1", "1.2"), (False, tail))
        else:
            built: List[Tuple[bool, bytes]] = []
            for version in ("1.0", "1.1", "1.2"):
                made = message_tail(version, stored, body)
                message.tails[version] = next((known for known in built if known == made), made)
                built.append(message.tails[version])
        self.stored_bytes += size
        self.stored_bytes -= self.streams.append(log, message, size, self.clock(), self._read)

    def _temp_queue(self, session: Session, name: str) -> Optional[str]:
        """The queue behind ``session``'s temporary queue ``name`` (``/temp-queue/...``), made on first use
        with the session's implicit subscription to it, whose id is ``name``; ``None`` after the ERROR
        when that subscription would pass ``max_subscriptions`` (it counts as one)."""
        destination = f"{TEMP_QUEUE_PREFIX}{session.name}.{name[len(_TEMP_QUEUE) :]}"
        if name not in session.subscriptions:
            if len(session.subscriptions) >= self.max_subscriptions:
                self.fail(session, "subscriptions-open", self.max_subscriptions)
                return None
            sub = _Subscription(session, name, destination, "auto", True)
            session.subscriptions[name] = sub
            session.temp_queues[destination] = None
            queue = self._queue(destination)
            queue.consumers.append(sub)
        return destination

    def publish(self, message: _Published, sender: Optional[Session] = None) -> None:
        """Route one message to its queue or to its topic's subscribers (an expired one is dropped or
        dead-lettered instead; a held destination keeps it)."""
        destination = message.destination
        if destination[1] == "t":  # /topic/
            if message.expires is not None and message.expires <= self.clock() * 1000:
                return  # (a topic's expired message is dropped: nobody could have had it in time)
            waiting = self.held.get(destination) if self.held else None
            for sub in self.topics.get(destination, ()):
                if waiting is None:
                    self._deliver(sub, message, False)
                else:
                    waiting.append((sub, message))
            return
        queue = self.queues.get(destination)
        if queue is None:
            if destination.startswith(TEMP_QUEUE_PREFIX):
                return  # a temporary queue that ended with its session (a late reply): dropped
            queue = self._queue(destination)
        if queue.special or message.expires is not None:
            now = self.clock() * 1000
            if message.expires is not None and message.expires <= now:
                self._dead_letter(message, "expired", queue)  # expired on arrival (ActiveMQ's ``expires``)
                self._forget_if_unused(destination, queue)
                return
            if queue.ttl is not None and (message.expires is None or now + queue.ttl < message.expires):
                message.expires = now + queue.ttl  # (0: for a consumer ready now only, as RabbitMQ)
        if queue.consumers and not queue.messages and not queue.held:
            taker = self._next_consumer(queue)
            if taker is not None:
                self._deliver(taker, message, False)
                return
        size = held_size(message.headers, message.body)
        if self.stored_bytes + size > self.max_stored_bytes and sender is not None:
            self.fail(sender, "full", self.max_stored_bytes)
            if not queue.messages and not queue.consumers:
                del self.queues[destination]  # (made for this message: nothing to remember)
            return
        queue.messages.append((message, False))
        self.stored_bytes += size
        if message.expires is not None:
            self._expiring[destination] = None

    def _queue(self, destination: str) -> _Queue:
        """The queue ``destination`` (made when new)."""
        queue = self.queues.get(destination)
        if queue is None:
            queue = self.queues[destination] = _Queue(destination in self.held)
        return queue

    def _forget_if_unused(self, destination: str, queue: _Queue) -> None:
        """Forget a queue nobody reads, that holds nothing and was declared with no arguments: a queue's
        name is no memory once unused."""
        if not queue.consumers and not queue.messages and not queue.declared and self.queues.get(destination) is queue:
            del self.queues[destination]

    @staticmethod
    def _next_consumer(queue: _Queue) -> Optional[_Subscription]:
        """The round robin: the queue's next consumer in turn that may take one more message (under
        its prefetch), ``None`` when none may (the one rule of who gets a message)."""
        consumers = queue.consumers
        count = len(consumers)
        start = queue.next if queue.next < count else 0
        for step in range(count):
            index = start + step if start + step < count else start + step - count
            sub = consumers[index]
            if not sub.prefetch or len(sub.unacked) < sub.prefetch:
                queue.next = index + 1
                return sub
        return None

    def _drain(self, queue: _Queue) -> None:
        """Deliver what a queue holds while it has consumers that may take it (not while it is held);
        expired messages on the way are dropped or dead-lettered."""
        if queue.held:
            return
        messages = queue.messages
        while messages and queue.consumers:
            message, redelivered = messages[0]
            if message.expires is not None and message.expires <= self.clock() * 1000:
                messages.popleft()
                self.stored_bytes -= held_size(message.headers, message.body)
                self._dead_letter(message, "expired", queue)
                continue
            sub = self._next_consumer(queue)
            if sub is None:
                return  # (every consumer has its prefetch's worth unacknowledged)
            messages.popleft()
            self.stored_bytes -= held_size(message.headers, message.body)
            self._deliver(sub, message, redelivered)

    def _dead_letter(self, message: _Published, reason: str, queue: Optional[_Queue]) -> None:
        """A message that expired (``reason`` ``expired``), was NACKed with ``requeue:false``
        (``rejected``) or ran out of redeliveries (``delivery_limit``): to its queue's dead-letter
        destination, else the broker's, else dropped. It goes without ``expires`` and ``expiration``
        and with ``x-first-death-reason``, ``x-first-death-queue`` (RabbitMQ's) and
        ``original-destination`` (ActiveMQ's), those of its first death kept."""
        target = queue.dead_letter if queue is not None and queue.dead_letter is not None else self.dead_letter
        source = message.destination
        if target is None or target == source or source[1] != "q":
            return  # dropped (a topic's, or one that would come back where it died)
        headers = tuple([item for item in message.headers if item[0] not in ("expires", "expiration")])
        if not any(name == "x-first-death-reason" for name, _ in headers):
            headers += (
                ("x-first-death-reason", reason),
                ("x-first-death-queue", source[len("/queue/") :]),
                ("original-destination", source),
            )
        self.publish(_Published(target, headers, message.body))

    def expire(self) -> int:
        """Drop or dead-letter the queued messages whose time has come; how many. Expired messages are
        never delivered whether this runs or not; the server calls it every 0.1 s so that they reach
        a dead-letter queue while nobody reads the queue they expired in, as in both big brokers."""
        if not self._expiring:
            return 0
        now = self.clock() * 1000
        dead: List[Tuple[_Published, str, _Queue]] = []
        for destination in list(self._expiring):
            queue = self.queues.get(destination)
            expiring = False
            if queue is not None:
                kept: Deque[Tuple[_Published, bool]] = collections.deque()
                for item in queue.messages:
                    expires = item[0].expires
                    if expires is not None and expires <= now:
                        dead.append((item[0], destination, queue))
                    else:
                        kept.append(item)
                        expiring = expiring or expires is not None
                queue.messages = kept
            if not expiring:
                del self._expiring[destination]
        for message, destination, queue in dead:
            self.stored_bytes -= held_size(message.headers, message.body)
            self._dead_letter(message, "expired", queue)
            self._forget_if_unused(destination, queue)
        return len(dead)

    # ------------------------------------------------------------------ held destinations

    def hold(self, destination: str) -> None:
        """Hold the deliveries of a queue or topic (``/queue/NAME``, ``/topic/NAME``; not a stream's):
        what is sent there is accepted (and its receipt sent) but reaches nobody until :meth:`release`.
        A queue keeps it stored; a topic keeps each copy for the subscriptions present when it was sent
        (outside ``max_stored_bytes``: a fault for tests)."""
        if destination in self.held:
            return
        self.held[destination] = []
        queue = self.queues.get(destination)
        if queue is not None:
            queue.held = True
            queue.restyle()

    def release(self, destination: str) -> None:
        """Deliver what a held destination kept, in order, and its messages as they come again."""
        waiting = self.held.pop(destination, None)
        if waiting is None:
            return
        queue = self.queues.get(destination)
        if queue is not None:
            queue.held = False
            queue.restyle()
            self._drain(queue)
        now = self.clock() * 1000
        for sub, message in waiting:  # (a topic's copies, to the subscriptions still there)
            if sub.session.subscriptions.get(sub.id) is sub and (message.expires is None or message.expires > now):
                self._deliver(sub, message, False)

    def _deliver(self, sub: _Subscription, message: _Published, redelivered: bool) -> None:
        sub.session.handle.write(self._delivery(sub, message, redelivered))

    def _deliver_run(self, sub: _Subscription, messages: List[_Published]) -> None:
        """First deliveries of several messages to one subscription (a stream's): in one write, or inside
        :meth:`receive_many` to the session's outbox, written with what the rest of the read routed."""
        target = sub.session
        data = [self._delivery(sub, message, False) for message in messages]
        if self._read is not None:
            box = target.outbox
            if not box:
                self._dirty.append(target)
            box += data
            return
        handle = target.handle
        if len(data) == 1 or not getattr(handle, "message_per_write", False):
            handle.write(data[0] if len(data) == 1 else b"".join(data))
        else:  # (a WebSocket: each frame is a message of its own)
            for frame in data:
                handle.write(frame)

    def _delivery(self, sub: _Subscription, message: _Published, redelivered: bool) -> bytes:
        # MESSAGE as bytes: the subscription's encoded prefix, this delivery's ids, and the message's
        # encoded headers and body, shared by every delivery in the same version
        self._message_ids += 1
        cached = message.tails.get(sub.escapes)
        if cached is None:
            cached = message.tails[sub.escapes] = message_tail(sub.escapes, message.headers, message.body)
        use_1_2, tail = cached
        prefix = sub.prefix_1_2 if use_1_2 else sub.prefix
        number = self._message_ids
        if sub.ack == "auto":
            return DELIVERY % (prefix, number, b"true" if redelivered else b"false", b"", tail)
        session = sub.session
        message_id = str(number)
        sub.unacked[message_id] = message
        session.pending[message_id] = sub
        ack = b"ack:%d\n" % number if sub.ack_header else b""
        if redelivered and message.deliveries and sub.destination[1] == "q":
            ack += b"x-delivery-count:%d\n" % message.deliveries  # (RabbitMQ's quorum queues' header)
        message.deliveries += 1
        return DELIVERY % (prefix, number, b"true" if redelivered else b"false", ack, tail)

    def _subscribe(self, session: Session, frame: Any) -> None:
        destination = self._check_destination(session, frame)
        if destination is None:
            return
        sub_id = frame.get("id")
        ack = frame.get("ack", "auto")
        if ack not in ACK_MODES:  # 1.0 has no client-individual; accepted anyway, as RabbitMQ does
            self.fail(session, "ack-id", "SUBSCRIBE", "ack")
            return
        key = sub_id if sub_id is not None else destination
        if key in session.subscriptions:
            self.fail(session, "duplicate-subscription", key)
            return
        if len(session.subscriptions) >= self.max_subscriptions:
            self.fail(session, "subscriptions-open", self.max_subscriptions)
            return
        if destination[1] == "a" or (
            destination[1] == "q" and (frame.get("x-queue-type") == "stream" or destination[7:] in self.streams.logs)
        ):
            found = self._stream_of(session, frame, destination)
            if found is None:
                return  # (refused: the ERROR is sent)
            if isinstance(found, str):
                destination = found  # /amq/queue/NAME of a queue that is no stream
            else:
                self._subscribe_stream(session, frame, found, key, ack, sub_id is not None)
                return
        sub = _Subscription(session, key, destination, ack, sub_id is not None)
        session.subscriptions[key] = sub
        if destination.startswith("/topic/"):
            self.topics.setdefault(destination, []).append(sub)
            return
        if ack != "auto":
            sub.prefetch = _count(frame.get("prefetch-count"), frame.get("activemq.prefetchSize")) or 0
        queue = self._queue(destination)
        _declare(queue, frame)
        queue.consumers.append(sub)
        queue.restyle()
        self._drain(queue)

    def _stream_of(self, session: Session, frame: Any, destination: str) -> Any:
        """The stream a SUBSCRIBE reads (declared by it when new), the ``/queue/NAME`` an ``/amq/queue/NAME``
        of another queue is, or ``None`` after the ERROR RabbitMQ sends."""
        if destination[1] == "a":
            name = destination[len(AMQ_QUEUE) :]
            log = self.streams.logs.get(name)
            if log is not None:
                return log
            if "/queue/" + name in self.queues:
                return "/queue/" + name
            self.fail(session, "not-found", name)
            return None
        found = self.streams.declare(session, destination[7:], frame, destination in self.queues)
        if isinstance(found, tuple):
            self.fail(session, found[0], *found[1])
            return None
        return found

    def _subscribe_stream(self, session: Session, frame: Any, log: StreamLog, key: str, ack: str, named: bool) -> None:
        sub = _Subscription(session, key, log.destination, ack, named)
        refusal = self.streams.subscribe(sub, log, frame, self.clock())
        if refusal is not None:
            self.fail(session, refusal[0], *refusal[1])
            return
        session.subscriptions[key] = sub
        cursor = self.streams.cursors[sub]
        self._after_receipt.append(lambda: self.streams.pump(cursor))  # after the RECEIPT, as RabbitMQ

    def _unsubscribe(self, session: Session, frame: Any) -> None:
        key = frame.get("id")
        if key is None:
            key = frame.get("destination")  # 1.0 may unsubscribe by destination
        sub = session.subscriptions.get(key) if key is not None else None
        if sub is None:
            self.fail(session, "subscription-id", "UNSUBSCRIBE")
            return
        self._drop_subscription(sub)

    def _drop_subscription(self, sub: _Subscription) -> None:
        session = sub.session
        session.subscriptions.pop(sub.id, None)
        for ack_id in sub.unacked:
            session.pending.pop(ack_id, None)
        if self.streams.cursors and self.streams.drop(sub):
            sub.unacked.clear()  # (a stream keeps its messages: nothing goes back)
            return
        if sub.destination.startswith("/topic/"):
            subs = self.topics.get(sub.destination, [])
            if sub in subs:
                subs.remove(sub)
            if not subs:
                self.topics.pop(sub.destination, None)
            sub.unacked.clear()
            return
        queue = self.queues[sub.destination]
        queue.consumers.remove(sub)
        queue.restyle()
        self._requeue(sub.destination, queue, list(sub.unacked.values()))
        sub.unacked.clear()
        self._drain(queue)
        self._forget_if_unused(sub.destination, queue)

    def _requeue(self, destination: str, queue: _Queue, messages: List[_Published], reject: bool = False) -> None:
        """Messages NACKed or left unacknowledged back at the head of their queue, in their original
        order, stored again until a consumer takes them; dead-lettered instead when ``reject``
        (``requeue:false``) or past the redelivery limit."""
        limit = queue.delivery_limit if queue.delivery_limit is not None else self.max_redeliveries
        if reject or limit is not None:
            back = []
            for message in messages:
                if reject or message.deliveries > limit:  # type: ignore[operator]
                    self._dead_letter(message, "rejected" if reject else "delivery_limit", queue)
                else:
                    back.append(message)
            messages = back
        for message in reversed(messages):
            queue.messages.appendleft((message, True))
            self.stored_bytes += held_size(message.headers, message.body)
            if message.expires is not None:
                self._expiring[destination] = None

    # ------------------------------------------------------------------ acknowledgements

    def _acked(self, session: Session, frame: Any) -> Optional[Tuple[_Subscription, List[str]]]:
        """The subscription and ack ids an ACK or NACK settles, or ``None`` after an ERROR."""
        name = "id" if session.version == "1.2" else "message-id"
        ack_id = frame.get(name)
        if ack_id is None and name == "id":
            ack_id = frame.get("message-id")
        sub = session.pending.get(ack_id) if ack_id is not None else None
        if sub is None or ack_id is None:
            self.fail(session, "ack-id", frame.command, name)
            return None
        if sub.ack == "client-individual":
            return sub, [ack_id]
        ids: List[str] = []
        for pending in sub.unacked:  # cumulative: every delivery up to this one
            ids.append(pending)
            if pending == ack_id:
                break
        return sub, ids

    def _ack(self, session: Session, frame: Any) -> None:
        found = self._acked(session, frame)
        if found is not None:
            sub, ids = found
            for ack_id in ids:
                del sub.unacked[ack_id]
                del session.pending[ack_id]
            cursor = self.streams.cursors.get(sub) if self.streams.cursors else None
            if cursor is not None:
                self.streams.pump(cursor)  # the credit the ACK gave back
            elif sub.prefetch:
                queue = self.queues.get(sub.destination)
                if queue is not None:
                    self._drain(queue)  # (room under the prefetch again)

    def _nack(self, session: Session, frame: Any) -> None:
        found = self._acked(session, frame)
        if found is None:
            return
        sub, ids = found
        cursor = self.streams.cursors.get(sub) if self.streams.cursors else None
        if cursor is not None:
            self.fail(session, "channel-died", f"basic.nack and basic.reject not supported by stream queues queue "
                      f"'{cursor.log.name}' in vhost '/'")  # fmt: skip
            return
        messages = [sub.unacked.pop(ack_id) for ack_id in ids]
        for ack_id in ids:
            del session.pending[ack_id]
        reject = frame.get("requeue", "true" if self.requeue_on_nack else "false") == "false"  # RabbitMQ's header
        if sub.destination.startswith("/topic/"):
            for message in [] if reject else messages:  # a topic copy belongs to this subscription only
                self._after_receipt.append(lambda m=message: self._redeliver(sub, m))  # type: ignore[misc]
            return
        queue = self.queues[sub.destination]
        self._requeue(sub.destination, queue, messages, reject)
        self._after_receipt.append(lambda: self._drain(queue))

    def _redeliver(self, sub: _Subscription, message: _Published) -> None:
        if sub.session.subscriptions.get(sub.id) is sub:
            self._deliver(sub, message, True)

    # ------------------------------------------------------------------ transactions

    def _transaction(self, session: Session, frame: Any) -> Optional[str]:
        tx: Optional[str] = frame.get("transaction")
        if tx is None:
            self.fail(session, "transaction-missing", frame.command)
        return tx

    def _begin(self, session: Session, frame: Any) -> None:
        tx = self._transaction(session, frame)
        if tx is None:
            return
        if tx in session.transactions:
            self.fail(session, "transaction-duplicate", tx)
            return
        if len(session.transactions) >= self.max_transactions:
            self.fail(session, "transactions-open", self.max_transactions)
            return
        session.transactions[tx] = []

    def _commit(self, session: Session, frame: Any) -> None:
        tx = self._transaction(session, frame)
        if tx is None:
            return
        held = session.transactions.pop(tx, None)
        if held is None:
            self.fail(session, "transaction-unknown", tx)
            return
        self._release(session, held)
        for inner in held:
            if session.closed:
                break
            self._handlers[inner.command](session, inner)

    def _abort(self, session: Session, frame: Any) -> None:
        tx = self._transaction(session, frame)
        if tx is None:
            return
        held = session.transactions.pop(tx, None)
        if held is None:
            self.fail(session, "transaction-unknown", tx)
            return
        self._release(session, held)

    def _hold(self, session: Session, frame: Any) -> bool:
        """Count a frame held in a transaction against the limits (an ERROR and False past one)."""
        size = held_size(frame.headers, frame.body)
        if session.transaction_bytes + size > self.max_transaction_bytes:
            self.fail(session, "transaction-bytes", self.max_transaction_bytes)
            return False
        if self.stored_bytes + size > self.max_stored_bytes:
            self.fail(session, "full", self.max_stored_bytes)
            return False
        session.transaction_bytes += size
        self.stored_bytes += size
        return True

    def _release(self, session: Session, held: List[Any]) -> None:
        """The frames of a transaction that ended no longer count (a COMMIT's SENDs count again if stored)."""
        size = sum(held_size(frame.headers, frame.body) for frame in held)
        session.transaction_bytes -= size
        self.stored_bytes -= size

    def _end_transactions(self, session: Session) -> None:
        for held in session.transactions.values():
            self._release(session, held)
        session.transactions.clear()

    def _disconnect(self, session: Session, frame: Any) -> None:
        receipt = frame.get("receipt")
        if receipt is not None:
            session.handle.receipt(receipt)
        session.handle.close()
        self.close(session)

    # ------------------------------------------------------------------ inspection

    def stats(self) -> Dict[str, int]:
        """Counts for tests and monitoring: sessions, queued messages, unacked deliveries, stored bytes."""
        return {
            "sessions": len(self.sessions),
            "queued": sum(len(q.messages) for q in self.queues.values()),
            "unacked": sum(len(s.pending) for s in self.sessions.values()),
            "transactions": sum(len(s.transactions) for s in self.sessions.values()),
            "subscriptions": sum(len(s.subscriptions) for s in self.sessions.values()),
            "stored_bytes": self.stored_bytes,
        }
