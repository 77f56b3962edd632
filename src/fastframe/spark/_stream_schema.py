"""The rows of the broker source: columns, their Spark and Arrow types, and messages made into Arrow batches.

One row per MESSAGE, as the asyncio client received it (decoded by the codec's
active twin, which the ``codec`` column names). The header columns have the
file source's types, so the same code reads both.
"""

from __future__ import annotations

import time
from itertools import accumulate, chain
from typing import Any, List, Optional, Sequence, Tuple

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
    their stream offsets)."""
    import pyarrow as pa

    schema = schema or stream_arrow_schema()
    n = len(messages)
    rows = [message.headers for message in messages]
    counts = list(map(len, rows))
    flat = list(chain.from_iterable(rows))
    names, values = (list(column) for column in zip(*flat)) if flat else ([], [])
    header_offsets = list(accumulate(counts, initial=0))
    headers_type = schema.field("headers").type
    struct = headers_type.value_type
    name_array, value_array = pa.array(names, pa.string()), pa.array(values, pa.string())
    pairs = pa.StructArray.from_arrays([name_array, value_array], fields=[struct.field(0), struct.field(1)])
    offsets_array = pa.array(header_offsets, pa.int32())
    headers = pa.ListArray.from_arrays(offsets_array, pairs, type=headers_type)
    firsts = [dict(reversed(pairs_of_row)) for pairs_of_row in rows]  # the first of each name wins
    if all(len(first) == count for first, count in zip(firsts, counts)):
        map_names, map_values, map_offsets = name_array, value_array, offsets_array  # no repeats: shared arrays
    else:
        map_names = pa.array([name for first in firsts for name in first], pa.string())
        map_values = pa.array([value for first in firsts for value in first.values()], pa.string())
        map_offsets = pa.array(list(accumulate(map(len, firsts), initial=0)), pa.int32())
    header_map = pa.MapArray.from_arrays(map_offsets, map_names, map_values, type=schema.field("header_map").type)
    bodies = [message.body for message in messages]
    ids = [message.message_id for message in messages]
    first_sub = messages[0].get("subscription") if messages else None  # one subscription per call
    redelivered = [message.get("redelivered") == "true" for message in messages]
    now = int(time.time() * 1_000_000)
    columns = {
        "destination": pa.repeat(pa.scalar(destination, pa.string()), n),
        "offset": pa.array(offsets, pa.int64()) if offsets is not None else pa.nulls(n, pa.int64()),
        "message_id": pa.array(ids, pa.string()),
        "subscription": pa.repeat(pa.scalar(first_sub, pa.string()), n),
        "redelivered": pa.array(redelivered, pa.bool_()),
        "headers": headers,
        "header_map": header_map,
        "body": pa.array(bodies, pa.binary()),
        "received_at": pa.repeat(pa.scalar(now, schema.field("received_at").type), n),
        "codec": pa.repeat(pa.scalar(codec, pa.string()), n),
    }
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


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
