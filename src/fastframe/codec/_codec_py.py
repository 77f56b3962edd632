"""The pure-Python twin: the reference implementation of the codec.

Clear first, but not slow: every scan is a ``bytearray.find`` over the
buffer, never a Python loop per byte. A complete, ordinary frame head is
parsed in one go (``_head_fast``); anything unusual, and every head that
arrives in pieces, goes through the line-by-line path (``_head_lines``), which
is the definition of what is an error and where. The compiled twin
(``_codec_c.pyx``) implements exactly the same rules.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
from array import array
from bisect import bisect_right
from collections.abc import Mapping
from itertools import accumulate
from struct import Struct
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from ._constants import (
    BODY_COMMANDS,
    COMMANDS_BY_VERSION,
    ESCAPE,
    UNESCAPE,
    UNESCAPED_COMMANDS,
)
from ._diagnose import (
    BODY_NOT_ALLOWED,
    BODY_TOO_LARGE,
    FRAME_TOO_LARGE,
    LINE_TOO_LONG,
    MISSING_NULL,
    TOO_MANY_HEADERS,
    TRUNCATED,
    command_problem,
    header_problem,
)
from ._errors import (
    NOT_BYTES,
    NOT_CONTIGUOUS,
    REENTRANT_CALL,
    BodyNotAllowedError,
    EncodeError,
    FrameError,
    LimitExceededError,
    MissingNullError,
    TruncatedError,
    make_decode_error,
)
from ._frames import body_bytes, body_repr, encode_error, first_wins_map, normalize_headers
from ._layout import (
    MAX_COLUMN_BYTES,
    NO_HEARTBEAT_EVENTS,
    NO_INVALID_UTF8,
    NOT_COLUMNS,
    NOT_TEXT,
    ROW_TOO_LARGE,
    TOO_LARGE_FOR_COLUMNS,
    Columns,
    take_limits,
)
from ._options import decoder_options, encoder_options, receive_size, received_size
from ._slots import slot_descriptors, wrong_count

__all__ = [
    "Frame",
    "Heartbeat",
    "Decoder",
    "ColumnDecoder",
    "Encoder",
    "decode",
    "encode",
    "to_columns",
    "route_messages",
    "first_row_without",
    "SlotMaker",
    "IMPLEMENTATION",
]

IMPLEMENTATION = "python"

Header = Tuple[str, str]
HeadersLike = Union[Mapping[str, str], Iterable[Tuple[str, str]]]
BytesLike = Union[bytes, bytearray, memoryview]


# --------------------------------------------------------------------------- frame


class Frame:
    """One STOMP frame: ``command``, ``headers`` and ``body``.

    ``headers`` is a tuple of ``(name, value)`` pairs in wire order with
    repeats kept; :meth:`get` returns the first entry of a name, as the
    specification requires. Frames are immutable and hashable, and compare
    equal when command, headers and body are equal (whichever twin made them).
    ``offset`` is the stream offset of the frame's first byte for decoded
    frames, ``None`` for frames built by hand; it takes no part in equality.
    """

    __slots__ = ("_command", "_headers", "_body", "_offset")
    __fastframe_frame__ = True

    def __init__(self, command: str, headers: HeadersLike = (), body: BytesLike = b"") -> None:
        if not isinstance(command, str):
            raise TypeError(f"command must be str, not {type(command).__name__}")
        self._command = command if type(command) is str else str(command)
        self._headers = normalize_headers(headers)
        self._body = body_bytes(body)
        self._offset: Optional[int] = None

    @property
    def command(self) -> str:
        """The command, e.g. ``"MESSAGE"``."""
        return self._command

    @property
    def headers(self) -> Tuple[Header, ...]:
        """Every header as ``(name, value)``, in wire order, repeats kept, unescaped."""
        return self._headers

    @property
    def body(self) -> bytes:
        """The body octets."""
        return self._body

    @property
    def offset(self) -> Optional[int]:
        """Stream offset of the first byte of a decoded frame; ``None`` otherwise."""
        return self._offset

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """The value of the first header called ``name``, else ``default``."""
        for key, value in self._headers:
            if key == name:
                return value
        return default

    def get_all(self, name: str) -> List[str]:
        """Every value of the headers called ``name``, in wire order."""
        return [value for key, value in self._headers if key == name]

    def header_map(self) -> Dict[str, str]:
        """The headers as a dict in which the first entry of each name wins."""
        return first_wins_map(self._headers)

    def encode(self, version: str = "1.2", **options: Any) -> bytes:
        """Encode this frame; the options are those of :func:`encode`."""
        return encode(self, version=version, **options)

    def __eq__(self, other: object) -> bool:
        if not getattr(other, "__fastframe_frame__", False):
            return NotImplemented
        return bool(
            self._command == other.command  # type: ignore[attr-defined]
            and self._headers == other.headers  # type: ignore[attr-defined]
            and self._body == other.body  # type: ignore[attr-defined]
        )

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash((self._command, self._headers, self._body))

    def __repr__(self) -> str:
        return f"Frame({self._command!r}, {self._headers!r}, {body_repr(self._body)})"

    def __reduce__(self) -> Any:
        return (Frame, (self._command, self._headers, self._body))


def _make_frame(command: str, headers: Tuple[Header, ...], body: bytes, offset: int) -> Frame:
    frame = object.__new__(Frame)
    frame._command = command
    frame._headers = headers
    frame._body = body
    frame._offset = offset
    return frame


class Heartbeat:
    """A heart-beat: an EOL between frames (``eol`` is ``b"\\n"`` or ``b"\\r\\n"``).

    Returned by ``feed()`` only when the decoder was made with
    ``heartbeat_events=True``; ``Decoder.heartbeats`` counts them always.
    """

    __slots__ = ("offset", "eol")

    def __init__(self, offset: int, eol: bytes) -> None:
        self.offset = offset
        self.eol = eol

    def __eq__(self, other: object) -> bool:
        if not getattr(other, "__fastframe_heartbeat__", False):
            return NotImplemented
        return bool(self.offset == other.offset and self.eol == other.eol)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.offset, self.eol))

    def __repr__(self) -> str:
        return f"Heartbeat(offset={self.offset}, eol={self.eol!r})"

    __fastframe_heartbeat__ = True


# --------------------------------------------------------------------------- escapes


class _UndefinedEscape(Exception):
    pass


def _make_unescaper(escapes: str, keep_undefined: bool) -> Any:
    """A str -> str unescaper for one escape set.

    Undefined sequences raise ``_UndefinedEscape`` (callers find the offset
    on the bytes) or, with ``keep_undefined``, stay as they are.
    """
    table = UNESCAPE[escapes]
    if not table:
        return None  # STOMP 1.0: a backslash is an ordinary character
    others = [("\\" + letter, char) for letter, char in table.items() if letter != "\\"]

    def unescape(text: str) -> str:
        if "\\" not in text:
            return text
        # split at escaped backslashes first: what is left has no "\\\\"
        pieces = text.split("\\\\")
        for i, piece in enumerate(pieces):
            if "\\" in piece:
                for sequence, char in others:
                    piece = piece.replace(sequence, char)
                if "\\" in piece and not keep_undefined:
                    raise _UndefinedEscape
                pieces[i] = piece
        return "\\".join(pieces)

    return unescape


# --------------------------------------------------------------------------- decoder

_BETWEEN, _HEAD, _BODY = 0, 1, 2
_CR = 13
_LF = 10
#: The one-go head parser looks this far for the blank line; longer heads
#: take the line-by-line path (this bounds the work spent on a failed try).
_FAST_HEAD_WINDOW = 8192
#: A run of CR and LF bytes between frames, and a CR in it that no LF follows (where a frame starts).
_EOL_RUN = re.compile(rb"[\r\n]*")
_BARE_CR = re.compile(rb"\r(?!\n)")


class Decoder:
    """Incremental, sans-I/O STOMP frame decoder.

    ``feed(data)`` takes bytes-like data split anywhere and returns the frames
    (and, with ``heartbeat_events=True``, :class:`Heartbeat` events) completed
    by it; ``get_buffer()`` and ``buffer_updated(nbytes)`` do the same for bytes
    written into a buffer the decoder lends (``asyncio.BufferedProtocol``).
    ``close()`` reports a stream that ended inside a frame. On
    malformed input ``feed()`` raises a :class:`DecodeError` subclass whose
    ``frames`` attribute holds what the same call completed before the bad
    byte; the decoder then refuses input until :meth:`reset`.

    The codec guide (docs/guides/codec.md) lists every option and its default.
    """

    def __init__(self, version: str = "1.2", **options: Any) -> None:
        lock: Optional[threading.Lock] = self.__dict__.get("_lock")
        if lock is None:
            # held while a call runs: a second call (another thread, a finalizer) raises
            # instead of touching the state (acquire(False) is atomic, free-threaded too)
            lock = self._lock = threading.Lock()
        self._enter("__init__")
        try:
            self._configure(version, options)
            self._reset()
        finally:
            lock.release()

    def _enter(self, method: str) -> None:
        if not self._lock.acquire(False):
            raise RuntimeError(REENTRANT_CALL.format(type(self).__name__, method))

    def _configure(self, version: str, options: Dict[str, Any]) -> None:
        opts = decoder_options(version, **options)
        self.options = opts
        self.version = opts.version
        self._strict = opts.strict
        self._commands = COMMANDS_BY_VERSION[opts.version]
        self._unescape = _make_unescaper(opts.escapes, opts.keep_undefined_escapes)
        letters = "".join(UNESCAPE[opts.escapes]).encode()
        # letters checked after a backslash, or None when nothing is checked
        self._escape_letters = letters if letters and not opts.keep_undefined_escapes else None
        self._colon_ok = opts.allow_colon_in_value
        self._bare_cr_ok = opts.allow_bare_cr
        self._missing_colon_ok = opts.allow_missing_colon
        # how header bytes that are not UTF-8 decode: an error (header_problem says where), or kept
        self._utf8_errors = "surrogateescape" if opts.keep_invalid_utf8 else "strict"
        self._max_count = opts.max_header_count
        self._max_line = opts.max_line_length
        self._max_body = opts.max_body_size
        self._max_frame = opts.max_frame_size
        self._events = opts.heartbeat_events
        self._seen_lines: Dict[str, Header] = {}  # head line -> its pair, in escaped frames
        self._recv: Optional[bytearray] = None  # what get_buffer() lends

    def reset(self) -> None:
        """Forget everything: buffered bytes, counters, a pending error."""
        self._enter("reset")
        try:
            self._reset()
        finally:
            self._lock.release()

    def _reset(self) -> None:
        self._lent = -1  # the size of the buffer lent by get_buffer(), -1 when none is
        self._buf: Union[bytes, bytearray] = bytearray()  # bytes: the caller's, parsed in place
        self._base = 0  # stream offset of _buf[0]
        self._pos = 0  # first byte not yet consumed (index into _buf)
        self._phase = _BETWEEN
        self._error: Optional[FrameError] = None
        self.heartbeats = 0
        self._start_frame(0)

    def _start_frame(self, index: int) -> None:
        self._frame_start = index  # frame start
        self._line_start = index  # current head line start
        self._line_scan = index  # where the LF search of the current line resumes
        self._command: Optional[str] = None
        self._escaped = True  # False for CONNECT, STOMP, CONNECTED
        self._headers: List[Header] = []
        self._content_length = -1  # content-length, -1 when absent
        self._body_start = -1  # body start
        self._body_scan = -1  # where the NUL search of the body resumes

    @property
    def bytes_fed(self) -> int:
        """Total number of bytes fed since creation or the last reset."""
        return self._base + len(self._buf)

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf) - self._pos

    def feed(self, data: BytesLike) -> List[Any]:
        """Add bytes; return the frames (and heart-beat events) completed so far."""
        self._enter("feed")
        try:
            return self._feed(data)
        finally:
            self._lock.release()

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """A writable buffer for the next bytes (at least 1 byte; 64 KiB when ``sizehint`` <= 0).

        Write the stream's next bytes at its start, then call
        :meth:`buffer_updated` with their number: together they are
        ``asyncio.BufferedProtocol``'s pair. The buffer belongs to the decoder and
        is reused: write into the one most recently returned, once.
        """
        size = receive_size(sizehint)
        self._enter("get_buffer")
        try:
            recv = self._recv
            if recv is None or len(recv) < size:
                # a new bytearray: a view of the old one stays valid memory while it lives
                recv = self._recv = bytearray(size)
            self._lent = len(recv)
            return memoryview(recv)
        finally:
            self._lock.release()

    def buffer_updated(self, nbytes: int) -> List[Any]:
        """``nbytes`` bytes were written into the buffer from :meth:`get_buffer`: what ``feed()`` of them returns."""
        self._enter("buffer_updated")
        try:
            return self._feed(self._received(nbytes))
        finally:
            self._lock.release()

    def _received(self, nbytes: int) -> bytes:
        size = received_size(nbytes, self._lent)
        self._lent = -1  # a buffer lent is filled once
        return bytes(memoryview(self._recv)[:size])  # type: ignore[arg-type]

    def _feed(self, data: BytesLike) -> List[Any]:
        if self._error is not None:
            raise self._repeat_error()
        out: List[Any] = []
        if type(data) is bytes:
            if not data:
                return out
            if self._pos == len(self._buf):
                # nothing buffered: parse the caller's bytes in place, keep only the tail
                self._base += self._pos
                self._pos = 0
                self._buf = data
            else:
                self._buf += data
        else:
            try:
                view = memoryview(data)
            except TypeError:
                raise TypeError(NOT_BYTES.format(type(data).__name__)) from None
            with view:
                if not view.c_contiguous:
                    raise BufferError(NOT_CONTIGUOUS)
                if not view.nbytes:
                    return out
                self._buf += view
        try:
            self._run(out)
        except FrameError as error:
            error.frames = out  # type: ignore[attr-defined]
            self._error = error
            raise
        finally:
            self._compact()
        return out

    def close(self) -> None:
        """Declare the end of the stream; raise TruncatedError inside a frame."""
        self._enter("close")
        try:
            self._close()
        finally:
            self._lock.release()

    def _close(self) -> None:
        if self._error is not None:
            raise self._repeat_error()
        end = len(self._buf)
        if self._pos < end:
            what = "a frame" if self._phase != _BETWEEN else "an EOL"
            try:
                self._fail(TruncatedError, TRUNCATED.format(what, self._base + self._pos), end, self._pos)
            except FrameError as error:
                self._error = error
                raise

    # -- internals -----------------------------------------------------------

    def _repeat_error(self) -> FrameError:
        reduced: Any = self._error.__reduce__()  # (class, args): rebuilt, so frames start empty
        again: Any = reduced[0](*reduced[1])
        again.frames = []
        return again  # type: ignore[no-any-return]

    def _compact(self) -> None:
        shift = self._pos
        buf = self._buf
        if isinstance(buf, bytes):  # parsed in place: keep a copy of the tail only
            self._buf = bytearray(memoryview(buf)[shift:])
        elif shift:
            del buf[:shift]  # cheap: CPython moves the bytearray's start pointer
        if shift:
            self._base += shift
            self._pos = 0
            if self._phase != _BETWEEN:
                self._frame_start -= shift
                self._line_start -= shift
                self._line_scan -= shift
                if self._body_start >= 0:
                    self._body_start -= shift
                    self._body_scan -= shift

    def _fail(self, cls: type, reason: str, index: int, floor: int, limit: str = "") -> None:
        base = self._base
        raise make_decode_error(cls, reason, base + index, self._buf, base, base + floor, base + len(self._buf), limit)

    def _run(self, out: List[Any]) -> None:
        buf = self._buf
        end = len(buf)
        while True:
            phase = self._phase
            if phase == _BETWEEN:
                pos = self._pos
                # the EOLs before the next frame, found by C scans (a flood of them costs no Python loop)
                stop = _EOL_RUN.match(buf, pos, end).end()  # type: ignore[union-attr]
                crs = buf.count(b"\r", pos, stop)
                if crs and crs != buf.count(b"\r\n", pos, stop):
                    stop = _BARE_CR.search(buf, pos, stop).start()  # type: ignore[union-attr]
                if self._events:
                    while pos < stop:
                        eol = b"\n" if buf[pos] == _LF else b"\r\n"
                        out.append(Heartbeat(self._base + pos, eol))
                        pos += len(eol)
                self.heartbeats += buf.count(b"\n", self._pos, stop)
                pos = self._pos = stop
                # a lone CR at the end: an EOL or a bad command, the next byte tells
                if pos == end or (pos + 1 == end and buf[pos] == _CR):
                    return
                self._frame_start = pos
                self._phase = _HEAD
                if not self._head_fast(end, out):
                    self._start_frame(pos)  # the line-by-line path needs the whole state
                    if not self._head_lines(end):
                        return
            elif phase == _HEAD:
                if not self._head_lines(end):
                    return
            elif not self._read_body(end, out):
                return

    def _head_fast(self, end: int, out: List[Any]) -> bool:
        """Parse a complete, ordinary head in one go, and its body when it is all here.

        False leaves the head to _head_lines, which decides what is an error;
        an unusual body is left to _begin_body/_read_body the same way.
        """
        buf = self._buf
        frame_start = self._frame_start
        blank = buf.find(b"\n\n", frame_start, min(end, frame_start + self._max_frame, frame_start + _FAST_HEAD_WINDOW))
        if blank < 0:
            return False
        try:
            text = buf[frame_start:blank].decode("utf-8")
        except UnicodeDecodeError:
            return False
        if "\r" in text or "\0" in text or text.count("\n") > self._max_count:
            return False
        if (
            blank - frame_start > self._max_line
            and max(map(len, bytes(buf[frame_start:blank]).split(b"\n"))) > self._max_line
        ):
            return False
        lines = text.split("\n")
        command = lines[0]
        if self._strict and command not in self._commands:
            return False
        escaped = command not in UNESCAPED_COMMANDS
        unescape = self._unescape if escaped and "\\" in text else None
        colon_ok = self._colon_ok or not escaped
        headers = []
        # lines repeat from frame to frame: reuse their (name, value) tuples
        seen = self._seen_lines if escaped else {}
        for line in lines[1:]:
            pair = seen.get(line)
            if pair is None:
                name, sep, value = line.partition(":")
                if not name or not sep:
                    return False
                if not colon_ok and ":" in value:
                    return False
                if unescape is not None:
                    try:
                        name = unescape(name)
                        value = unescape(value)
                    except _UndefinedEscape:
                        return False
                pair = (name, value)
                if len(seen) >= 512:
                    seen.clear()  # bounded; lines that keep coming back are soon back in
                seen[line] = pair
            headers.append(pair)
        content_length = -1
        at = text.find("\ncontent-length:")  # the first one: its name never needs escaping
        if at >= 0:
            stop = text.find("\n", at + 16)
            value = text[at + 16 : stop if stop >= 0 else len(text)]
            if not (value.isdigit() and value.isascii()) or len(value) > 19:
                return False
            content_length = int(value)
            if content_length > self._max_body:
                return False
        body_start = blank + 2
        # the body, when it is all here and nothing about it is unusual
        if not self._strict or command in BODY_COMMANDS:
            if content_length >= 0:
                nul = body_start + content_length
                if nul >= end or buf[nul] or nul - frame_start >= self._max_frame:
                    nul = -1
            else:
                nul = buf.find(
                    b"\0", body_start, min(end, body_start + self._max_body + 1, frame_start + self._max_frame)
                )
            if nul >= 0:
                body = bytes(memoryview(buf)[body_start:nul]) if nul - body_start > 4096 else bytes(buf[body_start:nul])
                out.append(_make_frame(command, tuple(headers), body, self._base + frame_start))
                self._pos = nul + 1
                self._phase = _BETWEEN
                return True
        self._command = command
        self._escaped = escaped
        self._headers = headers
        self._content_length = content_length
        self._begin_body(body_start)
        return True

    def _head_lines(self, end: int) -> bool:
        """Parse the head line by line, resuming where the last call stopped."""
        buf = self._buf
        frame_limit = self._frame_start + self._max_frame
        while True:
            line_start = self._line_start
            lf = buf.find(b"\n", self._line_scan, end)
            if lf < 0:
                self._line_scan = end
                # a CR at the very end may be half of an EOL: judge the line without it
                avail = end - 1 if end > line_start and buf[end - 1] == _CR else end
                if (
                    avail > frame_limit
                    or avail - line_start > self._max_line
                    or (len(self._headers) >= self._max_count and self._command is not None)
                ):
                    self._check_line_limits(line_start, avail, avail > frame_limit)
                return False
            content_end = lf - 1 if lf > line_start and buf[lf - 1] == _CR else lf
            if (
                lf >= frame_limit
                or content_end - line_start > self._max_line
                or (len(self._headers) >= self._max_count and self._command is not None)
            ):
                self._check_line_limits(line_start, content_end, lf >= frame_limit)
            if self._command is None:
                self._parse_command(line_start, content_end)
            elif content_end == line_start:
                self._line_start = self._line_scan = lf + 1
                self._begin_body(lf + 1)
                return True
            else:
                self._parse_header(line_start, content_end)
            self._line_start = self._line_scan = lf + 1

    def _check_line_limits(self, line_start: int, content_end: int, frame_exceeded: bool) -> None:
        """Header count, line length and frame size: checked before a line's content."""
        frame_start = self._frame_start
        if self._command is not None and content_end > line_start and len(self._headers) >= self._max_count:
            self._fail(
                LimitExceededError,
                TOO_MANY_HEADERS.format(self._max_count),
                line_start,
                frame_start,
                "max_header_count",
            )
        line_exceeded = content_end - line_start > self._max_line
        if line_exceeded or frame_exceeded:
            line_at = line_start + self._max_line
            frame_at = frame_start + self._max_frame
            if line_exceeded and (not frame_exceeded or line_at <= frame_at):
                self._fail(
                    LimitExceededError, LINE_TOO_LONG.format(self._max_line), line_at, frame_start, "max_line_length"
                )
            self._fail(
                LimitExceededError, FRAME_TOO_LARGE.format(self._max_frame), frame_at, frame_start, "max_frame_size"
            )

    def _parse_command(self, line_start: int, content_end: int) -> None:
        line = bytes(self._buf[line_start:content_end])
        problem = command_problem(line, self._strict, self._commands, self.version)
        if problem is not None:
            self._fail(problem[1], problem[2], line_start + problem[0], self._frame_start)
        command = line.decode("utf-8")
        self._command = command
        self._escaped = command not in UNESCAPED_COMMANDS

    def _parse_header(self, line_start: int, content_end: int) -> None:
        """Check one complete header line and append its (name, value)."""
        line = bytes(self._buf[line_start:content_end])
        escaped = self._escaped
        first_length = self._content_length < 0
        # the usual line, checked in a few scans; anything else is diagnosed below
        colon = line.find(b":")
        if colon > 0 and b"\0" not in line and (self._bare_cr_ok or b"\r" not in line):
            if not escaped or self._colon_ok or line.find(b":", colon + 1) < 0:
                value_b = line[colon + 1 :]
                try:
                    name = line[:colon].decode("utf-8", self._utf8_errors)
                    value = value_b.decode("utf-8", self._utf8_errors)
                    if escaped and self._unescape is not None and b"\\" in line:
                        name = self._unescape(name)
                        value = self._unescape(value)
                except (UnicodeDecodeError, _UndefinedEscape):
                    pass
                else:
                    if not (first_length and colon == 14 and line.startswith(b"content-length")):
                        self._headers.append((name, value))
                        return
                    if value_b.isdigit() and len(value_b) <= 19 and int(value_b) <= self._max_body:
                        self._content_length = int(value_b)
                        self._headers.append((name, value))
                        return
        problem = header_problem(
            line,
            escape_letters=self._escape_letters if escaped else None,
            colon_ok=self._colon_ok or not escaped,
            bare_cr_ok=self._bare_cr_ok,
            missing_colon_ok=self._missing_colon_ok,
            content_length_max=self._max_body if first_length else -1,
            invalid_utf8_ok=self._utf8_errors != "strict",
        )
        if problem is not None:
            self._fail(problem[1], problem[2], line_start + problem[0], self._frame_start, problem[3])
        name_b, _, value_b = line.partition(b":")
        name = name_b.decode("utf-8", self._utf8_errors)
        value = value_b.decode("utf-8", self._utf8_errors)
        if escaped and self._unescape is not None:
            name = self._unescape(name)
            value = self._unescape(value)
        if first_length and name_b == b"content-length":
            self._content_length = int(value_b)  # checked above: decimal, within max_body_size
        self._headers.append((name, value))

    def _begin_body(self, body_start: int) -> None:
        """The head is complete: checks that need the whole head, then the body phase."""
        self._body_start = self._body_scan = body_start
        self._phase = _BODY
        content_length = self._content_length
        if content_length >= 0:
            frame_start = self._frame_start
            if content_length and self._strict and self._command not in BODY_COMMANDS:
                self._fail(BodyNotAllowedError, BODY_NOT_ALLOWED.format(self._command), body_start, frame_start)
            if body_start + content_length + 1 - frame_start > self._max_frame:
                frame_at = frame_start + self._max_frame
                self._fail(
                    LimitExceededError, FRAME_TOO_LARGE.format(self._max_frame), frame_at, frame_start, "max_frame_size"
                )

    def _read_body(self, end: int, out: List[Any]) -> bool:
        buf = self._buf
        frame_start = self._frame_start
        body_start = self._body_start
        content_length = self._content_length
        if content_length >= 0:
            nul = body_start + content_length
            if end <= nul:
                return False
            if buf[nul]:
                self._fail(MissingNullError, MISSING_NULL.format(content_length), nul, frame_start)
        else:
            if (
                self._body_scan == body_start
                and end > body_start
                and buf[body_start]
                and self._strict
                and self._command not in BODY_COMMANDS
            ):
                self._fail(BodyNotAllowedError, BODY_NOT_ALLOWED.format(self._command), body_start, frame_start)
            frame_at = frame_start + self._max_frame
            body_at = body_start + self._max_body
            nul = buf.find(b"\0", self._body_scan, min(end, body_at + 1, frame_at))
            if nul < 0:
                if end > frame_at and frame_at <= body_at:
                    reason = FRAME_TOO_LARGE.format(self._max_frame)
                    self._fail(LimitExceededError, reason, frame_at, frame_start, "max_frame_size")
                if end > body_at:
                    self._fail(
                        LimitExceededError, BODY_TOO_LARGE.format(self._max_body), body_at, frame_start, "max_body_size"
                    )
                self._body_scan = end
                return False
        # one copy for large bodies (a bytearray slice would copy twice)
        body = bytes(memoryview(buf)[body_start:nul]) if nul - body_start > 4096 else bytes(buf[body_start:nul])
        out.append(_make_frame(self._command, tuple(self._headers), body, self._base + frame_start))  # type: ignore[arg-type]
        self._pos = nul + 1
        self._phase = _BETWEEN
        return True


