"""The machinery under the asyncio client: reading, writing, heart-beats, receipts, flow control.

One :class:`ClientSession` per TCP connection. The socket's read side is an ``asyncio.BufferedProtocol``
(:class:`_BufferedReader`: the socket writes into the connection's buffer; :attr:`ClientSession.reads_into_buffer`
False selects the plain ``Protocol``, :class:`_Reader`); every write goes through
:meth:`ClientSession.write` in the loop's thread, so there is one writer; heart-beats are sent and
checked by a task of their own, beside user code, never inside it.
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..protocol import (
    ClientConnection,
    Connected,
    Error,
    HeartbeatReceived,
    ProtocolError,
    ReadPauses,
    Receipt,
    State,
)
from ._errors import ConnectionClosedError, HeartbeatTimeout, ServerError
from ._subscription import BaseMessage

__all__ = ["ClientSession", "FrameHook", "WireHook"]

#: ``frame_hook(direction, frame)``: "in" or "out", a :class:`fastframe.Frame` or ``None`` for a heart-beat.
FrameHook = Callable[[str, Optional[Any]], None]
#: ``wire_hook(direction, data)``: the exact bytes read or written.
WireHook = Callable[[str, bytes], None]


_READ_SIZE = 256 * 1024  # asyncio's own read size for a plain Protocol
_CORK_LIMIT = 64 * 1024  # bytes held back within one loop iteration before they are written at once
_CONNECTED = State.CONNECTED  # (a module global: an enum member's lookup costs a send a tenth of its time)
_PLAIN_DESTINATIONS = 1024  # destinations a session remembers as accepted (send_plain)
_RESTING = "resting"  # the pause reason of coalesce_reads: the socket rests between reads
# a read of at most this many frames and heart-beats starts no rest: one frame, and the EOL that
# RabbitMQ and ActiveMQ write after each frame (the decoder reports it as a heart-beat)
_LONE = 2
# a read of at least this many frames is a fast stream's: the next rest is twice as long, up to
# _REST_CAP seconds (or coalesce_reads, when that is longer; see _after_read)
_FAST_READ = 32
_REST_CAP = 0.02
# while a full queue pauses reading, the peer still proves it is alive: once its heart-beat deadline
# passes, a probe reads what waits in the socket into a side buffer of at most this many bytes, not
# decoded (so no queue grows) until reading resumes
_HELD_LIMIT = 64 * 1024


class _Writes:
    """How many times a session of this process wrote to its socket: a read that follows one of them
    may be the answer to it, on this connection or another (a request sent here, its reply read there)."""

    count = 0


class _Reader(asyncio.Protocol):
    """The reading path as a plain ``Protocol``: each chunk the loop read is handed to the session.

    No exception leaves these callbacks for the event loop (which would log "Fatal error" and abort
    the socket): one from a hook, a message handler or a bug of ours ends the session with it as
    the cause, so every waiter fails with it at once.
    """

    def __init__(self, session: ClientSession) -> None:
        self._session = session

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        try:
            self._session._made(transport)
        except Exception as exc:
            self._session.abort(exc)

    def data_received(self, data: bytes) -> None:
        try:
            self._session._data(data)
        except Exception as exc:
            self._session.abort(exc)

    def eof_received(self) -> Optional[bool]:
        try:
            self._session._eof()
        except Exception as exc:
            self._session.abort(exc)
        return False  # close our side too

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        try:
            self._session._lost(exc)
        except Exception as error:
            self._session.abort(error)

    def pause_writing(self) -> None:
        self._session._writable.clear()
        self._session.writable = False

    def resume_writing(self) -> None:
        self._session._writable.set()
        self._session.writable = True


class _BufferedReader(_Reader, asyncio.BufferedProtocol):
    """The reading path as a ``BufferedProtocol``: the socket writes into the connection's buffer
    (the decoder's own once the handshake is over), which saves the loop's copy of every read."""

    def __init__(self, session: ClientSession) -> None:
        super().__init__(session)
        self._buffer: Optional[memoryview] = None

    def get_buffer(self, sizehint: int) -> memoryview:
        # asyncio asks for any size (-1); a plain Protocol's reads take up to 256 KiB each, and
        # fewer, larger reads are what makes a large body cheap
        session = self._session
        try:
            if session._probing:
                return session._probe_buffer()
            buffer = session.conn.get_buffer(max(sizehint, _READ_SIZE))
        except Exception as exc:
            session.abort(exc)
            return memoryview(bytearray(_READ_SIZE))  # (the session is over: what lands here is dropped)
        if session._wire_hook is not None:
            self._buffer = buffer  # the hook sees the bytes read
        return buffer

    def buffer_updated(self, nbytes: int) -> None:
        session = self._session
        try:
            if session._probing:
                session._probed(nbytes)
                return
            buffer, self._buffer = self._buffer, None
            session._received(nbytes, buffer)
        except Exception as exc:
            session.abort(exc)


class ClientSession:
    """One connection: a :class:`ClientConnection` driven over one asyncio transport.

    ``on_message(message)`` receives each :class:`Message` (the client routes it to its subscription);
    receipts, errors and heart-beats are handled here. The session ends once: :attr:`closed` is then done and
    :attr:`error` holds the cause (``None`` after a clean disconnect).
    """

    #: Read through ``asyncio.BufferedProtocol`` (the socket writes into the decoder's buffer); False
    #: selects a plain ``Protocol`` (``bench/aio_read.py`` measures both).
    reads_into_buffer = True

    def __init__(
        self,
        conn: ClientConnection,
        on_message: Callable[[BaseMessage], None],
        *,
        frame_hook: Optional[FrameHook] = None,
        wire_hook: Optional[WireHook] = None,
        coalesce_reads: float = 0.0,
    ) -> None:
        if not coalesce_reads >= 0.0:
            raise ValueError(f"coalesce_reads must be a number of seconds >= 0, not {coalesce_reads!r}")
        self.conn = conn
        self._on_message = on_message
        self._frame_hook = frame_hook
        self._wire_hook = wire_hook
        self._loop = asyncio.get_running_loop()
        self.transport: Optional[asyncio.Transport] = None
        self.connected: asyncio.Future[Connected] = self._loop.create_future()
        self.closed: asyncio.Future[None] = self._loop.create_future()
        self.error: Optional[BaseException] = None
        self._receipts: Dict[str, asyncio.Future[Receipt]] = {}
        self._writable = asyncio.Event()
        self._writable.set()
        #: Whether the socket's write buffer is below its high-water mark (``drain()`` would not
        #: wait): what ``_writable`` says, an attribute so every send reads it without a call
        self.writable = True
        self._corked: List[bytes] = []  # written this loop iteration, not yet handed to the transport
        self._corked_size = 0
        #: The everyday SENDs of this loop iteration (:meth:`send_plain`), encoded in one call before
        #: anything else is written (:meth:`flush_sends`): ``(destination, body, None, None, None)``
        #: each, the shape of :meth:`fastframe.protocol.ClientConnection.send_many`.
        self.queued_sends: List[Tuple[str, bytes, None, None, None]] = []
        # destinations conn.send accepted on this connection: the encoder accepts them again, so their
        # SENDs can be queued (a refusal is raised by the first SEND to a destination, at its call)
        self._plain_destinations: Dict[str, None] = {}
        self._uncork_due = False  # an _uncork is scheduled for this loop iteration
        self._pauses = ReadPauses()  # why reading is paused (full queues, a rest between reads)
        self._coalesce = coalesce_reads
        self._rest_length = coalesce_reads  # the next rest: longer while a fast stream's reads come full
        self._rest: Optional[asyncio.TimerHandle] = None  # ends the socket's rest after a read
        self._burst_until = 0.0  # (loop time) a read before this continues a burst
        self._last_read = -1.0  # (loop time) of the last read
        self._writes_seen = -1  # _Writes.count at the last read
        self._own_writes = 0  # this session's writes to its socket
        self._own_writes_seen = 0  # ... at its last read
        self._ticker: Optional[asyncio.Task[None]] = None
        self._probing = False  # one read goes to _held while queues pause reading
        self._held = bytearray()  # what probes read, not yet decoded (at most _HELD_LIMIT)
        self._releasing = False
        self._probe_scratch: Optional[bytearray] = None  # where a probe's read lands
        self._ending = False
        #: True over a WebSocket (:meth:`open_websocket`): each frame and heart-beat goes out as a
        #: message of its own, so corked writes are handed over as a list, never joined
        self.message_per_write = False

    # ------------------------------------------------------------------ opening

    async def open(
        self,
        host: str,
        port: int,
        connect_frame: bytes,
        *,
        ssl: Optional[_ssl.SSLContext],
        server_hostname: Optional[str],
    ) -> Connected:
        """TCP (and TLS) connect, send CONNECT, wait for CONNECTED (the caller bounds the wait).
        After :meth:`open_websocket`, CONNECT goes over the WebSocket (``host`` and ``port`` unused)."""
        try:
            if self.transport is None:
                reader = _BufferedReader if self.reads_into_buffer else _Reader
                await self._loop.create_connection(
                    lambda: reader(self), host, port, ssl=ssl, server_hostname=server_hostname if ssl else None
                )
            self.write(connect_frame)
            return await asyncio.shield(self.connected)
        except BaseException as exc:
            self.abort(exc if isinstance(exc, Exception) else ConnectionClosedError("connect cancelled"))
            raise

    async def open_websocket(
        self,
        url: str,
        *,
        versions: Sequence[str],
        ssl: Optional[_ssl.SSLContext],
        decoder_options: Mapping[str, Any],
    ) -> Sequence[str]:
        """Open a WebSocket to ``url`` (``ws://`` or ``wss://``; :mod:`fastframe.websocket`, the ``ws``
        extra); :meth:`open` then sends CONNECT over it. Returns the versions CONNECT may offer: the
        one of the subprotocol the server chose, or all of ``versions`` when it chose none (STOMP
        negotiates as over TCP). A WebSocket message larger than the decoder's ``max_frame_size`` (in
        ``decoder_options``) ends the session before its payload is read. The caller bounds the wait.
        """
        from .. import websocket  # the extra is imported when a WebSocket is asked for

        self.message_per_write = True
        try:
            transport, _ = await websocket.connect(
                url,
                lambda: _Reader(self),
                versions=versions,
                ssl=ssl,
                max_size=websocket.max_message_size(decoder_options),
            )
        except BaseException as exc:
            self.abort(exc if isinstance(exc, Exception) else ConnectionClosedError("connect cancelled"))
            raise
        chosen = websocket.subprotocol_version(transport.get_extra_info("subprotocol"))
        return (chosen,) if chosen else tuple(versions)

    def _made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._ticker = self._loop.create_task(self._tick())

    # ------------------------------------------------------------------ reading

    def _data(self, data: bytes) -> None:
        if self._probing:  # (a plain Protocol's read is not sized by us: at most one read past the limit)
            self._held += data
            self._probed(len(data))
            return
        if self._held:  # (a read after probes: the bytes they held come first)
            data, self._held = bytes(self._held) + data, bytearray()
        if self._wire_hook is not None:
            self._wire_hook("in", data)
        before = self.conn.frames_received
        now = self._loop.time()
        try:
            events = self.conn.receive_data(data, now)
        except ProtocolError as exc:
            self._dispatch(exc.events)
            self.abort(exc)
            return
        self._dispatch(events)
        if self._coalesce and len(data) < _READ_SIZE:
            self._after_read(self.conn.frames_received - before, now)

    def _received(self, nbytes: int, buffer: Optional[memoryview]) -> None:
        if self._wire_hook is not None and buffer is not None:
            self._wire_hook("in", bytes(buffer[:nbytes]))
        before = self.conn.frames_received
        now = self._loop.time()
        try:
            events = self.conn.buffer_updated(nbytes, now)
        except ProtocolError as exc:
            self._dispatch(exc.events)
            self.abort(exc)
            return
        self._dispatch(events)
        if self._coalesce and nbytes < _READ_SIZE:  # (a full read: more is waiting, read it now)
            self._after_read(self.conn.frames_received - before, now)

    def _after_read(self, frames: int, now: float) -> None:
        # coalesce_reads: while a stream flows the socket rests after each read, so what arrives
        # meanwhile comes in one larger read: one wake-up of the loop instead of one per frame or
        # few. A stream: a read of several frames (see _LONE), or one that follows the previous read
        # within a rest while no session of this process wrote in between; it goes on while reads
        # follow within a rest of each other's. Anything else is read at once: a lone message after
        # a quiet spell, the answer to what this process just sent (on this connection or another).
        # A receipt wait or closing down lifts a rest (a soft pause). While a stream is fast (a read
        # brings _FAST_READ frames or more) the rest doubles with each such read, up to _REST_CAP (the
        # blocking client's coalesce_reads): a read costs tens of µs of CPU however many frames it brings (the
        # loop's and the kernel's wake-ups), and it is at such rates that they add up; a read of
        # fewer frames sets the rest back, so a slower stream keeps the short rest's latency. So does
        # a write on this connection since the last read: a broker that waits for ACKs (a prefetch)
        # or credit (a stream) would wait out a long rest, and the stream would slow to its pace.
        soon = now < self._last_read + self._coalesce
        stream = frames > _LONE or now < self._burst_until or (soon and self._writes_seen == _Writes.count)
        answered = self._own_writes != self._own_writes_seen  # (ACKs, credit: the peer may wait for them)
        self._last_read, self._writes_seen, self._own_writes_seen = now, _Writes.count, self._own_writes
        if stream and self._rest is None and not self.closed.done():
            if frames < _FAST_READ or answered:
                self._rest_length = self._coalesce
            else:  # (from the short rest again after a quiet spell)
                grown = self._rest_length if now < self._burst_until else self._coalesce
                self._rest_length = min(2 * grown, max(_REST_CAP, self._coalesce))
            self._pauses.pause(_RESTING)
            self._apply_flow()
            self._rest = self._loop.call_later(self._rest_length, self._end_rest)
            self._burst_until = now + 2 * self._rest_length  # the rest, then as long again for the next read

    def _end_rest(self) -> None:
        self._rest = None
        self.resume_reading(_RESTING)

    def _dispatch(self, events: List[Any]) -> None:
        for inbox in self.conn.take_filled():  # the read's messages queued straight into inboxes
            inbox.filled(self)
            wake = inbox.wake
            if wake is not None:
                wake()
        for event in events:
            if self._frame_hook is not None:
                self._frame_hook("in", getattr(event, "frame", None))  # (None: a heart-beat)
            elif type(event) is HeartbeatReceived:  # (first: a broker's EOL after each routed frame is one)
                continue
            if isinstance(event, BaseMessage):  # the everyday event first (the connection's message_class): routed
                self._on_message(event)
            elif isinstance(event, HeartbeatReceived):
                continue
            elif isinstance(event, Connected):
                if not self.connected.done():
                    self.connected.set_result(event)
            elif isinstance(event, Receipt):
                waiter = self._receipts.pop(event.receipt_id, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(event)
                self._apply_flow()
                if event.for_command == "DISCONNECT":
                    self._ending = True
            elif isinstance(event, Error):
                self.abort(ServerError(event.message or "ERROR frame from the server", event.frame))
                return
            # (ConnectionClosed: the session ends in _lost)

    def _eof(self) -> None:
        self._decode_held()
        if self.closed.done():
            return
        if self.conn.state is State.DISCONNECTING:
            self._ending = True  # DISCONNECT went out: closing is an answer to it, not a failure
        try:
            events = self.conn.receive_eof()
        except ProtocolError as exc:
            self._dispatch(exc.events)
            self.abort(exc)
            return
        self._dispatch(events)

    def _lost(self, exc: Optional[BaseException]) -> None:
        if not self.closed.done():
            if exc is None and not self._ending and self.conn.state is not State.DISCONNECTING:
                exc = ConnectionClosedError("the server closed the connection")
            self._finish(exc)

    # ------------------------------------------------------------------ writing

    def write(self, data: bytes) -> None:
        """Write bytes the connection produced (one frame or one heart-beat), in call order."""
        transport = self.transport
        if transport is None or self.closed.done() or transport.is_closing():
            raise self._closed_error()
        if self.queued_sends:
            self._encode_sends()  # (queued before these bytes: they go first)
        if self._frame_hook is not None:
            self._frame_hook("out", self.conn.last_frame if data.strip(b"\r\n") else None)
        if self._wire_hook is not None:
            self._wire_hook("out", data)
        # frames written in one loop iteration go to the socket together: one send() instead of one each
        self._corked.append(data)
        self._corked_size += len(data)
        if self._corked_size >= _CORK_LIMIT:
            self._uncork()
        elif not self._uncork_due:
            self._uncork_due = True
            self._loop.call_soon(self._uncork)

    def send_plain(self, destination: str, body: Union[bytes, str]) -> bool:
        """SEND ``body`` to ``destination`` with no other header and no receipt, if that needs no
        wait: the session is connected, not ended, and below its write buffer's high-water mark
        (``False`` otherwise: nothing sent). What ``write(conn.send(destination, body))`` writes, in
        call order with everything written. Over TCP with no hook, once the connection has accepted
        a SEND to ``destination`` it is queued instead, and the loop iteration's SENDs are encoded
        in one call (:meth:`fastframe.protocol.ClientConnection.send_many`); what ``conn.send``
        refuses is raised here, by the first SEND to it."""
        transport = self.transport
        if (
            not self.writable
            or self.conn.state is not _CONNECTED
            or transport is None
            or self.closed.done()
            or transport.is_closing()
        ):
            return False
        if destination in self._plain_destinations and type(body) is bytes:
            self.queued_sends.append((destination, body, None, None, None))
            self._corked_size += len(body)  # (then as write() does, inline: a call per SEND would cost)
            if self._corked_size >= _CORK_LIMIT:
                self._uncork()
            elif not self._uncork_due:
                self._uncork_due = True
                self._loop.call_soon(self._uncork)
            return True
        self.write(self.conn.send(destination, body))
        if self._frame_hook is None and self._wire_hook is None and not self.message_per_write:
            if len(self._plain_destinations) >= _PLAIN_DESTINATIONS:
                self._plain_destinations.clear()  # (bounded: a client sending to ever new destinations)
            self._plain_destinations[destination] = None
        return True

    def flush_sends(self) -> None:
        """Encode the queued SENDs now (they still go with this loop iteration's writes): before a
        frame is built that changes what the connection may send (DISCONNECT)."""
        if self.queued_sends:
            self._encode_sends()

    def _encode_sends(self) -> None:
        sends, self.queued_sends = self.queued_sends, []
        data, refused = self.conn.send_many(sends)
        if data:
            self._corked.append(data)
        if refused:  # (the connection stopped being connected since they were queued: they cannot go)
            if self.conn.state is State.CONNECTED:  # (what conn.send accepted once it accepts again)
                self.abort(refused[0][1])

    def _uncork(self) -> None:
        self._uncork_due = False
        if self.queued_sends:
            self._encode_sends()
        if not self._corked:
            return
        if self.message_per_write:  # (a WebSocket: a message per frame)
            corked, self._corked = self._corked, []
            self._corked_size = 0
            if self.transport is not None and not self.transport.is_closing():
                self.transport.writelines(corked)
                self.conn.data_sent(self._loop.time())
                _Writes.count += 1
                self._own_writes += 1
            return
        data = self._corked[0] if len(self._corked) == 1 else b"".join(self._corked)
        self._corked.clear()
        self._corked_size = 0
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)
            self.conn.data_sent(self._loop.time())  # once per write to the socket, not per frame
            _Writes.count += 1
            self._own_writes += 1

    async def drain(self) -> None:
        """Wait until the socket's write buffer is below its high-water mark (or the session ended)."""
        if self.writable:
            return
        writable = self._loop.create_task(self._writable.wait())
        try:
            waits: List[asyncio.Future[Any]] = [writable, self.closed]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            writable.cancel()
        if self.closed.done():
            raise self._closed_error()

    def expect_receipt(self, receipt_id: str) -> asyncio.Future[Receipt]:
        """A future that the RECEIPT for ``receipt_id`` resolves (fails when the session ends first)."""
        waiter: asyncio.Future[Receipt] = self._loop.create_future()
        self._receipts[receipt_id] = waiter
        self._apply_flow()
        return waiter

    def forget_receipt(self, receipt_id: str) -> None:
        """Stop waiting for ``receipt_id`` (its wait ended)."""
        self._receipts.pop(receipt_id, None)
        self.conn.forget_receipt(receipt_id)  # (a receipt that arrived is gone from there already)
        self._apply_flow()

    # ------------------------------------------------------------------ flow control

    def pause_reading(self, reason: object, *, hard: bool = False) -> None:
        """Stop reading from the socket until every reason given here is resumed.

        A soft pause is lifted while a receipt is awaited, since the RECEIPT may wait in the socket
        behind MESSAGEs (an ACK with a receipt inside ``async for`` over a full queue); a ``hard``
        one (a queue at twice its bound) is not, so memory stays bounded either way. Heart-beats are
        still checked while paused: once the server's deadline passes, one read of a single byte is
        let through (a probe); a server that sends nothing within one more deadline is silent
        (:class:`HeartbeatTimeout`), a live one resumes the pause at once.
        """
        self._pauses.pause(reason, hard)
        self._apply_flow()

    def resume_reading(self, reason: object) -> None:
        """Withdraw one reason to pause; read again when none is left."""
        self._pauses.resume(reason)
        self._apply_flow()

    def _apply_flow(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        paused = self._pauses.paused(awaiting_receipt=bool(self._receipts))
        if self._held and not paused and not self._probing:
            # what probes read goes first, decoded on the next turn of the loop (its messages may
            # pause reading again), before the socket is read again
            if transport.is_reading():
                transport.pause_reading()
            if not self._releasing:
                self._releasing = True
                self._loop.call_soon(self._release_held)
            return
        paused = paused and not self._probing
        if paused and transport.is_reading():
            transport.pause_reading()
        elif not paused and not transport.is_reading():
            self.conn.keepalive(self._loop.time())  # unread bytes waited in the socket: not the peer's silence
            transport.resume_reading()

    def _paused_by_queues(self) -> bool:
        return self._pauses.paused_except(_RESTING)

    def _probe(self, now: float) -> None:
        # Reading is paused for a full queue and the peer's deadline passed: it cannot prove itself
        # while we do not read. One read goes to the side buffer; the peer has one more deadline from
        # now to deliver a byte (bytes already waiting in the socket do at once), else it is silent.
        # Once the side buffer is full the peer is given the benefit of the doubt (as before probes)
        # until the consumer catches up: memory stays bounded.
        if len(self._held) >= _HELD_LIMIT:
            self.conn.keepalive(now)
            return
        self.conn.keepalive(now)
        self._probing = True
        self._apply_flow()

    def _probe_buffer(self) -> memoryview:
        if self._probe_scratch is None:
            self._probe_scratch = bytearray(_HELD_LIMIT)
        return memoryview(self._probe_scratch)[: _HELD_LIMIT - len(self._held)]

    def _probed(self, nbytes: int) -> None:
        if self.reads_into_buffer and self._probe_scratch is not None:
            self._held += memoryview(self._probe_scratch)[:nbytes]
        self._probing = False
        self.conn.keepalive(self._loop.time())  # bytes came: the peer is alive
        self._apply_flow()

    def _release_held(self) -> None:
        self._releasing = False
        self._decode_held()
        self._apply_flow()

    def _decode_held(self) -> None:
        # what probes read, through the usual path (before the stream's end or an abort too: the
        # complete messages in it reach their queues, nothing read is lost)
        if self._held and not self.closed.done():
            data, self._held = bytes(self._held), bytearray()
            self._probing = False
            self._data(data)

    def closing_down(self) -> None:
        """Read freely from now on (DISCONNECT is being sent: its RECEIPT must not wait behind MESSAGEs)."""
        self._pauses.closing = True
        self.conn.unroute_all()  # Inbox.put drops what comes past a hard bound now: each MESSAGE an event
        self._apply_flow()

    def is_reading(self) -> bool:
        """Whether the socket is being read (False while paused by a full queue, and during a rest of
        ``coalesce_reads`` between two reads of a burst)."""
        return self.transport is not None and self.transport.is_reading()

    # ------------------------------------------------------------------ heart-beats

    async def _tick(self) -> None:
        waits: List[asyncio.Future[Any]] = [self.connected, self.closed]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        while not self.closed.done():
            deadline = self.conn.next_deadline()
            if deadline is None:
                return  # no heart-beats in either direction
            planned = deadline
            delay = max(0.0, deadline - self._loop.time())
            try:
                await asyncio.wait_for(asyncio.shield(self.closed), delay)
                return
            except asyncio.TimeoutError:
                pass
            now = self._loop.time()
            beat = self.conn.heartbeat_due(now)
            if beat:
                try:
                    self.write(beat)
                except ConnectionClosedError:
                    return
            if not self.is_reading():
                if not self._paused_by_queues():
                    self.conn.keepalive(now)  # a rest of coalesce_reads: over in milliseconds
                elif self.conn.peer_silent(now):
                    self._probe(now)
            elif self.conn.peer_silent(now):
                await self._settle_reads()
                now = self._loop.time()
                if now - planned > self.conn.heartbeat[1] / 2000.0:
                    self.conn.keepalive(now)  # the loop itself was blocked: we could not have read
                elif self.conn.peer_silent(now):
                    interval = self.conn.heartbeat[1]
                    self.abort(HeartbeatTimeout(f"no data from the server within {interval} ms x grace"))
                    return

    async def _settle_reads(self) -> None:
        # let reads that are already waiting in the loop run before judging the peer
        for _ in range(3):
            await asyncio.sleep(0)

    # ------------------------------------------------------------------ ending

    def abort(self, cause: BaseException) -> None:
        """End the session now because of ``cause``: every waiter fails at once."""
        if self._held and isinstance(cause, HeartbeatTimeout):
            self._decode_held()  # the messages read before the silence are delivered first
        self._finish(cause)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    def close(self) -> None:
        """End the session cleanly (after DISCONNECT's receipt)."""
        self._ending = True
        self._uncork()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    async def wait_closed(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until the socket is closed; abort it if it takes longer."""
        try:
            await asyncio.wait_for(asyncio.shield(self.closed), timeout)
        except asyncio.TimeoutError:
            self.abort(ConnectionClosedError("the connection did not close in time"))

    def _finish(self, cause: Optional[BaseException]) -> None:
        if self.closed.done():
            return
        self.error = cause
        error = self._closed_error()
        waiters: List[asyncio.Future[Any]] = [self.connected, *self._receipts.values()]
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)
                waiter.exception()  # retrieved: a waiter nobody awaits must not warn
        self._receipts.clear()
        self.closed.set_result(None)
        if self._rest is not None:
            self._rest.cancel()
        self._writable.set()
        self.writable = True
        if self._ticker is not None and self._ticker is not asyncio.current_task():
            self._ticker.cancel()

    def _closed_error(self) -> ConnectionClosedError:
        cause = self.error
        if isinstance(cause, ConnectionClosedError):
            return cause
        error = ConnectionClosedError(f"the connection is closed: {cause}" if cause else "the connection is closed")
        error.__cause__ = cause
        return error


Address = Tuple[str, int]
