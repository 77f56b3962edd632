"""A task's read of a stream range without Spark: Python's garbage collector as the caller left it.

``read_range`` pauses the cyclic collector while it receives and builds each Arrow batch (a CPU cost
of the read, see docs/benchmarks.md) and puts it back before every yield and after an error.
"""

from __future__ import annotations

import gc
from typing import Any, Iterator

import pytest

from fastframe.spark._stream_client import BrokerError
from fastframe.spark._stream_options import source_options as parse_options
from fastframe.spark._stream_read import read_range

from .stream_helpers import (
    RABBIT,
    delete_streams,  # noqa: F401  (deletes the streams a session declared)
    message,
    new_queue,
    publish_raw,
    publish_stream,
    require_broker,
    source_options,
)


@pytest.fixture(params=[True, False], ids=["collector-on", "collector-off"])
def collector(request: pytest.FixtureRequest) -> Iterator[bool]:
    """The collector's state before a read (restored after the test whatever it did)."""
    require_broker(RABBIT)
    was_on = gc.isenabled()
    (gc.enable if request.param else gc.disable)()
    try:
        yield request.param
    finally:
        (gc.enable if was_on else gc.disable)()


def test_a_range_read_leaves_the_collector_as_it_was(collector: bool) -> None:
    queue = new_queue("stream-read-gc")
    publish_stream(queue, range(250))
    opts = parse_options(source_options("rabbitmq", f"/queue/{queue}", consume="stream", maxRecordsPerBatch=100))
    seen, bodies = [], []
    for batch in read_range(opts, f"/queue/{queue}", 20, 250):
        seen.append(gc.isenabled())  # what Spark's code runs with between two batches
        bodies.extend(batch.column("body").to_pylist())
    assert seen == [collector] * 3  # 100 + 100 + 30 rows
    assert gc.isenabled() is collector
    assert bodies == [message(n)[0] for n in range(20, 250)]


def test_a_failed_range_read_leaves_the_collector_as_it_was(collector: bool) -> None:
    queue = new_queue("stream-read-gc-fail")
    publish_stream(queue, range(10))
    options = source_options("rabbitmq", f"/queue/{queue}", consume="stream", timeout=1)
    # offsets 10-19 do not exist: the read waits its timeout for offset 10, inside the pause, and fails
    with pytest.raises(BrokerError, match="the batch ends at 20.*no answer within 1 s"):
        list(read_range(parse_options(options), f"/queue/{queue}", 5, 20))
    assert gc.isenabled() is collector


def test_a_range_is_read_as_columns_and_cut_at_its_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task's subscription is columnar: its batches come from the reads' Columns, none from message
    objects; the reads at the range's start (a chunk begins before it) and end are cut to it."""
    require_broker(RABBIT)
    from fastframe.spark import _stream_read

    made = {"columns": 0, "messages": 0}
    for name, kind in (("columns_to_batch", "columns"), ("messages_to_batch", "messages")):
        original = getattr(_stream_read, name)

        def counting(*args: Any, _original: Any = original, _kind: str = kind) -> Any:
            made[_kind] += 1
            return _original(*args)

        monkeypatch.setattr(_stream_read, name, counting)
    queue = new_queue("stream-read-columns")
    publish_stream(queue, range(400))
    opts = parse_options(source_options("rabbitmq", f"/queue/{queue}", consume="stream", maxRecordsPerBatch=64))
    batches = list(read_range(opts, f"/queue/{queue}", 37, 301))
    assert [batch.num_rows for batch in batches] == [64, 64, 64, 64, 8]
    rows = [row for batch in batches for row in batch.to_pylist()]
    assert [row["offset"] for row in rows] == list(range(37, 301))
    assert [row["body"] for row in rows] == [message(n)[0] for n in range(37, 301)]
    assert [dict(row["header_map"])["n"] for row in rows] == [str(n) for n in range(37, 301)]
    assert all(row["message_id"] and row["subscription"] and row["error_code"] is None for row in rows)
    assert made == {"columns": 5, "messages": 0}


def test_a_poison_message_mid_range_is_a_row_and_the_rest_follows() -> None:
    """A header that is not UTF-8 ends the columnar read (Arrow's strings are UTF-8): the rest of the range
    is read again as message objects, the poison message a row that says so, nothing lost or doubled."""
    require_broker(RABBIT)
    queue = new_queue("stream-read-poison")
    publish_stream(queue, range(150))
    publish_raw(RABBIT.port, f"/amq/queue/{queue}", [b"a\xffb"])
    publish_stream(queue, range(150, 300))
    opts = parse_options(source_options("rabbitmq", f"/queue/{queue}", consume="stream", maxRecordsPerBatch=100))
    rows = [row for batch in read_range(opts, f"/queue/{queue}", 10, 301) for row in batch.to_pylist()]
    assert [row["offset"] for row in rows] == list(range(10, 301))
    assert [row["error_code"] for row in rows] == [None] * 140 + ["invalid-utf8"] + [None] * 150
    assert rows[140]["body"] == b"body0" and b"x-value:a\xffb\n" in rows[140]["raw_headers"]
    good = [row["body"] for row in rows if row["error_code"] is None]
    assert good == [message(n)[0] for n in range(10, 300)]