def decode(data: BytesLike, version: str = "1.2", **options: Any) -> List[Any]:
    """Decode a whole buffer: every frame in it; raises if it ends inside a frame."""
    decoder = Decoder(version, **options)
    frames = decoder.feed(data)
    decoder.close()
    return frames


class SlotMaker:
    """Builds instances of ``cls`` without calling its ``__init__``: ``maker(*values)`` returns a new
    instance whose slots ``names`` hold ``values`` followed by ``fixed``.

    The instance is made as ``object.__new__(cls)`` makes it and each slot is set through its member
    descriptor, as ``object.__setattr__`` would (a ``__setattr__`` of the class's own is not called).
    :func:`route_messages` builds each message this way when its ``make`` is a SlotMaker, in the
    compiled twin without a Python call (the receiving fast path's one object per MESSAGE).
    ``cls`` must be a class ``object.__new__`` builds and each name one of its slots (a
    :class:`TypeError` or :class:`ValueError` otherwise); a call with other than
    ``len(names) - len(fixed)`` values is a :class:`TypeError`. ``SlotMaker.compiled`` says whether
    it is the compiled twin's: the Python twin's, a Python loop over the descriptors, costs more
    than a plain ``__init__`` call, so a caller may prefer the class's own constructor there.
    """

    compiled = False

    __slots__ = ("cls", "names", "fixed", "_setters", "_count")

    def __init__(self, cls: type, names: Sequence[str], fixed: Sequence[Any] = ()) -> None:
        descriptors = slot_descriptors(cls, names, fixed)
        self.cls = cls
        self.names = tuple(names)
        self.fixed = tuple(fixed)
        self._setters = tuple(descriptor.__set__ for descriptor in descriptors)
        self._count = len(names) - len(fixed)

    def __call__(self, *values: Any) -> Any:
        if len(values) != self._count:
            raise TypeError(wrong_count(self._count, len(values)))
        made: Any = object.__new__(self.cls)
        for setter, value in zip(self._setters, values + self.fixed):
            setter(made, value)
        return made

    def __repr__(self) -> str:
        return f"SlotMaker({self.cls.__qualname__}, {self.names!r}, fixed={len(self.fixed)})"


