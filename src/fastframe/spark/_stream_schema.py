"""The rows of the broker source: columns, their Spark and Arrow types, and messages made into Arrow batches.

One row per MESSAGE, as the asyncio client received it (decoded by the codec's
active twin, which the ``codec`` column names). The header columns have the
file source's types, so the same code reads both.

A poison message (a header holding bytes that are not UTF-8, which RabbitMQ
passes on) is a row too: the client keeps such bytes (the codec's
``keep_invalid_utf8``), the string columns get U+FFFD in their place, and
``error_code``, ``error_reason`` and ``raw_headers`` (the exact bytes) say so.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

from ..codec import ESCAPE, to_columns

#: (name, Spark type, nullable, meaning) of every column, in order.
STREAM_COLUMNS: Tuple[Tuple[str, str, bool, str], ...] = (
    ("destination", "string", False, "the destination as given in the source's options"),
    ("offset", "bigint", True, "the stream offset (x-stream-offset) with consume=stream; null for queues"),
    ("message_id", "string", True, "the message-id header"),
    ("subscription", "string", True, "the subscription header"),
    ("redelivered", "boolean", False, "the broker delivered the message before (redelivered:true)"),
    ("headers", "array<struct<name:string,value:string>>", False, "every header in wire order, unescaped"),
    ("header_map", "map<string,string>", False, "the headers, the first of each name winning"),
    ("body", "binary", False, "the body octets"),
    ("error_code", "string", True, "null, or why the message's headers are not all text: invalid-utf8"),
    ("error_reason", "string", True, "null, or which headers hold bytes that are not UTF-8"),
    ("raw_headers", "binary", True, "null, or (on a row with error_code) the headers byte for byte, as a STOMP "
     "1.2 head: name:value lines, escaped"),
    ("received_at", "timestamp", False, "when the client took the message (UTC)"),
    ("codec", "string", False, "the fastframe twin that decoded the frame: c or python"),
)  # fmt: skip

STREAM_COLUMN_NAMES = tuple(c[0] for c in STREAM_COLUMNS)
STREAM_DDL = ", ".join(f"{name} {kind}{'' if nullable else ' NOT NULL'}" for name, kind, nullable, _ in STREAM_COLUMNS)


def stream_spark_schema() -> Any:
    """The broker source's rows as a ``pyspark.sql.types.StructType``."""
    from pyspark.sql.types import BooleanType, StructField, StructType, TimestampType

    from ._schema import _spark_type

    def kind(name: str) -> Any:
        if name == "boolean":
            return BooleanType()
        if name == "timestamp":
            return TimestampType()
        return _spark_type(name)

    return StructType([StructField(name, kind(spark), nullable) for name, spark, nullable, _ in STREAM_COLUMNS])


def stream_arrow_schema() -> Any:
    """The Arrow schema Spark expects for :data:`STREAM_DDL`."""
    import pyarrow as pa  # type: ignore[import-untyped]

    from ._arrow import ARROW_TYPES

    types = {
        "destination": pa.string(),
        "offset": pa.int64(),
        "message_id": pa.string(),
        "subscription": pa.string(),
        "redelivered": pa.bool_(),
        "headers": ARROW_TYPES["headers"],
        "header_map": ARROW_TYPES["header_map"],
        "body": pa.binary(),
        "error_code": pa.string(),
        "error_reason": pa.string(),
        "raw_headers": pa.binary(),
        "received_at": pa.timestamp("us", tz="UTC"),
        "codec": pa.string(),
    }
    return pa.schema([pa.field(name, types[name], nullable) for name, _, nullable, _ in STREAM_COLUMNS])


def check_stream_schema(schema: Any) -> None:
    """A user schema must be ours: the broker source builds every column."""
    ours = stream_spark_schema()
    if schema is not None and schema.simpleString() != ours.simpleString():
        raise ValueError(f"the broker source's schema is fixed: {STREAM_DDL}")


