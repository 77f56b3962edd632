"""Rows of columns in Arrow's layout: to_columns and ColumnDecoder, the same from both twins."""

from __future__ import annotations

import tracemalloc
from array import array
from types import ModuleType
from typing import Any, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastframe
from _strategies import column_rows
from conftest import compiled_twin
from fastframe.archive import generate_stream
from fastframe.codec import _codec_py as P

STREAM = (
    b"CONNECTED\nversion:1.2\n\n\0\n"
    b"MESSAGE\ndestination:/q\nx:\xc3\xa9\\c\nx:again\ncontent-length:3\n\na\0b\0"
    b"RECEIPT\nreceipt-id:7\n\n\0"
)


def _frame_rows(frames: List[Any]) -> List[Any]:
    return [(f.command, f.headers, f.body, -1 if f.offset is None else f.offset) for f in frames]


def _drain(decoder: Any, **limits: Any) -> List[Any]:
    rows = []
    while decoder.rows:
        rows += column_rows(decoder.take(**limits))
    return rows


# --------------------------------------------------------------------------- to_columns


def test_columns_hold_every_frame(codec: ModuleType) -> None:
    frames = codec.decode(STREAM)
    columns = codec.to_columns(frames)
    assert isinstance(columns, fastframe.Columns) and columns.rows == 3
    assert all(type(buffer) is bytes for buffer in columns[1:])
    assert column_rows(columns) == _frame_rows(frames)
    assert array("q", columns.frame_offsets).tolist() == [0, 25, 85]
    # the MESSAGE repeats "x": the map keeps the first
    assert columns.map_keep == bytes([1, 1, 1, 0, 1, 1])
    assert array("i", columns.map_offsets).tolist() == [0, 1, 4, 5]


def test_no_repeated_name_means_no_map_buffers(codec: ModuleType) -> None:
    columns = codec.to_columns(codec.decode(b"SEND\na:1\nb:2\n\n\0SEND\na:1\n\n\0"))
    assert columns.map_offsets is None and columns.map_keep is None


def test_no_frames(codec: ModuleType) -> None:
    zero = b"\0\0\0\0"
    assert codec.to_columns([]) == (0, b"", zero, b"", zero, zero, b"", zero, b"", zero, b"", None, None)


def test_frames_made_by_hand_and_by_the_other_twin(codec: ModuleType) -> None:
    other = P if codec is not P else compiled_twin()
    frames = other.decode(b"SEND\na:b\n\nhi\0") + [codec.Frame("SEND", [("a", "é")]), other.Frame("ACK")]
    assert column_rows(codec.to_columns(frames)) == [
        ("SEND", (("a", "b"),), b"hi", 0),
        ("SEND", (("a", "é"),), b"", -1),
        ("ACK", (), b"", -1),
    ]


def test_names_alike_but_not_equal_are_not_repeats(codec: ModuleType) -> None:
    # same length, same first and last byte: only the bytes between tell them apart
    headers = [("axc", "1"), ("abc", "2"), ("abc", "3"), ("", "4"), ("", "5"), ("ab", "6"), ("ba", "7")]
    columns = codec.to_columns([codec.Frame("SEND", headers)])
    assert columns.map_keep == bytes([1, 1, 0, 1, 0, 1, 1])
    assert array("i", columns.map_offsets).tolist() == [0, 5]


def test_many_repeats_take_the_sorting_path(codec: ModuleType) -> None:
    # past 16 headers the compiled twin sorts names instead of comparing pairs
    names = [f"h{i % 7}" for i in range(40)] + ["a" * 50, "b", "a" * 50, "h3"]
    frame = codec.Frame("SEND", [(name, str(i)) for i, name in enumerate(names)])
    columns = codec.to_columns([frame, frame])
    expected_keep = [0 if name in names[:i] else 1 for i, name in enumerate(names)]
    assert columns.map_keep == bytes(expected_keep * 2)
    assert array("i", columns.map_offsets).tolist() == [0, 9, 18]
    assert column_rows(columns) == _frame_rows([frame, frame])


TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            TEXT.filter(bool),
            st.lists(st.tuples(st.sampled_from(["a", "b", "é", "x" * 20]) | TEXT, TEXT), max_size=24),
            st.binary(max_size=40),
        )
    )
)
def test_twins_agree(items: List[Any]) -> None:
    C = compiled_twin()
    frames = [C.Frame(command, headers, body) for command, headers, body in items]
    columns = C.to_columns(frames)
    assert columns == P.to_columns(frames)
    assert column_rows(columns) == _frame_rows(frames)