def route_messages(
    items: List[Any],
    start: int,
    routes: Dict[str, Tuple[Any, Any, bool]],
    ack_header: bool,
    unacked: Dict[str, Tuple[str, str]],
    make: Any,
    filled: List[Any],
    events: Optional[List[Any]] = None,
    beat: Any = None,
) -> int:
    """Queue the everyday MESSAGEs of ``items[start:]`` straight into their subscriptions' queues.

    The receiving side's fast path (a client connection calls it on each read's decoded items): starting
    at ``start`` (0 when negative), each :class:`fastframe.Frame` whose command is ``MESSAGE``, with
    ``subscription`` and ``message-id`` headers (str) and a subscription in ``routes``, becomes
    ``make(frame, subscription, message_id, ack_id, destination)`` appended to that queue (a
    :class:`SlotMaker` of five values is built without a Python call in the compiled twin); ``ack_id`` is
    the ``ack`` header when ``ack_header`` (STOMP 1.2) and it is set, else the message id, and a
    subscription that acknowledges (``manual``) records ``unacked[ack_id] = (subscription,
    message_id)``. ``routes`` maps a subscription id to ``(owner, queue, manual)``: ``queue`` is
    appended to, and ``owner`` is added to ``filled`` (once per run of messages; the owner bounds its
    queue after the read). With ``events`` (a list), each :class:`fastframe.Heartbeat` item appends
    ``beat`` to it and routing goes on (the EOL RabbitMQ and ActiveMQ write after every frame).
    Returns the index of the first item it did not queue (``len(items)`` when it queued them all): a
    heart-beat (without ``events``), another frame, an unusual MESSAGE; the caller takes that item by
    its general path, then may call again from the next one, so the order of everything is kept.
    """
    end = len(items)
    i = max(start, 0)
    while i < end:
        frame = items[i]
        if type(frame) is not Frame or frame._command != "MESSAGE":
            if type(frame) is Heartbeat and events is not None:
                events.append(beat)
                i += 1
                continue
            return i
        sub_id = message_id = ack = destination = None
        for key, value in frame._headers:  # the first of each name, as Frame.get
            if key == "subscription":
                if sub_id is None:
                    sub_id = value
            elif key == "message-id":
                if message_id is None:
                    message_id = value
            elif key == "ack":
                if ack is None:
                    ack = value
            elif key == "destination":
                if destination is None:
                    destination = value
        if type(sub_id) is not str or type(message_id) is not str:
            return i
        route = routes.get(sub_id)
        if route is None:
            return i
        owner, queue, manual = route
        ack_id = (ack if ack_header else None) or message_id
        if manual:
            unacked[ack_id] = (sub_id, message_id)
        queue.append(make(frame, sub_id, message_id, ack_id, destination))
        if not filled or filled[-1] is not owner:
            filled.append(owner)
        i += 1
    return end


