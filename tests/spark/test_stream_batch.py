"""messages_to_batch (the broker source's Arrow rows) against the list-building implementation it replaced.

The reference below is that implementation, kept as it was: the new one builds
the columns from the codec's ``to_columns`` in one pass and must give the same
schema, values and nulls, with either twin, poison rows included.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import time
from itertools import accumulate, chain
from types import ModuleType
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from fastframe.aio import Message
from fastframe.spark import _stream_schema
from fastframe.spark._stream_schema import (
    INVALID_UTF8,
    _poison,
    _text,
    _text_headers,
    columns_to_batch,
    messages_to_batch,
    stream_arrow_schema,
)


def reference_batch(
    destination: str, messages: Sequence[Any], offsets: Optional[Sequence[int]], codec: str, schema: Any = None
) -> Any:
    """messages_to_batch as it was: Python lists per message, made into arrays."""
    schema = schema or stream_arrow_schema()
    n = len(messages)
    rows = [message.headers for message in messages]
    counts = list(map(len, rows))
    flat = list(chain.from_iterable(rows))
    names, values = (list(column) for column in zip(*flat)) if flat else ([], [])
    header_offsets = list(accumulate(counts, initial=0))
    headers_type = schema.field("headers").type
    struct = headers_type.value_type
    poison: Optional[List[Optional[Tuple[str, bytes]]]] = None
    try:
        name_array, value_array = pa.array(names, pa.string()), pa.array(values, pa.string())
    except UnicodeEncodeError:
        poison = [_poison(row) for row in rows]
        rows = [_text_headers(row) if bad else row for row, bad in zip(rows, poison)]
        flat = list(chain.from_iterable(rows))
        names, values = (list(column) for column in zip(*flat)) if flat else ([], [])
        name_array, value_array = pa.array(names, pa.string()), pa.array(values, pa.string())
    pairs = pa.StructArray.from_arrays([name_array, value_array], fields=[struct.field(0), struct.field(1)])
    offsets_array = pa.array(header_offsets, pa.int32())
    headers = pa.ListArray.from_arrays(offsets_array, pairs, type=headers_type)
    firsts = [dict(reversed(pairs_of_row)) for pairs_of_row in rows]
    if all(len(first) == count for first, count in zip(firsts, counts)):
        map_names, map_values, map_offsets = name_array, value_array, offsets_array
    else:
        map_names = pa.array([name for first in firsts for name in first], pa.string())
        map_values = pa.array([value for first in firsts for value in first.values()], pa.string())
        map_offsets = pa.array(list(accumulate(map(len, firsts), initial=0)), pa.int32())
    header_map = pa.MapArray.from_arrays(map_offsets, map_names, map_values, type=schema.field("header_map").type)
    bodies = [message.body for message in messages]
    ids = [message.message_id for message in messages]
    first_sub = messages[0].get("subscription") if messages else None
    if poison is not None:
        ids = [_text(value) if value is not None else None for value in ids]
        first_sub = _text(first_sub) if first_sub is not None else None
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
        "error_code": pa.nulls(n, pa.string()),
        "error_reason": pa.nulls(n, pa.string()),
        "raw_headers": pa.nulls(n, pa.binary()),
        "received_at": pa.repeat(pa.scalar(now, schema.field("received_at").type), n),
        "codec": pa.repeat(pa.scalar(codec, pa.string()), n),
    }
    if poison is not None:
        columns["error_code"] = pa.array([INVALID_UTF8 if bad else None for bad in poison], pa.string())
        columns["error_reason"] = pa.array([bad[0] if bad else None for bad in poison], pa.string())
        columns["raw_headers"] = pa.array([bad[1] if bad else None for bad in poison], pa.binary())
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


def _messages(codec: ModuleType, data: bytes) -> List[Message]:
    """The aio Messages of MESSAGE frames, built as the client builds them (the first header of each name)."""
    frames = codec.decode(data, keep_invalid_utf8=True)
    return [_message(frame) for frame in frames]


def _message(frame: Any) -> Message:
    return Message(
        frame,
        frame.get("subscription"),
        frame.get("message-id"),
        frame.get("ack") or frame.get("message-id"),
        frame.get("destination"),
        client=None,
        session=None,
    )


ORDINARY = b"".join(
    b"MESSAGE\nsubscription:s\ndestination:/q\nmessage-id:m-%d\nredelivered:%b\ncontent-length:%d\n\n%b\0"
    % (i, b"true" if i % 3 == 0 else b"false", len(body), body)
    for i, body in enumerate([b"hello", b"", b"nul\0in\0the\0body", b"\0", b"x" * 300])
)
REPEATS = (
    # the first of each name wins in header_map and redelivered; headers keeps them all
    b"MESSAGE\nsubscription:s\nmessage-id:a\nredelivered:false\nredelivered:true\nn:1\nn:2\nmessage-id:b\n\nb1\0"
    b"MESSAGE\nsubscription:s\nmessage-id:c\nredelivered:true\nredelivered:false\nz:\nz:x\n\n\0"
    b"MESSAGE\nsubscription:s\nmessage-id:d\nx:1\ny:2\n\nno repeats in this row\0"
    # more than 16 headers: the compiled twin sorts them to find repeats
    b"MESSAGE\nsubscription:s\nmessage-id:e\n" + b"".join(b"h%d:%d\n" % (i % 7, i) for i in range(30)) + b"\n\0"
)
ESCAPES = (
    b"MESSAGE\nsubscription:s\x5cc1\nmessage-id:m\x5cn1\nk\x5cc:v\x5cr\x5cn\x5c\x5c\nempty:\n"
    b"caf\xc3\xa9:\xe2\x82\xac\xf0\x9f\x98\x80\n\nbody\0"
)
NO_IDS = b"MESSAGE\ndestination:/q\n\nno subscription, no message-id\0MESSAGE\n\n\0MESSAGE\nredelivered:TRUE\n\nx\0"
POISON = (
    b"MESSAGE\nsubscription:s\nmessage-id:1\nn:1\n\nclean\0"
    b"MESSAGE\nsubscription:s\nmessage-id:m\xff2\nn:2\nx-bad:a\xff\\n\xfe\nredelivered:true\n\npoison\0"
    # two names that differ only in bytes that are not UTF-8: the same text, so one map entry
    b"MESSAGE\nsubscription:s\nmessage-id:3\nb\xff:1\nb\xfe:2\nn:3\nn:4\n\n\0"
)
POISON_FIRST = b"MESSAGE\nsubscription:s\xc3\nmessage-id:1\n\nthe subscription itself\0" + ORDINARY

CASES: Dict[str, bytes] = {
    "ordinary": ORDINARY,
    "repeats": REPEATS,
    "escapes": ESCAPES,
    "no-ids": NO_IDS,
    "poison": POISON,
    "poison-first": POISON_FIRST,
    "all": ORDINARY + REPEATS + ESCAPES + NO_IDS + POISON,
}


def _first_wins(headers: Sequence[Tuple[str, str]]) -> List[Tuple[str, str]]:
    return list(dict(reversed(headers)).items())


def assert_same(got: Any, want: Any) -> None:
    got.validate(full=True)
    assert got.schema == want.schema == stream_arrow_schema()
    assert got.num_rows == want.num_rows
    for name in got.schema.names:
        if name == "received_at":
            continue
        column, expected = got.column(name).to_pylist(), want.column(name).to_pylist()
        if name == "header_map":
            # the same entries; their order is the headers' (the reference reversed it in a batch with a repeat)
            assert [dict(row) for row in column] == [dict(row) for row in expected]
            headers = got.column("headers").to_pylist()
            firsts = [list(dict.fromkeys(pair["name"] for pair in row)) for row in headers]
            assert [[key for key, _ in row] for row in column] == firsts
        else:
            assert column == expected, name
    now = int(time.time() * 1_000_000)
    stamps = got.column("received_at").cast(pa.int64()).to_pylist()
    assert all(now - 60_000_000 < stamp <= now for stamp in stamps)


@pytest.fixture
def twin(codec: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """messages_to_batch with ``codec``'s to_columns (the one the active twin gives, normally)."""
    monkeypatch.setattr(_stream_schema, "to_columns", codec.to_columns)
    return codec


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("with_offsets", [True, False])
def test_the_same_rows_as_the_list_building_implementation(twin: ModuleType, case: str, with_offsets: bool) -> None:
    messages = _messages(twin, CASES[case])
    offsets = list(range(100, 100 + len(messages))) if with_offsets else None
    want = reference_batch("/queue/q", messages, offsets, twin.IMPLEMENTATION)
    assert_same(messages_to_batch("/queue/q", messages, offsets, twin.IMPLEMENTATION), want)


