"""consume=stream with trigger(availableNow=True): the end found at the start is where it reads to, so its
batches plan without probing the stream again; a stream shorter than the query's offset is still probed
(failOnDataLoss). The broker is replaced by counters: this is the driver's planning alone."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest

from fastframe.spark import _stream_read
from fastframe.spark._stream_compat import ReadMaxRows
from fastframe.spark._stream_source import StreamQueueReader

DEST = "/amq/queue/s"


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Dict[str, List[Any]]:
    calls: Dict[str, List[Any]] = {"find_end": [], "checked_end": []}
    stream_end = {"value": 25_000}

    def find_end(opts: Any, dest: str, start: int, limit: int, settle: bool = False) -> int:
        calls["find_end"].append((start, limit, settle))
        return stream_end["value"]

    def checked_end(opts: Any, dest: str, start: int, limit: int) -> Tuple[int, int]:
        calls["checked_end"].append((start, limit))
        return start, stream_end["value"]

    monkeypatch.setattr(_stream_read, "find_end", find_end)
    monkeypatch.setattr(_stream_read, "checked_end", checked_end)
    calls["end"] = [stream_end]
    return calls


def _reader() -> StreamQueueReader:
    return StreamQueueReader({"host": "127.0.0.1", "destination": DEST, "consume": "stream"})


def test_available_now_plans_to_its_end_without_probing_again(probes: Dict[str, List[Any]]) -> None:
    reader = _reader()
    reader.prepareForTriggerAvailableNow()
    probes["end"][0]["value"] = 40_000  # published since: availableNow reads what there was at its start
    ends = []
    start: Dict[str, Any] = {DEST: 0}
    while True:
        end = reader.latestOffset(start, ReadMaxRows(10_000))
        if end == start:
            break
        ends.append(end[DEST])
        start = end
    assert ends == [10_000, 20_000, 25_000]
    assert probes["find_end"] == [(0, 0, True)]
    assert probes["checked_end"] == []  # neither the first batch nor the last (the end reached) probed
    assert reader.reportLatestOffset() == {DEST: 25_000}


def test_available_now_still_probes_a_stream_shorter_than_the_query(probes: Dict[str, List[Any]]) -> None:
    """A restart at offset 30,000 of a stream that ends at 25,000 now (declared again): probed (data loss)."""
    reader = _reader()
    reader.prepareForTriggerAvailableNow()
    reader.latestOffset({DEST: 30_000}, ReadMaxRows(10_000))
    assert probes["checked_end"] == [(30_000, 10_000)]
