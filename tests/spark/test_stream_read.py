"""A task's read of a stream range without Spark: Python's garbage collector as the caller left it.

``read_range`` pauses the cyclic collector while it receives and builds each Arrow batch (a CPU cost
of the read, see docs/benchmarks.md) and puts it back before every yield and after an error.
"""

from __future__ import annotations

import gc
from typing import Iterator

import pytest

from fastframe.spark._stream_client import BrokerError
from fastframe.spark._stream_options import source_options as parse_options
from fastframe.spark._stream_read import read_range

from .stream_helpers import (
    RABBIT,
    delete_streams,  # noqa: F401  (deletes the streams a session declared)
    message,
    new_queue,
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
