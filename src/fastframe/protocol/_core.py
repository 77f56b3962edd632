"""The core both roles share: state, the codec per negotiated version, receipts, liveness.

Bytes in, events out; calls in, bytes out. No sockets, no clocks, no threads: time enters as the
``now`` argument (seconds from any monotonic clock).
"""

from __future__ import annotations

import enum
import itertools
from typing import Any, Callable, Dict, Iterable, List, Mapping, NoReturn, Optional, Sequence, Tuple, Union

from ..codec import VERSIONS, DecodeError, Decoder, EncodeError, Encoder, Frame, Heartbeat, receive_size, received_size
from . import spec
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import ConnectionClosed, Event, HeartbeatReceived
from ._heartbeat import DEFAULT_GRACE, HeartbeatTimer

__all__ = ["State", "Headers", "ConnectionCore"]

Headers = Union[Mapping[str, str], Iterable[Tuple[str, str]], None]

_BEAT = HeartbeatReceived()  # immutable and field-less: one instance serves every heart-beat

#: Ids of receipts given up on remembered (:meth:`ConnectionCore.forget_receipt`), so a late RECEIPT
#: is no violation.
_FORGOTTEN_RECEIPTS_KEPT = 1024


class State(enum.Enum):
    """Where a connection is. Both roles share the states."""

    IDLE = "idle"  # nothing exchanged yet
    CONNECTING = "connecting"  # CONNECT sent (client) or received (server), no answer yet
    CONNECTED = "connected"  # the session is open
    DISCONNECTING = "disconnecting"  # DISCONNECT sent or received, its receipt pending
    CLOSED = "closed"  # over: disconnected, rejected, the stream ended, or the peer broke the protocol


def misuse(message: str, command: str, *headers: Tuple[str, str]) -> LocalProtocolError:
    """A :class:`LocalProtocolError` carrying the frame the refused call would have sent."""
    return LocalProtocolError(message, Frame(command, list(headers)))


def header_list(headers: Headers) -> List[Tuple[str, str]]:
    """Headers given as a mapping or pairs, as a list of pairs."""
    if headers is None:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(str(name), str(value)) for name, value in items]


