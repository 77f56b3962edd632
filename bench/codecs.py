"""Every codec the benchmarks compare, behind one small interface.

A :class:`Codec` can decode a whole stream, encode prepared frames and take a
stream in pieces (``feed``); each returns the codec's own objects, and
:meth:`Codec.normalize` turns those into ``(command, headers, body)`` for the
correctness check (done outside the timed region). Peers are driven the way
their own clients drive them; where that is not obvious the class docstring
says how, and ``notes`` lists where the peer deviates from the STOMP 1.2 spec
(from reading its source; the benchmark's result checks show the effects).

Floors are not codecs: they bound what any decoder can reach on the same
bytes (a copy, a NUL scan) or what a C extension building the same Python
objects reaches (msgpack).
"""

from __future__ import annotations

import importlib
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from bench.workloads import LogicalFrame

__all__ = ["Codec", "NormFrame", "all_codecs", "CODEC_KEYS", "diagnose", "diagnose_semantic"]

#: ``(command, pairs or None, mapping or None, body)``: a decoded frame in comparable form.
#: Codecs whose API keeps header pairs give ``pairs``; dict-based ones give ``mapping``.
NormFrame = Tuple[str, Optional[Tuple[Tuple[str, str], ...]], Optional[Dict[str, str]], bytes]

# pieces are fed in blocks; the clock is read once per block so it costs nothing
_BLOCK = 256


class Unavailable(Exception):
    """The codec cannot run here (not installed, not built)."""


class Codec:
    key = ""  # for --only
    label = ""  # table row
    kind = "peer"  # "fastframe", "peer" or "floor"
    #: how the codec is driven, printed under the table
    how = ""
    #: where the codec deviates from the spec (shown under the table)
    notes: Tuple[str, ...] = ()
    #: decode/encode/feed support
    can_decode = True
    can_encode = True
    can_feed = True
    #: the stream the floor works on is the STOMP stream (False for msgpack: its own encoding)
    checks = True

    def load(self) -> None:
        """Import what the codec needs; raise Unavailable with the reason."""

    # decode ------------------------------------------------------------------
    def prepare_decode(self, frames: Sequence[LogicalFrame], data: bytes) -> Any:
        """Untimed preparation; the result is passed to decode()."""
        return data

    def decode(self, prepared: Any) -> Any:
        raise NotImplementedError

    def normalize(self, result: Any) -> List[NormFrame]:
        raise NotImplementedError

    # encode ------------------------------------------------------------------
    def prepare_encode(self, frames: Sequence[LogicalFrame]) -> Any:
        raise NotImplementedError

    def encode(self, prepared: Any) -> List[bytes]:
        raise NotImplementedError

    # feed --------------------------------------------------------------------
    def feed(self, pieces: Sequence[bytes], deadline: float) -> Tuple[int, Any, bool]:
        """Feed ``pieces`` one by one; stop after the wall-clock ``deadline``.

        Returns (pieces fed, the codec's frames, finished).
        """
        raise NotImplementedError


def _pairs_frames(frames: Any) -> List[NormFrame]:
    return [(f.command, tuple(f.headers), None, f.body) for f in frames]


# --------------------------------------------------------------------------- fastframe


class FastframeTwin(Codec):
    kind = "fastframe"

    def __init__(self, twin: str) -> None:
        self.twin = twin
        self.key = twin
        self.module_name = {"c": "fastframe.codec._codec_c", "py": "fastframe.codec._codec_py"}[twin]
        self.label = f"fastframe {'C twin' if twin == 'c' else 'Python twin'}"
        self.how = "decode(stream) (one feed + close); encode(frame) per Frame; Decoder.feed(piece)"

    def load(self) -> None:
        try:
            self.mod = importlib.import_module(self.module_name)
        except ImportError as error:
            raise Unavailable(f"not built ({error})") from None

    def decode(self, data: bytes) -> Any:
        return self.mod.decode(data)

    def normalize(self, result: Any) -> List[NormFrame]:
        return _pairs_frames(result)

    def prepare_encode(self, frames: Sequence[LogicalFrame]) -> Any:
        frame = self.mod.Frame
        return [frame(command, headers, body) for command, headers, body in frames]

    def encode(self, prepared: Any) -> List[bytes]:
        encode = self.mod.encode
        return [encode(frame) for frame in prepared]

    def feed(self, pieces: Sequence[bytes], deadline: float) -> Tuple[int, Any, bool]:
        decoder = self.mod.Decoder()
        feed = decoder.feed
        out: List[Any] = []
        done = 0
        clock = time.perf_counter
        for start in range(0, len(pieces), _BLOCK):
            for piece in pieces[start : start + _BLOCK]:
                out += feed(piece)
            done = min(start + _BLOCK, len(pieces))
            if done < len(pieces) and clock() > deadline:
                return done, out, False
        decoder.close()
        return len(pieces), out, True


