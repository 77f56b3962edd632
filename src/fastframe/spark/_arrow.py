"""The row layout, and decoded frames turned into Arrow record batches.

One row per frame; a malformed spot in a file becomes one error row (command,
headers, header_map and body null; error_code and error_reason set). The
Arrow types are exactly what Spark derives from :data:`SPARK_DDL` (the
Python Data Source API refuses any other), which a test checks.

The codec's ``ColumnDecoder`` decodes a file straight into Arrow's buffers
(in C with the compiled twin: no Frame objects), and the arrays wrap them
without a copy; the ``headers`` and ``header_map`` columns share their name
and value arrays unless a frame repeats a header name (the codec marks the
first of each name: Arrow does not check map keys).
"""

from __future__ import annotations

import array
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from ._columns import COLUMN_NAMES, COLUMNS, ERROR_NULL, SPARK_DDL  # noqa: F401  (re-exported)

HEADER_STRUCT = pa.struct([pa.field("name", pa.string(), False), pa.field("value", pa.string(), False)])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_STRUCT, False))
MAP_TYPE = pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.string(), False))

ARROW_TYPES: Dict[str, pa.DataType] = {
    "path": pa.string(),
    "offset": pa.int64(),
    "frame_index": pa.int64(),
    "command": pa.string(),
    "headers": HEADERS_TYPE,
    "header_map": MAP_TYPE,
    "body": pa.binary(),
    "error_code": pa.string(),
    "error_reason": pa.string(),
    "codec": pa.string(),
    "received_at": pa.timestamp("us", tz="UTC"),  # (filled in by the reader from a capture's sidecar)
}


Field = Tuple[str, bool, pa.DataType]  # (name, nullable, Arrow type)


def default_fields() -> List[Field]:
    """Every column, with our nullability and types."""
    return [(name, nullable, ARROW_TYPES[name]) for name, _, nullable, _ in COLUMNS]


def arrow_schema(fields: Optional[Sequence[Field]] = None) -> pa.Schema:
    """The Arrow schema of ``(name, nullable, type)`` fields (default: every column)."""
    if fields is None:
        fields = default_fields()
    return pa.schema([pa.field(name, kind, nullable) for name, nullable, kind in fields])


def _strings(kind: pa.DataType, count: int, offsets: Any, data: Any, valid: Any = None) -> pa.Array:
    """A string or binary array over buffers in Arrow's layout, without copying them."""
    validity = None if valid is None else pa.py_buffer(valid)
    return pa.Array.from_buffers(kind, count, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])


# Arrays and scalars of Python values are made from their bytes here, not with pa.array or pa.scalar:
# those first ask pyarrow's pandas shim whether the value is a pandas object, which imports pandas
# (0.2-0.3 s of CPU, more in a capped worker) into a Spark Python worker that has not imported it.


def int64s(values: Iterable[int], kind: Optional[pa.DataType] = None) -> pa.Array:
    """``pa.array(values, kind)`` for ints, ``kind`` int64 (the default) or a timestamp (none null)."""
    data = array.array("q", values)
    return pa.Array.from_buffers(kind or pa.int64(), len(data), [None, pa.py_buffer(data)])


def optional_strings(values: Sequence[Union[str, bytes, None]], kind: pa.DataType) -> pa.Array:
    """``pa.array(values, kind)`` for str or bytes values and None, ``kind`` string or binary."""
    encoded = [value.encode() if isinstance(value, str) else value for value in values]
    ends = array.array("i", [0])
    for value in encoded:
        ends.append(ends[-1] + (len(value) if value is not None else 0))
    if None not in encoded:
        return _strings(kind, len(encoded), ends, b"".join(encoded))  # type: ignore[arg-type]
    bits = sum(1 << i for i, value in enumerate(encoded) if value is not None)
    valid = bits.to_bytes((len(encoded) + 7) // 8, "little")
    return _strings(kind, len(encoded), ends, b"".join(value for value in encoded if value is not None), valid)


def scalar(value: Union[str, bytes, int, None], kind: pa.DataType) -> pa.Scalar:
    """``pa.scalar(value, kind)``: a str, bytes or None for a string or binary ``kind``, an int for int64
    or a timestamp."""
    if isinstance(value, int):
        return int64s((value,), kind)[0]
    return optional_strings((value,), kind)[0]


def repeated(value: Union[str, bytes, int, None], kind: pa.DataType, n: int) -> pa.Array:
    """``value`` ``n`` times (see :func:`scalar`)."""
    return pa.repeat(scalar(value, kind), n)


def one_null(kind: pa.DataType) -> pa.Array:
    """``pa.array([None], kind)``, to the byte: a list's or a map's children empty (``pa.nulls`` gives
    them longer offsets buffers)."""
    offsets = pa.Array.from_buffers(pa.int32(), 2, [None, pa.py_buffer(bytes(8))])
    mask = pa.Array.from_buffers(pa.bool_(), 1, [None, pa.py_buffer(b"\x01")])
    if pa.types.is_map(kind):
        return pa.MapArray.from_arrays(offsets, _empty(kind.key_type), _empty(kind.item_type), type=kind, mask=mask)
    if pa.types.is_list(kind):
        return pa.ListArray.from_arrays(offsets, _empty(kind.value_type), type=kind, mask=mask)
    return pa.nulls(1, kind)


def _empty(kind: pa.DataType) -> pa.Array:
    """An empty array of a string, binary or struct kind (of those), as ``pa.array([], kind)`` makes it."""
    if pa.types.is_struct(kind):
        return pa.StructArray.from_arrays([_empty(field.type) for field in kind], fields=list(kind))
    return _strings(kind, 0, bytes(4), b"")


def header_columns(
    columns: Any, headers_type: Optional[pa.DataType], map_type: Optional[pa.DataType]
) -> Tuple[Optional[pa.ListArray], Optional[pa.MapArray]]:
    """The ``headers`` and ``header_map`` arrays of a ``fastframe.Columns`` (one left out: None for its type).

    Both wrap the codec's buffers and share the name and value arrays unless a
    row repeats a header name: then the map keeps the first of each name.
    """
    n = columns.rows
    count = len(columns.name_offsets) // 4 - 1
    list_offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(columns.header_offsets)])
    keys = _strings(pa.string(), count, columns.name_offsets, columns.name_data)
    items = _strings(pa.string(), count, columns.value_offsets, columns.value_data)
    headers = header_map = None
    if headers_type is not None:
        struct_type = headers_type.value_type
        flat = pa.StructArray.from_arrays([keys, items], fields=[struct_type.field(0), struct_type.field(1)])
        headers = pa.ListArray.from_arrays(list_offsets, flat, type=headers_type)
    if map_type is not None:
        map_offsets = list_offsets
        if columns.map_keep is not None:  # some row repeats a name: the first of each name stays
            map_offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(columns.map_offsets)])
            keep = pa.Array.from_buffers(pa.uint8(), count, [None, pa.py_buffer(columns.map_keep)])
            mask = keep.cast(pa.bool_())
            keys, items = keys.filter(mask), items.filter(mask)
        header_map = pa.MapArray.from_arrays(map_offsets, keys, items, type=map_type)
    return headers, header_map


