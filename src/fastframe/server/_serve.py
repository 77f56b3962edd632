"""``serve()``: an asyncio STOMP server, one protocol object per connection, callbacks only.

The server owns the bytes and the clock; a *handler* owns the meaning; between them, for each
connection, a :class:`fastframe.protocol.ServerConnection` owns the handshake, the negotiated
version, heart-beat timing and escaping, and the shape of CONNECTED, RECEIPT and ERROR (the handler
keeps subscriptions, acks and transactions). For every connection the
handler's ``connection_made(conn)`` is called, then ``frame_received(conn, frame)`` for each frame
the client sends (CONNECT first; a handler with ``frames_received(conn, frames)`` gets the frames of
each read in one call instead), then ``connection_lost(conn, cause)`` once. The handler answers
with calls: ``conn.accept(version, headers)`` (CONNECTED: it fixes the version the connection speaks
from then on, decoding and escaping, and the heart-beats; ``version=None`` is ``conn.common_version``,
the one the protocol connection negotiated), ``conn.receipt(id)``,
``conn.error(message, body=, headers=)``, ``conn.write(bytes)`` or ``conn.send(frame)`` for any other
frame, and ``conn.close()``.

What the server enforces, each bound an option of :func:`serve`:

* the decoder's limits (``decoder_options``); malformed input gets one ERROR frame whose body carries
  the decoder's reason and stream offset, then a close;
* ``max_connections``; a connection past it gets an ERROR and a close;
* ``handshake_timeout``: CONNECT must be complete this long after the TCP accept;
* ``frame_timeout``: a frame, once its first byte arrived, must be complete this long after (a client
  trickling a byte a second is cut off; heart-beat EOLs between frames are not a frame);
* heart-beats at the negotiated intervals: a bare EOL when the server has written nothing for the
  interval; any byte received is liveness, and silence longer than ``heartbeat_grace`` times the
  client's interval closes the connection without an ERROR, as RabbitMQ and ActiveMQ do;
* outbound flow control, the documented policy: a client that does not read hurts nobody else.
  Bytes waiting for a client are bounded by ``max_outbound_bytes`` (past it the connection is
  dropped at once). Above ``outbound_high_water`` the client is *congested*; one that stays
  congested for ``slow_consumer_timeout`` seconds is dropped. Nobody else's reads, writes or
  receipts wait for it. Only when the bytes waiting for all congested clients together pass
  ``max_waiting_bytes`` does the server stop reading from the other clients (so producers slow
  down), until half of those bytes were written or their clients dropped.
* ``Server.close(timeout)``: stop listening, send each client an ERROR "Server shutting down", let
  what was queued drain, and abort what is still open at the deadline.
"""

from __future__ import annotations

import asyncio
import logging
import ssl as _ssl
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Set, Tuple

from ..codec import DecodeError, EncodeError, Frame, encode
from ..protocol import FrameEvent, LocalProtocolError, RemoteProtocolError, plain_error
from ..protocol import ServerConnection as ProtocolConnection

__all__ = ["serve", "Server", "ServedConnection", "FrameHandler", "SlowConsumerError", "TimeoutClosed"]

_log = logging.getLogger("fastframe.server")
_CALLS = {"CONNECTED": "accept", "RECEIPT": "receipt", "ERROR": "error"}
#: (message header, text) of the ERRORs the server sends itself, whatever its handler (its limits,
#: time-outs, input the protocol refuses, shutdown), worded as RabbitMQ words them; ``{}`` is filled in.
_ERRORS = {
    "not-connected": ("Illegal command", "You must log in using CONNECT first"),
    "malformed": ("Malformed frame", "{}\n"),
    "too-many-connections": ("Too many connections", "The broker accepts at most {} connections\n"),
    "shutdown": ("Server shutting down", "The broker is shutting down\n"),
    "timeout": ("Timeout", "{}\n"),
    "internal": ("Internal error", "The server failed to handle a frame ({}); the connection is closed\n"),
}


class SlowConsumerError(ConnectionError):
    """The client stopped reading: its outbound bytes passed the bound, or it stayed congested too long."""


class TimeoutClosed(ConnectionError):
    """A handshake, frame or heart-beat deadline passed."""