# --------------------------------------------------------------------------- stomp.py


class StompPy(Codec):
    """stomp.py 8/9: the transport's own read loop, then ``stomp.utils.parse_frame``.

    A ``BaseTransport`` subclass whose ``receive()`` hands out the stream in
    pieces, as the socket transport's ``recv(16384)`` does; frames come from
    the transport's private ``__read`` (its splitting loop) and ``parse_frame``,
    as ``__read_frames`` does, without listener dispatch. ``auto_decode=False``
    keeps bodies as bytes (the client's default decodes them to str with
    ``errors="replace"``, which corrupts binary bodies). Encoding is the
    client's send path: ``pack(convert_frame(Frame(cmd, headers, body)))``.
    """

    key = "stomp.py"
    label = "stomp.py"
    how = "transport read loop over 16 KiB recv pieces + parse_frame (auto_decode=False); pack(convert_frame(Frame))"
    notes = (
        "headers come back as a dict: only the first of repeated headers is kept",
        "convert_frame does not escape header names or values, and sorts the headers",
        "undefined escape sequences are kept instead of being rejected",
        "the default client (auto_decode=True) decodes bodies to str with errors='replace'",
        "the transport skips only LF EOLs after a NUL: a frame after a CRLF EOL plus a CRLF heart-beat"
        " (`...\\0\\r\\n\\r\\nMESSAGE...`) is dropped silently, as parse_frame takes the blank line for the"
        " end of an empty head",
        "its splitting loop re-slices the remaining buffer after each frame: a piece holding many frames costs"
        " quadratic time (hence its own 16 KiB recv size here)",
    )
    recv_size = 16384

    def load(self) -> None:
        try:
            import stomp  # noqa: F401
            from stomp import transport, utils
        except ImportError as error:
            raise Unavailable(f"not installed ({error})") from None
        self.utils = utils
        self.version = getattr(stomp, "__version__", None)
        if isinstance(self.version, tuple):
            self.version = ".".join(map(str, self.version))

        class PieceTransport(transport.BaseTransport):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__(auto_decode=False)
                self.running = True
                self.blocking = False  # receive() returning None ends a read instead of raising
                self.pieces: Any = iter(())
                self.exhausted = False

            def receive(self) -> Optional[bytes]:
                piece = next(self.pieces, None)
                if piece is None:
                    self.exhausted = True
                return piece

        self.transport_class = PieceTransport

    def _run(self, transport: Any, out: List[Any]) -> None:
        parse_frame = self.utils.parse_frame
        read = transport._BaseTransport__read
        while not transport.exhausted:
            for raw in read():
                if raw == b"\n":  # is_eol_default: a heart-beat
                    continue
                frame = parse_frame(raw)
                if frame is not None:
                    out.append(frame)

    def decode(self, data: bytes) -> Any:
        transport = self.transport_class()
        size = self.recv_size
        transport.pieces = (data[i : i + size] for i in range(0, len(data), size))
        out: List[Any] = []
        self._run(transport, out)
        return out

    def normalize(self, result: Any) -> List[NormFrame]:
        return [(f.cmd, None, dict(f.headers), f.body) for f in result]

    def prepare_encode(self, frames: Sequence[LogicalFrame]) -> Any:
        prepared = []
        for command, headers, body in frames:
            mapping: Dict[str, Any] = {}
            for name, value in headers:
                # repeated headers: convert_frame sends a tuple value as repeated lines
                if name in mapping:
                    old = mapping[name]
                    mapping[name] = (old if isinstance(old, tuple) else (old,)) + (value,)
                else:
                    mapping[name] = value
            prepared.append(self.utils.Frame(command, mapping, body))
        return prepared

    def encode(self, prepared: Any) -> List[bytes]:
        convert, pack = self.utils.convert_frame, self.utils.pack
        return [pack(convert(frame)) for frame in prepared]

    def feed(self, pieces: Sequence[bytes], deadline: float) -> Tuple[int, Any, bool]:
        transport = self.transport_class()
        state = {"done": 0, "stopped": False}
        clock = time.perf_counter

        def source() -> Any:
            for start in range(0, len(pieces), _BLOCK):
                yield from pieces[start : start + _BLOCK]
                state["done"] = min(start + _BLOCK, len(pieces))
                if state["done"] < len(pieces) and clock() > deadline:
                    state["stopped"] = True
                    return

        transport.pieces = source()
        out: List[Any] = []
        self._run(transport, out)
        return state["done"], out, not state["stopped"]


