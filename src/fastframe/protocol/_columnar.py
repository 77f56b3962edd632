"""A columnar subscription's reads: MESSAGE rows stay columns, anything else becomes a Frame again.

:meth:`fastframe.protocol.ClientConnection.route_columns` decodes a connection with a
:class:`fastframe.ColumnDecoder`, so a read's MESSAGEs cost no Python object each. The everyday
read holds everyday MESSAGEs only and goes to the subscription whole (:func:`everyday_read`: two
bytes comparisons and two passes over the header names, in C with the compiled twin); a read with
anything else in it (the SUBSCRIBE's RECEIPT, an ERROR, a MESSAGE the general path must judge) is
rebuilt as frames, its runs of everyday MESSAGEs made columns again (:func:`split_read`), so the
order holds.
"""

from __future__ import annotations

import struct
import sys
from array import array
from functools import lru_cache
from typing import Any, List, Sequence, Union

from ..codec import Columns, Frame, first_row_without, to_columns

__all__ = ["everyday_read", "frames_of", "message_columns", "split_read"]

_MESSAGE = b"MESSAGE"


@lru_cache(maxsize=64)  # a stream's reads mostly hold the same number of rows
def _message_offsets(rows: int) -> bytes:
    """The command offsets of ``rows`` rows that are each ``MESSAGE`` (int32, little-endian)."""
    return struct.pack(f"<{rows + 1}i", *range(0, len(_MESSAGE) * rows + 1, len(_MESSAGE)))


def everyday_read(columns: Columns, subscription: str) -> bool:
    """Whether every row of ``columns`` is an everyday MESSAGE of ``subscription``: the command (its
    data and the offsets that cut it), a ``message-id``, and ``subscription`` its first such header (a
    row without them takes the general path, which says what is wrong with it)."""
    rows = columns.rows
    return (
        columns.command_data == _MESSAGE * rows
        and columns.command_offsets == _message_offsets(rows)
        and first_row_without(columns, "message-id") == rows
        and first_row_without(columns, "subscription", subscription) == rows
    )


def _int32s(data: bytes) -> "array[int]":
    values = array("i", data)
    if sys.byteorder == "big":  # the columns are little-endian, as Arrow's are
        values.byteswap()
    return values


def frames_of(columns: Columns) -> List[Any]:
    """Each row of ``columns`` as a :class:`fastframe.Frame` (the rare path: a Python loop per header)."""
    commands, headers, names, values, bodies = (
        _int32s(columns.command_offsets),
        _int32s(columns.header_offsets),
        _int32s(columns.name_offsets),
        _int32s(columns.value_offsets),
        _int32s(columns.body_offsets),
    )
    name_data, value_data = columns.name_data, columns.value_data
    frames = []
    for row in range(columns.rows):
        pairs = tuple(
            (name_data[names[h] : names[h + 1]].decode(), value_data[values[h] : values[h + 1]].decode())
            for h in range(headers[row], headers[row + 1])
        )
        command = columns.command_data[commands[row] : commands[row + 1]].decode()
        frames.append(Frame(command, pairs, columns.body_data[bodies[row] : bodies[row + 1]]))
    return frames


def message_columns(messages: Sequence[Any]) -> Columns:
    """MESSAGE events (:class:`fastframe.protocol.Message`, e.g. a columnar subscription's that came
    as events while closing down) as one Columns, so a columnar consumer gets one type."""
    return to_columns([message.frame for message in messages])


def split_read(columns: Columns, subscription: str) -> List[Union[Columns, Any]]:
    """``columns`` as items in their order: each run of everyday MESSAGEs of ``subscription`` one
    :class:`fastframe.Columns` (``to_columns`` of the run: its ``frame_offsets`` are -1), every other
    row a Frame (a MESSAGE without a ``message-id`` or of another subscription included: the general
    path judges it)."""
    items: List[Union[Columns, Any]] = []
    run: List[Any] = []
    for frame in frames_of(columns):
        if (
            frame.command == "MESSAGE"
            and frame.get("message-id") is not None
            and frame.get("subscription") == subscription
        ):
            run.append(frame)
            continue
        if run:
            items.append(to_columns(run))
            run = []
        items.append(frame)
    if run:
        items.append(to_columns(run))
    return items