_INT32 = Struct("<i")


def first_row_without(columns: Columns, name: str, value: Optional[str] = None) -> int:
    """The first row of ``columns`` (a :class:`fastframe.Columns`) with no ``name`` header, or, with
    ``value``, whose first ``name`` header is not ``value``; ``columns.rows`` when every row has it.

    The check a columnar subscription makes of each read (``message-id`` present, ``subscription`` its
    own), one pass over the rows' header names with no object per row. Raises TypeError when a buffer
    is not bytes and ValueError when the offsets point outside their buffers (columns made by hand).
    """
    buffers = (columns.header_offsets, columns.name_offsets, columns.name_data, columns.value_offsets)
    if any(type(buffer) is not bytes for buffer in (*buffers, columns.value_data)):
        raise TypeError(NOT_COLUMNS.format("its offsets and data must be bytes"))
    heads, names, name_data, values = buffers
    value_data = columns.value_data
    rows = columns.rows
    if type(name) is not str or (value is not None and type(value) is not str):
        wrong = ("name", name) if type(name) is not str else ("value", value)
        raise TypeError(NOT_TEXT.format(wrong[0], type(wrong[1]).__name__))
    key = name.encode()
    want = None if value is None else value.encode()
    if rows < 0 or len(heads) < 4 * (rows + 1):
        raise ValueError(NOT_COLUMNS.format("header_offsets holds fewer than rows + 1 offsets"))
    count = _INT32.unpack_from(heads, 4 * rows)[0]
    if count < 0 or len(names) < 4 * (count + 1) or len(values) < 4 * (count + 1):
        raise ValueError(NOT_COLUMNS.format("name_offsets or value_offsets hold fewer offsets than headers"))
    for row in range(rows):
        first, end = _INT32.unpack_from(heads, 4 * row)[0], _INT32.unpack_from(heads, 4 * row + 4)[0]
        if not 0 <= first <= end <= count:
            raise ValueError(NOT_COLUMNS.format("header_offsets do not rise within the headers"))
        for index in range(first, end):
            start, stop = _INT32.unpack_from(names, 4 * index)[0], _INT32.unpack_from(names, 4 * index + 4)[0]
            if not 0 <= start <= stop <= len(name_data):
                raise ValueError(NOT_COLUMNS.format("name_offsets point outside name_data"))
            if stop - start != len(key) or not name_data.startswith(key, start):
                continue
            if want is None:
                break  # (the first header of the name decides)
            start, stop = _INT32.unpack_from(values, 4 * index)[0], _INT32.unpack_from(values, 4 * index + 4)[0]
            if not 0 <= start <= stop <= len(value_data):
                raise ValueError(NOT_COLUMNS.format("value_offsets point outside value_data"))
            if stop - start != len(want) or not value_data.startswith(want, start):
                return row
            break
        else:
            return row
    return rows


