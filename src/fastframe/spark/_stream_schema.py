"""The rows of the broker source: columns, their Spark and Arrow types, and messages made into Arrow batches.

One row per MESSAGE, as the asyncio client received it (decoded by the codec's
active twin, which the ``codec`` column names). The header columns have the
file source's types, so the same code reads both.
"""

from __future__ import annotations

import time
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
    """One Arrow record batch of :class:`fastframe.aio.Message` objects (``offsets``: their stream offsets)."""
    import pyarrow as pa

    schema = schema or stream_arrow_schema()
    n = len(messages)
    names: List[str] = []
    values: List[str] = []
    header_offsets = [0]
    map_names: List[str] = []
    map_values: List[str] = []
    map_offsets = [0]
    bodies: List[bytes] = []
    ids: List[Optional[str]] = []
    subs: List[Optional[str]] = []
    redelivered: List[bool] = []
    for message in messages:
        pairs = message.headers
        seen = set()
        for name, value in pairs:
            names.append(name)
            values.append(value)
            if name not in seen:
                seen.add(name)
                map_names.append(name)
                map_values.append(value)
        header_offsets.append(len(names))
        map_offsets.append(len(map_names))
        bodies.append(message.body)
        ids.append(message.message_id)
        subs.append(message.get("subscription"))
        redelivered.append(message.get("redelivered") == "true")
    headers_type = schema.field("headers").type
    struct = headers_type.value_type
    flat = pa.StructArray.from_arrays(
        [pa.array(names, pa.string()), pa.array(values, pa.string())], fields=[struct.field(0), struct.field(1)]
    )
    headers = pa.ListArray.from_arrays(pa.array(header_offsets, pa.int32()), flat, type=headers_type)
    header_map = pa.MapArray.from_arrays(
        pa.array(map_offsets, pa.int32()),
        pa.array(map_names, pa.string()),
        pa.array(map_values, pa.string()),
        type=schema.field("header_map").type,
    )
    now = int(time.time() * 1_000_000)
    columns = {
        "destination": pa.repeat(pa.scalar(destination, pa.string()), n),
        "offset": pa.array(offsets, pa.int64()) if offsets is not None else pa.nulls(n, pa.int64()),
        "message_id": pa.array(ids, pa.string()),
        "subscription": pa.array(subs, pa.string()),
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
