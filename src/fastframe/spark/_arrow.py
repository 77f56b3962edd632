"""The row layout, and decoded frames turned into Arrow record batches.

One row per frame; a malformed spot in a file becomes one error row (command,
headers, header_map and body null; error_code and error_reason set). The
Arrow types are exactly what Spark derives from :data:`SPARK_DDL` (the
Python Data Source API refuses any other), which a test checks.

Per batch, the codec's ``to_columns`` lays commands, headers and bodies out
in Arrow's buffers in one pass (in C with the compiled twin), and the arrays
wrap them without a copy; the ``headers`` and ``header_map`` columns share
their name and value arrays unless a frame repeats a header name.
"""

from __future__ import annotations

from array import array
from itertools import accumulate
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa  # type: ignore[import-untyped]

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
}


Field = Tuple[str, bool, pa.DataType]  # (name, nullable, Arrow type)


def _offsets(lengths: Any) -> pa.Array:
    """Int32 offsets (0, then running totals) of the given lengths, as an Arrow array."""
    values = array("i", accumulate(lengths, initial=0))
    return pa.Array.from_buffers(pa.int32(), len(values), [None, pa.py_buffer(values)])


def default_fields() -> List[Field]:
    """Every column, with our nullability and types."""
    return [(name, nullable, ARROW_TYPES[name]) for name, _, nullable, _ in COLUMNS]


def arrow_schema(fields: Optional[Sequence[Field]] = None) -> pa.Schema:
    """The Arrow schema of ``(name, nullable, type)`` fields (default: every column)."""
    if fields is None:
        fields = default_fields()
    return pa.schema([pa.field(name, kind, nullable) for name, nullable, kind in fields])


def _repeating_rows(frames: Sequence[Any], lens: List[int], names: pa.Array, headers: pa.Array) -> List[int]:
    """The rows whose frame repeats a header name.

    With numpy (PySpark's pandas brings it) this is a few vectorized steps
    over the whole batch; otherwise each frame's first-wins view
    (``Frame.header_map()``) is compared with its header count.
    """
    try:
        import numpy as np
    except ImportError:  # numpy comes with pandas, but the stomp source itself does not need pandas
        return [i for i, frame in enumerate(frames) if len(frame.header_map()) != lens[i]]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    encoded = pc.dictionary_encode(names)
    distinct = len(encoded.dictionary)
    # one number per (row, name): a repeat within a row is a repeated number
    keys = pc.list_parent_indices(headers).to_numpy() * distinct + encoded.indices.to_numpy()
    if len(lens) * distinct <= 1 << 22:
        repeated = np.flatnonzero(np.bincount(keys) > 1)
    else:
        ordered = np.sort(keys)
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    return [int(row) for row in np.unique(repeated // distinct)]


def _first_wins(hs: List[Any], lens: List[int], flat: pa.StructArray, repeated: List[int]) -> Tuple[Any, ...]:
    """Keys, values and offsets of the header_map column: the first header of each name wins.

    Only the rows that repeat a name (``repeated``) lose entries; the other
    rows share the headers column's arrays.
    """
    names, values = flat.field(0), flat.field(1)
    if not repeated:
        return names, values, None
    keep = [True] * len(flat)
    new_lens = list(lens)
    starts = list(accumulate(lens, initial=0))
    for i in repeated:
        seen = set()
        start = starts[i]
        for j, (name, _) in enumerate(hs[i]):
            if name in seen:
                keep[start + j] = False
                new_lens[i] -= 1
            else:
                seen.add(name)
    mask = pa.array(keep, pa.bool_())
    return names.filter(mask), values.filter(mask), _offsets(new_lens)


def _strings(kind: pa.DataType, count: int, offsets: bytes, data: bytes) -> pa.Array:
    """A string or binary array over buffers in Arrow's layout, without copying them."""
    return pa.Array.from_buffers(kind, count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


class BatchBuilder:
    """Builds the record batches of one file (or one split of it).

    The codec's ``to_columns`` lays the frames out in Arrow's buffers (in C,
    with the compiled twin); this class wraps them as arrays without copying.
    """

    def __init__(self, fields: Sequence[Field], path: str, codec: str, to_columns: Any = None) -> None:
        self.schema = arrow_schema(fields)
        self.names = [name for name, _, _ in fields]
        self.types = {name: kind for name, _, kind in fields}
        self.path = path
        self.codec = codec
        if to_columns is None:
            import fastframe

            to_columns = fastframe.to_columns
        self.to_columns = to_columns

    def _constant(self, value: str, n: int) -> pa.Array:
        return pa.repeat(pa.scalar(value, pa.string()), n)

    def frames(self, frames: Sequence[Any], offsets: Sequence[int], first_index: int) -> pa.RecordBatch:
        """A batch of frames; ``offsets`` are their absolute offsets in the file."""
        n = len(frames)
        names = self.names
        columns: Dict[str, pa.Array] = {}
        (command_offsets, command_data, header_offsets, name_offsets, name_data, value_offsets, value_data,
         body_offsets, body_data) = self.to_columns(frames)  # fmt: skip
        if "headers" in names or "header_map" in names:
            count = len(name_offsets) // 4 - 1
            list_offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(header_offsets)])
            headers_type = self.types.get("headers", HEADERS_TYPE)
            struct_type = headers_type.value_type
            flat = pa.StructArray.from_arrays(
                [_strings(pa.string(), count, name_offsets, name_data),
                 _strings(pa.string(), count, value_offsets, value_data)],
                fields=[struct_type.field(0), struct_type.field(1)],
            )  # fmt: skip
            headers = pa.ListArray.from_arrays(list_offsets, flat, type=headers_type)
            if "headers" in names:
                columns["headers"] = headers
            if "header_map" in names:
                hs = [frame.headers for frame in frames]
                lens = list(map(len, hs))
                repeated = _repeating_rows(frames, lens, flat.field(0), headers)
                keys, items, map_offsets = _first_wins(hs, lens, flat, repeated)
                columns["header_map"] = pa.MapArray.from_arrays(
                    list_offsets if map_offsets is None else map_offsets, keys, items, type=self.types["header_map"]
                )
        for name in names:
            if name in columns:
                continue
            if name == "path":
                columns[name] = self._constant(self.path, n)
            elif name == "offset":
                columns[name] = pa.array(offsets, pa.int64())
            elif name == "frame_index":
                columns[name] = pa.array(range(first_index, first_index + n), pa.int64())
            elif name == "command":
                columns[name] = _strings(pa.string(), n, command_offsets, command_data)
            elif name == "body":
                columns[name] = _strings(pa.binary(), n, body_offsets, body_data)
            elif name in ("error_code", "error_reason"):
                columns[name] = pa.nulls(n, pa.string())
            elif name == "codec":
                columns[name] = self._constant(self.codec, n)
        return pa.RecordBatch.from_arrays([columns[name] for name in names], schema=self.schema)

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
        arrays = [pa.array([values.get(name)], self.types[name]) for name in self.names]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