# --------------------------------------------------------------------------- encoder


class Encoder:
    """Frame serializer with fixed options (see :func:`encode`)."""

    def __init__(self, version: str = "1.2", **options: Any) -> None:
        opts = encoder_options(version, **options)
        self.options = opts
        self.version = opts.version
        self._table = str.maketrans(ESCAPE[opts.escapes]) if ESCAPE[opts.escapes] else None
        self._cr_escaped = "\r" in ESCAPE[opts.escapes]
        self._content_length = opts.content_length
        self._eol = opts.eol

    def encode(self, frame: Any, headers: Optional[HeadersLike] = None, body: Optional[BytesLike] = None) -> bytes:
        """Encode a Frame, or a command with headers and body, to bytes."""
        if type(frame) is Frame and headers is None and body is None:
            command, header_list, body_b = frame._command, frame._headers, frame._body
        elif getattr(frame, "__fastframe_frame__", False):
            if headers is not None or body is not None:
                raise TypeError("pass either a Frame or (command, headers, body), not both")
            command, header_list, body_b = frame.command, frame.headers, frame.body
        else:
            command = frame
            if not isinstance(command, str):
                raise TypeError(f"command must be str or a Frame, not {type(command).__name__}")
            header_list = normalize_headers(() if headers is None else headers)
            body_b = body_bytes(b"" if body is None else body)
        if not command or "\n" in command or "\r" in command or "\0" in command:
            raise self._refusal(command, header_list, body_b)
        escape = command not in UNESCAPED_COMMANDS and self._table is not None
        count = len(header_list)
        head = "\n".join([f"{name}:{value}" for name, value in header_list])
        # the usual frame: nothing to escape or refuse, as a few scans of the joined head show
        if (
            "\\" in head
            or "\r" in head
            or "\0" in head
            or head.count(":") != count
            or head.count("\n") != max(count - 1, 0)
        ):
            escaped = [self._escaped_header(name, value, escape) for name, value in header_list]
            if None in escaped:
                raise self._refusal(command, header_list, body_b)
            head = "\n".join([f"{name}:{value}" for name, value in escaped])  # type: ignore[misc]
        if head.startswith(":") or "\n:" in head:
            raise self._refusal(command, header_list, body_b)  # an empty name
        at = 0 if head.startswith("content-length:") else head.find("\ncontent-length:") + 1
        if at > 0 or head.startswith("content-length:"):
            stop = head.find("\n", at)
            value = head[at + 15 : stop if stop >= 0 else len(head)]
            if value != str(len(body_b)) and not (value.isdigit() and value.isascii() and int(value) == len(body_b)):
                raise self._refusal(command, header_list, body_b)
        elif (self._content_length is None and body_b) or self._content_length or b"\0" in body_b:
            head = f"{head}\ncontent-length:{len(body_b)}" if count else f"content-length:{len(body_b)}"
        text = f"{command}\n{head}\n\n" if head else f"{command}\n\n"
        if self._eol != "\n":
            text = text.replace("\n", self._eol)  # no LF is left in names or values by now
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError:
            raise self._refusal(command, header_list, body_b) from None
        return b"".join((encoded, body_b, b"\0"))

    def encode_sends(self, sends: List[Any], start: int = 0) -> Tuple[bytes, int]:
        """The everyday SENDs of ``sends[start:]`` encoded back to back, and where they stopped.

        Each item is ``(destination, body, headers, content_type, transaction)``, the arguments of
        :meth:`fastframe.protocol.ClientConnection.send`. Starting at ``start`` (0 when negative),
        each one whose ``destination`` is a str, ``body`` bytes, ``content_type`` None or a str,
        and ``headers`` and ``transaction`` None is encoded as ``encode("SEND", pairs, body)``
        would, ``pairs`` being ``destination`` then ``content-type`` when given. Returns the bytes
        of those frames and the index of the first item it did not encode (``len(sends)`` when it
        encoded them all): another shape, or a frame the encoder refuses. The caller takes that
        item by its general path (which reports a refusal), then may call again from the next one.
        """
        i, end = max(start, 0), len(sends)
        chunks = []
        while i < end:
            item = sends[i]
            if type(item) is not tuple or len(item) != 5:
                break
            destination, body, headers, content_type, transaction = item
            if (
                headers is not None
                or transaction is not None
                or type(destination) is not str
                or type(body) is not bytes
            ):
                break
            if content_type is None:
                pairs = [("destination", destination)]
            elif type(content_type) is str:
                pairs = [("destination", destination), ("content-type", content_type)]
            else:
                break
            try:
                chunks.append(self.encode("SEND", pairs, body))
            except EncodeError:
                break
            i += 1
        return b"".join(chunks), i

    def _escaped_header(self, name: str, value: str, escape: bool) -> Optional[Header]:
        """A header as it goes on the wire, or None when it cannot (encode_error says why)."""
        if not name or "\0" in name or "\0" in value:
            return None
        if escape:
            if not self._cr_escaped and ("\r" in name or "\r" in value):
                return None
            table: Any = self._table  # set whenever escape is
            return (name.translate(table), value.translate(table))
        if ":" in name or "\n" in name or "\r" in name or "\n" in value or "\r" in value:
            return None
        return (name, value)

    def _refusal(self, command: str, headers: Tuple[Header, ...], body: bytes) -> Exception:
        """The shared rules' error for a frame this encoder found it cannot write."""
        error = encode_error(command, headers, body, self.options.escapes)
        return error if error is not None else RuntimeError("fastframe: encoder and encode_error disagree")  # a bug


