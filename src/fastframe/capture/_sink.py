"""The disk side of a recording: one thread per archive does every write, so a slow disk never stalls the
event loop, and a failing one costs the recording of a connection, never the connection.

The event loop hands each direction's :class:`FileSink` operations (``write``, ``finish``, ``abort``)
through :meth:`Writer.submit`; the writer thread runs them in order, one write per file and batch. What
waits is counted per recorder (``Recording.pending``): the recorder drops itself when that passes its bound (the disk is
too slow). An ``OSError`` from the disk (full, gone, read-only) drops the recording of that connection:
both of its sinks close what they have, and the reason is logged once.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import deque
from typing import IO, Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from ..archive import COMPRESSED_SUFFIXES, INDEX_SUFFIX, MAGIC, compressed_writer, make_index, times_path

_log = logging.getLogger("fastframe.capture")

#: ``(checkpoints, frames, error_offset)`` of a finished file: what its ``.ffidx`` says.
IndexFacts = Tuple[Sequence[Tuple[int, int]], int, Optional[int]]
Opener = Callable[[str, str], IO[bytes]]
BATCH_DELAY = 0.02  # seconds the writer lets operations gather after waking (unless flushing or closing)


class Recording:
    """What a recorder and its two sinks share across threads: the bytes waiting, and why it stopped."""

    __slots__ = ("name", "pending", "dropped")

    def __init__(self, name: str) -> None:
        self.name = name
        self.pending = 0  # bytes submitted, not yet written (changed under the writer's lock)
        self.dropped: Optional[str] = None  # why the recording stopped (None while it runs)

    def drop(self, reason: str) -> None:
        if self.dropped is None:
            self.dropped = reason
            _log.warning("recording of %s dropped: %s (the connection goes on)", self.name, reason)


class FileSink:
    """One direction of one connection: its pieces ``<stem><piece>.stomp[.gz|.zst]``, each with its sidecars.

    Used by the writer thread only (after construction).
    """

    def __init__(
        self,
        recording: Recording,
        folder: str,
        stem: str,
        compression: Optional[str],
        decoder_kwargs: Any,
        opener: Opener,
    ) -> None:
        self.recording = recording
        self.folder = folder
        self.stem = stem  # e.g. conn-0003.c2s
        self.compression = compression  # None, "gzip" or "zstd"
        self.decoder_kwargs = decoder_kwargs
        self.opener = opener
        self.piece = 0
        self.paths: List[str] = []  # every piece opened, in order
        self._raw: Optional[IO[bytes]] = None
        self._out: Any = None  # the piece's writer: the raw file, or a GzipFile over it
        self._times: Optional[IO[bytes]] = None
        self._data: List[bytes] = []  # gathered by ``write`` operations, written by drain()
        self._times_data: List[bytes] = []

    def path(self, piece: int) -> str:
        """Piece 1 is ``conn-NNNN.c2s.stomp``, then ``conn-NNNN.c2s_0002.stomp`` (names sort in stream order)."""
        more = "" if piece == 1 else f"_{piece:04d}"
        ending = COMPRESSED_SUFFIXES[self.compression] if self.compression else ""
        return os.path.join(self.folder, f"{self.stem}{more}.stomp{ending}")

    def _open(self) -> None:
        self.piece += 1
        path = self.path(self.piece)
        os.makedirs(self.folder, exist_ok=True)
        self.paths.append(path)
        self._raw = self.opener(path, "wb")
        # (compressed: the bytes depend on the traffic only, no time in them)
        self._out = compressed_writer(self._raw, self.compression) if self.compression else self._raw
        self._times = self.opener(times_path(path), "wb")
        self._times.write(MAGIC)

    def run(self, op: str, arg: Any) -> None:
        """One operation, in the writer thread (an OSError drops the recording).

        ``write`` (bytes, their arrival-time records) only gathers; ``drain`` (after each batch of the
        writer, and before any other operation) writes what gathered, in one call per file.
        """
        if op == "write":
            data, times = arg
            self._data.append(data)
            if times:
                self._times_data.append(times)
            return
        self.drain()  # (what gathered goes first)
        if op == "finish":
            self._finish(arg)
        elif op == "abort":
            self.abort()

    def drain(self) -> None:
        """Write the bytes and records gathered (opening the piece when it is not open yet)."""
        if not self._data and not self._times_data:
            return
        data, times = self._data, self._times_data
        self._data, self._times_data = [], []
        if self._out is None:
            self._open()
        assert self._out is not None and self._times is not None
        self._out.write(data[0] if len(data) == 1 else b"".join(data))
        if times:
            self._times.write(times[0] if len(times) == 1 else b"".join(times))

    def _finish(self, facts: IndexFacts) -> None:
        """Close the current piece and write its ``.ffidx`` (the next write opens the next piece)."""
        if self._out is None:
            return
        out, raw, times = self._out, self._raw, self._times
        self._out = self._raw = self._times = None
        path = self.paths[-1]
        try:
            out.flush()
            if out is not raw:
                out.close()  # gzip's trailer, zstd's end of frame (the file stays open)
            assert raw is not None and times is not None
            raw.close()
            times.close()
        except BaseException:
            _close_quietly(out, raw, times)
            raise
        checkpoints, frames, error_offset = facts
        index = make_index(os.path.getsize(path), self.decoder_kwargs, checkpoints, frames, error_offset)
        with self.opener(path + INDEX_SUFFIX, "wb") as sidecar:
            sidecar.write(json.dumps(index).encode("utf-8"))

    def abort(self) -> None:
        """Close what is open, keeping what reached the disk (no index: the piece may end anywhere)."""
        out, raw, times = self._out, self._raw, self._times
        self._out = self._raw = self._times = None
        self._data, self._times_data = [], []
        _close_quietly(out, raw, times)


def _close_quietly(*files: Optional[IO[bytes]]) -> None:
    for file in files:
        if file is not None:
            try:
                file.close()
            except Exception:  # (a full disk again: what is there stays)
                pass


class Writer:
    """The archive's writer thread: runs the sinks' operations in order, off the event loop."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._ops: Deque[Tuple[FileSink, str, Any, int]] = deque()
        self._thread: Optional[threading.Thread] = None
        self._stopping = False
        self._waiting = False  # the thread waits for work: the next submit wakes it
        self._flushing = 0  # flush() calls waiting: no batch delay meanwhile
        self._submitted = 0  # operations submitted, and run (flush() waits for the second to reach the first)
        self._done = 0

    def submit(self, sink: FileSink, op: str, arg: Any = None, nbytes: int = 0) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fastframe-capture-writer", daemon=True)
                self._thread.start()
            sink.recording.pending += nbytes
            self._submitted += 1
            self._ops.append((sink, op, arg, nbytes))
            if self._waiting:
                self._waiting = False
                self._cond.notify_all()  # (flush() waits on the same condition)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._ops and not self._stopping:
                    self._waiting = True
                    self._cond.wait()
                if not self._ops:
                    return
                # let a batch gather: one wake-up per BATCH_DELAY, not one per read of every connection
                self._cond.wait_for(lambda: self._stopping or self._flushing > 0, BATCH_DELAY)
                batch, self._ops = self._ops, deque()
            written: Dict[Recording, int] = {}
            touched: Dict[FileSink, None] = {}  # (in order)
            for sink, op, arg, nbytes in batch:
                self._run_one(sink, op, arg)
                touched[sink] = None
                written[sink.recording] = written.get(sink.recording, 0) + nbytes
            for sink in touched:  # what the batch gathered: one write per file
                self._run_one(sink, "drain", None)
            with self._cond:
                for recording, nbytes in written.items():
                    recording.pending -= nbytes
                self._done += len(batch)
                self._cond.notify_all()

    @staticmethod
    def _run_one(sink: FileSink, op: str, arg: Any) -> None:
        recording = sink.recording
        try:
            if recording.dropped is None:
                sink.run(op, arg)
            else:
                sink.abort()
        except OSError as exc:
            recording.drop(f"{op} failed: {exc}")
            sink.abort()
        except Exception as exc:  # a bug of ours must not end the thread (other connections record)
            _log.exception("capture writer: %s of %s failed", op, sink.stem)
            recording.drop(f"{op} failed: {type(exc).__name__}: {exc}")
            sink.abort()

    def flush(self, timeout: float) -> bool:
        """Wait until every operation submitted so far ran (at most ``timeout`` s); True when they did."""
        with self._cond:
            target = self._submitted
            self._flushing += 1
            self._cond.notify_all()  # (a batch gathering runs now)
            try:
                return self._cond.wait_for(lambda: self._done >= target, timeout)
            finally:
                self._flushing -= 1

    def close(self, timeout: float = 30.0) -> None:
        """Run what is queued, then stop the thread (waiting at most ``timeout`` s)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
