"""STOMP over WebSocket: an asyncio transport that carries one STOMP frame per WebSocket message.

The WebSocket protocol itself (the HTTP upgrade, framing, masking, ping/pong, the closing handshake,
the size limit) is the sans-I/O protocol of the ``websockets`` package (``pip install
"fastframe[ws]"``). This module puts it between an asyncio socket and a STOMP protocol object, so
the STOMP layers above run unchanged over either:

* :class:`WebSocketTransport` looks like the ``asyncio.Transport`` the STOMP side writes to: each
  ``write(data)`` is one WebSocket message, ``writelines(frames)`` one message per item;
  ``pause_reading()``/``resume_reading()`` pause the socket underneath; ``close()`` starts the
  closing handshake; ``abort()`` drops the socket.
* Under it, the WebSocket side of the socket answers pings, handles close frames and hands the
  payload of every data message, text or binary, to the STOMP protocol's ``data_received`` as
  *bytes*, never decoded (RabbitMQ sends bodies that are not UTF-8 in text frames). The payloads of
  one socket read go up in one call, so frames split across messages, several frames in one
  message and heart-beat EOLs as messages of their own all reach the STOMP decoder as a stream.
* A message is sent as a *text* message when it is valid UTF-8 and as a *binary* one otherwise, as
  stomp.js does: browsers and stomp.js refuse text messages that are not UTF-8, and ActiveMQ reads
  STOMP from text messages.

:func:`connect` opens a client connection (offering the subprotocols ``v10.stomp``, ``v11.stomp``,
``v12.stomp`` of the STOMP versions asked); :func:`serve` listens for them.
"""

from __future__ import annotations

import asyncio
import os
import ssl as _ssl
import struct
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from .codec import DEFAULT_MAX_FRAME_SIZE

try:
    from websockets.client import ClientProtocol
    from websockets.exceptions import InvalidHandshake, InvalidURI, PayloadTooBig
    from websockets.frames import Frame, Opcode
    from websockets.http11 import Request, Response
    from websockets.protocol import OPEN, Protocol
    from websockets.server import ServerProtocol
    from websockets.typing import Subprotocol
    from websockets.uri import parse_uri
except ImportError as exc:  # pragma: no cover - the extra is installed in the test environment
    raise ImportError('STOMP over WebSocket needs the "websockets" package: pip install "fastframe[ws]"') from exc
try:
    from websockets.speedups import apply_mask  # the C speedups (websockets' wheels have them)
except ImportError:  # pragma: no cover
    from websockets.utils import apply_mask

__all__ = [
    "SUBPROTOCOLS",
    "WebSocketError",
    "WebSocketTransport",
    "connect",
    "max_message_size",
    "serve",
    "subprotocol_version",
]

#: The WebSocket subprotocol of each STOMP version (the names stomp.js, RabbitMQ and Spring use).
SUBPROTOCOLS: Dict[str, str] = {"1.0": "v10.stomp", "1.1": "v11.stomp", "1.2": "v12.stomp"}
_VERSIONS = {name: version for version, name in SUBPROTOCOLS.items()}

# pongs queued while the peer does not read what we write: past this the peer floods us with pings
_PONG_BACKLOG = 1024 * 1024
_CLOSE_TIMEOUT = 5.0  # seconds the closing handshake may take before the socket is dropped
_TEXT, _BINARY, _CONT, _CLOSE, _PING = Opcode.TEXT, Opcode.BINARY, Opcode.CONT, Opcode.CLOSE, Opcode.PING
_HEAD_SHORT, _HEAD_16, _HEAD_64 = struct.Struct("!BB").pack, struct.Struct("!BBH").pack, struct.Struct("!BBQ").pack
_FIN_TEXT, _FIN_BINARY = 0x81, 0x82  # a whole text or binary message in one frame, no extension bits


class WebSocketError(ConnectionError):
    """The WebSocket connection failed: the upgrade was refused or broken, the peer broke the
    WebSocket protocol, sent a message larger than the limit, flooded pings, or closed with an error
    code. A ``ConnectionError``, so the clients treat it as a dropped connection (and reconnect
    when told to)."""


def subprotocol_version(subprotocol: Optional[str]) -> Optional[str]:
    """The STOMP version of a subprotocol name (``"v12.stomp"`` -> ``"1.2"``; ``None`` for none or another)."""
    return _VERSIONS.get(subprotocol or "")


