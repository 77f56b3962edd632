"""The broker source's pieces that need neither Spark nor a broker: poison rows, data-loss messages."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Optional

import pytest

from fastframe.spark._stream_options import source_options
from fastframe.spark._stream_read import DataLossError, data_lost
from fastframe.spark._stream_schema import messages_to_batch, stream_arrow_schema

POISON = b"MESSAGE\ndestination:/q\nmessage-id:m\\c2\nn:2\nx-bad:a\xff\\n\xfe\n\nbody2\0"


class _Message:
    """What the schema reads of an aio Message: its frame, and get()."""

    def __init__(self, frame: Any) -> None:
        self.frame, self.headers, self.body = frame, frame.headers, frame.body
        self.message_id = frame.get("message-id")

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        return dict(reversed(self.headers)).get(name, default)


def test_a_poison_message_is_a_row_with_its_bytes(codec: ModuleType) -> None:
    # RabbitMQ passes on a header that is not UTF-8; the client keeps it (keep_invalid_utf8)
    data = b"MESSAGE\ndestination:/q\nmessage-id:1\nn:1\n\nbody1\0" + POISON
    frames = codec.decode(data, keep_invalid_utf8=True)
    batch = messages_to_batch("/q", [_Message(f) for f in frames], [7, 8], "c")
    assert batch.schema == stream_arrow_schema()
    rows = batch.to_pylist()
    assert [row["body"] for row in rows] == [b"body1", b"body2"]
    clean, poison = rows
    assert (clean["error_code"], clean["error_reason"], clean["raw_headers"]) == (None, None, None)
    assert poison["error_code"] == "invalid-utf8"
    assert "'x-bad'" in poison["error_reason"] and "raw_headers" in poison["error_reason"]
    # the text columns: U+FFFD for each byte that is not UTF-8; the others as they were
    assert poison["headers"][-1] == {"name": "x-bad", "value": "a\ufffd\n\ufffd"}
    assert dict(poison["header_map"])["n"] == "2" and poison["message_id"] == "m:2" and poison["offset"] == 8
    # the exact bytes, as a STOMP 1.2 head: decoding it again gives the very headers the client received
    assert poison["raw_headers"] == b"destination:/q\nmessage-id:m\\c2\nn:2\nx-bad:a\xff\\n\xfe\n"
    (again,) = codec.decode(b"MESSAGE\n" + poison["raw_headers"] + b"\n\0", keep_invalid_utf8=True)
    assert again.headers == frames[1].headers


def test_a_batch_without_poison_has_null_error_columns() -> None:
    from fastframe import decode

    frames = decode(b"MESSAGE\ndestination:/q\nmessage-id:1\nx:\xc3\xa9\n\n\0")
    rows = messages_to_batch("/q", [_Message(f) for f in frames], None, "c").to_pylist()
    assert rows[0]["headers"][-1]["value"] == "é" and rows[0]["error_code"] is None


@pytest.mark.parametrize(
    ("first", "end", "expected", "again"),
    [
        (30753, 40000, "removed offsets 2000 to 30752 before", 30753),
        (2001, 40000, "removed offset 2000 before", 2001),
        (None, None, "holds no message", 0),
        (0, 0, "holds no message", 0),  # empty bounds, as a probe of an empty stream gives
        (0, 500, "ends before the query's next offset 2000 (its last offset is 499)", 0),
        (0, 2000, "holds offsets 0 to 1999, but the query's next offset 2000 did not arrive", 2000),
        (1500, 3000, "holds offsets 1500 to 2999, but the query's next offset 2000 did not arrive", 2000),
    ],
)
def test_data_lost_reads_right_for_any_bounds(first: Any, end: Any, expected: str, again: int, capfd: Any) -> None:
    strict = source_options({"host": "h", "destination": "/queue/s", "consume": "stream"})
    with pytest.raises(DataLossError) as caught:
        data_lost(strict, "/queue/s", 2000, first, end)
    message = str(caught.value)
    assert message.startswith("failOnDataLoss: stream '/queue/s' ") and expected in message, message
    assert " to -" not in message and f"go on from offset {again}" in message
    lenient = source_options({"host": "h", "destination": "/queue/s", "consume": "stream", "failOnDataLoss": "false"})
    assert data_lost(lenient, "/queue/s", 2000, first, end) == again
    assert expected in capfd.readouterr().err