# --------------------------------------------------------------------------- stompest


class Stompest(Codec):
    """stompest 2.3: ``StompParser('1.2')``: ``add(data)`` then ``get()`` until None, as its
    sync transport does (the whole stream in one ``add`` is linear: it trims its
    bytearray from the front). Encoding: ``bytes(StompFrame(..., rawHeaders=...))``."""

    key = "stompest"
    label = "stompest"
    how = "StompParser('1.2').add(stream) + get() loop; bytes(StompFrame(rawHeaders=..., version='1.2'))"
    notes = (
        "a CRLF heart-beat (or CRLF after a NUL) is taken as the start of a frame: 'Invalid command'",
        "STOMP (CONNECT's synonym) frames get their headers unescaped and escaped (a backslash in one raises)",
        "bodies on frames other than SEND/MESSAGE/ERROR are rejected, even in lenient use",
    )

    def load(self) -> None:
        try:
            from stompest.protocol import StompFrame, StompParser
            from stompest.protocol.frame import StompHeartBeat
        except ImportError as error:
            raise Unavailable(f"not installed ({error})") from None
        self.parser_class, self.frame_class, self.heartbeat_class = StompParser, StompFrame, StompHeartBeat

    def _drain(self, parser: Any, out: List[Any]) -> None:
        heartbeat = self.heartbeat_class
        while parser.canRead():
            frame = parser.get()
            if not isinstance(frame, heartbeat):
                out.append(frame)

    def decode(self, data: bytes) -> Any:
        parser = self.parser_class("1.2")
        parser.add(data)
        out: List[Any] = []
        self._drain(parser, out)
        return out

    def normalize(self, result: Any) -> List[NormFrame]:
        return [(f.command, tuple(f.rawHeaders or ()), None, f.body) for f in result]

    def prepare_encode(self, frames: Sequence[LogicalFrame]) -> Any:
        make = self.frame_class
        return [make(command, body=body, rawHeaders=list(headers), version="1.2") for command, headers, body in frames]

    def encode(self, prepared: Any) -> List[bytes]:
        return [bytes(frame) for frame in prepared]

    def feed(self, pieces: Sequence[bytes], deadline: float) -> Tuple[int, Any, bool]:
        parser = self.parser_class("1.2")
        out: List[Any] = []
        clock = time.perf_counter
        for start in range(0, len(pieces), _BLOCK):
            for piece in pieces[start : start + _BLOCK]:
                parser.add(piece)
                self._drain(parser, out)
            done = min(start + _BLOCK, len(pieces))
            if done < len(pieces) and clock() > deadline:
                return done, out, False
        return len(pieces), out, True


# --------------------------------------------------------------------------- coilmq