def test_poison_rows_say_so_and_the_others_do_not(twin: ModuleType) -> None:
    rows = messages_to_batch("/q", _messages(twin, POISON), None, "c").to_pylist()
    assert [row["error_code"] for row in rows] == [None, INVALID_UTF8, INVALID_UTF8]
    clean, bad, names = rows
    assert clean["raw_headers"] is None and clean["headers"][-1] == {"name": "n", "value": "1"}
    assert bad["message_id"] == "m\ufffd2" and bad["redelivered"] is True
    assert bad["raw_headers"] == b"subscription:s\nmessage-id:m\xff2\nn:2\nx-bad:a\xff\\n\xfe\nredelivered:true\n"
    assert [(pair["name"], pair["value"]) for pair in names["headers"]][2:4] == [("b\ufffd", "1"), ("b\ufffd", "2")]
    assert dict(names["header_map"]) == {"subscription": "s", "message-id": "3", "b\ufffd": "1", "n": "3"}


def test_repeated_names_keep_every_header_and_the_first_in_the_map(twin: ModuleType) -> None:
    rows = messages_to_batch("/q", _messages(twin, REPEATS), [1, 2, 3, 4], "c").to_pylist()
    first = rows[0]
    assert [pair["name"] for pair in first["headers"]] == [
        "subscription", "message-id", "redelivered", "redelivered", "n", "n", "message-id"
    ]  # fmt: skip
    assert first["header_map"] == [("subscription", "s"), ("message-id", "a"), ("redelivered", "false"), ("n", "1")]
    assert (first["message_id"], first["redelivered"]) == ("a", False)
    assert (rows[1]["message_id"], rows[1]["redelivered"]) == ("c", True)
    many = rows[3]
    assert len(many["headers"]) == 32 and many["header_map"][2:] == [(f"h{i}", str(i)) for i in range(7)]
    assert [row["offset"] for row in rows] == [1, 2, 3, 4]