class ConnectionCore:
    """What :class:`ClientConnection` and :class:`ServerConnection` share (not used directly).

    Options: ``strict`` makes the decoder strict and checks every incoming frame against the
    specification (:func:`fastframe.protocol.spec.frame_problems`); ``escapes`` is the escape set in both
    directions (``"1.2"`` for RabbitMQ on any version); ``validate`` checks every outgoing frame;
    ``heartbeat_grace`` is how many receive intervals of silence make the peer silent; the other
    keyword arguments are :class:`fastframe.Decoder` options (limits and tolerances).
    """

    our_side = "client"  # overridden: "client" or "server"
    peer_side = "server"

    def __init__(
        self,
        *,
        strict: bool = False,
        escapes: Optional[str] = None,
        validate: bool = True,
        heartbeat_grace: float = DEFAULT_GRACE,
        **decoder_options: Any,
    ) -> None:
        if "heartbeat_events" in decoder_options or "version" in decoder_options:
            raise TypeError("the connection chooses the decoder's version and heart-beat events")
        if heartbeat_grace < 1.0:
            raise ValueError(f"heartbeat_grace must be at least 1.0, not {heartbeat_grace!r}")
        self.strict = strict
        self.escapes = escapes
        self.validate = validate
        self.heartbeat_grace = heartbeat_grace
        self._decoder_options = dict(decoder_options, strict=strict)
        # Handshake frames are never escaped; an ERROR before CONNECTED is read raw (as ActiveMQ sends it).
        self._decoder = Decoder("1.2", heartbeat_events=True, **dict(self._decoder_options, escapes=escapes or "1.0"))
        self._encoder: Optional[Encoder] = None
        self.state = State.IDLE
        #: The negotiated version, once CONNECTED is sent or received.
        self.version: Optional[str] = None
        #: The negotiated heart-beat intervals of our side, ``(send_ms, receive_ms)``.
        self.heartbeat: Tuple[int, int] = (0, 0)
        #: Pending receipts: receipt id -> the command that asked for it.
        self.pending_receipts: Dict[str, str] = {}
        self._forgotten_receipts: Dict[str, str] = {}  # receipt id -> command, oldest first
        self._timer: Optional[HeartbeatTimer] = None
        self._now: Optional[float] = None
        self._ready: List[Event] = []
        self._error: Optional[RemoteProtocolError] = None
        self._ended = False  # receive_eof() was called: no byte may follow
        self._handshaken = False  # the first frame was seen
        self._held: Optional[bytearray] = None  # (server) bytes after CONNECT, until accept()
        self._backlog = b""  # (server) those bytes, to decode at the next receive_data()
        self._ids = itertools.count(1)
        self._base = 0  # stream offset where the current decoder started (the handshake's had its own)
        # get_buffer(): the decoder whose buffer was lent (None: our own, for bytes that go through
        # receive_data()), and whether one is lent at all
        self._lent_decoder: Optional[Any] = None
        self._lent = False
        self._scratch = bytearray()
        #: Frames and heart-beats decoded from the peer so far, those before an undecodable byte included
        #: (a transport compares it across a read).
        self.frames_received = 0
        #: The frame behind the bytes the last sending method returned (for logging hooks).
        self.last_frame: Optional[Any] = None

    # ------------------------------------------------------------------ public helpers

    def new_id(self, prefix: str = "") -> str:
        """A fresh id for receipts, subscriptions, transactions or messages (unique per connection)."""
        return f"{prefix}{next(self._ids)}"

    def forget_receipt(self, receipt_id: str) -> None:
        """Stop waiting for the receipt ``receipt_id`` (its wait timed out or was cancelled).

        It leaves :attr:`pending_receipts`; a RECEIPT that still comes for it is no violation (the
        last 1024 ids given up on are remembered), it returns its :class:`Receipt` event as ever.
        """
        command = self.pending_receipts.pop(receipt_id, None)
        if command is None:
            return
        forgotten = self._forgotten_receipts
        forgotten[receipt_id] = command
        if len(forgotten) > _FORGOTTEN_RECEIPTS_KEPT:
            del forgotten[next(iter(forgotten))]

    def _take_receipt(self, receipt_id: str) -> Optional[str]:
        """The command a receipt id was asked for by, pending or given up on (``None``: unknown)."""
        command = self.pending_receipts.pop(receipt_id, None)
        return self._forgotten_receipts.pop(receipt_id, None) if command is None else command

    @property
    def connected(self) -> bool:
        """Whether frames may be sent now."""
        return self.state is State.CONNECTED

    @property
    def buffered(self) -> int:
        """Bytes received that complete no frame yet (held ones included): a frame is under way."""
        return int(self._decoder.buffered) + len(self._held or b"") + len(self._backlog)

    @property
    def frames_end(self) -> int:
        """Offset in the peer's stream just past the last frame (or heart-beat) completed."""
        return int(self._base + self._decoder.bytes_fed - self._decoder.buffered)

    # ------------------------------------------------------------------ liveness

    def _note_now(self, now: Optional[float]) -> Optional[HeartbeatTimer]:
        if now is not None:
            self._now = now if self._now is None else max(self._now, now)
        if self._timer is None and self.version is not None and self._now is not None:
            self._timer = HeartbeatTimer(*self.heartbeat, grace=self.heartbeat_grace, now=self._now)
        return self._timer

    def _heard(self, now: Optional[float], nbytes: int) -> None:
        """``nbytes`` arrived at ``now``: the peer is alive (any byte counts)."""
        timer = self._note_now(now)
        if timer is not None and now is not None and nbytes:
            timer.received(now)

    def data_sent(self, now: float) -> None:
        """Tell the connection that bytes went out at ``now`` (any byte postpones our next heart-beat)."""
        timer = self._note_now(now)
        if timer is not None:
            timer.sent(now)

    def heartbeat_due(self, now: float) -> bytes:
        """The bytes of a heart-beat (``b"\\n"``) when one is due at ``now``, else ``b""``."""
        timer = self._note_now(now)
        if timer is None or self.state not in (State.CONNECTED, State.DISCONNECTING) or not timer.send_due(now):
            return b""
        timer.sent(now)
        return b"\n"

    def keepalive(self, now: float) -> None:
        """Count the peer as alive at ``now`` without data: for a transport that paused reading, the
        silence was ours (what the peer sent waited unread), so it must not count against the peer."""
        timer = self._note_now(now)
        if timer is not None:
            timer.received(now)

    def peer_silent(self, now: float) -> bool:
        """Whether the peer sent nothing for longer than its heart-beat interval times the grace."""
        timer = self._note_now(now)
        return timer is not None and self.state in (State.CONNECTED, State.DISCONNECTING) and timer.peer_silent(now)

    def next_deadline(self) -> Optional[float]:
        """When to call :meth:`heartbeat_due` / :meth:`peer_silent` again (``None``: no heart-beats)."""
        timer = self._note_now(None)
        return None if timer is None else timer.next_deadline()

    # ------------------------------------------------------------------ receiving

    def receive_data(self, data: bytes, now: Optional[float] = None) -> List[Event]:
        """Feed bytes from the peer; return the events they complete, in order.

        ``now``, when given, records that the peer is alive. ``data`` may be split anywhere
        (``b""`` is no end of stream: call :meth:`receive_eof` for that). A violation by the peer
        raises :class:`RemoteProtocolError` whose ``events`` holds what came before it; data after
        :meth:`receive_eof` raises :class:`LocalProtocolError`.
        """
        self._raise_if_broken()
        self._refuse_after_eof()
        self._heard(now, len(data))
        events, self._ready = self._ready, []
        if self._backlog:
            data, self._backlog = self._backlog + bytes(data), b""
        if not data:
            return events
        if self._held is not None:
            self._hold(bytes(data), events)
        else:
            self._feed(bytes(data), events)
        return events

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """A writable buffer for the peer's next bytes, for ``asyncio.BufferedProtocol``.

        Write the bytes at its start, then call :meth:`buffer_updated`: the pair returns the events
        :meth:`receive_data` would for the same bytes. Once the handshake frame was read (and, on a
        server, answered) the buffer is the decoder's own, so the socket writes straight into it.
        """
        self._refuse_after_eof()
        size = receive_size(sizehint)
        if self._handshaken and self._held is None and not self._backlog and self._error is None:
            self._lent_decoder, self._lent = self._decoder, True
            return self._decoder.get_buffer(size)
        # the handshake is fed up to each NUL (or held until accept()): through receive_data()
        if len(self._scratch) < size:
            self._scratch = bytearray(size)
        self._lent_decoder, self._lent = None, True
        return memoryview(self._scratch)

    def buffer_updated(self, nbytes: int, now: Optional[float] = None) -> List[Event]:
        """``nbytes`` bytes were written into the buffer from :meth:`get_buffer`: what
        :meth:`receive_data` of them returns (and raises)."""
        decoder, lent = self._lent_decoder, self._lent
        if not lent:
            raise RuntimeError("buffer_updated() without get_buffer(): no buffer is lent")
        self._lent_decoder, self._lent = None, False
        self._refuse_after_eof()
        if decoder is None:  # our own buffer: the handshake's path
            nbytes = received_size(nbytes, len(self._scratch))
            return self.receive_data(bytes(self._scratch[:nbytes]), now)
        self._raise_if_broken()
        self._heard(now, nbytes)
        events, self._ready = self._ready, []
        self._dispatch_all(self._decode(decoder.buffer_updated, nbytes, events), events)
        return events

    def _hold(self, data: bytes, events: List[Event]) -> None:
        assert self._held is not None
        limit = self._decoder.options.max_frame_size
        if len(self._held) + len(data) > limit:
            self._fail(
                f"more than {limit} bytes (max_frame_size) arrived before the CONNECT was answered", None, events
            )
        self._held += data

    def receive_eof(self) -> List[Event]:
        """The peer closed the stream. Raises :class:`RemoteProtocolError` when it stopped mid-frame.

        Once is enough: a second call returns no event, and data after it raises :class:`LocalProtocolError`.
        """
        self._raise_if_broken()
        if self._ended:
            return []
        self._ended = True
        events, self._ready = self._ready, []
        try:
            self._decoder.close()
        except DecodeError as exc:
            self._undecodable(exc, events, "the peer closed the connection inside a frame")
        self.state = State.CLOSED
        events.append(ConnectionClosed())
        return events

    def _refuse_after_eof(self) -> None:
        if self._ended:
            raise LocalProtocolError("data after the end of the stream (receive_eof() was called)")

    def _feed(self, data: bytes, events: List[Event]) -> None:
        # Until the first frame, feed up to each NUL: a frame ends at a NUL, so the bytes after the
        # handshake frame are known exactly and go to the codec of the negotiated version.
        while not self._handshaken and data:
            nul = data.find(b"\0")
            piece, data = (data, b"") if nul < 0 else (data[: nul + 1], data[nul + 1 :])
            self._feed_piece(piece, events)
        if not data:
            return
        if self._held is not None:
            self._hold(data, events)
        else:
            self._feed_piece(data, events)

    def _feed_piece(self, data: bytes, events: List[Event]) -> None:
        self._dispatch_all(self._decode(self._decoder.feed, data, events), events)

    def _decode(self, decode: Callable[[Any], List[Any]], data: Any, events: List[Event]) -> List[Any]:
        """What every read passes through: ``decode(data)`` (the decoder's feed or buffer_updated),
        counted; undecodable bytes take the one failure path, :meth:`_undecodable`."""
        try:
            items: List[Any] = decode(data)
        except DecodeError as exc:
            self._undecodable(exc, events)
        self.frames_received += len(items)
        return items

    def _dispatch_all(self, items: Sequence[Any], events: List[Event]) -> None:
        for item in items:
            if isinstance(item, Heartbeat):
                events.append(_BEAT)
            elif self._handshaken:
                self._dispatch(item, events)
            else:
                self._handshaken = True
                self._dispatch(item, events)
                self._after_handshake(item)

    def _after_handshake(self, frame: Any) -> None:
        """Called after the first frame: switch codecs, or hold what follows until the server accepts."""
        raise NotImplementedError

    def _switch_codec(self, version: str) -> None:
        self.version = version
        self._base += self._decoder.bytes_fed
        self._decoder = Decoder(version, heartbeat_events=True, **dict(self._decoder_options, escapes=self.escapes))
        self._encoder = Encoder(version, escapes=self.escapes)
        self._note_now(None)

    def _dispatch(self, frame: Any, events: List[Event]) -> None:
        if self.strict and self.version is not None:
            problems = spec.frame_problems(frame, self.version, sender=self.peer_side)
            if problems:
                self._fail(f"invalid {frame.command} frame: {'; '.join(problems)}", frame, events)
        events.append(self._on_frame(frame, events))

    def _on_frame(self, frame: Any, events: List[Event]) -> Event:
        raise NotImplementedError

    def _undecodable(
        self, exc: DecodeError, events: List[Event], what: str = "undecodable data from the peer"
    ) -> NoReturn:
        """The one path of a decoder failure: the frames before the bad bytes become events, then
        the connection fails with the offset counted in the peer's whole stream (handshake included)."""
        self.frames_received += len(exc.frames)
        self._dispatch_all(exc.frames, events)
        offset = self._base + exc.offset
        self._fail(f"{what}: {exc.reason} at offset {offset} (near {exc.excerpt!r})", None, events, exc, offset)

    def _fail(
        self, message: str, frame: Any, events: List[Event], cause: Optional[BaseException] = None,
        offset: Optional[int] = None,
    ) -> NoReturn:  # fmt: skip
        error = RemoteProtocolError(message, frame)
        error.events = list(events)
        error.offset = offset
        self._error = error
        self.state = State.CLOSED
        raise error from cause

    def _raise_if_broken(self) -> None:
        if self._error is not None:
            error = RemoteProtocolError(self._error.message, self._error.frame)
            error.offset = self._error.offset
            raise error from self._error

    def _require(self, frame: Any, events: List[Event], *names: str) -> List[str]:
        values = []
        for name in names:
            value = frame.get(name)
            if value is None:
                self._fail(f"{frame.command} frame without a {name!r} header", frame, events)
            values.append(str(value))
        return values

    # ------------------------------------------------------------------ sending

    def _build(
        self,
        command: str,
        headers: List[Tuple[str, str]],
        body: bytes = b"",
        *,
        receipt: Optional[str] = None,
        state: Optional[State] = State.CONNECTED,
        version: Optional[str] = None,
        broken_ok: bool = False,
        encoder: Optional[Encoder] = None,
    ) -> Tuple[Any, bytes]:
        """Validate and encode one outgoing frame; nothing changes when this raises."""
        if not broken_ok:
            self._raise_if_broken()
        frame = Frame(command, headers if receipt is None else [*headers, ("receipt", receipt)], body)
        if state is not None and self.state is not state:
            raise LocalProtocolError(f"cannot send {command} in state {self.state.value}", frame)
        if receipt is not None and receipt in self.pending_receipts:
            raise LocalProtocolError(f"receipt id {receipt!r} is already pending", frame)
        version = version or self.version or "1.2"
        if self.validate:
            problems = spec.frame_problems(frame, version, sender=self.our_side)
            if problems:
                raise LocalProtocolError(f"invalid {command} frame: {'; '.join(problems)}", frame)
        encoder = encoder or self._encoder or Encoder(version, escapes=self.escapes)
        try:
            data = encoder.encode(frame)
        except EncodeError as exc:
            raise LocalProtocolError(f"cannot encode {command}: {exc}", frame) from exc
        if receipt is not None:
            self.pending_receipts[receipt] = command
        self.last_frame = frame
        return frame, data


def check_versions(versions: Sequence[str]) -> Tuple[str, ...]:
    """``versions`` as a tuple, each one known."""
    result = tuple(versions)
    if not result or any(v not in VERSIONS for v in result):
        raise ValueError(f"versions must be among {', '.join(VERSIONS)}, not {versions!r}")
    return result
