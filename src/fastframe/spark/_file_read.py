"""Planning a read (files -> splits -> partitions) and reading one split.

Runs without Spark: the data source and the tests call the same two
functions, :func:`plan` on the driver and
:func:`read_split` in the tasks.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from .. import __version__
from .. import codec as fastframe_codec
from ..archive import (
    choose_splits,
    compression_for,
    iter_files,
    load_checkpoints,
    open_stream,
    read_raw,
    scan_checkpoints,
)
from ._arrow import ARROW_TYPES, BatchBuilder, arrow_schema, default_fields, scalar
from ._file_options import ReadOptions

#: The codec module rows are decoded with: ``fastframe.codec`` (whichever twin it
#: picked). Tests point it at each twin module in turn.
codec: Any = fastframe_codec


class Split(NamedTuple):
    """A piece of one file that one task decodes: bytes ``[start, end)``; end -1 is the end of the file."""

    path: str
    start: int
    end: int
    first_index: int
    size: int  # bytes on disk, for planning
    compression: Optional[str]


class MalformedStompError(RuntimeError):
    """Raised in mode FAILFAST (and never caught by the reader)."""

    def __init__(self, path: str, offset: int, code: str, reason: str) -> None:
        self.path = path
        self.offset = offset
        self.code = code
        self.reason = reason
        super().__init__(
            f"Malformed STOMP in {path} at offset {offset}: {reason} [{code}]. "
            "Mode FAILFAST stops the job at the first malformed frame; use mode PERMISSIVE "
            "(error rows) or DROPMALFORMED to read past it."
        )

    def __reduce__(self) -> Any:
        return (type(self), (self.path, self.offset, self.code, self.reason))


# --------------------------------------------------------------------------- planning


def list_files(opts: ReadOptions) -> List[Tuple[str, int]]:
    """Every input file as ``(path, size)``, sorted by path.

    Folders that hold no file of their own but files in subfolders (a capture archive, nested by broker
    and date) are an error that says so, not a read of nothing: without ``recursiveFileLookup``, Spark's
    file sources' default, only the files directly in a folder are read.
    """
    files = list(iter_files(opts.paths, opts.filesystem, opts.recursive, opts.path_glob_filter))
    if not files and not opts.recursive:
        nested = sum(1 for _ in iter_files(opts.paths, opts.filesystem, True, opts.path_glob_filter))
        if nested:
            raise FileNotFoundError(
                f"no input files directly in {', '.join(map(str, opts.paths))}, but {nested} in subfolders "
                "(a capture archive is nested by broker and date): set option recursiveFileLookup to true"
            )
    files.sort()
    return files


def max_split_bytes(opts: ReadOptions, files: Sequence[Tuple[str, int]], parallelism: int) -> int:
    """Spark's rule for file sources: fill the cores, but no piece above maxPartitionBytes."""
    total = sum(size + opts.open_cost_in_bytes for _, size in files)
    per_core = total // max(1, parallelism)
    return min(opts.max_partition_bytes, max(opts.open_cost_in_bytes, per_core))