# --------------------------------------------------------------------------- ColumnDecoder


def test_column_decoder_rows_are_the_decoders_frames(codec: ModuleType) -> None:
    data = generate_stream(300, seed=11)
    frames = codec.decode(data)
    decoder = codec.ColumnDecoder()
    for start in range(0, len(data), 1000):
        decoder.feed(data[start : start + 1000])
    decoder.close()
    assert decoder.rows == 300 and decoder.buffered == 0 and decoder.bytes_fed == len(data)
    plain = codec.Decoder()
    plain.feed(data)
    assert decoder.heartbeats == plain.heartbeats > 0
    assert _drain(decoder) == _frame_rows(frames)
    assert decoder.rows == 0 and decoder.pending_bytes == 0


def test_column_decoder_counts_heartbeats_like_the_decoder(codec: ModuleType) -> None:
    data = b"\n\r\nSEND\n\n\0\n\n"
    decoder, plain = codec.ColumnDecoder(), codec.Decoder()
    decoder.feed(data)
    plain.feed(data)
    assert decoder.heartbeats == plain.heartbeats == 4


def test_feed_returns_the_rows_waiting(codec: ModuleType) -> None:
    decoder = codec.ColumnDecoder()
    assert decoder.feed(b"SEND\n\n\0SEN") == 1
    assert decoder.feed(b"D\n\n\0") == 2
    assert decoder.pending_bytes == 8
    assert decoder.take(1).rows == 1 and decoder.rows == 1 and decoder.pending_bytes == 4


def test_take_is_capped_by_rows_and_bytes(codec: ModuleType) -> None:
    data = generate_stream(200, seed=5)
    expected = _frame_rows(codec.decode(data))
    decoder = codec.ColumnDecoder()
    decoder.feed(data)
    batches, sizes = [], []
    while decoder.rows:
        before = decoder.pending_bytes
        by_rows = len(batches) % 2 == 0  # alternately capped by rows and by bytes
        columns = decoder.take(max_rows=30) if by_rows else decoder.take(max_bytes=2000)
        batches.append(columns)
        size = len(columns.command_data) + len(columns.name_data) + len(columns.value_data) + len(columns.body_data)
        assert before - decoder.pending_bytes == size
        if by_rows:
            assert columns.rows == min(30, columns.rows + decoder.rows)
        else:
            assert size <= 2000 or columns.rows == 1
            sizes.append(size)
    assert [row for b in batches for row in column_rows(b)] == expected
    assert max(sizes) > 1500  # the byte cap is approached, not just respected


def test_a_frame_larger_than_max_bytes_comes_alone(codec: ModuleType) -> None:
    decoder = codec.ColumnDecoder()
    decoder.feed(b"SEND\n\n" + b"x" * 100 + b"\0SEND\n\n\0")
    assert decoder.take(max_bytes=10).rows == 1
    assert decoder.take(max_bytes=10).rows == 1


@pytest.mark.parametrize(
    "limits, error",
    [({"max_rows": 0}, ValueError), ({"max_bytes": -1}, ValueError), ({"max_rows": 1.5}, TypeError),
     ({"max_bytes": True}, TypeError)],
)  # fmt: skip
def test_take_checks_its_limits(codec: ModuleType, limits: Any, error: type) -> None:
    with pytest.raises(error):
        codec.ColumnDecoder().take(**limits)


def test_take_with_nothing_waiting(codec: ModuleType) -> None:
    decoder = codec.ColumnDecoder()
    decoder.feed(b"SEND\na:b\n")  # a frame in progress is not a row
    assert decoder.take() == codec.to_columns([])
    decoder.feed(b"\nbody\0")
    assert column_rows(decoder.take()) == [("SEND", (("a", "b"),), b"body", 0)]