@functools.lru_cache(maxsize=64, typed=True)  # typed: 1 == True, but 1 is refused
def _encoder(version: str, escapes: Optional[str], content_length: Optional[bool], eol: str) -> Encoder:
    return Encoder(version, escapes=escapes, content_length=content_length, eol=eol)


def encode(
    frame: Any,
    headers: Optional[HeadersLike] = None,
    body: Optional[BytesLike] = None,
    *,
    version: str = "1.2",
    escapes: Optional[str] = None,
    content_length: Optional[bool] = None,
    eol: str = "\n",
) -> bytes:
    """Encode a Frame, or ``(command, headers, body)``, to the bytes of one frame.

    ``escapes`` picks the escape set (default: the version's; "1.2" always
    escapes, as RabbitMQ expects on any version). ``content_length``: None adds
    it when the body is non-empty, True always, False only when the body
    contains NUL. ``eol`` is "\\n" or "\\r\\n". A content-length header given by
    the caller is kept, and must match the body.
    """
    if version == "1.2" and escapes is None and content_length is None and eol == "\n":
        return _DEFAULT_ENCODER.encode(frame, headers, body)
    return _encoder(version, escapes, content_length, eol).encode(frame, headers, body)


_DEFAULT_ENCODER = Encoder()


# --------------------------------------------------------------------------- columns