class FrameHandler(Protocol):
    """What :func:`serve` calls; the in-memory broker is one."""

    def connection_made(self, conn: ServedConnection) -> None:
        """A client connected (before any byte)."""

    def frame_received(self, conn: ServedConnection, frame: Any) -> None:
        """The client sent ``frame`` (CONNECT or STOMP first)."""

    # optional: ``frames_received(conn, frames)``, the frames of one read in one call (in order; the
    # handler stops at the first after which the connection is closing)

    def connection_lost(self, conn: ServedConnection, cause: Optional[BaseException]) -> None:
        """The connection ended; ``cause`` is why (``None`` for an orderly close)."""


class ServedConnection(asyncio.Protocol):
    """One client connection: a :class:`fastframe.protocol.ServerConnection` over one transport (the
    handler keeps subscriptions, acks and transactions).

    The protocol connection owns the handshake (the version and heart-beats the handler's CONNECTED
    fixes, the escaping and decoding that follow), the heart-beat timing, the decoder's limits and
    the shape of CONNECTED, RECEIPT and ERROR; this class owns the socket, the clock and the
    handshake, frame and slow-consumer deadlines.
    """

    def __init__(self, server: Server, *, message_per_write: bool = False) -> None:
        self._server = server
        #: True over a WebSocket: each frame is written as a message of its own (the broker core
        #: hands them over one by one)
        self.message_per_write = message_per_write
        self._options = server._options
        self._loop = server._loop
        self._transport: Optional[asyncio.Transport] = None
        self._proto = ProtocolConnection(
            heartbeat=self._options["heartbeat"],
            heartbeat_grace=self._options["heartbeat_grace"],
            **server._decoder_options,
        )  # every version: the handler's CONNECTED chooses
        self._accepted = False  # CONNECTED was just sent: frames held behind CONNECT are due
        self._timer: Optional[asyncio.TimerHandle] = None
        self._out: List[bytes] = []
        self._out_bytes = 0
        self._backlog = 0
        self._max_outbound: int = self._options["max_outbound_bytes"]
        self._now = self._loop.time()
        self._opened_at = self._now
        self._frame_started: Optional[float] = None
        self._congested_since: Optional[float] = None
        self._cause: Optional[BaseException] = None
        self._registered = False
        self._paused = False  # reading paused by the server's flow control (deadlines wait meanwhile)
        self._wire: Any = None  # the serve() option wire_hook's hook for this connection
        #: True once close() or abort() was called
        self.closing = False
        #: free for the handler (the broker keeps its session here)
        self.context: Any = None
        #: while True no heart-beat goes out, whatever was negotiated (fault injection for tests:
        #: :mod:`fastframe.testing`); the client's own heart-beats are still checked
        self.heartbeats_paused = False
        self.peer: Any = None

    # ------------------------------------------------------------------ asyncio.Protocol

    # Every entry from the event loop (the asyncio.Protocol methods, the timer) goes through
    # _guarded: an exception from the handler or a bug of ours ends this connection with an ERROR
    # and is logged, it never reaches the loop (which would log "Fatal error" and abort the socket).

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # noqa: D102
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._guarded(self._made, transport)

    def _made(self, transport: asyncio.Transport) -> None:
        self.peer = transport.get_extra_info("peername")
        server = self._server
        if len(server._connections) >= self._options["max_connections"]:
            self._fail("too-many-connections", self._options["max_connections"])
            self.close()
            return
        transport.set_write_buffer_limits(high=self._options["outbound_high_water"])
        server._connections.add(self)
        self._registered = True
        if self._options["wire_hook"] is not None:
            self._wire = self._options["wire_hook"](self)
        if server._holding_producers:
            transport.pause_reading()
            self._paused = True
        self._schedule()
        server._handler.connection_made(self)

    def data_received(self, data: bytes) -> None:  # noqa: D102
        if not self.closing:
            self._guarded(self._received, data)

    def _guarded(self, step: Any, *args: Any) -> None:
        try:
            step(*args)
        except Exception as exc:
            _log.exception("STOMP connection from %s: %s failed; the connection is closed", self.peer, step.__name__)
            if self.closing:
                self.abort(exc)
                return
            try:
                self._fail("internal", type(exc).__name__)
            except Exception:  # (the connection cannot even say so)
                self.abort(exc)
                return
            self.close(exc)

    def _received(self, data: bytes) -> None:
        if self._wire is not None:
            self._wire("in", data)
        self._now = self._loop.time()
        proto = self._proto
        whole = proto.frames_end
        try:
            self._deliver(proto.receive_frames(data, self._now))
            while self._accepted and not self.closing:  # what the client pipelined behind CONNECT
                self._accepted = False
                self._deliver(proto.receive_frames(b"", self._now))
        except RemoteProtocolError as err:
            self._refuse(err)
            return
        if proto.buffered:
            # the deadline runs from the first byte of the frame still incomplete: it restarts when a
            # frame completed in this read (a fast stream whose every read ends mid-frame is fine)
            if self._frame_started is None or proto.frames_end != whole:
                self._frame_started = self._now
        else:
            self._frame_started = None

    def _refuse(self, err: RemoteProtocolError) -> None:
        """The client broke the protocol: what came before goes to the handler, then one ERROR and a close."""
        self._deliver([event.frame for event in err.events if isinstance(event, FrameEvent)])
        if self.closing:
            return
        cause = err.__cause__
        if isinstance(cause, DecodeError):  # the offset is in the whole stream, across the handshake
            self._fail("malformed", f"{cause.reason} at offset {err.offset} (near {cause.excerpt!r})")
            self.close(cause)
            return
        frame = err.frame
        if self._proto.request is None and frame is not None and frame.command not in ("CONNECT", "STOMP"):
            self._fail("not-connected")  # a frame before CONNECT
        else:
            self._fail("malformed", err.message)
        self.close(err)

    def eof_received(self) -> Optional[bool]:  # noqa: D102
        return False  # close our side too

    def connection_lost(self, exc: Optional[BaseException]) -> None:  # noqa: D102
        self.closing = True
        if self._timer is not None:
            self._timer.cancel()
        if not self._registered:
            return
        self._registered = False
        server = self._server
        server._connections.discard(self)
        self._set_congested(False)
        if self._wire is not None and hasattr(self._wire, "close"):
            try:
                self._wire.close()
            except Exception:
                _log.exception("STOMP connection from %s: the wire hook's close failed", self.peer)
        try:
            server._handler.connection_lost(self, self._cause or exc)
        except Exception:
            _log.exception("STOMP connection from %s: the handler's connection_lost failed", self.peer)
        if not server._connections:
            server._idle.set()

    def pause_writing(self) -> None:  # noqa: D102
        self._set_congested(True)

    def resume_writing(self) -> None:  # noqa: D102
        self._set_congested(False)

    # ------------------------------------------------------------------ what the handler calls

    def accept(
        self,
        version: Optional[str] = None,
        headers: Sequence[Tuple[str, str]] = (),
        *,
        heartbeat: Optional[Tuple[int, int]] = None,
    ) -> None:
        """Answer CONNECT with CONNECTED in ``version`` (``None``: :attr:`common_version`), fixed from
        then on (decoding and escaping), with ``headers`` (server, session); ``heartbeat=(sx, sy)`` ms
        overrides the server's option."""
        if self.closing or self._transport is None:
            return
        proto = self._proto
        if heartbeat is not None:
            proto.offered_heartbeat = heartbeat
        data = proto.accept(version=version, headers=headers, now=self._now)
        self._accepted = True  # frames held behind CONNECT are due
        self._schedule()
        self.write(data)

    def receipt(self, receipt_id: str) -> None:
        """Send the RECEIPT of ``receipt_id`` (DISCONNECT's closes the session)."""
        self._send_built(lambda: self._proto.receipt(receipt_id), "RECEIPT", [("receipt-id", receipt_id)])

    def error(self, message: str, *, body: bytes = b"", headers: Sequence[Tuple[str, str]] = ()) -> None:
        """Send an ERROR with this ``message`` header, ``body`` and other ``headers`` (then close())."""
        self._send_built(
            lambda: self._proto.error(message, body=body, headers=headers),
            "ERROR",
            [("message", message), *headers],
            body,
        )

    def send(self, frame: Any) -> None:
        """Encode any other ``frame`` in the connection's version and write it (CONNECTED, RECEIPT and
        ERROR have their calls: :meth:`accept`, :meth:`receipt`, :meth:`error`)."""
        if frame.command in ("CONNECTED", "RECEIPT", "ERROR"):
            raise ValueError(f"send {frame.command} with {_CALLS[frame.command]}(), not send()")
        self._send_built(lambda: self._proto.frame(frame), frame.command, list(frame.headers), bytes(frame.body))

    def _send_built(self, build: Any, command: str, headers: List[Tuple[str, str]], body: bytes = b"") -> None:
        if self.closing or self._transport is None:
            return
        try:
            data = build()
        except LocalProtocolError:
            frame, version = Frame(command, headers, body), self._proto.version or "1.2"
            try:
                encode(frame, version=version)
            except EncodeError:  # a value 1.0/1.1 cannot carry: the 1.2 escapes, as RabbitMQ does
                data = encode(frame, version=version, escapes="1.2")
            else:
                raise  # refused for another reason: the handler's mistake
        self.write(data)

    def _fail(self, kind: str, *args: Any) -> None:
        """Our own ERROR of ``kind`` (a key of ``_ERRORS``, its text formatted with ``args``), in
        RabbitMQ's shape as the broker's are (:func:`fastframe.protocol.plain_error`)."""
        message, text = _ERRORS[kind]
        message, body, headers = plain_error(message, text.format(*args))
        self.error(message, body=body, headers=headers)

    def write(self, data: bytes) -> None:
        """Queue frames already encoded in the connection's version."""
        if self.closing or self._transport is None:
            return
        # frames sent in one turn of the loop go out in one write (one syscall, not one per frame)
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes + self._backlog > self._max_outbound:
            self.abort(SlowConsumerError("outbound bytes passed max_outbound_bytes"))
        elif self._congested_since is not None:
            self._server._weigh_waiting()

    def _flush(self) -> None:
        out, self._out, self._out_bytes = self._out, [], 0
        if self._transport is not None and not self._transport.is_closing():
            data = b"".join(out)
            if self._wire is not None:
                self._wire("out", data)
            if self.message_per_write:
                self._transport.writelines(out)
            else:
                self._transport.write(data)
            self._backlog = self._transport.get_write_buffer_size()  # what the kernel has not taken
            self._proto.data_sent(self._loop.time())
            if self._congested_since is not None:
                self._server._weigh_waiting()

    def close(self, cause: Optional[BaseException] = None) -> None:
        """Close after what was sent is written (aborted if that takes longer than ``close_timeout``)."""
        if self.closing or self._transport is None:
            return
        self.closing = True
        self._cause = self._cause or cause
        self._flush()
        self._transport.close()
        self._loop.call_later(self._options["close_timeout"], self._transport.abort)

    def abort(self, cause: Optional[BaseException] = None) -> None:
        """Drop the connection now, discarding what was not written."""
        self._cause = self._cause or cause
        self.closing = True
        if self._transport is not None:
            self._transport.abort()

    @property
    def version(self) -> Optional[str]:
        """The version the connection speaks (``None`` before CONNECTED was sent); the protocol
        connection owns it."""
        return self._proto.version

    @property
    def common_version(self) -> Optional[str]:
        """The version CONNECTED will fix, negotiated when CONNECT arrived (``None``: none in common,
        answer with an ERROR); the protocol connection owns it."""
        return self._proto.common_version

    @property
    def heartbeat(self) -> Tuple[int, int]:
        """The negotiated ``(client_to_server_ms, server_to_client_ms)``; 0 means none."""
        send_ms, receive_ms = self._proto.heartbeat
        return receive_ms, send_ms

    # ------------------------------------------------------------------ internals

    def _deliver(self, frames: List[Any]) -> None:
        if not frames or self.closing:
            return
        many = self._server._frames_received
        if many is not None:
            many(self, frames)
            return
        receive = self._server._handler.frame_received
        for frame in frames:
            if self.closing:
                return
            receive(self, frame)

    def _set_congested(self, congested: bool) -> None:
        server = self._server
        if congested and self._congested_since is None and not self.closing:
            self._congested_since = self._loop.time()
            server._congested.add(self)
            server._weigh_waiting()
        elif not congested and self._congested_since is not None:
            self._congested_since = None
            server._congested.discard(self)
            server._weigh_waiting()

    @property
    def waiting_bytes(self) -> int:
        """Bytes queued for this client and not yet taken by its socket."""
        return self._out_bytes + (self._transport.get_write_buffer_size() if self._transport is not None else 0)

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        options = self._options
        periods = [options["frame_timeout"], options["slow_consumer_timeout"]]
        if self.version is None:
            periods.append(options["handshake_timeout"])
        send_ms, receive_ms = self._proto.heartbeat
        if send_ms:
            periods.append(send_ms / 1000)
        if receive_ms:
            periods.append(receive_ms / 1000 * options["heartbeat_grace"])
        self._tick_every = min(0.5, max(0.01, min(periods) / 4))
        self._timer = self._loop.call_later(self._tick_every, self._guarded, self._tick)

    def _tick(self) -> None:
        if self.closing:
            return
        self._now = now = self._loop.time()
        options = self._options
        if self.version is None and not self._paused and now - self._opened_at > options["handshake_timeout"]:
            self._fail("timeout", "CONNECT was not complete within handshake_timeout")
            self.close(TimeoutClosed("handshake"))
            return
        if self._paused:  # the client cannot be heard while we do not read: only our heart-beats go out
            pass
        elif self._frame_started is not None and now - self._frame_started > options["frame_timeout"]:
            self._fail("timeout", "a frame was not complete within frame_timeout")
            self.close(TimeoutClosed("frame"))
            return
        elif self._proto.peer_silent(now):
            self.abort(TimeoutClosed("heart-beat"))  # silent, as the big brokers do
            return
        if self._congested_since is not None and now - self._congested_since > options["slow_consumer_timeout"]:
            self.abort(SlowConsumerError("congested longer than slow_consumer_timeout"))
            return
        beat = self._proto.heartbeat_due(now)
        if beat and self._transport is not None and not self.heartbeats_paused:
            if self._wire is not None:
                self._wire("out", beat)
            self._transport.write(beat)
        self._timer = self._loop.call_later(self._tick_every, self._guarded, self._tick)