def test_no_messages_is_an_empty_batch(twin: ModuleType) -> None:
    batch = messages_to_batch("/q", [], None, "c")
    assert_same(batch, reference_batch("/q", [], None, "c"))
    assert batch.num_rows == 0


def test_frames_made_by_hand(twin: ModuleType) -> None:
    """Frames from the Frame constructor (no stream offset), headers empty or not."""
    frames = [
        twin.Frame("MESSAGE", (), b""),
        twin.Frame("MESSAGE", (("subscription", "7"), ("message-id", ""), ("redelivered", "true")), b"\0\0"),
        twin.Frame("MESSAGE", (("", ""), ("a", "1"), ("a", "2")), b"x"),
    ]
    messages = [_message(frame) for frame in frames]
    want = reference_batch("/q", messages, [5, 6, 7], "py")
    got = messages_to_batch("/q", messages, [5, 6, 7], "py")
    assert_same(got, want)
    assert got.column("subscription").to_pylist() == [None] * 3  # the first message has none
    assert got.column("message_id").to_pylist() == [None, "", None]
    assert got.column("redelivered").to_pylist() == [False, True, False]


def test_many_messages_in_one_batch(twin: ModuleType) -> None:
    data = (ORDINARY + REPEATS + ESCAPES) * 200
    messages = _messages(twin, data)
    want = reference_batch("/q", messages, list(range(len(messages))), "c")
    assert_same(messages_to_batch("/q", messages, list(range(len(messages))), "c"), want)