class CoilMQ(Codec):
    """coilmq 1.1: ``FrameBuffer``: ``append(data)`` then iterate, as its socket server does.
    Encoding: ``Frame(cmd, headers, body).pack()``."""

    key = "coilmq"
    label = "coilmq"
    how = "FrameBuffer.append(stream) + iteration; Frame.pack()"
    notes = (
        "headers come back as a dict in which the LAST repeated header wins (spec: the first)",
        "no unescaping nor escaping; a header value containing ':' raises ValueError",
        "head lines are stripped of surrounding whitespace; an empty body comes back as str ''",
        "an EOL between frames (heart-beat, or after a NUL) stops extraction for good",
        "a piece that ends inside a frame's head raises (ValueError / BodyNotTerminated)",
        "without content-length each frame re-reads the rest of the buffer (quadratic); the buffer is never trimmed",
    )

    def load(self) -> None:
        try:
            from coilmq.util import frames
        except ImportError as error:
            raise Unavailable(f"not installed ({error})") from None
        self.frames = frames

    def decode(self, data: bytes) -> Any:
        buffer = self.frames.FrameBuffer()
        buffer.append(data)
        return list(buffer)

    def normalize(self, result: Any) -> List[NormFrame]:
        # an empty body comes back as "" (Frame stores ``body or ""``): not counted as wrong
        return [(f.cmd, None, dict(f.headers), f.body or b"") for f in result]

    def prepare_encode(self, frames: Sequence[LogicalFrame]) -> Any:
        # its Frame holds a dict: give it the first entry of each name (the one that counts)
        make = self.frames.Frame
        return [make(command, dict(reversed(headers)), body) for command, headers, body in frames]

    def encode(self, prepared: Any) -> List[bytes]:
        return [frame.pack() for frame in prepared]

    def feed(self, pieces: Sequence[bytes], deadline: float) -> Tuple[int, Any, bool]:
        buffer = self.frames.FrameBuffer()
        out: List[Any] = []
        clock = time.perf_counter
        for start in range(0, len(pieces), _BLOCK):
            for piece in pieces[start : start + _BLOCK]:
                buffer.append(piece)
                out.extend(buffer)
            done = min(start + _BLOCK, len(pieces))
            if done < len(pieces) and clock() > deadline:
                return done, out, False
        return len(pieces), out, True


# --------------------------------------------------------------------------- aiostomp


class AioStomp(Codec):
    """aiostomp 1.7: the ``StompProtocol`` parser its ``StompReader.data_received`` drives
    (``feed_data`` then ``pop_frames``, HEARTBEAT frames dropped); encoding is its
    ``build_frame(command, headers, body)``."""

    key = "aiostomp"
    label = "aiostomp"
    how = "protocol.StompProtocol().feed_data(stream) + pop_frames(); build_frame(command, headers, body)"
    notes = (
        "parses byte by byte in Python (a deque of ints)",
        "headers come back as a dict in which the last repeated header wins (spec: the first)",
        "header names are not unescaped; undefined escapes are kept",
        "a head with CRLF line endings never ends (ends_with_crlf compares a list of ints with a list of"
        " bytes): that frame and everything after it are swallowed",
        "a CR right after a frame (CRLF EOL or heart-beat) raises ValueError (islice with a negative index)",
        "the byte after content-length octets is consumed without checking that it is NUL",
        "an empty body comes back as None",
        "a frame whose head fails to parse is dropped silently with the rest of the piece",
    )

    def load(self) -> None:
        try:
            from aiostomp import protocol
        except ImportError as error:
            raise Unavailable(f"not installed ({error})") from None
        self.protocol_class = protocol.StompProtocol

    def decode(self, data: bytes) -> Any:
        parser = self.protocol_class()
        parser.feed_data(data)
        return [frame for frame in parser.pop_frames() if frame.command != "HEARTBEAT"]

    def normalize(self, result: Any) -> List[NormFrame]:
        return [(f.command, None, dict(f.headers), b"" if f.body is None else f.body) for f in result]

    def prepare_encode(self, frames: Sequence[LogicalFrame]) -> Any:
        return [(command, dict(reversed(headers)), body) for command, headers, body in frames]

    def encode(self, prepared: Any) -> List[bytes]:
        build = self.protocol_class().build_frame
        return [build(command, headers, body) for command, headers, body in prepared]

    def feed(self, pieces: Sequence[bytes], deadline: float) -> Tuple[int, Any, bool]:
        parser = self.protocol_class()
        out: List[Any] = []
        clock = time.perf_counter
        for start in range(0, len(pieces), _BLOCK):
            for piece in pieces[start : start + _BLOCK]:
                parser.feed_data(piece)
                out += [frame for frame in parser.pop_frames() if frame.command != "HEARTBEAT"]
            done = min(start + _BLOCK, len(pieces))
            if done < len(pieces) and clock() > deadline:
                return done, out, False
        return len(pieces), out, True