def messages_to_batch(
    destination: str, messages: Sequence[Any], offsets: Optional[Sequence[int]], codec: str, schema: Any = None
) -> Any:
    """One Arrow record batch of :class:`fastframe.aio.Message` objects of one subscription (``offsets``:
    their stream offsets).

    The codec lays the frames out in Arrow's buffers in one pass (``to_columns``, compiled with the C
    twin); the header columns wrap them, and ``message_id`` and ``redelivered`` are read from the
    first-wins map in Arrow: no Python object per message but its frame.
    """
    from ._arrow import int64s

    frames = [message.frame for message in messages]
    poison: Optional[List[Optional[Tuple[str, bytes]]]] = None
    try:
        columns = to_columns(frames)
    except UnicodeEncodeError:  # a poison message (rare): its headers are made text, the bytes kept aside
        poison = [_poison(frame.headers) for frame in frames]
        columns = to_columns([_text_frame(frame) if bad else frame for frame, bad in zip(frames, poison)])
    first_sub = messages[0].get("subscription") if messages else None  # one subscription per call
    if poison is not None and first_sub is not None:
        first_sub = _text(first_sub)
    stream_offsets = int64s(offsets) if offsets is not None else None
    return _batch(destination, [(columns, 0, columns.rows)], stream_offsets, first_sub, codec, schema, poison)


def columns_to_batch(
    destination: str, pieces: Sequence[Tuple[Any, int, int]], subscription: str, codec: str, schema: Any = None
) -> Any:
    """One Arrow record batch of a stream subscription's rows: ``pieces`` are ``(columns, first row, end
    row)`` of the :class:`fastframe.Columns` a columnar subscription gave (one per read), in order.

    The offsets are the rows' ``x-stream-offset`` headers, read in Arrow with the other header columns;
    nothing is made per message in Python.
    """
    return _batch(destination, pieces, "x-stream-offset", subscription, codec, schema, None)


