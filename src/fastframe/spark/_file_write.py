"""Writing rows back to frame-stream files, one file per partition, with a commit step.

Runs without Spark: the ``DataSourceArrowWriter`` (and the tests) drive
:class:`FrameFileWriter`. Each task writes its file under
``<path>/_temporary/<job>/``; the driver's :meth:`FrameFileWriter.commit`
moves the files of successful tasks into ``<path>`` (after clearing it, for
overwrite) and :meth:`FrameFileWriter.abort` removes the staging folder, so
readers never see half-written output (names starting with ``_`` are
skipped when a folder is read).
"""

from __future__ import annotations

import json
import uuid
from itertools import accumulate
from typing import Any, Dict, Iterable, List, Optional, Sequence

from .. import codec as fastframe_codec
from ..archive import INDEX_SUFFIX, basename, make_index, resolve
from ._file_options import CODEC_SUFFIX, WriteOptions

STAGING = "_temporary"

#: The codec module frames are encoded with (tests point it at each twin).
codec: Any = fastframe_codec


def pairs_per_row(column: Any) -> List[Optional[List[Any]]]:
    """A list<struct<name,value>> or map<string,string> column as per-row lists of pairs."""
    import pyarrow as pa  # type: ignore[import-untyped]

    if pa.types.is_map(column.type):
        return list(column.to_pylist())  # rows of (key, value) tuples already
    lengths = column.value_lengths().to_pylist()
    flat = column.flatten()
    names, values = (child.to_pylist() for child in flat.flatten())
    pairs = list(zip(names, values))
    out: List[Optional[List[Any]]] = []
    starts = accumulate((n or 0 for n in lengths), initial=0)
    for n, start in zip(lengths, starts):
        out.append(None if n is None else pairs[start : start + n])
    return out


class FrameFileWriter:
    """Encodes record batches with the codec's Encoder into one file per task."""

    def __init__(self, opts: WriteOptions, columns: Sequence[str], overwrite: bool) -> None:
        names = set(columns)
        if "command" not in names:
            raise ValueError(f"writing STOMP needs a 'command' column (the DataFrame has {', '.join(columns)})")
        self.headers_column = "headers" if "headers" in names else ("header_map" if "header_map" in names else None)
        self.has_body = "body" in names
        self.has_error = "error_code" in names
        self.opts = opts
        self.overwrite = overwrite
        self.job = uuid.uuid4().hex[:16]
        opts.make_encoder()  # fail on the driver, not in every task

    def staging_dir(self) -> str:
        fs, inner = resolve(self.opts.path, self.opts.filesystem)
        return str(fs.join(inner, STAGING, self.job))

    def write_partition(self, batches: Iterable[Any], partition: int, attempt: int = 0) -> Dict[str, Any]:
        """Write one task's rows; return its commit message (a plain dict)."""
        import pyarrow as pa

        opts = self.opts
        encoder = opts.make_encoder(codec)
        fs, inner = resolve(opts.path, opts.filesystem)
        name = f"part-{partition:05d}-{self.job}.stomp{CODEC_SUFFIX.get(opts.compression, '')}"
        folder = fs.join(inner, STAGING, self.job, str(attempt))
        staged = fs.join(folder, name)
        frames = written = skipped = 0
        checkpoints: List[List[int]] = []
        next_at = 0
        out: Any = None
        raw: Any = None
        try:
            for batch in batches:
                n = batch.num_rows
                if not n:
                    continue
                commands = batch.column("command").to_pylist()
                bodies = batch.column("body").to_pylist() if self.has_body else [None] * n
                headers = pairs_per_row(batch.column(self.headers_column)) if self.headers_column else [None] * n
                errors = batch.column("error_code").to_pylist() if self.has_error else [None] * n
                chunks = []
                for command, pairs, body, error in zip(commands, headers, bodies, errors):
                    if command is None:
                        if error is not None:
                            skipped += 1  # an error row of a read: nothing to encode
                            continue
                        raise ValueError("a row has a null command (and no error_code): it cannot be encoded")
                    data = encoder.encode(command, pairs or (), body or b"")
                    if opts.write_index and written >= next_at:
                        checkpoints.append([frames, written])
                        next_at = written + opts.index_interval
                    chunks.append(data)
                    written += len(data)
                    frames += 1
                if not chunks:
                    continue
                if out is None:
                    fs.makedirs(folder)
                    raw = fs.open_write(staged)
                    out = pa.CompressedOutputStream(raw, opts.compression) if opts.compression != "none" else raw
                out.write(b"".join(chunks))
        finally:
            if out is not None:
                out.close()
                if raw is not out:
                    raw.close()
        files = []
        if out is not None:
            files.append([staged, name])
            if opts.write_index:
                index = make_index(
                    written, {"version": opts.version, "escapes": opts.escapes}, checkpoints, frames, None
                )
                with fs.open_write(staged + INDEX_SUFFIX) as sidecar:
                    sidecar.write(json.dumps(index).encode("utf-8"))
                files.append([staged + INDEX_SUFFIX, name + INDEX_SUFFIX])
        return {"files": files, "frames": frames, "bytes": written, "skipped_error_rows": skipped}

    def commit(self, messages: Sequence[Optional[Dict[str, Any]]]) -> Dict[str, Any]:
        """Move the files of successful tasks into place; return the totals."""
        fs, inner = resolve(self.opts.path, self.opts.filesystem)
        fs.makedirs(inner)
        if self.overwrite:
            for child in fs.listdir(inner):
                if basename(child.path) != STAGING:
                    fs.remove(child.path)
        totals = {"files": 0, "frames": 0, "bytes": 0, "skipped_error_rows": 0}
        for message in messages:
            if not message:
                continue
            for staged, name in message["files"]:
                fs.move(staged, fs.join(inner, name))
                totals["files"] += not name.endswith(INDEX_SUFFIX)
            for key in ("frames", "bytes", "skipped_error_rows"):
                totals[key] += message[key]
        self._cleanup(fs, inner)
        return totals

    def abort(self, messages: Sequence[Optional[Dict[str, Any]]] = ()) -> None:
        fs, inner = resolve(self.opts.path, self.opts.filesystem)
        self._cleanup(fs, inner)

    def _cleanup(self, fs: Any, inner: str) -> None:
        staging = fs.join(inner, STAGING)
        if fs.info(fs.join(staging, self.job)) is not None:
            fs.remove(fs.join(staging, self.job))
        got = fs.info(staging)
        if got is not None and got.is_dir and not fs.listdir(staging):
            fs.remove(staging)