def test_rows_before_an_error_stay_to_be_taken(codec: ModuleType) -> None:
    decoder = codec.ColumnDecoder()
    with pytest.raises(fastframe.MissingNullError) as caught:
        decoder.feed(b"SEND\n\n\0SEND\nx:1\n\n\0SEND\ncontent-length:1\n\nab\0")
    assert caught.value.offset == 42 and caught.value.frames == []
    assert [row[1] for row in _drain(decoder)] == [(), (("x", "1"),)]
    with pytest.raises(fastframe.MissingNullError):
        decoder.feed(b"SEND\n\n\0")  # refused until reset
    decoder.reset()
    decoder.feed(b"ACK\nid:1\n\n\0")
    assert _drain(decoder) == [("ACK", (("id", "1"),), b"", 0)]


def test_reset_drops_rows_and_the_frame_in_progress(codec: ModuleType) -> None:
    decoder = codec.ColumnDecoder()
    decoder.feed(b"SEND\n\n\0SEND\nname:value\n")
    decoder.reset()
    assert decoder.rows == 0 and decoder.pending_bytes == 0 and decoder.bytes_fed == 0
    decoder.feed(b"ACK\n\n\0")
    assert _drain(decoder) == [("ACK", (), b"", 0)]


def test_options_and_errors_are_the_decoders(codec: ModuleType) -> None:
    bad = b"SEND\nk:a\\tb\n\n\0"
    with pytest.raises(fastframe.InvalidEscapeError) as caught:
        codec.ColumnDecoder().feed(bad)
    with pytest.raises(fastframe.InvalidEscapeError) as plain:
        codec.Decoder().feed(bad)
    assert (caught.value.offset, str(caught.value)) == (plain.value.offset, str(plain.value))
    decoder = codec.ColumnDecoder(keep_undefined_escapes=True, version="1.2")
    decoder.feed(bad + b"CONNECT\nlogin:a\\cb\n\n\0")
    assert [row[1] for row in _drain(decoder)] == [(("k", "a\\tb"),), (("login", "a\\cb"),)]
    with pytest.raises(fastframe.LimitExceededError):
        codec.ColumnDecoder(max_header_count=1).feed(b"SEND\na:1\nb:2\n\n\0")


def test_no_heartbeat_events(codec: ModuleType) -> None:
    with pytest.raises(ValueError, match="heart-beat"):
        codec.ColumnDecoder(heartbeat_events=True)
    # Arrow string columns hold UTF-8: bytes that are not cannot be kept
    with pytest.raises(ValueError, match="keep_invalid_utf8"):
        codec.ColumnDecoder(keep_invalid_utf8=True)
    with pytest.raises(TypeError):
        codec.ColumnDecoder(no_such_option=1)


def test_escaped_and_non_ascii_fields_are_unescaped_utf8(codec: ModuleType) -> None:
    stream = "MESSAGE\nnäme:v\\\\al\\nue\\c☃\nplain:é\n\n\0".encode()
    decoder = codec.ColumnDecoder()
    decoder.feed(stream)
    assert _drain(decoder) == [("MESSAGE", (("näme", "v\\al\nue:☃"), ("plain", "é")), b"", 0)]


def test_rows_waiting_are_compacted(codec: ModuleType) -> None:
    # taking one row at a time from many stays linear, and memory is given back
    data = generate_stream(2000, seed=8)
    expected = _frame_rows(codec.decode(data))
    decoder = codec.ColumnDecoder()
    decoder.feed(data)
    rows = []
    while decoder.rows:
        rows += column_rows(decoder.take(1))
    assert rows == expected


def test_memory_is_bounded_by_what_waits(codec: ModuleType) -> None:
    frame = b"SEND\ncontent-length:1000000\n\n" + b"x" * 1_000_000 + b"\0"
    decoder = codec.ColumnDecoder()
    tracemalloc.start()
    try:
        for _ in range(40):
            decoder.feed(frame)
            decoder.take()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 12_000_000  # a few copies of one frame, not 40 MB