def max_message_size(decoder_options: Mapping[str, Any]) -> int:
    """The largest WebSocket message accepted: the STOMP decoder's ``max_frame_size`` (its default when
    not given), so a message that no frame could fill is refused from its header, before its payload is read."""
    return int(decoder_options.get("max_frame_size", DEFAULT_MAX_FRAME_SIZE))


def _is_text(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class WebSocketTransport(asyncio.Transport):
    """What the STOMP side writes to: one WebSocket message per ``write``, over a socket's transport.

    ``get_extra_info("subprotocol")`` is the subprotocol the handshake chose (``None``: none); every
    other name is the socket's (``peername``, ``sslcontext``, ...).
    """

    def __init__(self, adapter: _Adapter) -> None:
        super().__init__()
        self._adapter = adapter

    def write(self, data: Any) -> None:
        """Send ``data`` (one STOMP frame or a heart-beat) as one WebSocket message."""
        self._adapter.send_messages((bytes(data),))

    def writelines(self, list_of_data: Any) -> None:
        """Send each item as a WebSocket message of its own, in one write to the socket."""
        self._adapter.send_messages([bytes(data) for data in list_of_data])

    def can_write_eof(self) -> bool:
        return False

    def write_eof(self) -> None:
        raise NotImplementedError("a WebSocket ends with close(), which sends a close frame")

    def close(self) -> None:
        """Start the closing handshake (close code 1000); the socket closes when the peer answers
        (at most 5 s later)."""
        self._adapter.close()

    def abort(self) -> None:
        """Drop the socket now, without a close frame."""
        self._adapter.abort()

    def is_closing(self) -> bool:
        return self._adapter.closing

    def pause_reading(self) -> None:
        self._adapter.raw.pause_reading()

    def resume_reading(self) -> None:
        self._adapter.raw.resume_reading()

    def is_reading(self) -> bool:
        return bool(self._adapter.raw.is_reading())

    def set_write_buffer_limits(self, high: Optional[int] = None, low: Optional[int] = None) -> None:
        self._adapter.raw.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return int(self._adapter.raw.get_write_buffer_size())

    def get_write_buffer_limits(self) -> Tuple[int, int]:
        low, high = self._adapter.raw.get_write_buffer_limits()
        return int(low), int(high)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "subprotocol":
            return self._adapter.ws.subprotocol
        return self._adapter.raw.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._adapter.app = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        app: asyncio.BaseProtocol = self._adapter.app
        return app


class _Adapter(asyncio.Protocol):
    """The socket's protocol: drives a ``websockets`` sans-I/O protocol, and the STOMP protocol
    (``app``) above it through a :class:`WebSocketTransport` once the upgrade is done."""

    def __init__(
        self,
        ws: Protocol,
        app_factory: Callable[[], asyncio.BaseProtocol],
        *,
        paths: Sequence[str] = (),
        handshake_timeout: float = 10.0,
        live: Optional[Set[_Adapter]] = None,
        max_connections: Optional[int] = None,
    ) -> None:
        self.ws = ws
        self._live = live  # (a server's: every connection of it, upgraded or not)
        self._max_connections = max_connections
        self._app_factory = app_factory
        self.app: Any = None
        self.raw: Any = None
        self.transport = WebSocketTransport(self)
        self._paths = tuple(paths)
        self._handshake_timeout = handshake_timeout
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.closing = False
        self._writing_paused = False
        self._pong_backlog = 0
        self._error: Optional[BaseException] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._partial = bytearray()  # the start of a frame whose rest is still to come (read directly)
        self._masked_out = isinstance(ws, ClientProtocol)  # a client masks what it sends, a server does not
        self._masked_in = not self._masked_out
        limit = getattr(ws, "max_message_size", getattr(ws, "max_size", None))  # (websockets <15: max_size)
        self._limit: Optional[int] = limit if isinstance(limit, int) else None

    # ------------------------------------------------------------------ the socket's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport
        if self._live is not None:
            self._live.add(self)
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._handshake_timeout, self._handshake_late)
        if isinstance(self.ws, ClientProtocol):
            self.ws.send_request(self.ws.connect())
            self._flush()

    def data_received(self, data: bytes) -> None:
        try:
            if self._direct():
                self._received_directly(data)
            else:
                if self._partial:  # (read directly before: the frame's start comes first)
                    data, self._partial = bytes(self._partial) + data, bytearray()
                self.ws.receive_data(data)
                self._events([])
        except Exception as exc:  # (a bug of ours or of the app's callbacks: never into the loop)
            self._fail(exc)

    # The everyday frames (a whole text or binary message in one frame, within the size limit) are
    # read and written here, the rest (the handshake, control frames, fragments, errors, the limit)
    # by the websockets protocol. Measured on 250-byte messages: websockets' frame parser and
    # serializer take 6.4 and 7.8 µs a message, these paths 1.8 and 1.3 (masking is websockets' C
    # apply_mask either way), which is what keeps STOMP over WebSocket near STOMP over TCP.

    def _direct(self) -> bool:
        # only while websockets' parser waits at a frame boundary with nothing buffered, so the bytes
        # handed to it later start at a frame's first byte
        ws = self.ws
        fragmented = getattr(ws, "current_size", getattr(ws, "cur_size", None))  # (websockets <15: cur_size)
        return ws.state is OPEN and not ws.extensions and fragmented is None and not ws.reader.buffer

    def _received_directly(self, data: bytes) -> None:
        buffer = self._partial
        buffer += data
        view = memoryview(buffer)
        end, pos, masked, limit = len(buffer), 0, self._masked_in, self._limit
        payloads: List[Any] = []
        other = False  # a frame of another kind (control, fragment, bad bits, past the limit) is next
        try:
            while end - pos >= 2:
                first, second = buffer[pos], buffer[pos + 1]
                if (first != _FIN_BINARY and first != _FIN_TEXT) or bool(second & 0x80) is not masked:
                    other = True
                    break
                size, start = second & 0x7F, pos + 2
                if size == 126:
                    size, start = int.from_bytes(view[pos + 2 : pos + 4], "big"), pos + 4
                elif size == 127:
                    size, start = int.from_bytes(view[pos + 2 : pos + 10], "big"), pos + 10
                if start > end:
                    break  # the header is cut short: the rest is still to come
                if limit is not None and size > limit:
                    other = True  # websockets refuses it (PayloadTooBig), from the header
                    break
                if masked:
                    start += 4
                if start + size > end:
                    break  # the rest of this frame is still to come
                if masked:
                    payloads.append(apply_mask(view[start : start + size], bytes(view[start - 4 : start])))
                else:
                    payloads.append(bytes(view[start : start + size]))  # (no view outlives the loop)
                pos = start + size
        finally:
            view.release()
        del buffer[:pos]
        if other:
            rest = bytes(buffer)
            buffer.clear()
            self.ws.receive_data(rest)  # websockets' parser from this frame on
            self._events(payloads)
        elif payloads and self.app is not None:
            self.app.data_received(payloads[0] if len(payloads) == 1 else b"".join(payloads))

    def eof_received(self) -> Optional[bool]:
        try:
            if self._partial:  # (a frame cut short: websockets reports it)
                self.ws.receive_data(bytes(self._partial))
                self._partial.clear()
            self.ws.receive_eof()
            self._events([])
        except Exception as exc:
            self._fail(exc)
        return False

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.closing = True
        if self._live is not None:
            self._live.discard(self)
        if self._timer is not None:
            self._timer.cancel()
        cause = self._error or exc or self._close_error()
        if not self.opened.done():
            self.opened.set_exception(cause or WebSocketError("the connection closed during the WebSocket upgrade"))
            self.opened.exception()  # (retrieved: an abandoned wait must not warn)
        if self.app is not None:
            app, self.app = self.app, None
            app.connection_lost(cause)

    def pause_writing(self) -> None:
        self._writing_paused = True
        if self.app is not None:
            self.app.pause_writing()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._pong_backlog = 0
        if self.app is not None:
            self.app.resume_writing()

    # ------------------------------------------------------------------ what arrives

    def _events(self, payloads: List[Any]) -> None:
        ws = self.ws
        closed = pings = False
        for event in ws.events_received():
            if type(event) is Frame:
                opcode = event.opcode
                if opcode is _BINARY or opcode is _TEXT or opcode is _CONT:
                    payloads.append(event.data)
                elif opcode is _PING:
                    pings = True
                    self._pong_backlog += len(event.data) + 6
                elif opcode is _CLOSE:
                    closed = True
            elif isinstance(event, Request):
                self._accept(event)
            elif isinstance(event, Response):
                self._opened(event)
        self._flush()
        if pings and self._writing_paused and self._pong_backlog > _PONG_BACKLOG:
            self._fail(WebSocketError("the peer sends pings faster than it reads their pongs"))
            return
        app = self.app
        if payloads and app is not None:
            app.data_received(bytes(payloads[0]) if len(payloads) == 1 else b"".join(payloads))
        failure = ws.parser_exc or ws.handshake_exc
        if failure is not None:
            self._fail(self._explain(failure))
        elif closed:
            if self.app is not None:
                self.app.eof_received()
            self._close_socket()

    def _explain(self, failure: Exception) -> WebSocketError:
        if isinstance(failure, PayloadTooBig):
            error = WebSocketError(f"a WebSocket message is larger than the limit (max_frame_size): {failure}")
        elif isinstance(failure, InvalidHandshake):
            error = WebSocketError(f"the WebSocket upgrade failed: {failure}")
        elif isinstance(failure, EOFError):
            error = WebSocketError("the connection closed without a WebSocket close frame")
        else:
            error = WebSocketError(f"the peer broke the WebSocket protocol: {failure}")
        error.__cause__ = failure
        return error

    def _close_error(self) -> Optional[WebSocketError]:
        # a close frame with an error code (1011, 1001...) says why; 1000 (or none) is an orderly close
        received = self.ws.close_rcvd
        if received is None or received.code in (1000, 1005):
            return None
        return WebSocketError(f"the peer closed the WebSocket: {received}")

    # ------------------------------------------------------------------ the handshake

    def _accept(self, request: Request) -> None:
        ws = self.ws
        assert isinstance(ws, ServerProtocol)
        path = request.path.split("?", 1)[0]
        if self._paths and path not in self._paths:
            response = ws.reject(404, f"no STOMP endpoint at {path}; try {self._paths[0]}\n")
        elif self._live is not None and self._max_connections is not None and len(self._live) > self._max_connections:
            response = ws.reject(503, "too many connections\n")
        else:
            response = ws.accept(request)
        ws.send_response(response)
        if response.status_code == 101:
            self._opened(response)

    def _opened(self, response: Response) -> None:
        if self.ws.handshake_exc is not None or response.status_code != 101:
            return  # (_events reports handshake_exc; a server's refusal closes the socket)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.app = self._app_factory()
        self.app.connection_made(self.transport)
        if not self.opened.done():
            self.opened.set_result(None)

    def _handshake_late(self) -> None:
        self._timer = None
        if not self.opened.done():
            self._fail(WebSocketError(f"the WebSocket upgrade was not done within {self._handshake_timeout} s"))

    # ------------------------------------------------------------------ what goes out

    def send_messages(self, messages: Sequence[bytes]) -> None:
        ws = self.ws
        if self.closing:
            return
        if ws.state is not OPEN or ws.extensions or ws.expect_continuation_frame:
            for data in messages:  # (websockets raises what is wrong)
                (ws.send_text if _is_text(data) else ws.send_binary)(data)
            self._flush()
            return
        self._flush()  # what websockets has to send (pongs) goes first
        out: List[bytes] = []
        masks = os.urandom(4 * len(messages)) if self._masked_out else b""
        for i, data in enumerate(messages):
            opcode = _FIN_TEXT if _is_text(data) else _FIN_BINARY
            size, bit = len(data), 0x80 if masks else 0
            if size < 126:
                out.append(_HEAD_SHORT(opcode, bit | size))
            elif size < 65536:
                out.append(_HEAD_16(opcode, bit | 126, size))
            else:
                out.append(_HEAD_64(opcode, bit | 127, size))
            if masks:
                mask = masks[4 * i : 4 * i + 4]
                out += (mask, apply_mask(data, mask))
            else:
                out.append(data)
        if not self.raw.is_closing():
            self.raw.write(b"".join(out))

    def _flush(self) -> None:
        raw = self.raw
        for data in self.ws.data_to_send():
            if data:
                if not raw.is_closing():
                    raw.write(data)
            else:  # (the end of the stream: the closing handshake is over)
                self._close_socket()

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        try:
            self.ws.send_close(1000)
        except Exception:  # (the WebSocket is not open any more: only the socket is left)
            self._close_socket()
            return
        self._flush()
        self._timer = asyncio.get_running_loop().call_later(_CLOSE_TIMEOUT, self.abort)

    def _close_socket(self) -> None:
        self.closing = True
        if not self.raw.is_closing():
            self.raw.close()

    def abort(self) -> None:
        self.closing = True
        if self.raw is not None:
            self.raw.abort()

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self.abort()


