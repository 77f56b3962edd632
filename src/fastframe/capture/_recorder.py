"""``Archive`` (a folder of recordings, its writer thread, its options) and ``Recorder`` (one connection).

The recorder runs where the bytes are (the event loop): it feeds each direction to a
:class:`fastframe.ColumnDecoder`, which proves the frame boundaries (the only places a file is cut) and
gives each frame's offset to date it, and hands the bytes and their records to the archive's writer
thread (:mod:`._sink`), one operation per read. It never raises into its caller and never blocks: at
worst it drops its own recording.
"""

from __future__ import annotations

import datetime
import os
import re
import sys
import threading
import time
from array import array
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

from .. import codec as _codec
from ..archive import require_compression
from ..codec import DecodeError
from ._credentials import Redactor
from ._sink import FileSink, Opener, Recording, Writer, _log

#: ``Recorder`` directions by name: the client's wire_hook says "out"/"in", a server's "in"/"out".
_PERSPECTIVES = {"client": {"out": "c2s", "in": "s2c"}, "server": {"in": "c2s", "out": "s2c"}}
_NUMBERED = re.compile(r"conn-(\d+)\.")
DEFAULT_INDEX_INTERVAL = 4 << 20  # as fastframe.spark.write_index
DEFAULT_MAX_PENDING = 8 << 20
_BIG_ENDIAN = sys.byteorder == "big"  # (the sidecar's records are little-endian)

#: The codec module the recorder decodes with (tests point it at each twin).
codec: Any = _codec