def _batch(
    destination: str,
    pieces: Sequence[Tuple[Any, int, int]],
    offsets: Any,
    subscription: Optional[str],
    codec: str,
    schema: Any,
    poison: Optional[List[Optional[Tuple[str, bytes]]]],
) -> Any:
    """The record batch of ``pieces`` (see :func:`columns_to_batch`); ``offsets`` an int64 array, None (no
    offsets: nulls) or the name of the header that holds them."""
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    from ._arrow import header_columns, optional_strings, repeated, scalar

    schema = schema or stream_arrow_schema()
    headers_type, map_type = schema.field("headers").type, schema.field("header_map").type
    parts: List[Tuple[Any, Any, Any]] = []
    for columns, first, end in pieces:
        headers, header_map = header_columns(columns, headers_type, map_type)
        assert headers is not None and header_map is not None  # both types given: both built
        body = pa.Array.from_buffers(
            pa.binary(), columns.rows, [None, pa.py_buffer(columns.body_offsets), pa.py_buffer(columns.body_data)]
        )
        if first or end != columns.rows:
            headers, header_map, body = (array.slice(first, end - first) for array in (headers, header_map, body))
        parts.append((headers, header_map, body))
    if len(parts) == 1 and pieces[0][1:] == (0, pieces[0][0].rows):
        headers, header_map, body = parts[0]
    else:  # one array each (sliced ones made whole: the map's keys and items are read below)
        headers, header_map, body = (pa.concat_arrays([part[i] for part in parts]) for i in range(3))
    n = len(body)
    # each row's first header of a name, found in Arrow: the map's entries (at most one of a name per
    # row), and the row of each when some row lacks it
    keys, items = header_map.keys, header_map.items
    string = pa.string()
    rows_of: List[Any] = []  # (the entries' rows and the row numbers, made once if needed)

    def entries_by_row() -> Any:
        if not rows_of:
            rows_of.append(pc.list_parent_indices(pa.ListArray.from_arrays(header_map.offsets, keys)))
            rows_of.append(_row_numbers(n))
        return rows_of

    def first_of(name: str) -> Any:
        found = pc.equal(keys, scalar(name, string))
        values = items.filter(found)
        if len(values) == n:  # every row has one: they are in row order
            return values
        entry_rows, rows = entries_by_row()
        return values.take(pc.index_in(rows, value_set=entry_rows.filter(found)))

    is_redelivered = pc.and_(pc.equal(keys, scalar("redelivered", string)), pc.equal(items, scalar("true", string)))
    if pc.any(is_redelivered).as_py():
        entry_rows, rows = entries_by_row()
        redelivered = pc.is_in(rows, value_set=entry_rows.filter(is_redelivered))
    else:  # (the usual batch) all false: a bitmap of zeros
        redelivered = pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bytes((n + 7) // 8))])
    if isinstance(offsets, str):
        offsets = first_of(offsets).cast(pa.int64())
    now = int(time.time() * 1_000_000)
    arrays = {
        "destination": repeated(destination, string, n),
        "offset": offsets if offsets is not None else pa.nulls(n, pa.int64()),
        "message_id": first_of("message-id"),
        "subscription": repeated(subscription, string, n),
        "redelivered": redelivered,
        "headers": headers,
        "header_map": header_map,
        "body": body,
        "error_code": pa.nulls(n, string),
        "error_reason": pa.nulls(n, string),
        "raw_headers": pa.nulls(n, pa.binary()),
        "received_at": repeated(now, schema.field("received_at").type, n),
        "codec": repeated(codec, string, n),
    }
    if poison is not None:
        arrays["error_code"] = optional_strings([INVALID_UTF8 if bad else None for bad in poison], string)
        arrays["error_reason"] = optional_strings([bad[0] if bad else None for bad in poison], string)
        arrays["raw_headers"] = optional_strings([bad[1] if bad else None for bad in poison], pa.binary())
    return pa.RecordBatch.from_arrays([arrays[name] for name in schema.names], schema=schema)


@lru_cache(maxsize=4)  # a stream task's batches mostly have the same size
def _row_numbers(n: int) -> Any:
    """0, 1, ..., n - 1 (int64, as list_parent_indices gives)."""
    from ._arrow import int64s

    return int64s(range(n))


class _TextFrame(NamedTuple):
    """A poison message's frame with its headers made text, as ``to_columns`` reads a frame."""

    command: str
    headers: Tuple[Tuple[str, str], ...]
    body: bytes


def _text_frame(frame: Any) -> _TextFrame:
    return _TextFrame(frame.command, _text_headers(frame.headers), frame.body)


#: ``error_code`` of a message whose headers hold bytes that are not UTF-8.
INVALID_UTF8 = "invalid-utf8"
#: STOMP 1.2's escapes, as ``raw_headers`` writes them.
_ESCAPE_1_2 = str.maketrans(ESCAPE["1.2"])


def _text(value: str) -> str:
    """``value`` with each byte that is not UTF-8 (a lone surrogate of ``surrogateescape``) as U+FFFD."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _text_headers(headers: Sequence[Tuple[str, str]]) -> Tuple[Tuple[str, str], ...]:
    return tuple((_text(name), _text(value)) for name, value in headers)


def _poison(headers: Sequence[Tuple[str, str]]) -> Optional[Tuple[str, bytes]]:
    """None when every header is text; else ``(error_reason, raw_headers)``."""
    bad = []
    for name, value in headers:
        try:
            name.encode()
            value.encode()
        except UnicodeEncodeError:
            bad.append(_text(name))
    if not bad:
        return None
    raw = b"".join(
        b"%b:%b\n"
        % (
            name.translate(_ESCAPE_1_2).encode("utf-8", "surrogateescape"),
            value.translate(_ESCAPE_1_2).encode("utf-8", "surrogateescape"),
        )
        for name, value in headers
    )
    names = ", ".join(map(repr, dict.fromkeys(bad)))
    reason = (
        f"header {names} holds bytes that are not UTF-8 (U+FFFD in headers and header_map; the bytes in raw_headers)"
    )
    return reason, raw


def batch_to_bytes(batch: Any) -> bytes:
    """An Arrow batch as IPC stream bytes (how the driver hands received messages to a task)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def bytes_to_batches(data: bytes) -> List[Any]:
    import pyarrow as pa

    return list(pa.ipc.open_stream(pa.py_buffer(data)))