async def connect(
    url: str,
    protocol_factory: Callable[[], asyncio.BaseProtocol],
    *,
    versions: Sequence[str] = ("1.0", "1.1", "1.2"),
    ssl: Optional[_ssl.SSLContext] = None,
    max_size: int = DEFAULT_MAX_FRAME_SIZE,
    handshake_timeout: float = 10.0,
) -> Tuple[WebSocketTransport, Any]:
    """Open a WebSocket to ``url`` (``ws://`` or ``wss://``) and run ``protocol_factory()``'s protocol over it.

    The upgrade offers the subprotocols of ``versions``, newest first; the returned transport's
    ``get_extra_info("subprotocol")`` is the one the server chose (``None``: it chose none). ``ssl``:
    the context for ``wss://`` (the default context when ``None``). A message larger than
    ``max_size`` bytes ends the connection with :class:`WebSocketError` before its payload is read.
    Returns ``(transport, protocol)`` once the upgrade is done; raises :class:`WebSocketError` when
    it is refused, and ``ValueError`` for a URL that is not a WebSocket URL or ``ssl`` with ``ws://``.
    The caller bounds the wait (the upgrade is bounded by ``handshake_timeout`` too).
    """
    try:
        uri = parse_uri(url)
    except InvalidURI as exc:
        raise ValueError(f"not a WebSocket URL (ws://host:port/path or wss://...): {url!r}") from exc
    if ssl is not None and not uri.secure:
        raise ValueError(f"ssl= was given for {url!r}: TLS over WebSocket is a wss:// URL")
    context = (ssl or _ssl.create_default_context()) if uri.secure else None
    offered = [Subprotocol(SUBPROTOCOLS[v]) for v in sorted(set(versions), reverse=True) if v in SUBPROTOCOLS]
    ws = ClientProtocol(uri, subprotocols=offered or None, max_size=max_size)
    loop = asyncio.get_running_loop()
    _, adapter = await loop.create_connection(
        lambda: _Adapter(ws, protocol_factory, handshake_timeout=handshake_timeout),
        uri.host,
        uri.port,
        ssl=context,
        server_hostname=uri.host if context is not None else None,
    )
    try:
        await asyncio.shield(adapter.opened)
    except BaseException:
        adapter.abort()
        raise
    return adapter.transport, adapter.app