class Archive:
    """A folder of recordings in the layout the readers know: ``OUT/BROKER/DATE/conn-NNNN.{c2s,s2c}.stomp``.

    Args:
        out_dir: the archive's root folder (created when needed).
        broker: the folder under it for this source (``fastframe record`` uses ``--name``).
        roll_size: start a new piece of a direction once its file holds this many bytes (None: never).
        roll_age: ... or once it is this many seconds old (None: never). Pieces end at proven frame
            boundaries only: past a decode error, a direction is not cut again.
        compression: ``"gzip"`` (``.stomp.gz``) or ``"zstd"`` (``.stomp.zst``: the ``zstd`` extra before
            Python 3.14, an ImportError naming it here when missing) compresses each piece; None: not.
        gzip: the same as ``compression="gzip"``.
        decoder_options: :class:`fastframe.Decoder` options the boundaries and the ``.ffidx`` sidecars are
            proven with (reads with other options ignore the index).
        index_interval: bytes between the checkpoints of an ``.ffidx``.
        max_pending: bytes a connection may have waiting for the disk; past it its recording is dropped.
        opener: ``opener(path, "wb")`` opens each file (default :func:`open`).
        redact: the CONNECT and STOMP headers whose values are replaced by ``<redacted>`` before anything
            is written (default ``("passcode",)``; add ``"login"`` to hide the user too; ``()`` keeps
            credentials). The files, their offsets and sidecars describe the redacted bytes.

    Each connection gets the next free number of its ``BROKER/DATE`` folder (UTC date of its start).
    Use as a context manager, or call :meth:`close`: it closes the recorders still open and waits for
    the disk.
    """

    def __init__(
        self,
        out_dir: str,
        broker: str = "capture",
        *,
        roll_size: Optional[int] = None,
        roll_age: Optional[float] = None,
        compression: Optional[str] = None,
        gzip: bool = False,
        decoder_options: Optional[Mapping[str, Any]] = None,
        index_interval: int = DEFAULT_INDEX_INTERVAL,
        max_pending: int = DEFAULT_MAX_PENDING,
        opener: Opener = open,
        clock: Callable[[], int] = time.time_ns,
        redact: Tuple[str, ...] = ("passcode",),
    ) -> None:
        if roll_size is not None and roll_size < 1:
            raise ValueError("roll_size must be at least 1 byte")
        if roll_age is not None and not roll_age > 0:
            raise ValueError("roll_age must be a positive number of seconds")
        if index_interval < 1 or max_pending < 1:
            raise ValueError("index_interval and max_pending must be at least 1")
        if not broker or os.sep in broker or broker.startswith((".", "_")):
            raise ValueError(f"broker must be a plain folder name (not hidden), not {broker!r}")
        self.out_dir = out_dir
        self.broker = broker
        self.roll_size = roll_size
        self.roll_age = roll_age
        if gzip:
            if compression not in (None, "gzip"):
                raise ValueError(f"gzip=True and compression={compression!r}: choose one")
            compression = "gzip"
        if compression is not None:
            if compression not in ("gzip", "zstd"):
                raise ValueError(f"compression must be 'gzip', 'zstd' or None, not {compression!r}")
            require_compression(compression)  # zstd without its module: the extra to install, now
        self.compression = compression
        self.decoder_options: Dict[str, Any] = dict(decoder_options or {})
        codec.ColumnDecoder(**self.decoder_options)  # refuse bad options now
        self.index_interval = index_interval
        self.max_pending = max_pending
        self.opener = opener
        self.clock = clock
        if isinstance(redact, str):
            raise TypeError("redact must be a tuple of header names, such as ('passcode', 'login')")
        self.redact = tuple(redact)
        self.writer = Writer()
        self._lock = threading.Lock()
        self._next: Dict[str, int] = {}
        self._open: Set[Recorder] = set()
        self.closed = False

    def _number(self, folder: str) -> int:
        """The next free connection number in ``folder`` (a folder listed once per archive)."""
        with self._lock:
            number = self._next.get(folder)
            if number is None:
                try:
                    names = os.listdir(folder)
                except OSError:
                    names = []
                found = [int(m.group(1)) for m in map(_NUMBERED.match, names) if m]
                number = max(found, default=0) + 1
            self._next[folder] = number + 1
            return number

    def recorder(self, perspective: str = "client") -> Recorder:
        """A recorder for a new connection.

        ``perspective`` names what ``recorder(direction, data)`` means: ``"client"`` (the asyncio
        client's ``wire_hook``: "out" is what the client sent) or ``"server"`` (a server's hook: "in"
        is what the client sent). :meth:`Recorder.c2s` and :meth:`Recorder.s2c` need neither. One recorder is
        one connection: a client that reconnects (``Reconnect``) with the same hook appends the next
        connection's bytes to the same files.
        """
        if perspective not in _PERSPECTIVES:
            raise ValueError(f"perspective must be 'client' or 'server', not {perspective!r}")
        if self.closed:
            raise RuntimeError("the archive is closed")
        day = datetime.datetime.fromtimestamp(self.clock() / 1e9, datetime.timezone.utc).strftime("%Y-%m-%d")
        folder = os.path.join(self.out_dir, self.broker, day)
        recorder = Recorder(self, folder, self._number(folder), perspective)
        with self._lock:
            self._open.add(recorder)
        return recorder

    def server_hook(self, conn: Any) -> Recorder:
        """``wire_hook`` of :func:`fastframe.aio.serve` / :class:`fastframe.aio.Broker`: one recorder per connection."""
        return self.recorder("server")

    def _closed(self, recorder: Recorder) -> None:
        with self._lock:
            self._open.discard(recorder)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until what was recorded so far is on disk (at most ``timeout`` s)."""
        return self.writer.flush(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Close every recorder still open, write what waits, stop the writer thread."""
        with self._lock:
            recorders = list(self._open)
        for recorder in recorders:
            recorder.close()
        self.closed = True
        self.writer.close(timeout)

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Direction:
    """One direction of a connection, in the caller's thread: its current piece's size and frames.

    Its decoder (a :class:`fastframe.ColumnDecoder`: a frame's offset without a Frame object) starts with
    each piece, so the offsets it gives are the piece's (what the sidecars hold).
    """

    def __init__(self, recorder: Recorder, sink: FileSink, redactor: Optional[Redactor]) -> None:
        self.recorder = recorder
        self.sink = sink
        self.redactor = redactor  # the client's direction: credentials never reach the decoder or the disk
        self.decoder: Any = codec.ColumnDecoder(**recorder.archive.decoder_options)
        self.proven = True  # every byte so far decoded into frames: boundaries are known
        self.size = 0  # bytes of the current piece handed to the sink
        self.opened_at: Optional[float] = None  # monotonic time of the current piece's first byte
        self.frames = 0  # frames in the current piece
        self.checkpoints: List[Tuple[int, int]] = []
        self.next_checkpoint = 0
        self.error_offset: Optional[int] = None  # in the current piece

    def feed(self, data: bytes, now_ns: int, now: float) -> None:
        if self.redactor is not None and self.proven:
            data = self.redactor.feed(data, at_boundary=not self.decoder.buffered)
            if not data:
                return  # a CONNECT's headers, held until they are complete
        if self.proven:
            decoder = self.decoder
            try:
                decoder.feed(data)
            except DecodeError as err:  # (the rows before the bad byte wait to be taken)
                self._unproven(err)
            else:
                # roll at the last frame this read completed (only ever inside this read)
                boundary = decoder.bytes_fed - decoder.buffered
                if boundary > 0 and boundary >= self.size and self._due(self.size + len(data), now):
                    self._roll_within(data, boundary - self.size, now_ns, now)
                    return
            self._write(data, self._dated(now_ns), now)
        else:
            self._write(data, b"", now)

    def _unproven(self, err: Any) -> None:
        self.proven = False  # no boundary past a decode error: this direction is not cut again
        self.error_offset = err.offset

    def _roll_within(self, data: bytes, cut: int, now_ns: int, now: float) -> None:
        times = self._dated(now_ns)
        if cut or times:
            self._write(data[:cut], times, now)
        self._roll()
        if cut < len(data):
            rest = data[cut:]  # the start of a frame: the new piece's decoder takes it from its first byte
            try:
                self.decoder.feed(rest)
            except DecodeError as err:
                self._unproven(err)
            self._write(rest, b"", now)

    def _due(self, end: int, now: float) -> bool:
        archive = self.recorder.archive
        if archive.roll_size is not None and end >= archive.roll_size:
            return True
        return archive.roll_age is not None and self.opened_at is not None and now - self.opened_at >= archive.roll_age

    def tick(self, now: float) -> None:
        """Roll an idle piece that is old enough (between frames only)."""
        if self.proven and not self.decoder.buffered and self.size and self._due(0, now):
            self._roll()

    def _write(self, data: bytes, times: bytes, now: float) -> None:
        if self.opened_at is None:
            self.opened_at = now
        self.size += len(data)
        # one operation per read: the bytes and their frames' arrival times
        self.recorder._submit(self.sink, "write", (data, times), len(data) + len(times))

    def _dated(self, now_ns: int) -> bytes:
        """The arrival-time records of the frames the decoder completed (all arrived at ``now_ns``)."""
        decoder = self.decoder
        if not decoder.rows:
            return b""
        offsets = array("q", decoder.take().frame_offsets)  # little-endian int64, one per frame
        if _BIG_ENDIAN:
            offsets.byteswap()
        if offsets[-1] >= self.next_checkpoint:
            interval = self.recorder.archive.index_interval
            for k, offset in enumerate(offsets):
                if offset >= self.next_checkpoint:
                    self.checkpoints.append((self.frames + k, offset))
                    self.next_checkpoint = offset + interval
        self.frames += len(offsets)
        records = array("q", (now_ns,)) * (2 * len(offsets))  # (offset, unix_ns) pairs, built in C
        records[0::2] = offsets
        if _BIG_ENDIAN:
            records.byteswap()
        return records.tobytes()

    def _facts(self) -> Tuple[List[Tuple[int, int]], int, Optional[int]]:
        return self.checkpoints, self.frames, self.error_offset

    def _roll(self) -> None:
        self.recorder._submit(self.sink, "finish", self._facts())
        self.decoder = codec.ColumnDecoder(**self.recorder.archive.decoder_options)
        self.size = 0
        self.opened_at = None
        self.frames = 0
        self.checkpoints = []
        self.next_checkpoint = 0
        self.error_offset = None

    def close(self) -> None:
        held = self.redactor.close() if self.redactor is not None else b""
        self.redactor = None
        if held:  # the stream ended inside a CONNECT's headers (redacted as far as they came)
            self.feed(held, self.recorder.archive.clock(), time.monotonic())
        if self.proven:
            try:
                self.decoder.close()
            except DecodeError as err:  # the stream ended inside a frame
                self.error_offset = err.offset
        self.recorder._submit(self.sink, "finish", self._facts())


