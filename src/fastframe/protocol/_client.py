"""The client role: CONNECT out, CONNECTED in; SEND, SUBSCRIBE, ACK ... out, MESSAGE, RECEIPT, ERROR in."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..codec import (
    VERSIONS,
    ColumnDecoder,
    Columns,
    DecodeError,
    EncodeError,
    Encoder,
    Frame,
    Heartbeat,
    route_messages,
)
from . import spec
from ._columnar import everyday_read, frames_of, split_read
from ._core import _BEAT, ConnectionCore, Headers, State, check_versions, header_list, misuse
from ._errors import LocalProtocolError
from ._events import Connected, Error, Event, Message, Receipt
from ._inbox import Inbox

_CONNECTED = State.CONNECTED
#: Ids of recently closed subscriptions remembered, so in-flight MESSAGEs for them are no violation.
_CLOSED_SUBSCRIPTIONS_KEPT = 1024
#: CONNECT headers that connect()'s own arguments write: refused among its ``headers``.
RESERVED_CONNECT_HEADERS = frozenset({"accept-version", "host", "heart-beat", "login", "passcode", "content-length"})
#: What a MESSAGE for a subscription this connection never made becomes (``unknown_subscriptions``).
UNKNOWN_SUBSCRIPTION_POLICIES = ("deliver", "refuse")


__all__ = ["ClientConnection", "RESERVED_CONNECT_HEADERS", "UNKNOWN_SUBSCRIPTION_POLICIES"]


class ClientConnection(ConnectionCore):
    """A STOMP client connection without I/O: every method returns the bytes to write.

    Start with :meth:`connect`, feed what the server sends to :meth:`receive_data` until a
    :class:`Connected` event arrives, then :meth:`send`, :meth:`subscribe`, :meth:`ack` ...
    Constructor options are those of the shared core (``strict``, ``escapes``, ``validate``,
    ``heartbeat_grace``, decoder limits and tolerances), and ``message_class``: what each MESSAGE
    becomes, :class:`Message` or a subclass (or any callable taking ``(frame, subscription,
    message_id, ack_id, destination)`` and returning a :class:`Message`); a transport that wraps
    every message (:mod:`fastframe.aio`) passes its own, so one object per message is built, not two.

    ``unknown_subscriptions`` says what a MESSAGE for a subscription this connection never made
    becomes. ``"deliver"`` (the default): a :class:`Message` event like any other, its
    ``subscription`` the header's value, not tracked in :attr:`unacked` (nothing to ACK here): brokers
    send such messages on purpose, RabbitMQ delivers the replies to a ``reply-to:/temp-queue/NAME`` on
    subscription ``/temp-queue/NAME``; the application routes them (``message.subscription not in
    connection.subscriptions``). ``"refuse"``: a :class:`RemoteProtocolError`, as the specification's
    letter reads (a server may only send MESSAGEs for the client's subscriptions).
    """

    our_side = "client"
    peer_side = "server"

    def __init__(
        self, *, message_class: Callable[..., Message] = Message, unknown_subscriptions: str = "deliver", **options: Any
    ) -> None:
        if unknown_subscriptions not in UNKNOWN_SUBSCRIPTION_POLICIES:
            raise ValueError(f"unknown_subscriptions must be 'deliver' or 'refuse', not {unknown_subscriptions!r}")
        #: What each MESSAGE becomes (see the class's description).
        self.message_class = message_class
        #: What a MESSAGE for a subscription never made becomes: ``"deliver"`` or ``"refuse"``.
        self.unknown_subscriptions = unknown_subscriptions
        self._bare_encoder: Optional[Encoder] = None  # SENDs without content-length (send(content_length=False))
        self._last_frame: Optional[Any] = None
        self._pending_frame: Optional[Tuple[str, List[Tuple[str, str]], bytes]] = None
        # the SEND fast path: besides the wire's encoder, the one of the version itself when the
        # escapes differ (validation asks whether the frame can be written in the version)
        self._check_encoder: Optional[Any] = None
        super().__init__(**options)
        self.offered_heartbeat: Tuple[int, int] = (0, 0)
        #: Open subscriptions: id -> (destination, ack mode).
        self.subscriptions: Dict[str, Tuple[str, str]] = {}
        #: Open transactions.
        self.transactions: Dict[str, None] = {}
        #: Unacknowledged messages: ack id -> (subscription id, message-id), oldest first.
        self.unacked: Dict[str, Tuple[str, str]] = {}
        self._closed_subscriptions: Dict[str, None] = {}
        # route(): subscription id -> (inbox, its deque, whether it acknowledges)
        self._routes: Dict[str, Tuple[Inbox[Any], Any, bool]] = {}
        self._filled: List[Inbox[Any]] = []
        # route_columns(): (subscription id, inbox) while its MESSAGEs are queued as columns
        self._columnar: Optional[Tuple[str, Inbox[Any]]] = None

    @property
    def last_frame(self) -> Optional[Any]:
        """The frame behind the bytes the last sending method returned (for logging hooks)."""
        pending = self._pending_frame
        if pending is not None:  # the SEND fast path encodes without a Frame: built when asked for
            self._last_frame, self._pending_frame = Frame(*pending), None
        return self._last_frame

    @last_frame.setter
    def last_frame(self, frame: Optional[Any]) -> None:
        self._last_frame, self._pending_frame = frame, None

    def _switch_codec(self, version: str) -> None:
        super()._switch_codec(version)
        self._bare_encoder = None
        check = Encoder(version)
        self._check_encoder = None if self._encoder.options == check.options else check  # type: ignore[union-attr]

    # ------------------------------------------------------------------ handshake

    def connect(
        self,
        host: str,
        *,
        login: Optional[str] = None,
        passcode: Optional[str] = None,
        heartbeat: Tuple[int, int] = (0, 0),
        versions: Sequence[str] = VERSIONS,
        headers: Headers = None,
        command: str = "CONNECT",
    ) -> bytes:
        """The CONNECT (or ``command="STOMP"``) frame offering ``versions`` and ``heartbeat=(cx, cy)`` ms.

        ``headers`` are added after the frame's own (``client-id`` for ActiveMQ's durable topic
        subscriptions, a vendor's headers); those the other arguments write (``accept-version``,
        ``host``, ``heart-beat``, ``login``, ``passcode``) and ``content-length`` are refused with a
        :class:`LocalProtocolError`: pass them as the arguments.
        """
        if command not in ("CONNECT", "STOMP"):
            raise ValueError(f"command must be CONNECT or STOMP, not {command!r}")
        extra = header_list(headers)
        for name, _ in extra:
            if name in RESERVED_CONNECT_HEADERS:
                raise misuse(
                    f"header {name!r} is written by connect()'s own arguments, not headers=", command, (name, "")
                )
        offered = check_versions(versions)
        cx, cy = heartbeat
        pairs = [("accept-version", ",".join(offered)), ("host", host), ("heart-beat", f"{cx},{cy}")]
        if login is not None:
            pairs.append(("login", login))
        if passcode is not None:
            pairs.append(("passcode", passcode))
        pairs += extra
        newest = max(offered, key=VERSIONS.index)
        _, data = self._build(command, pairs, state=State.IDLE, version="1.2" if command == "STOMP" else newest)
        self.offered_heartbeat = (cx, cy)
        self.offered_versions = offered
        self.state = State.CONNECTING
        return data

    def _after_handshake(self, frame: Any) -> None:
        if frame.command != "CONNECTED":  # (CONNECTED switched the codec when it was dispatched)
            self.state = State.CLOSED  # ERROR: the server refused us

    # ------------------------------------------------------------------ receiving

    def _dispatch_all(self, items: Sequence[Any], events: List[Event]) -> None:
        if not self._handshaken or self.strict:
            super()._dispatch_all(items, events)
            return
        # the usual read, many MESSAGEs at once: those of routed subscriptions go straight into
        # their inboxes (route_messages, compiled in the codec's C twin), the others through the
        # shared loop and _dispatch, inlined; route_messages stops at anything else, so the order
        # of everything is kept
        append, on_message, routes = events.append, self._on_message, self._routes
        i, end = 0, len(items)
        while i < end:
            if routes and self.state is _CONNECTED:
                i = route_messages(
                    items,  # type: ignore[arg-type]  # (the decoder's list)
                    i,
                    routes,
                    self.version == "1.2",
                    self.unacked,
                    self.message_class,
                    self._filled,
                    events,  # (the EOL a broker writes after each frame: a heart-beat, routed past)
                    _BEAT,
                )
                if i == end:
                    return
            item = items[i]
            i += 1
            if type(item) is Heartbeat:
                append(_BEAT)
            elif type(item) is Columns:  # a columnar subscription's MESSAGEs (see _decode)
                self._queue_columns(item, events)
            elif item.command == "MESSAGE" and self.state is _CONNECTED:
                append(on_message(item, events))
            else:
                super()._dispatch(item, events)

    def route(self, id: str, inbox: Inbox[Any]) -> None:
        """Queue the MESSAGEs of subscription ``id`` straight into ``inbox`` (the receiving fast path).

        From now on, a MESSAGE of that subscription read while the connection is open (and not
        ``strict``) becomes a :attr:`message_class` object appended to ``inbox.items``, with no
        event returned for it; :meth:`take_filled` says which inboxes got messages, for the caller
        to call their :meth:`Inbox.filled` (which pauses reading as :meth:`Inbox.put` would) and
        ``wake``. Anything unusual about a MESSAGE returns it as an event as usual. Routing has no
        bound of its own: the inbox's bound holds to one read either way. :meth:`unroute` and
        :meth:`unsubscribe` end it (as closing down should: then :meth:`Inbox.put` drops what
        comes past the hard bound).
        """
        if id not in self.subscriptions:
            raise misuse(f"no subscription with id {id!r} to route", "SUBSCRIBE", ("id", id))
        self._routes[id] = (inbox, inbox.items, self.subscriptions[id][1] != "auto")

    def route_columns(self, id: str, inbox: Inbox[Any]) -> None:
        """Queue the MESSAGEs of subscription ``id`` into ``inbox`` as :class:`fastframe.Columns`,
        one item per read: no Python object per message (the batch consumer's fast path, e.g. into Arrow).

        The connection decodes with a :class:`fastframe.ColumnDecoder` from now on, so ``id`` must be
        its only subscription (another :meth:`subscribe` is refused while it is routed so), of ack mode
        ``auto`` or ``client``, on a connection that is not ``strict``, with no frame under way (call it
        right after :meth:`subscribe`). A read of MESSAGEs only is queued whole; a read with anything
        else in it is rebuilt as frames in order (the other frames become events as usual, each run of
        MESSAGEs one Columns item). What the decoder refuses, it refuses as ever, and header bytes
        that are not UTF-8 too (``keep_invalid_utf8`` does not apply: Arrow's strings are UTF-8).

        No ledger is kept of these messages: :meth:`ack` and :meth:`nack` take a row's ``ack``
        header (1.2) or ``message-id`` as given. After :meth:`unroute` (or :meth:`unsubscribe`) the
        connection goes on decoding columns, and every row becomes a frame again (the slow path).
        """
        known = self.subscriptions.get(id)
        if known is None:
            raise misuse(f"no subscription with id {id!r} to route", "SUBSCRIBE", ("id", id))
        self._check_columns(id, known[1], len(self.subscriptions) - 1)
        if type(self._decoder) is not ColumnDecoder:
            self._base += self._decoder.bytes_fed
            options = dict(self._decoder_options, escapes=self.escapes, keep_invalid_utf8=False)
            self._decoder = ColumnDecoder(self.version or "1.2", **options)
        self._routes.pop(id, None)
        self._columnar = (id, inbox)

    def check_columns(self, id: str, ack: str = "auto") -> None:
        """Raise :class:`LocalProtocolError` when a new subscription ``id`` of ack mode ``ack`` could not
        be routed as columns now (see :meth:`route_columns`): ask before :meth:`subscribe`."""
        self._check_columns(id, ack, len(self.subscriptions))

    def _check_columns(self, id: str, ack: str, others: int) -> None:
        refusal = (
            "it is not the connection's only subscription" if others
            else "its ack mode is client-individual" if ack == "client-individual"
            else "the connection is strict" if self.strict
            else "bytes of a frame are under way" if self._decoder.buffered or self._lent
            else ""
        )  # fmt: skip
        if refusal:
            raise misuse(f"cannot route subscription {id!r} as columns: {refusal}", "SUBSCRIBE", ("id", id))

    def unroute_all(self) -> None:
        """:meth:`unroute` every subscription (closing down: every MESSAGE is an event again)."""
        self._routes.clear()
        self._columnar = None

    def unroute(self, id: str) -> None:
        """Stop queueing subscription ``id``'s MESSAGEs into an inbox: they are events again."""
        self._routes.pop(id, None)
        if self._columnar is not None and self._columnar[0] == id:
            self._columnar = None

    def _decode(self, decode: Callable[[Any], Any], data: Any, events: List[Event]) -> List[Any]:
        if type(self._decoder) is not ColumnDecoder:
            return super()._decode(decode, data, events)
        decoder = self._decoder
        beats = decoder.heartbeats
        try:
            decode(data)
        except DecodeError as exc:  # the rows before the bad bytes are taken first, as a Decoder's frames
            exc.frames = self._column_items(decoder.take()) if decoder.rows else []
            self._undecodable(exc, events)
        self.frames_received += decoder.rows + decoder.heartbeats - beats
        return self._column_items(decoder.take()) if decoder.rows else []

    def _column_items(self, columns: Columns) -> List[Any]:
        columnar = self._columnar
        if columnar is None:
            return frames_of(columns)
        if everyday_read(columns, columnar[0]):
            return [columns]
        return split_read(columns, columnar[0])

    def _queue_columns(self, columns: Columns, events: List[Event]) -> None:
        columnar = self._columnar
        if columnar is None:  # (unrouted within the read): the rows are frames again
            self._dispatch_all(frames_of(columns), events)
            return
        inbox = columnar[1]
        inbox.items.append(columns)
        filled = self._filled
        if not filled or filled[-1] is not inbox:
            filled.append(inbox)

    def take_filled(self) -> Sequence[Inbox[Any]]:
        """The inboxes that routed MESSAGEs were queued into since the last call (each once per
        run of messages; usually once per read), for the caller to wake their readers."""
        filled = self._filled
        if not filled:
            return ()
        self._filled = []
        return filled

    def _dispatch(self, frame: Any, events: List[Event]) -> None:
        # the everyday frame, a MESSAGE on an open session, without the general path's calls; a
        # strict connection checks every frame against the specification first (the shared path)
        if frame.command == "MESSAGE" and self.state is _CONNECTED and not self.strict:
            events.append(self._on_message(frame, events))
        else:
            super()._dispatch(frame, events)

    def _on_frame(self, frame: Any, events: List[Event]) -> Any:
        command = frame.command
        if command == "ERROR":
            receipt_id = frame.get("receipt-id")
            if receipt_id is not None:
                self._take_receipt(receipt_id)
            return Error(frame, frame.get("message"), receipt_id)
        if self.state is State.IDLE:
            self._fail(f"{command} arrived before CONNECT was sent", frame, events)
        if self.state is State.CONNECTING:
            if command != "CONNECTED":
                self._fail(f"expected CONNECTED or ERROR, got {command}", frame, events)
            return self._on_connected(frame, events)
        if command == "MESSAGE":
            return self._on_message(frame, events)
        if command == "RECEIPT":
            (receipt_id,) = self._require(frame, events, "receipt-id")
            for_command = self._take_receipt(receipt_id)
            if for_command is None:
                self._fail(f"RECEIPT for unknown receipt id {receipt_id!r}", frame, events)
            if for_command == "DISCONNECT":
                self.state = State.CLOSED
            return Receipt(frame, receipt_id, for_command)
        self._fail(f"a server must not send {command} (state {self.state.value})", frame, events)

    def _on_connected(self, frame: Any, events: List[Event]) -> Event:
        version = frame.get("version") or "1.0"
        if version not in self.offered_versions:
            self._fail(f"the server chose version {version!r}, not one of those offered", frame, events)
        try:
            server_beat = spec.parse_heartbeat(frame.get("heart-beat"))
        except ValueError as exc:
            self._fail(f"bad heart-beat header in CONNECTED: {exc}", frame, events, exc)
        send_ms, receive_ms = spec.negotiate_heartbeat(self.offered_heartbeat, server_beat)
        self.heartbeat = (send_ms, receive_ms)
        self._switch_codec(version)
        self.state = State.CONNECTED
        return Connected(frame, version, self.heartbeat)

    def _on_message(self, frame: Any, events: List[Event]) -> Any:
        get = frame.get
        message_id = get("message-id")
        sub_id = get("subscription")
        known = self.subscriptions.get(sub_id) if sub_id is not None else None
        if known is None or type(message_id) is not str:
            return self._on_unusual_message(frame, events)
        # the everyday MESSAGE: for an open subscription, with its message-id
        ack_id = (get("ack") if self.version == "1.2" else None) or message_id
        if known[1] != "auto":
            self.unacked[ack_id] = (sub_id, message_id)
        return self.message_class(frame, sub_id, message_id, ack_id, get("destination"))

    def _on_unusual_message(self, frame: Any, events: List[Event]) -> Any:
        # no message-id, no subscription (1.0), an unknown or just closed subscription: every check
        get = frame.get
        message_id = get("message-id")
        if message_id is None:
            self._require(frame, events, "message-id")  # raises
        message_id = str(message_id)
        sub_id = get("subscription")
        version = self.version
        if sub_id is None:
            if version != "1.0":
                self._fail("MESSAGE frame without a 'subscription' header", frame, events)
            mode = None
        else:
            known = self.subscriptions.get(sub_id)
            if known is None and self.unknown_subscriptions == "refuse" and sub_id not in self._closed_subscriptions:
                self._fail(f"MESSAGE for unknown subscription {sub_id!r}", frame, events)
            mode = None if known is None else known[1]
        ack_id = (get("ack") if version == "1.2" else None) or message_id
        if mode is not None and mode != "auto":
            self.unacked[ack_id] = (sub_id, message_id)
        return self.message_class(frame, sub_id, message_id, ack_id, get("destination"))

    # ------------------------------------------------------------------ sending

    def send(
        self,
        destination: str,
        body: Union[bytes, str] = b"",
        headers: Headers = None,
        *,
        content_type: Optional[str] = None,
        transaction: Optional[str] = None,
        receipt: Optional[str] = None,
        content_length: bool = True,
    ) -> bytes:
        """SEND ``body`` (bytes, or str sent as UTF-8 ``text/plain`` unless ``content_type`` says).

        ``content_length=False`` leaves the ``content-length`` header out (the body then ends at
        its first NUL): ActiveMQ makes a JMS TextMessage of such a SEND, a BytesMessage otherwise
        (stomp.py's ``auto_content_length=False``). A body holding a NUL cannot be sent so: a
        :class:`LocalProtocolError`.
        """
        if not content_length:
            return self._send_bare(destination, body, headers, content_type, transaction, receipt)
        if isinstance(body, str):
            body = body.encode("utf-8")
            content_type = content_type or "text/plain;charset=utf-8"
        pairs = [("destination", destination)]
        if content_type is not None:
            pairs.append(("content-type", content_type))
        if transaction is not None or headers is not None:
            pairs += self._tx_header(transaction, "SEND") + header_list(headers)
        if type(body) is not bytes:
            body = bytes(body)
        if (
            receipt is None
            and self.state is _CONNECTED
            and self._error is None
            and type(destination) is str
            and (content_type is None or type(content_type) is str)
        ):
            # The everyday SEND, encoded once without a Frame. For a SEND whose destination is a
            # str, the only rules spec.frame_problems can find broken are the content-length
            # (the encoder refuses the same values) and what the version cannot carry (the
            # encoder of the version refuses it): when the encoders accept the frame it is valid.
            # Anything refused takes the general path, which reports it exactly as before.
            try:
                data = self._encoder.encode("SEND", pairs, body)  # type: ignore[union-attr]
                if self.validate and self._check_encoder is not None:
                    self._check_encoder.encode("SEND", pairs, body)
            except EncodeError:
                pass
            else:
                self._pending_frame = ("SEND", pairs, body)
                return data
        return self._build("SEND", pairs, body, receipt=receipt)[1]

    def send_many(
        self, sends: Sequence[Tuple[str, Union[bytes, str], Headers, Optional[str], Optional[str]]]
    ) -> Tuple[bytes, List[Tuple[int, Exception]]]:
        """SEND each of ``sends``, the arguments of :meth:`send` as ``(destination, body, headers,
        content_type, transaction)``, back to back: the bytes of those it sends, and ``(index, error)``
        for each that :meth:`send` refuses (the others go). The everyday ones are encoded by the
        codec, many in one call (:meth:`fastframe.Encoder.encode_sends`); the others one by one.
        :attr:`last_frame` is None after it: a frame hook wants :meth:`send`, a frame at a time.
        """
        chunks: List[bytes] = []
        refused: List[Tuple[int, Exception]] = []
        # the codec's run has no receipt and no check encoder: with a check, each frame goes by send()
        fast = self.state is _CONNECTED and self._error is None and not (self.validate and self._check_encoder)
        sends = sends if type(sends) is list else list(sends)
        i, end = 0, len(sends)
        while i < end:
            if fast:
                data, i = self._encoder.encode_sends(sends, i)  # type: ignore[union-attr]
                if data:
                    chunks.append(data)
                if i == end:
                    break
            try:  # (a tuple of another size too: its error is this one's, the others go)
                destination, body, headers, content_type, transaction = sends[i]
                chunks.append(self.send(destination, body, headers, content_type=content_type, transaction=transaction))
            except Exception as exc:  # (what send() raises for this one: the others go)
                refused.append((i, exc))
            i += 1
        self.last_frame = None
        return b"".join(chunks), refused

    def _send_bare(
        self,
        destination: str,
        body: Union[bytes, str],
        headers: Headers,
        content_type: Optional[str],
        transaction: Optional[str],
        receipt: Optional[str],
    ) -> bytes:
        """send(content_length=False): the general path with an encoder that adds no content-length."""
        if isinstance(body, str):
            body = body.encode("utf-8")
            content_type = content_type or "text/plain;charset=utf-8"
        body = bytes(body)
        pairs = [("destination", destination)]
        if content_type is not None:
            pairs.append(("content-type", content_type))
        pairs += self._tx_header(transaction, "SEND") + header_list(headers)
        if b"\0" in body or any(name == "content-length" for name, _ in pairs):
            what = "a body holding a NUL" if b"\0" in body else "a content-length header"
            raise LocalProtocolError(f"cannot SEND {what} with content_length=False", Frame("SEND", pairs, body))
        if self._bare_encoder is None:
            self._bare_encoder = Encoder(self.version or "1.2", escapes=self.escapes, content_length=False)
        return self._build("SEND", pairs, body, receipt=receipt, encoder=self._bare_encoder)[1]

    def subscribe(
        self, id: str, destination: str, *, ack: str = "auto", headers: Headers = None, receipt: Optional[str] = None
    ) -> bytes:
        """SUBSCRIBE to ``destination`` as subscription ``id`` with ack mode auto, client or client-individual."""
        if id in self.subscriptions:
            raise misuse(
                f"subscription id {id!r} is already in use", "SUBSCRIBE", ("id", id), ("destination", destination)
            )
        if self._columnar is not None:
            raise misuse(
                f"subscription {self._columnar[0]!r} is routed as columns: it must stay the connection's only one",
                "SUBSCRIBE", ("id", id), ("destination", destination),
            )  # fmt: skip
        pairs = [("id", id), ("destination", destination), ("ack", ack), *header_list(headers)]
        data = self._build("SUBSCRIBE", pairs, receipt=receipt)[1]
        self.subscriptions[id] = (destination, ack)
        self._closed_subscriptions.pop(id, None)
        return data

    def unsubscribe(self, id: str, *, headers: Headers = None, receipt: Optional[str] = None) -> bytes:
        """UNSUBSCRIBE subscription ``id``; its unacknowledged messages are forgotten."""
        if id not in self.subscriptions:
            raise misuse(f"no subscription with id {id!r}", "UNSUBSCRIBE", ("id", id))
        data = self._build("UNSUBSCRIBE", [("id", id), *header_list(headers)], receipt=receipt)[1]
        self._forget_subscription(id)
        return data

    def ack(
        self,
        message: Union[Message, str],
        *,
        subscription: Optional[str] = None,
        transaction: Optional[str] = None,
        receipt: Optional[str] = None,
    ) -> bytes:
        """ACK a message; in ``client`` mode, the older ones of its subscription too.

        ``message`` is a :class:`Message` or an id kept from one: its ``ack_id`` or its
        ``message-id`` (what stomp.py users keep), of a message this connection received and has
        not settled. The connection knows each such message's subscription, so the ACK gets the
        headers its version needs (1.2 ``id``; 1.1 ``message-id`` and ``subscription``; 1.0
        ``message-id``); ``subscription`` is needed only when a message-id waits on two
        subscriptions (a topic delivers one message to each), and is checked when given. Anything
        else (settled already, from an ``auto`` subscription, from an earlier connection: the broker
        redelivers those) is a :class:`LocalProtocolError`.
        """
        return self._ack("ACK", message, subscription, transaction, receipt)

    def nack(
        self,
        message: Union[Message, str],
        *,
        subscription: Optional[str] = None,
        transaction: Optional[str] = None,
        receipt: Optional[str] = None,
    ) -> bytes:
        """NACK a message (1.1 and later); ``message`` and ``subscription`` as for :meth:`ack`."""
        return self._ack("NACK", message, subscription, transaction, receipt)

    def _unacked_id(self, command: str, message: Union[Message, str], subscription: Optional[str]) -> str:
        """The key in :attr:`unacked` that ``message`` (a Message, an ack id or a message-id) names."""
        ack_id = message.ack_id if isinstance(message, Message) else message
        known = self.unacked.get(ack_id) if ack_id is not None else None
        if known is not None and (subscription is None or known[0] == subscription):
            return str(ack_id)
        columnar = self._columnar
        if columnar is not None and isinstance(ack_id, str) and subscription in (None, columnar[0]):
            return ack_id  # a row of the columnar subscription: no ledger to check (see route_columns)
        if not isinstance(message, Message):  # maybe a message-id kept where the ack id differs (1.2)
            found = [a for a, (s, m) in self.unacked.items() if m == message and subscription in (None, s)]
            if len(found) == 1:
                return found[0]
            if found:
                subs = ", ".join(repr(self.unacked[a][0]) for a in found)
                raise misuse(
                    f"cannot {command} {message!r}: it waits on subscriptions {subs}; pass subscription=",
                    command, ("message-id", message),
                )  # fmt: skip
        where = "" if subscription is None else f" of subscription {subscription!r}"
        raise misuse(
            f"cannot {command} {ack_id!r}: not an unacknowledged message{where} (settled already, of an auto "
            "subscription, or of an earlier connection)",
            command, ("id", str(ack_id)),
        )  # fmt: skip

    def _ack(
        self,
        command: str,
        message: Union[Message, str],
        subscription: Optional[str],
        transaction: Optional[str],
        receipt: Optional[str],
    ) -> bytes:
        ack_id = self._unacked_id(command, message, subscription)
        known = self.unacked.get(ack_id)
        if known is None:  # a row of the columnar subscription (no ledger): the id as given
            assert self._columnar is not None  # (_unacked_id returns such an id only then)
            known = (self._columnar[0], ack_id)
        sub_id, message_id = known
        if self.version == "1.2":
            pairs = [("id", ack_id)]
        elif self.version == "1.1":
            pairs = [("message-id", message_id), ("subscription", sub_id)]
        else:
            pairs = [("message-id", message_id)]
        data = self._build(command, pairs + self._tx_header(transaction, command), receipt=receipt)[1]
        if ack_id in self.unacked:
            self._settle(ack_id)
        return data

    def begin(self, transaction: str, *, receipt: Optional[str] = None) -> bytes:
        """BEGIN ``transaction``."""
        if transaction in self.transactions:
            raise misuse(f"transaction {transaction!r} is already open", "BEGIN", ("transaction", transaction))
        data = self._build("BEGIN", [("transaction", transaction)], receipt=receipt)[1]
        self.transactions[transaction] = None
        return data

    def commit(self, transaction: str, *, receipt: Optional[str] = None) -> bytes:
        """COMMIT ``transaction``."""
        return self._end("COMMIT", transaction, receipt)

    def abort(self, transaction: str, *, receipt: Optional[str] = None) -> bytes:
        """ABORT ``transaction``."""
        return self._end("ABORT", transaction, receipt)

    def _end(self, command: str, transaction: str, receipt: Optional[str]) -> bytes:
        self._tx_header(transaction, command)
        data = self._build(command, [("transaction", transaction)], receipt=receipt)[1]
        del self.transactions[transaction]
        return data

    def _tx_header(self, transaction: Optional[str], command: str) -> List[Tuple[str, str]]:
        if transaction is None:
            return []
        if transaction not in self.transactions:
            raise misuse(f"no open transaction {transaction!r}", command, ("transaction", transaction))
        return [("transaction", transaction)]

    def disconnect(self, *, receipt: Optional[str] = None) -> bytes:
        """DISCONNECT; with a ``receipt`` the state stays DISCONNECTING until the RECEIPT arrives."""
        data = self._build("DISCONNECT", [], receipt=receipt)[1]
        self.state = State.DISCONNECTING if receipt is not None else State.CLOSED
        return data

    # ------------------------------------------------------------------ the session's state

    def _forget_subscription(self, sub_id: str) -> None:
        self.subscriptions.pop(sub_id, None)
        self.unroute(sub_id)
        self._closed_subscriptions[sub_id] = None
        if len(self._closed_subscriptions) > _CLOSED_SUBSCRIPTIONS_KEPT:
            del self._closed_subscriptions[next(iter(self._closed_subscriptions))]
        for ack_id in [a for a, (s, _) in self.unacked.items() if s == sub_id]:
            del self.unacked[ack_id]

    def _settle(self, ack_id: str) -> List[str]:
        """Remove ``ack_id`` (and, in ``client`` mode, the older ones of its subscription); return them."""
        unacked = self.unacked
        sub_id, _ = unacked[ack_id]
        if self.subscriptions.get(sub_id, ("", "auto"))[1] != "client":
            del unacked[ack_id]  # (no walk: an ACK per message must not cost the whole ledger)
            return [ack_id]
        settled = []
        for key, (sub, _) in unacked.items():  # oldest first, up to ack_id: what it settles
            if sub == sub_id:
                settled.append(key)
            if key == ack_id:
                break
        for key in settled:
            del unacked[key]
        return settled