def _offsets(lengths: Iterable[int]) -> bytes:
    """Little-endian int32 offsets: 0, then the running totals of ``lengths``."""
    values = array("i", accumulate(lengths, initial=0))
    if sys.byteorder != "little":  # Arrow offsets are little-endian
        values.byteswap()
    return values.tobytes()


class _Row(NamedTuple):
    """A frame as its column bytes, encoded once."""

    command: bytes
    names: List[bytes]
    values: List[bytes]
    body: bytes
    offset: int  # -1 for a frame made by hand
    size: int  # data bytes: command, names, values, body


def _row(frame: Any) -> _Row:
    headers = tuple(frame.headers)
    command = frame.command.encode("utf-8")
    names = [name.encode("utf-8") for name, _ in headers]
    values = [value.encode("utf-8") for _, value in headers]
    body = bytes(frame.body)
    offset = getattr(frame, "offset", None)  # frames of other kinds may have none
    size = len(command) + sum(map(len, names)) + sum(map(len, values)) + len(body)
    return _Row(command, names, values, body, -1 if offset is None else offset, size)


def _columns(rows: Sequence[_Row]) -> Columns:
    """The Columns of these rows (the caller checked their size)."""
    names = [name for row in rows for name in row.names]
    # the first-wins map: 1 for the first header of each name in its row
    keep: List[int] = []
    for row in rows:
        seen = set()
        for name in row.names:
            keep.append(0 if name in seen else 1)
            seen.add(name)
    map_offsets = map_keep = None
    if not all(keep):
        kept = iter(keep)
        map_offsets = _offsets(sum(next(kept) for _ in row.names) for row in rows)
        map_keep = bytes(keep)
    frame_offsets = array("q", [row.offset for row in rows])
    if sys.byteorder != "little":
        frame_offsets.byteswap()
    values = [value for row in rows for value in row.values]
    return Columns(
        len(rows),
        frame_offsets.tobytes(),
        _offsets(len(row.command) for row in rows),
        b"".join(row.command for row in rows),
        _offsets(len(row.names) for row in rows),
        _offsets(map(len, names)),
        b"".join(names),
        _offsets(map(len, values)),
        b"".join(values),
        _offsets(len(row.body) for row in rows),
        b"".join(row.body for row in rows),
        map_offsets,
        map_keep,
    )