def plan(opts: ReadOptions, parallelism: Optional[int] = None) -> List[List[Split]]:
    """The splits of every input file, packed into partitions (one task each).

    Uncompressed files larger than the split size are cut at proven frame
    boundaries only (a valid index sidecar, or a scan with ``split=scan``);
    everything else is one split. Splits are packed largest first, each
    partition up to the split size (counting ``openCostInBytes`` per split),
    as Spark packs files.
    """
    if parallelism is None:
        parallelism = opts.min_partitions or os.cpu_count() or 1
    else:
        parallelism = max(parallelism, opts.min_partitions)
    files = list_files(opts)
    target = max_split_bytes(opts, files, parallelism)
    decoder_kwargs = opts.decoder_kwargs
    splits: List[Split] = []
    for path, size in files:
        codec = compression_for(path, opts.compression)
        pieces = None
        checkpoints: Optional[List[Tuple[int, int]]]
        if codec is None and size > target and opts.split != "none":
            if opts.split == "scan":
                checkpoints = scan_checkpoints(path, decoder_kwargs, max(1, target // 4), opts.filesystem)[0]
            else:
                checkpoints = load_checkpoints(path, size, decoder_kwargs, opts.filesystem)
            if checkpoints:
                pieces = choose_splits(checkpoints, size, target)
        if pieces and len(pieces) > 1:
            for start, end, first in pieces:
                splits.append(Split(path, start, end, first, end - start, None))
        else:
            splits.append(Split(path, 0, -1, 0, size, codec))
    # largest first, next-fit into partitions (Spark's FilePartition.getFilePartitions)
    splits.sort(key=lambda s: (-s.size, s.path, s.start))
    partitions: List[List[Split]] = []
    current: List[Split] = []
    current_size = 0
    for split in splits:
        if current and current_size + split.size > target:
            partitions.append(current)
            current, current_size = [], 0
        current.append(split)
        current_size += split.size + opts.open_cost_in_bytes
    if current:
        partitions.append(current)
    for part in partitions:
        part.sort(key=lambda s: (s.path, s.start))
    return partitions


# --------------------------------------------------------------------------- reading

_announced = False


def _announce_twin() -> None:
    """Say once per worker process when the slow twin decodes (it would otherwise go unnoticed)."""
    global _announced
    if _announced:
        return
    _announced = True
    if codec.IMPLEMENTATION != "c":
        print(
            f"fastframe.spark: worker pid {os.getpid()} decodes with the pure-Python twin "
            f"(fastframe {__version__}, {sys.executable}): the compiled module is not installed "
            "on this node; the codec column says 'python'",
            file=sys.stderr,
        )


class _Arrivals:
    """The ``received_at`` column: a capture's arrival-time sidecar (``fastframe.archive``), its
    record ``i`` for the file's frame ``i``, used only where its offsets are the rows' (else null)."""

    NAME = "received_at"

    def __init__(self, split: Split, opts: ReadOptions, fields: Sequence[Any]) -> None:
        self.path = split.path
        self.prefer = opts.filesystem
        self.schema = arrow_schema(fields)
        self.names = [name for name, _, _ in fields]
        self.type = ARROW_TYPES[self.NAME]
        inner = [field for field in fields if field[0] != self.NAME]
        if "offset" not in self.names:  # the rows are matched to the records by offset
            inner.append(("offset", False, ARROW_TYPES["offset"]))
        self.inner = inner  # what the BatchBuilder makes
        self.none_left = False  # no sidecar, or none past this point, or not this decoding's frames

    def add(self, batch: Any, first_index: int, error: bool = False) -> Any:
        n = batch.num_rows
        column = None if error or self.none_left else self._times(batch.column("offset"), first_index, n)
        if column is None:
            column = pa.nulls(n, self.type)
        arrays = [column if name == self.NAME else batch.column(name) for name in self.names]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _times(self, offsets: Any, first: int, n: int) -> Any:
        raw = read_raw(self.path, first, n, self.prefer)
        if not raw:
            self.none_left = True
            return None
        pairs = pa.FixedSizeListArray.from_arrays(
            pa.Array.from_buffers(pa.int64(), len(raw) // 8, [None, pa.py_buffer(raw)]), 2
        )
        found = len(pairs)
        if not pc.all(pc.equal(pc.list_element(pairs, scalar(0, pa.int64())), offsets.slice(0, found))).as_py():
            self.none_left = True  # other decoder options ended a frame elsewhere: not the recorder's frames
            return None
        arrived = pc.list_element(pairs, scalar(1, pa.int64()))
        times = pc.divide(arrived, scalar(1000, pa.int64())).cast(self.type)  # ns -> us
        return times if found == n else pa.concat_arrays([times, pa.nulls(n - found, self.type)])


def read_split(split: Split, opts: ReadOptions, fields: Optional[Sequence[Any]] = None) -> Iterator[Any]:
    """Stream one split through the codec's ColumnDecoder; yield Arrow record batches.

    Memory stays bounded: one read buffer, the decoder's partial frame, and
    the rows of the batch being filled (at most maxRecordsPerBatch rows or
    about maxBytesPerBatch bytes of frame data; a single larger frame makes
    its own batch).
    """
    _announce_twin()
    fields = default_fields() if fields is None else fields
    arrivals = _Arrivals(split, opts, fields) if _Arrivals.NAME in [f[0] for f in fields] else None
    builder = BatchBuilder(fields if arrivals is None else arrivals.inner, split.path, codec.IMPLEMENTATION)
    decoder = codec.ColumnDecoder(**opts.decoder_kwargs)
    max_rows = opts.max_records_per_batch
    max_bytes = opts.max_bytes_per_batch
    base = split.start
    remaining = -1 if split.end < 0 else split.end - split.start
    next_index = split.first_index

    def cut(final: bool) -> Iterator[Any]:
        nonlocal next_index
        while decoder.rows and (final or decoder.rows >= max_rows or decoder.pending_bytes >= max_bytes):
            columns = decoder.take(max_rows, max_bytes)
            batch = builder.batch(columns, next_index, base)
            yield batch if arrivals is None else arrivals.add(batch, next_index)
            next_index += columns.rows

    error: Optional[Tuple[int, str, str]] = None
    stream = open_stream(split.path, opts.filesystem, split.compression, split.start)
    try:
        size = opts.read_buffer_size
        while remaining != 0:
            try:
                data = stream.read(size if remaining < 0 else min(size, remaining))
            except OSError as exc:
                if split.compression is None:
                    raise
                # a corrupt or truncated compressed file is malformed input, not an I/O failure
                error = (decoder.bytes_fed + base, "corrupt-compressed-data", f"{split.compression}: {exc}")
                break
            if not data:
                break
            if remaining > 0:
                remaining -= len(data)
            try:
                decoder.feed(data)
            except fastframe_codec.DecodeError as err:  # the rows before it stay in the decoder
                error = (err.offset + base, err.code, err.reason)
                break
            yield from cut(False)
        if error is None:
            try:
                decoder.close()
            except fastframe_codec.DecodeError as err:
                error = (err.offset + base, err.code, err.reason)
    finally:
        stream.close()
    yield from cut(True)
    if error is not None:
        offset, code, reason = error
        if opts.mode == "FAILFAST":
            raise MalformedStompError(split.path, offset, code, reason)
        if opts.mode == "PERMISSIVE":
            batch = builder.error(offset, next_index, code, reason)
            yield batch if arrivals is None else arrivals.add(batch, next_index, error=True)
        # DROPMALFORMED: the frames before the error stay; the rest of the split is dropped
