"""The twins as a pair: which one is imported, that they expose the same API, and that
the compiled one does not leak (memory, references) on good and bad input."""

from __future__ import annotations

import gc
import inspect
import os
import re
import subprocess
import sys
import tracemalloc
from types import ModuleType

import pytest

try:
    import resource  # RSS is checked where the platform has it (not on Windows)
except ImportError:  # pragma: no cover
    resource = None  # type: ignore[assignment]

import fastframe
from fastframe import DecodeError, EncodeError
from fastframe import _codec_c as C
from fastframe import _codec_py as P

PUBLIC = [
    "Frame",
    "Heartbeat",
    "Decoder",
    "ColumnDecoder",
    "Encoder",
    "decode",
    "encode",
    "to_columns",
    "IMPLEMENTATION",
]


def test_default_import_is_the_compiled_twin() -> None:
    # the compiled twin is importable here (this module imports it), so unless
    # the environment asks for pure Python, `import fastframe` must give it
    if os.environ.get("FASTFRAME_NO_EXTENSIONS", "") not in ("", "0"):
        assert fastframe.IMPLEMENTATION == "python"
    else:
        assert fastframe.IMPLEMENTATION == "c"
        assert fastframe.Decoder is C.Decoder and fastframe.Frame is C.Frame
        assert fastframe.ColumnDecoder is C.ColumnDecoder


@pytest.mark.parametrize("value, expected", [("1", "python"), ("0", "c"), ("", "c")])
def test_environment_variable_picks_the_twin(value: str, expected: str) -> None:
    env = dict(os.environ, FASTFRAME_NO_EXTENSIONS=value)
    result = subprocess.run(
        [sys.executable, "-c", "import fastframe; print(fastframe.IMPLEMENTATION)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == expected


def test_same_public_names() -> None:
    assert sorted(C.__all__) == sorted(P.__all__) == sorted(PUBLIC)
    assert C.IMPLEMENTATION == "c" and P.IMPLEMENTATION == "python"


def _doc(obj: object, name: str) -> str:
    """A docstring without the signature line Cython's embedsignature adds."""
    doc = inspect.cleandoc(obj.__doc__ or "")
    lines = doc.splitlines()
    if lines and re.match(rf"[\w.]*\b{name}\(", lines[0]):
        doc = "\n".join(lines[1:]).strip()
    return doc


@pytest.mark.parametrize("name", [n for n in PUBLIC if n != "IMPLEMENTATION"])
def test_same_docstrings(name: str) -> None:
    compiled, reference = getattr(C, name), getattr(P, name)
    assert _doc(compiled, name) == _doc(reference, name)
    if not isinstance(reference, type):
        return
    for attribute, value in vars(reference).items():
        if attribute.startswith("_") or not getattr(value, "__doc__", None):
            continue
        assert _doc(getattr(compiled, attribute), attribute) == _doc(value, attribute), f"{name}.{attribute}"


def test_frames_are_not_tracked_by_the_cyclic_gc() -> None:
    frame = C.decode(b"MESSAGE\ndestination:/q\nx:y\n\nbody\0")[0]
    assert not gc.is_tracked(frame)
    assert not gc.is_tracked(frame.headers)
    assert not any(gc.is_tracked(pair) for pair in frame.headers)


def _workload() -> bytes:
    frames = [
        P.encode(
            "MESSAGE",
            [("destination", "/queue/a"), ("x-seq", str(i)), ("x-esc", "a:b\\c\n☃")],
            bytes(i % 251 for i in range(i * 37 % 900)),
        )
        for i in range(300)
    ]
    return b"\n".join(frames)


BAD_INPUTS = [
    b"SEND\nx:a\\tb\n\n\0",
    b"SEND\nnocolon\n\n\0",
    b"SEND\ncontent-length:abc\n\n\0",
    b"SEND\ncontent-length:2\n\nabc\0",
    b"SEND\ncontent-length:99999999999999\n\n",
    b"SEND\nx:\xff\n\n\0",
    b"SEND\nx:y\n\npartial",
]


def _exercise(module: ModuleType, data: bytes) -> None:
    frames = module.decode(data)
    decoder = module.Decoder(heartbeat_events=True)
    for start in range(0, len(data), 977):
        decoder.feed(data[start : start + 977])
    decoder.close()
    for frame in frames[:50]:
        module.encode(frame)
    for bad in BAD_INPUTS:
        with pytest.raises(DecodeError):
            module.decode(bad)
        decoder = module.Decoder()
        with pytest.raises(DecodeError):
            decoder.feed(bad)
            decoder.close()
        with pytest.raises(DecodeError):
            decoder.feed(b"more")  # the error sticks
    columns = module.ColumnDecoder()
    for start in range(0, len(data), 977):
        columns.feed(data[start : start + 977])
        columns.take(max_rows=7)
    columns.close()
    module.to_columns(frames[:50])
    for bad in BAD_INPUTS:
        columns.reset()
        with pytest.raises(DecodeError):
            columns.feed(data[:5000] + bad)
            columns.close()
        columns.take()
    with pytest.raises(EncodeError):
        module.encode("SEND", [("", "x")], b"")
    with pytest.raises(EncodeError):
        module.encode("SEND", [("content-length", "9")], b"x")


def test_compiled_twin_does_not_leak() -> None:
    data = _workload()
    probes = ["destination", "MESSAGE", "content-length", DecodeError, EncodeError, C.Frame, C.Heartbeat]
    for _ in range(20):  # warm up caches, interned strings, type caches
        _exercise(C, data)
    gc.collect()
    refcounts = [sys.getrefcount(probe) for probe in probes]
    objects = len(gc.get_objects())
    tracemalloc.start()
    try:
        _exercise(C, data)
        gc.collect()
        before, _ = tracemalloc.get_traced_memory()
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss if resource else 0
        for _ in range(150):
            _exercise(C, data)
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss if resource else 0
    assert after - before < 64 * 1024, f"traced memory grew by {after - before} bytes"
    assert rss_after - rss_before < 16 * 1024, f"max RSS grew by {rss_after - rss_before} KiB"
    # the codec's caches hold a bounded number of references to header strings, so
    # a count may move by a few; a leak would add one per iteration (150 here)
    growth = [sys.getrefcount(probe) - count for probe, count in zip(probes, refcounts)]
    assert max(growth) < 10, dict(zip(map(repr, probes), growth))
    assert len(gc.get_objects()) - objects < 100