# --------------------------------------------------------------------------- floors


class CopyFloor(Codec):
    key = "copy"
    label = "floor: copy (bytes(bytearray))"
    kind = "floor"
    how = "bytes(bytearray_of_the_stream): one memcpy of the same bytes"
    can_feed = False
    checks = False

    def prepare_decode(self, frames: Sequence[LogicalFrame], data: bytes) -> Any:
        return bytearray(data)

    def decode(self, prepared: Any) -> Any:
        return bytes(prepared)

    def prepare_encode(self, frames: Sequence[LogicalFrame]) -> Any:
        from fastframe.codec import _codec_py

        return bytearray(b"".join(_codec_py.encode(*frame) for frame in frames))

    def encode(self, prepared: Any) -> List[bytes]:
        return [bytes(prepared)]


class ScanFloor(Codec):
    key = "scan"
    label = "floor: NUL scan (bytes.count)"
    kind = "floor"
    how = "stream.count(b'\\0'): one pass over the same bytes, nothing built"
    can_encode = False
    can_feed = False
    checks = False

    def decode(self, prepared: Any) -> Any:
        return prepared.count(b"\0")


class MsgpackFloor(Codec):
    """msgpack's C Unpacker/Packer on the same logical frames.

    ``(command, ((name, value), ...), body)`` packed as arrays, str and bin;
    unpacked with ``use_list=False`` so it builds the same objects a decoded
    frame holds (a str, a tuple of str pairs, bytes). Rates are per frame, and
    MB/s counts the STOMP stream the same frames encode to, so the row is
    comparable with the others.
    """

    key = "msgpack"
    label = "floor: msgpack C (same objects)"
    kind = "floor"
    how = "Unpacker(use_list=False).feed(packed) + list(); Packer(use_bin_type=True).pack((cmd, headers, body))"
    can_feed = False

    def load(self) -> None:
        try:
            import msgpack
        except ImportError as error:
            raise Unavailable(f"not installed ({error})") from None
        if not getattr(msgpack.Unpacker, "__module__", "").startswith("msgpack._cmsgpack"):
            raise Unavailable("installed without its C extension")
        self.msgpack = msgpack

    def prepare_decode(self, frames: Sequence[LogicalFrame], data: bytes) -> Any:
        pack = self.msgpack.Packer(use_bin_type=True).pack
        return b"".join(pack(frame) for frame in frames)

    def decode(self, packed: bytes) -> Any:
        unpacker = self.msgpack.Unpacker(use_list=False, raw=False, max_buffer_size=max(len(packed), 1))
        unpacker.feed(packed)
        return list(unpacker)

    def normalize(self, result: Any) -> List[NormFrame]:
        return [(command, headers, None, body) for command, headers, body in result]

    def prepare_encode(self, frames: Sequence[LogicalFrame]) -> Any:
        return list(frames)

    def encode(self, prepared: Any) -> List[bytes]:
        pack = self.msgpack.Packer(use_bin_type=True).pack
        return [pack(frame) for frame in prepared]

    def decode_packed(self, outputs: List[bytes]) -> List[NormFrame]:
        unpacker = self.msgpack.Unpacker(use_list=False, raw=False)
        unpacker.feed(b"".join(outputs))
        return self.normalize(list(unpacker))


# --------------------------------------------------------------------------- registry


def all_codecs() -> List[Codec]:
    """Every codec and floor, in table order."""
    return [
        FastframeTwin("c"),
        FastframeTwin("py"),
        StompPy(),
        Stompest(),
        CoilMQ(),
        AioStomp(),
        MsgpackFloor(),
        CopyFloor(),
        ScanFloor(),
    ]


CODEC_KEYS: Tuple[str, ...] = tuple(codec.key for codec in all_codecs())


# --------------------------------------------------------------------------- checks


def _repeats(headers: Sequence[Tuple[str, str]]) -> bool:
    names = [name for name, _ in headers]
    return len(set(names)) != len(names)


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_ESCAPE_12 = str.maketrans({"\\": "\\\\", "\r": "\\r", "\n": "\\n", ":": "\\c"})