class BatchBuilder:
    """Builds the record batches of one file (or one split of it).

    The codec lays rows out in Arrow's buffers (``ColumnDecoder.take`` or
    ``to_columns``, in C with the compiled twin); this class wraps them as
    arrays without copying.
    """

    def __init__(self, fields: Sequence[Field], path: str, codec: str) -> None:
        self.schema = arrow_schema(fields)
        self.names = [name for name, _, _ in fields]
        self.types = {name: kind for name, _, kind in fields}
        self.path = path
        self.codec = codec
        # most batches have the same row count: their constant columns are built once
        self._repeated: Dict[Tuple[str, int], pa.Array] = {}
        self._counting: Dict[int, pa.Array] = {}

    def _constant(self, value: str, n: int) -> pa.Array:
        column = self._repeated.get((value, n))
        if column is None:
            if len(self._repeated) > 8:
                self._repeated.clear()
            column = self._repeated[value, n] = repeated(value, pa.string(), n)
        return column

    def _indexes(self, first: int, n: int) -> pa.Array:
        """first, first + 1, ..., first + n - 1 (int64)."""
        counting = self._counting.get(n)
        if counting is None:
            if len(self._counting) > 4:
                self._counting.clear()
            counting = self._counting[n] = int64s(range(n))
        return pc.add(counting, scalar(first, pa.int64())) if first else counting

    def batch(self, columns: Any, first_index: int, base: int = 0) -> pa.RecordBatch:
        """A batch of rows from a ``fastframe.Columns``; ``base`` is added to their offsets."""
        n = columns.rows
        names = self.names
        arrays: Dict[str, pa.Array] = {}
        if "headers" in names or "header_map" in names:
            headers, header_map = header_columns(columns, self.types.get("headers"), self.types.get("header_map"))
            if headers is not None:
                arrays["headers"] = headers
            if header_map is not None:
                arrays["header_map"] = header_map
        for name in names:
            if name in arrays:
                continue
            if name == "path":
                arrays[name] = self._constant(self.path, n)
            elif name == "offset":
                offsets = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(columns.frame_offsets)])
                arrays[name] = pc.add(offsets, scalar(base, pa.int64())) if base else offsets
            elif name == "frame_index":
                arrays[name] = self._indexes(first_index, n)
            elif name == "command":
                arrays[name] = _strings(pa.string(), n, columns.command_offsets, columns.command_data)
            elif name == "body":
                arrays[name] = _strings(pa.binary(), n, columns.body_offsets, columns.body_data)
            elif name in ("error_code", "error_reason"):
                arrays[name] = pa.nulls(n, pa.string())
            elif name == "codec":
                arrays[name] = self._constant(self.codec, n)
        return pa.RecordBatch.from_arrays([arrays[name] for name in names], schema=self.schema)

    def error(self, offset: int, index: int, code: str, reason: str) -> pa.RecordBatch:
        """The one-row batch that reports a malformed spot."""
        values: Dict[str, Any] = {
            "path": self.path,
            "offset": offset,
            "frame_index": index,
            "error_code": code,
            "error_reason": reason,
            "codec": self.codec,
        }
        arrays = [
            one_null(self.types[name]) if values.get(name) is None else repeated(values[name], self.types[name], 1)
            for name in self.names
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