# What a task runs in a new Spark Python worker, which has not imported pandas: the rows of messages (a
# poison one too) and of a file (an error row too). pyarrow's pa.scalar and pa.array of Python values
# import pandas (0.3 s of CPU per worker) to ask whether the value is a pandas object.
NO_PANDAS = """
    import sys
    from fastframe import codec
    from fastframe.aio import Message
    from fastframe.spark._arrow import BatchBuilder, default_fields
    from fastframe.spark._stream_schema import messages_to_batch

    data = b"MESSAGE\\nsubscription:s\\nmessage-id:m\\xff\\nredelivered:true\\n\\nbody\\0MESSAGE\\nsubscription:s\\n\\n\\0"
    frames = codec.decode(data, keep_invalid_utf8=True)
    ids = [frame.get("message-id") for frame in frames]
    messages = [Message(f, "s", i, i, "/q", client=None, session=None) for f, i in zip(frames, ids)]
    messages_to_batch("/q", messages, [7, 8], codec.IMPLEMENTATION).validate(full=True)
    messages_to_batch("/q", messages, None, codec.IMPLEMENTATION).validate(full=True)
    decoder = codec.ColumnDecoder()
    decoder.feed(data.replace(b"\\xff", b""))
    fields = [field for field in default_fields() if field[0] != "received_at"]
    builder = BatchBuilder(fields, "/f", codec.IMPLEMENTATION)
    builder.batch(decoder.take(10, 1 << 20), 3, 100).validate(full=True)
    builder.error(5, 2, "truncated", "why").validate(full=True)
    print("pandas" in sys.modules)
"""


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed: nothing to import")
def test_rows_are_made_without_importing_pandas() -> None:
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(NO_PANDAS)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False", "making rows imported pandas"


@pytest.mark.parametrize("case", sorted(set(CASES) - {"poison", "poison-first", "all"}))
@pytest.mark.parametrize("cuts", [(), (1,), (0, 2), (1, 2, 3)], ids=["whole", "two", "three", "four"])
def test_columns_pieces_make_the_rows_of_their_messages(twin: ModuleType, case: str, cuts: Tuple[int, ...]) -> None:
    """columns_to_batch (a columnar subscription's reads, cut to a range) gives the rows messages_to_batch
    gives for the same messages: the offsets from each row's x-stream-offset, the pieces in order."""
    frames = twin.decode(CASES[case] + ORDINARY)
    frames = [
        twin.Frame(f.command, [*f.headers, ("x-stream-offset", str(100 + i))], f.body) for i, f in enumerate(frames)
    ]
    frames = twin.decode(b"".join(twin.encode(frame) for frame in frames))  # (as the wire has them)
    decoder = twin.ColumnDecoder("1.2")
    reads = []
    for start, end in zip([0, *cuts], [*cuts, len(frames)]):  # one Columns per read
        decoder.feed(b"".join(twin.encode(frame) for frame in frames[start:end]))
        reads.append(decoder.take())
    # each read lends all its rows but the first read's first (a range's start inside a chunk)
    pieces = [
        (columns, 1 if index == 0 and columns.rows > 1 else 0, columns.rows) for index, columns in enumerate(reads)
    ]
    skipped = 1 if pieces[0][1] else 0
    got = columns_to_batch("/queue/q", pieces, "s", twin.IMPLEMENTATION)
    messages = [_message(frame) for frame in frames[skipped:]]
    want = messages_to_batch("/queue/q", messages, list(range(100 + skipped, 100 + len(frames))), twin.IMPLEMENTATION)
    want = want.set_column(want.schema.get_field_index("subscription"), "subscription", pa.array(["s"] * len(messages)))
    assert_same(got, want)