class Recorder:
    """Records one connection's two directions into its archive (see :meth:`Archive.recorder`).

    ``c2s(data)`` and ``s2c(data)`` take the exact bytes each side sent, in order;
    ``recorder(direction, data)`` is the same as a ``wire_hook``. Nothing here raises into the
    caller or waits for the disk: a disk error or a disk too slow (more than the archive's
    ``max_pending`` bytes waiting) drops this recording, logged once, and :attr:`dropped` says why.
    :meth:`tick` rolls pieces old enough while the connection is idle; :meth:`close` ends the
    recording (the last pieces and their sidecars are written).
    """

    def __init__(self, archive: Archive, folder: str, number: int, perspective: str) -> None:
        self.archive = archive
        self.number = number
        self.name = f"conn-{number:04d}"
        self._recording = Recording(os.path.join(folder, self.name))
        self._names = _PERSPECTIVES[perspective]
        self._directions: Dict[str, _Direction] = {}
        for direction in ("c2s", "s2c"):
            sink = FileSink(
                self._recording,
                folder,
                f"{self.name}.{direction}",
                archive.compression,
                archive.decoder_options,
                archive.opener,
            )
            redactor = Redactor(archive.redact) if direction == "c2s" and archive.redact else None
            self._directions[direction] = _Direction(self, sink, redactor)
        self.closed = False

    @property
    def dropped(self) -> Optional[str]:
        """Why the recording stopped early (``None`` while it records, and after a complete one)."""
        return self._recording.dropped

    @property
    def paths(self) -> Dict[str, List[str]]:
        """The files written so far per direction (``{"c2s": [...], "s2c": [...]}``), in stream order.

        Complete once :meth:`close` returned and the archive was flushed.
        """
        return {name: list(d.sink.paths) for name, d in self._directions.items()}

    def c2s(self, data: Any) -> None:
        """Record bytes the client sent."""
        self._feed("c2s", data)

    def s2c(self, data: Any) -> None:
        """Record bytes the server sent."""
        self._feed("s2c", data)

    def __call__(self, direction: str, data: Any) -> None:
        """As a wire hook: ``direction`` "in"/"out" in the recorder's perspective (or "c2s"/"s2c")."""
        self._feed(self._names.get(direction, direction), data)

    def _feed(self, name: str, data: Any) -> None:
        if self.closed or self._recording.dropped is not None or not data:
            return
        try:
            if type(data) is not bytes:
                data = bytes(data)  # the writer thread writes it later: a buffer the caller reuses would change
            self._directions[name].feed(data, self.archive.clock(), time.monotonic())
        except Exception as exc:  # never into the caller's connection
            _log.exception("recording of %s: %s bytes failed", self._recording.name, name)
            self._drop(f"{type(exc).__name__}: {exc}")

    def tick(self) -> None:
        """Roll the pieces that passed the archive's ``roll_age`` while nothing arrived."""
        if self.closed or self._recording.dropped is not None:
            return
        now = time.monotonic()
        try:
            for direction in self._directions.values():
                direction.tick(now)
        except Exception as exc:
            self._drop(f"{type(exc).__name__}: {exc}")

    def _submit(self, sink: FileSink, op: str, arg: Any, nbytes: int = 0) -> None:
        recording = self._recording
        if nbytes and recording.pending + nbytes > self.archive.max_pending:
            self._drop(
                f"the disk is too slow ({recording.pending} bytes waiting, max_pending {self.archive.max_pending})"
            )
            return
        self.archive.writer.submit(sink, op, arg, nbytes)

    def _drop(self, reason: str) -> None:
        self._recording.drop(reason)
        for direction in self._directions.values():
            self.archive.writer.submit(direction.sink, "abort")

    def close(self) -> None:
        """End the recording: the last pieces are finished with their sidecars (by the writer thread)."""
        if self.closed:
            return
        self.closed = True
        try:
            if self._recording.dropped is None:
                for direction in self._directions.values():
                    direction.close()
        except Exception as exc:
            self._drop(f"{type(exc).__name__}: {exc}")
        finally:
            self.archive._closed(self)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["Archive", "Recorder"]