def _select_subprotocol(_: ServerProtocol, offered: Sequence[Subprotocol]) -> Optional[Subprotocol]:
    # the newest STOMP version the client offers; none offered (or only others): no subprotocol, the
    # STOMP handshake negotiates as over TCP (refusing would shut out clients that offer none)
    for name in ("v12.stomp", "v11.stomp", "v10.stomp"):
        if name in offered:
            return Subprotocol(name)
    return None


async def serve(
    protocol_factory: Callable[[], asyncio.BaseProtocol],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    path: str = "/ws",
    ssl: Optional[_ssl.SSLContext] = None,
    max_size: int = DEFAULT_MAX_FRAME_SIZE,
    handshake_timeout: float = 10.0,
    max_connections: Optional[int] = None,
) -> asyncio.Server:
    """Listen on ``host:port`` for WebSocket upgrades to ``path`` (others get 404) and run one
    ``protocol_factory()`` protocol over each connection, from the end of its upgrade.

    The newest STOMP subprotocol the client offers is chosen (``v12.stomp`` first); a client that
    offers none is served without one. An upgrade not done within ``handshake_timeout`` seconds
    is dropped; a message larger than ``max_size`` bytes closes the connection (close code 1009).
    Past ``max_connections`` connections (those still upgrading count too) an upgrade gets HTTP 503.
    """
    live: Set[_Adapter] = set()

    def adapter() -> _Adapter:
        ws = ServerProtocol(select_subprotocol=_select_subprotocol, max_size=max_size)
        return _Adapter(
            ws,
            protocol_factory,
            paths=(path,),
            handshake_timeout=handshake_timeout,
            live=live,
            max_connections=max_connections,
        )

    return await asyncio.get_running_loop().create_server(adapter, host, port, ssl=ssl)