_DEFAULTS: Dict[str, Any] = {
    "heartbeat": (10_000, 10_000),
    "heartbeat_grace": 2.0,
    "max_connections": 1000,
    "handshake_timeout": 10.0,
    "frame_timeout": 30.0,
    "max_outbound_bytes": 16 * 1024 * 1024,
    "outbound_high_water": 1024 * 1024,
    "slow_consumer_timeout": 10.0,
    "max_waiting_bytes": 64 * 1024 * 1024,
    "close_timeout": 5.0,
    "wire_hook": None,
}


class Server:
    """A listening STOMP server (from :func:`serve`); ``async with`` closes it."""

    def __init__(self, handler: FrameHandler, options: Dict[str, Any], decoder_options: Mapping[str, Any]) -> None:
        self._handler = handler
        self._frames_received = getattr(handler, "frames_received", None)
        self._options = options
        self._decoder_options = dict(decoder_options)
        self._loop = asyncio.get_running_loop()
        self._connections: Set[ServedConnection] = set()
        self._congested: Set[ServedConnection] = set()
        self._holding_producers = False  # reading paused for all: congested clients wait for too much
        self._idle = asyncio.Event()
        self._server: Optional[asyncio.Server] = None
        self._ws_server: Optional[asyncio.Server] = None
        self._port = 0
        self._ws_port: Optional[int] = None

    @property
    def port(self) -> int:
        """The port listened on (useful with ``port=0``)."""
        return self._port

    @property
    def ws_port(self) -> Optional[int]:
        """The WebSocket port listened on (``None``: none was asked)."""
        return self._ws_port

    @property
    def connections(self) -> int:
        """How many clients are connected."""
        return len(self._connections)

    def _weigh_waiting(self) -> None:
        """Hold or release the producers by what the congested clients wait for, all together."""
        limit = self._options["max_waiting_bytes"]
        waiting = sum(conn.waiting_bytes for conn in self._congested) if self._congested else 0
        if not self._holding_producers and waiting > limit:
            self._holding_producers = True
            self._pause_others()
        elif self._holding_producers and waiting <= limit // 2:
            self._holding_producers = False
            self._resume_all()

    def _pause_others(self) -> None:
        for conn in self._connections:
            if conn not in self._congested and conn._transport is not None and not conn.closing:
                conn._transport.pause_reading()
                conn._paused = True

    def _resume_all(self) -> None:
        now = self._loop.time()
        for conn in self._connections:
            if conn._paused and conn._transport is not None and not conn.closing:
                conn._transport.resume_reading()
            if conn._paused:  # our pause is not the client's silence nor its slowness: restart the clocks
                conn._paused = False
                conn._proto.keepalive(now)
                if conn._frame_started is not None:
                    conn._frame_started = now

    async def close(self, timeout: float = 5.0) -> None:
        """Stop listening, tell every client, wait up to ``timeout`` s for them to go, then abort the rest."""
        for listening in (self._server, self._ws_server):
            if listening is not None:
                listening.close()
        for conn in list(self._connections):
            conn._fail("shutdown")
            conn.close()
        if self._connections:
            self._idle.clear()
            try:
                await asyncio.wait_for(self._idle.wait(), timeout)
            except asyncio.TimeoutError:
                for conn in list(self._connections):
                    conn.abort()
                for _ in range(10):  # connection_lost runs on the next loop turns
                    if not self._connections:
                        break
                    await asyncio.sleep(0.01)
        for listening in (self._server, self._ws_server):
            if listening is not None:
                await listening.wait_closed()

    async def __aenter__(self) -> Server:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