def _diff_headers(want: Sequence[Tuple[str, str]], got: Dict[str, str]) -> str:
    first = dict(reversed(want))
    last = dict(want)
    if got == first:
        return "drops repeated headers"
    if got == last and first != last:
        return "last repeated header wins"
    for name, value in first.items():
        if name not in got:
            if name.translate(_ESCAPE_12) in got:
                return f"does not unescape header names ({_short(name.translate(_ESCAPE_12), 24)})"
            return f"loses header {_short(name)}"
        if got[name] != value and got[name] == value.translate(_ESCAPE_12):
            return f"does not unescape header values ({_short(got[name], 24)})"
        if got[name] != value:
            return f"header {_short(name, 24)}: {_short(got[name])} for {_short(value)}"
    extra = next(iter(set(got) - set(first)))
    return f"extra header {_short(extra)}"


def _drop_added_length(want: LogicalFrame, got: NormFrame) -> NormFrame:
    """An encoder may add a content-length the frame did not have, if it is right."""
    command, headers, body = want
    if any(name == "content-length" for name, _ in headers):
        return got
    length = str(len(body))
    g_command, g_pairs, g_map, g_body = got
    if g_pairs is not None and ("content-length", length) in g_pairs:
        g_pairs = tuple(pair for pair in g_pairs if pair != ("content-length", length))
    if g_map is not None and g_map.get("content-length") == length:
        g_map = {name: value for name, value in g_map.items() if name != "content-length"}
    return g_command, g_pairs, g_map, g_body


def _diff_frame(want: LogicalFrame, got: NormFrame, ordered: bool) -> Optional[str]:
    command, headers, body = want
    if not ordered:
        got = _drop_added_length(want, got)
    g_command, g_pairs, g_map, g_body = got
    if g_command != command:
        return f"command {_short(g_command)} for {_short(command)}"
    if g_pairs is not None:
        g_pairs = tuple(g_pairs)
        if ordered and g_pairs != headers:
            if sorted(g_pairs) == sorted(headers):
                return "reorders headers"
            return _diff_headers(headers, dict(reversed(g_pairs))) if not _repeats(g_pairs) else "headers differ"
        if not ordered:
            # encoders may order headers as they like; values of one name must keep their order
            for name in {n for n, _ in headers} | {n for n, _ in g_pairs}:
                if [v for n, v in headers if n == name] != [v for n, v in g_pairs if n == name]:
                    mine = [v for n, v in g_pairs if n == name]
                    want_values = [v for n, v in headers if n == name]
                    if len(mine) < len(want_values) and mine == want_values[: len(mine)]:
                        return "drops repeated headers"
                    return f"header {_short(name, 24)}: {_short(mine)} for {_short(want_values)}"
    elif g_map is not None:
        if g_map != dict(reversed(headers)) or _repeats(headers):
            return _diff_headers(headers, g_map)
    if g_body != body:
        if isinstance(g_body, str):
            return "body comes back as str"
        return f"body of {len(g_body)} bytes for {len(body)}"
    return None


def diagnose(want: Sequence[LogicalFrame], got: Sequence[NormFrame], *, complete: bool = True) -> Optional[str]:
    """None when ``got`` decodes to ``want`` (a prefix of it when not ``complete``), else what is wrong."""
    for index, (w, g) in enumerate(zip(want, got)):
        problem = _diff_frame(w, g, ordered=True)
        if problem is not None:
            if index + 1 < len(want) and _diff_frame(want[index + 1], g, ordered=True) is None:
                return f"drops frame {index} ({w[0]}), {len(got)} frames for {len(want)}"
            return f"frame {index}: {problem}"
    if len(got) > len(want) or (complete and len(got) != len(want)):
        return f"{len(got)} frames for {len(want)}"
    return None


def diagnose_semantic(want: Sequence[LogicalFrame], got: Sequence[NormFrame]) -> Optional[str]:
    """Like diagnose() for an encoder's output: the order of different header names is free."""
    for index, (w, g) in enumerate(zip(want, got)):
        problem = _diff_frame(w, g, ordered=False)
        if problem is not None:
            return f"frame {index}: {problem}"
    if len(got) != len(want):
        return f"{len(got)} frames for {len(want)}"
    return None