@pytest.mark.parametrize("count", [17, 64, 301])
def test_first_wins_map_of_many_headers(codec: ModuleType, count: int) -> None:
    # past 16 headers the compiled twin sorts the names: equal names must keep wire order
    import random

    rng = random.Random(count)
    names = ["n%d" % rng.randrange(count // 3) for _ in range(count)] + ["x" * rng.randrange(1, 4) for _ in range(9)]
    rng.shuffle(names)
    headers = [(name, str(i)) for i, name in enumerate(names)]
    frame = codec.Frame("SEND", headers, b"")
    columns = codec.to_columns([frame])
    seen = set()
    keep = []
    for name, _ in headers:
        keep.append(0 if name in seen else 1)
        seen.add(name)
    assert columns.map_keep == bytes(keep)
    decoder = codec.ColumnDecoder()
    decoder.feed(codec.encode(frame))
    assert decoder.take().map_keep == bytes(keep)


# --------------------------------------------------------------------------- first_row_without


def _first_row_model(frames: List[Any], name: str, value: Any) -> int:
    """What first_row_without says, by Frame.get: the first row lacking the header (or its value)."""
    for row, frame in enumerate(frames):
        got = frame.get(name)
        if got is None or (value is not None and got != value):
            return row
    return len(frames)


def test_first_row_without_reads_the_first_header_of_a_name(codec: ModuleType) -> None:
    frames = [
        codec.Frame("MESSAGE", [("subscription", "s"), ("message-id", "1")]),
        codec.Frame("MESSAGE", [("message-id", "2"), ("subscription", "s"), ("subscription", "t")]),
        codec.Frame("MESSAGE", [("subscription", "t"), ("subscription", "s"), ("message-id", "3")]),
        codec.Frame("MESSAGE", [("subscriptio", "s"), ("subscriptions", "s")]),
    ]
    columns = codec.to_columns(frames)
    assert codec.first_row_without(columns, "message-id") == 3
    assert codec.first_row_without(columns, "subscription", "s") == 2  # the first of the name decides
    assert codec.first_row_without(columns, "subscription", "é") == 0
    assert codec.first_row_without(columns, "x") == 0
    assert codec.first_row_without(codec.to_columns(frames[:2]), "subscription", "s") == 2
    assert codec.first_row_without(codec.to_columns([]), "x") == 0


def test_first_row_without_refuses_columns_whose_offsets_lie(codec: ModuleType) -> None:
    columns = codec.to_columns([codec.Frame("SEND", [("a", "1"), ("b", "2")]), codec.Frame("SEND", [("a", "3")])])
    lies = {
        "header_offsets holds fewer": columns._replace(rows=3),
        "hold fewer offsets than headers": columns._replace(name_offsets=columns.name_offsets[:8]),
        "do not rise": columns._replace(header_offsets=b"\2\0\0\0\1\0\0\0\3\0\0\0"),
        "name_offsets point outside": columns._replace(name_data=b"a"),
        "value_offsets point outside": columns._replace(value_data=b""),
    }
    for words, lie in lies.items():
        with pytest.raises(ValueError, match=words):
            codec.first_row_without(lie, "b" if "name_offsets" in words else "a", "1")
    with pytest.raises(TypeError, match="must be bytes"):
        codec.first_row_without(columns._replace(name_data=bytearray(columns.name_data)), "a")
    with pytest.raises(TypeError, match="^the header name must be a str, not bytes$"):
        codec.first_row_without(columns, b"a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^the header value must be a str, not int$"):
        codec.first_row_without(columns, "a", 1)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(["s", "id", "s ", "é", "ss"]), st.sampled_from(["", "1", "é", "2"])), max_size=5
        )
    ),
    st.sampled_from(["s", "id", "é", "x"]),
    st.sampled_from([None, "", "1", "é"]),
    st.data(),
)
def test_first_row_without_twins_agree_with_the_model(rows: List[Any], name: str, value: Any, data: Any) -> None:
    C = compiled_twin()
    frames = [C.Frame("MESSAGE", headers) for headers in rows]
    columns = C.to_columns(frames)
    want = _first_row_model(frames, name, value)
    assert C.first_row_without(columns, name, value) == P.first_row_without(columns, name, value) == want
    # cut: a byte of a buffer dropped or changed, the same answer or the same error from both
    field = data.draw(st.sampled_from(["header_offsets", "name_offsets", "name_data", "value_offsets", "value_data"]))
    buffer = bytearray(getattr(columns, field))
    if buffer:
        buffer[data.draw(st.integers(0, len(buffer) - 1))] = data.draw(st.integers(0, 255))
    lie = columns._replace(**{field: bytes(buffer[: data.draw(st.integers(0, len(buffer)))])})
    results = []
    for twin in (C, P):
        try:
            results.append(twin.first_row_without(lie, name, value))
        except ValueError as exc:
            results.append(str(exc))
    assert results[0] == results[1]
