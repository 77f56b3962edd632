"""The columns of a read: names, Spark types, nullability, meaning (no pyarrow, no pyspark needed)."""

from __future__ import annotations

from typing import Tuple

#: (name, Spark type, nullable, meaning) of every column, in order.
COLUMNS: Tuple[Tuple[str, str, bool, str], ...] = (
    ("path", "string", False, "the file the row comes from (as listed: a path or a URI)"),
    ("offset", "bigint", False, "byte offset of the frame's first byte in the (decompressed) file; "
     "for an error row, of the offending byte"),
    ("frame_index", "bigint", False, "0-based number of the frame in its file (an error row takes the next number)"),
    ("command", "string", True, "the frame's command; null on an error row"),
    ("headers", "array<struct<name:string,value:string>>", True,
     "every header in wire order, repeats kept, unescaped; null on an error row"),
    ("header_map", "map<string,string>", True,
     "the headers with the first occurrence of each name winning (as STOMP says); null on an error row"),
    ("body", "binary", True, "the body octets; null on an error row"),
    ("error_code", "string", True, "null, or the decode error's code (e.g. missing-null, truncated)"),
    ("error_reason", "string", True, "null, or why the file could not be decoded past this offset"),
    ("codec", "string", False, "the fastframe twin that decoded the row: c or python"),
    ("received_at", "timestamp", True, "when a capture received the frame's last byte (its .fftimes sidecar, "
     "written by fastframe record); null without one, and on an error row"),
)  # fmt: skip

COLUMN_NAMES = tuple(c[0] for c in COLUMNS)
SPARK_DDL = ", ".join(f"{name} {kind}{'' if nullable else ' NOT NULL'}" for name, kind, nullable, _ in COLUMNS)
#: Columns that are null on error rows: a schema must not declare them NOT NULL.
ERROR_NULL = frozenset({"command", "headers", "header_map", "body", "error_code", "error_reason", "received_at"})
