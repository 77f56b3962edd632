"""to_columns: frames laid out in Arrow's buffers, the same from both twins."""

from __future__ import annotations

from array import array
from types import ModuleType
from typing import Any, List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from fastframe import _codec_c as C
from fastframe import _codec_py as P


def _unpack(offsets: bytes, data: bytes) -> List[bytes]:
    bounds = array("i", offsets)
    return [data[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]


def _rows(columns: Tuple[bytes, ...]) -> List[Any]:
    commands = _unpack(columns[0], columns[1])
    header_bounds = array("i", columns[2])
    names = _unpack(columns[3], columns[4])
    values = _unpack(columns[5], columns[6])
    bodies = _unpack(columns[7], columns[8])
    rows = []
    for i, command in enumerate(commands):
        start, stop = header_bounds[i], header_bounds[i + 1]
        headers = tuple((names[j].decode(), values[j].decode()) for j in range(start, stop))
        rows.append((command.decode(), headers, bodies[i]))
    return rows


def test_columns_hold_every_frame(codec: ModuleType) -> None:
    stream = (
        b"CONNECTED\nversion:1.2\n\n\0\n"
        b"MESSAGE\ndestination:/q\nx:\xc3\xa9\\c\nx:again\ncontent-length:3\n\na\0b\0"
        b"RECEIPT\nreceipt-id:7\n\n\0"
    )
    frames = codec.decode(stream)
    columns = codec.to_columns(frames)
    assert len(columns) == 9 and all(type(column) is bytes for column in columns)
    assert _rows(columns) == [(f.command, f.headers, f.body) for f in frames]


def test_no_frames(codec: ModuleType) -> None:
    zero = b"\0\0\0\0"
    assert codec.to_columns([]) == (zero, b"", zero, zero, b"", zero, b"", zero, b"")


def test_frames_from_the_other_twin(codec: ModuleType) -> None:
    other = P if codec is C else C
    frames = other.decode(b"SEND\na:b\n\nhi\0")
    assert _rows(codec.to_columns(frames)) == [("SEND", (("a", "b"),), b"hi")]


TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(TEXT.filter(bool), st.lists(st.tuples(TEXT, TEXT), max_size=5), st.binary(max_size=40))))
def test_twins_agree(items: List[Any]) -> None:
    frames = [C.Frame(command, headers, body) for command, headers, body in items]
    columns = C.to_columns(frames)
    assert columns == P.to_columns(frames)
    assert _rows(columns) == [(f.command, f.headers, f.body) for f in frames]