async def serve(
    handler: FrameHandler,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    ssl: Optional[_ssl.SSLContext] = None,
    decoder_options: Optional[Mapping[str, Any]] = None,
    ws_port: Optional[int] = None,
    ws_path: str = "/ws",
    **options: Any,
) -> Server:
    """Listen on ``host:port`` (0: a free port) and serve STOMP connections to ``handler``.

    Keyword options (defaults in brackets): ``heartbeat`` [(10000, 10000)] the server's heart-beat
    pair for CONNECTED; ``heartbeat_grace`` [2.0]; ``max_connections`` [1000]; ``handshake_timeout``
    [10.0 s]; ``frame_timeout`` [30.0 s]; ``max_outbound_bytes`` [16 MiB]; ``outbound_high_water``
    [1 MiB]; ``slow_consumer_timeout`` [10.0 s]; ``max_waiting_bytes`` [64 MiB]; ``close_timeout`` [5.0 s]; ``wire_hook`` [None]: called
    with each new connection, it returns ``None`` or a ``hook(direction, data)`` that sees every byte
    ("in": from the client, "out": to it; its ``close()``, if any, is called when the connection ends),
    e.g. :meth:`fastframe.capture.Archive.server_hook`. ``decoder_options`` are
    :class:`fastframe.Decoder` options (limits, tolerances). ``ssl`` serves TLS.

    ``ws_port`` (0: a free one, read it from :attr:`Server.ws_port`) serves the same handler over
    WebSocket too, at ``ws://host:ws_port`` + ``ws_path`` (``/ws``; other paths get 404), with TLS
    when ``ssl`` is given (``wss://``); it needs the ``ws`` extra (:mod:`fastframe.websocket`). The
    newest STOMP subprotocol the client offers is chosen (``v12.stomp`` first; none offered: none,
    STOMP negotiates as over TCP); each frame and heart-beat goes out as a WebSocket message of its
    own, *text* when it is UTF-8 and *binary* otherwise (stomp.js and browsers refuse text messages
    that are not UTF-8); a message larger than the decoder's ``max_frame_size`` closes the
    connection (close code 1009). The upgrade must be done within ``handshake_timeout``.
    """
    unknown = set(options) - set(_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown server options: {', '.join(sorted(unknown))}")
    merged = dict(_DEFAULTS, **options)
    if merged["outbound_high_water"] > merged["max_outbound_bytes"]:
        raise ValueError("outbound_high_water must not exceed max_outbound_bytes")
    ProtocolConnection(
        heartbeat_grace=merged["heartbeat_grace"], **(decoder_options or {})
    )  # refuse bad options now, not per connection
    server = Server(handler, merged, decoder_options or {})
    server._server = await server._loop.create_server(lambda: ServedConnection(server), host, port, ssl=ssl)
    server._port = server._server.sockets[0].getsockname()[1]
    if ws_port is not None:
        from .. import websocket  # the ws extra, imported when a WebSocket port is asked for

        server._ws_server = await websocket.serve(
            lambda: ServedConnection(server, message_per_write=True),
            host,
            ws_port,
            path=ws_path,
            ssl=ssl,
            max_size=websocket.max_message_size(server._decoder_options),
            handshake_timeout=merged["handshake_timeout"],
            max_connections=merged["max_connections"],
        )
        server._ws_port = server._ws_server.sockets[0].getsockname()[1]
    return server
