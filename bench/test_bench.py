"""pytest-benchmark suite: both twins on every workload.

    pytest bench                                   # full sizes, both twins
    FASTFRAME_BENCH_SIZES=tiny pytest bench -k py  # quick, Python twin only

Groups (``benchmark.group``) are per workload and operation, so each table
row pair compares the C twin with the Python twin on the same bytes. Every
benchmark also checks its result against the workload's logical frames. The
GC stays on (do not pass ``--benchmark-disable-gc``: users run with it on).
For the comparison with other STOMP libraries run ``python -m bench.compare``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Dict, List

import pytest

from bench.codecs import diagnose_semantic
from bench.conftest import SIZES
from bench.workloads import WORKLOAD_NAMES, Workload

# incremental feeding: (workload, piece size, bytes of the slice for full sizes, for tiny)
FEEDS = [
    ("small", 1, 64 * 1024, 16 * 1024),
    ("small", 100, 1024 * 1024, 64 * 1024),
    ("mixed", 100, 1024 * 1024, 32 * 1024),
    ("large", 100, 2 * 1024 * 1024, 256 * 1024),
]


def _logical(frames: List[Any]) -> List[Any]:
    return [(f.command, f.headers, f.body) for f in frames]


def _describe(benchmark: Any, group: str, workload: Workload, n_frames: int, n_bytes: int) -> None:
    benchmark.group = group
    benchmark.extra_info["frames"] = n_frames
    benchmark.extra_info["bytes"] = n_bytes
    benchmark.extra_info["sizes"] = SIZES


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_decode(benchmark: Any, codec: ModuleType, workloads: Dict[str, Workload], name: str) -> None:
    workload = workloads[name]
    _describe(benchmark, f"{name}: decode", workload, len(workload), len(workload.data))
    frames = benchmark(codec.decode, workload.data)
    assert _logical(frames) == list(workload.frames)


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_decode_to_columns(benchmark: Any, codec: ModuleType, workloads: Dict[str, Workload], name: str) -> None:
    """ColumnDecoder: rows straight into Arrow-layout buffers, in batches of 10,000 (as the Spark source)."""
    workload = workloads[name]
    _describe(benchmark, f"{name}: decode to columns", workload, len(workload), len(workload.data))

    def run() -> List[Any]:
        decoder = codec.ColumnDecoder()
        decoder.feed(workload.data)
        decoder.close()
        return [decoder.take(10_000) for _ in range(-(-decoder.rows // 10_000))]

    batches = benchmark(run)
    assert sum(b.rows for b in batches) == len(workload)
    reference = codec.to_columns(codec.decode(workload.data))
    assert b"".join(b.body_data for b in batches) == reference.body_data
    assert b"".join(b.value_data for b in batches) == reference.value_data


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_encode(benchmark: Any, codec: ModuleType, workloads: Dict[str, Workload], name: str) -> None:
    workload = workloads[name]
    _describe(benchmark, f"{name}: encode", workload, len(workload), len(workload.data))
    prepared = [codec.Frame(command, headers, body) for command, headers, body in workload.frames]
    encode = codec.encode

    def run() -> List[bytes]:
        return [encode(frame) for frame in prepared]

    out = benchmark(run)
    decoded = [(f.command, f.headers, None, f.body) for f in codec.decode(b"".join(out))]
    assert diagnose_semantic(workload.frames, decoded) is None
    if name != "mixed":  # no CRLF nor heart-beats: the bytes are exactly the workload's
        assert b"".join(out) == workload.data


@pytest.mark.parametrize(
    "name, piece, full_bytes, tiny_bytes", FEEDS, ids=[f"{name}-{piece}B" for name, piece, _, _ in FEEDS]
)
def test_feed(
    benchmark: Any,
    codec: ModuleType,
    workloads: Dict[str, Workload],
    name: str,
    piece: int,
    full_bytes: int,
    tiny_bytes: int,
) -> None:
    frames, data = workloads[name].slice_bytes(tiny_bytes if SIZES == "tiny" else full_bytes)
    pieces = [data[i : i + piece] for i in range(0, len(data), piece)]
    _describe(benchmark, f"{name}: feed {piece} B pieces", workloads[name], len(frames), len(data))

    def run() -> List[Any]:
        decoder = codec.Decoder()
        feed = decoder.feed
        out: List[Any] = []
        for chunk in pieces:
            out += feed(chunk)
        decoder.close()
        return out

    out = benchmark(run)
    assert _logical(out) == list(frames)