class _RowStore:
    """Rows waiting to become Columns (the compiled twin's ``_ColumnStore``, with the same rules)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._rows: List[_Row] = []  # those before _first are taken
        self._ends: List[int] = []  # running total of their data bytes
        self._first = 0
        self._total = 0  # data bytes of every row so far
        self._taken = 0  # data bytes of the rows taken

    def add(self, frames: Iterable[Any]) -> None:
        for frame in frames:
            row = _row(frame)
            self._total += row.size
            self._ends.append(self._total)
            self._rows.append(row)

    @property
    def pending(self) -> int:
        return len(self._rows) - self._first

    @property
    def pending_bytes(self) -> int:
        return self._total - self._taken

    def take(self, limit_rows: int, limit_bytes: int) -> Columns:
        """The oldest rows waiting, at most ``limit_rows`` and ``limit_bytes`` of data (one row at least)."""
        first = self._first
        count = min(self.pending, limit_rows)
        if count == 0:
            return _columns([])
        count = max(1, bisect_right(self._ends, self._taken + limit_bytes, first, first + count) - first)
        rows = self._rows[first : first + count]
        if count == 1:  # one frame alone must fit Arrow's int32 offsets, column by column
            row = rows[0]
            if max(len(row.command), sum(map(len, row.names)), sum(map(len, row.values)), len(row.body)) > (
                MAX_COLUMN_BYTES
            ):
                raise OverflowError(ROW_TOO_LARGE)
        columns = _columns(rows)
        self._first = first + count
        self._taken = self._ends[first + count - 1]
        if 2 * self._first >= len(self._rows):  # drop what is taken, a half at a time at most
            del self._rows[: self._first]
            del self._ends[: self._first]
            self._first = 0
        return columns


def to_columns(frames: Iterable[Any]) -> Columns:
    """Frames as rows of columns in Arrow's memory layout, for data-frame libraries.

    Returns a :class:`fastframe.Columns`: one row per frame, in order (the
    ``frame_offsets`` of a frame made by hand are -1). Raises OverflowError
    when the frames hold more than 2 GiB of data (give fewer frames).
    """
    store = _RowStore()
    store.add(frames)
    count = store.pending
    columns = store.take(count, MAX_COLUMN_BYTES)
    if columns.rows != count:
        raise OverflowError(TOO_LARGE_FOR_COLUMNS)
    return columns


class ColumnDecoder(Decoder):
    """A Decoder whose frames become rows of columns in Arrow's layout (no Frame objects).

    ``feed(data)`` decodes as :class:`Decoder` does, with the same options,
    errors and offsets, and returns how many rows wait to be taken;
    ``take()`` returns them as :class:`fastframe.Columns`. On malformed
    input, the rows completed before the bad byte stay to be taken (the
    error's ``frames`` is empty). There are no heart-beat events.
    """

    def __init__(self, version: str = "1.2", **options: Any) -> None:
        super().__init__(version, **options)
        if self._events:
            raise ValueError(NO_HEARTBEAT_EVENTS)
        if self.options.keep_invalid_utf8:
            raise ValueError(NO_INVALID_UTF8)

    def reset(self) -> None:
        """Forget everything: buffered bytes, rows not taken, counters, a pending error."""
        super().reset()  # the store too (_reset)

    def _reset(self) -> None:
        super()._reset()
        self._store = _RowStore()

    def feed(self, data: BytesLike) -> int:  # type: ignore[override]
        """Add bytes; return the number of rows waiting to be taken."""
        self._enter("feed")
        try:
            return self._feed_rows(data)
        finally:
            self._lock.release()

    def buffer_updated(self, nbytes: int) -> int:  # type: ignore[override]
        """``nbytes`` bytes were written into the buffer from :meth:`get_buffer`: the number of rows waiting."""
        self._enter("buffer_updated")
        try:
            return self._feed_rows(self._received(nbytes))
        finally:
            self._lock.release()

    def _feed_rows(self, data: BytesLike) -> int:
        try:
            frames = self._feed(data)
        except FrameError as error:
            self._store.add(error.frames)  # type: ignore[attr-defined]
            error.frames = []  # type: ignore[attr-defined]
            raise
        self._store.add(frames)
        return self._store.pending

    @property
    def rows(self) -> int:
        """Rows (complete frames) waiting to be taken."""
        return self._store.pending

    @property
    def pending_bytes(self) -> int:
        """Data bytes (commands, header names and values, bodies) of the rows waiting to be taken."""
        return self._store.pending_bytes

    def take(self, max_rows: Optional[int] = None, max_bytes: Optional[int] = None) -> Columns:
        """The oldest rows waiting, as Columns: all of them, or at most ``max_rows``
        rows and ``max_bytes`` data bytes (one row at least, when any waits).

        Raises OverflowError when one frame alone overflows an Arrow column (2 GiB).
        """
        limits = take_limits(max_rows, max_bytes)
        self._enter("take")
        try:
            return self._store.take(*limits)
        finally:
            self._lock.release()
