"""Frames as columns in Arrow's memory layout: what both twins hand to data-frame libraries.

``to_columns(frames)`` and ``ColumnDecoder.take()`` return a :class:`Columns`.
Every buffer is a ``bytes`` object ready to wrap, without a copy, as an Arrow
array (``pyarrow.Array.from_buffers``): offsets are little-endian int32 (one
more than the items, starting at 0), data is UTF-8 (or the body bytes).
"""

from __future__ import annotations

import sys
from struct import Struct
from typing import NamedTuple, Optional, Tuple

_PAIR = Struct("<2i")  # two neighbouring offsets: where an item starts and ends

#: Above this, an int32 offset overflows: an Arrow string or binary column holds less than 2 GiB.
MAX_COLUMN_BYTES = 2**31 - 1

TOO_LARGE_FOR_COLUMNS = "a column passes 2 GiB: give to_columns fewer frames"
ROW_TOO_LARGE = "one frame holds more than 2 GiB: it does not fit an Arrow column"
NO_HEARTBEAT_EVENTS = (
    "ColumnDecoder has no heart-beat events (its rows are frames); its heartbeats attribute counts them"
)
#: first_row_without() of columns whose buffers do not hold what their offsets say (ValueError).
NOT_COLUMNS = "columns are not in Arrow's layout: {}"
#: first_row_without() of a header name, or a value, that is not a str (TypeError).
NOT_TEXT = "the header {} must be a str, not {}"
NO_INVALID_UTF8 = (
    "ColumnDecoder cannot keep invalid UTF-8 (Arrow string columns hold UTF-8): "
    "decode such frames with Decoder(keep_invalid_utf8=True)"
)


class Columns(NamedTuple):
    """Rows of frames, column by column, in Arrow's layout."""

    #: number of rows (frames)
    rows: int
    #: little-endian int64 per row: the frame's stream offset (-1 for a frame made by hand)
    frame_offsets: bytes
    command_offsets: bytes
    command_data: bytes
    #: int32 offsets into the flattened headers (one list of headers per row, in wire order)
    header_offsets: bytes
    name_offsets: bytes
    name_data: bytes
    value_offsets: bytes
    value_data: bytes
    body_offsets: bytes
    body_data: bytes
    #: None when no row repeats a header name: then the first-wins map of a row is its headers.
    #: Otherwise the map's int32 offsets (rows' counts without repeats) ...
    map_offsets: Optional[bytes]
    #: ... and one byte per flattened header: 1 when it is the first of its name in its row, else 0.
    map_keep: Optional[bytes]

    def header(self, row: int, name: str) -> Optional[str]:
        """The first value of header ``name`` in row ``row`` (``None``: the row has none); a look at
        one row's headers, for the few rows a reader picks (Arrow's compute is for whole columns)."""
        if not 0 <= row < self.rows:
            raise IndexError(f"row {row} is not among the {self.rows} rows")
        first, end = _PAIR.unpack_from(self.header_offsets, 4 * row)
        key, names = name.encode(), self.name_data
        for index in range(first, end):
            start, stop = _PAIR.unpack_from(self.name_offsets, 4 * index)
            if stop - start == len(key) and names.startswith(key, start):
                start, stop = _PAIR.unpack_from(self.value_offsets, 4 * index)
                return self.value_data[start:stop].decode()
        return None


def take_limits(max_rows: Optional[int], max_bytes: Optional[int]) -> Tuple[int, int]:
    """``ColumnDecoder.take``'s limits, checked: (rows, bytes), the bytes capped at MAX_COLUMN_BYTES."""
    for name, value in (("max_rows", max_rows), ("max_bytes", max_bytes)):
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} must be at least 1, not {value}")
    rows = sys.maxsize if max_rows is None else min(max_rows, sys.maxsize)
    size = MAX_COLUMN_BYTES if max_bytes is None else min(max_bytes, MAX_COLUMN_BYTES)
    return rows, size
