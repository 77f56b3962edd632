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
from typing import Any, Dict, List

import pytest

from conftest import compiled_twin

try:
    import resource  # RSS is checked where the platform has it (not on Windows)
except ImportError:  # pragma: no cover
    resource = None  # type: ignore[assignment]

import fastframe
from fastframe import DecodeError, EncodeError
from fastframe.codec import _codec_py as P

C = compiled_twin()  # a skip for the whole module when absent by design

PUBLIC = [
    "Frame",
    "Heartbeat",
    "Decoder",
    "ColumnDecoder",
    "Encoder",
    "decode",
    "encode",
    "to_columns",
    "route_messages",
    "first_row_without",
    "SlotMaker",
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


def test_compiled_twin_imports_no_python_twin() -> None:
    # the compiled twin stands on its own: `import fastframe` leaves the reference unimported
    code = "import sys, fastframe; print(fastframe.IMPLEMENTATION, 'fastframe.codec._codec_py' in sys.modules)"
    env = dict(os.environ, FASTFRAME_NO_EXTENSIONS="0")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["c", "False"]
    env["FASTFRAME_NO_EXTENSIONS"] = "1"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["python", "True"]


class _Str(str):
    pass


_HEADER_SHAPES: List[Any] = [
    {"a": "1", "b": "2"},
    {_Str("a"): "1", "b": _Str("2")},
    [("a", "1"), ("a", "2"), ("b", "")],
    (("a", "1"), ["b", "2"]),
    [(_Str("a"), "1")],
    (p for p in [("a", "1"), ("b", "2")]),
    iter([("x", "y")]),
    {"k%d" % i: "v" for i in range(40)},  # more fields than the encoder's stack array holds
    [("a", "1"), "ab"],
    [("a", "1"), ("b",)],
    [("a", "1"), ("b", "2", "3")],
    [("a", 1)],
    {"a": None},
    [None],
    5,
    "ab",
    [("", "x"), ("y", "\0")],
    [("y", "\0"), ("", "x")],
    [("content-length", "7"), ("x", "\ud800")],
    [("x", "\ud800\udfff!"), ("content-length", "1\n")],
    [("content-length", "0003")],
    [("content-length", "٣")],
    [("a:b", "c\rd")],
]
_BODIES: List[Any] = [b"abc", bytearray(b"abc"), memoryview(b"abc"), b"", b"x" * 1000, "text", None, 3]


def _outcome(call: object, *args: object, **options: object) -> object:
    try:
        result = call(*args, **options)  # type: ignore[operator]
    except Exception as error:  # the outcome compared is the exception's type and message
        return (type(error).__name__, str(error))
    return (
        (result.command, result.headers, result.body, repr(result), result.header_map())
        if hasattr(result, "header_map")
        else result
    )


@pytest.mark.parametrize("index", range(len(_HEADER_SHAPES)))
@pytest.mark.parametrize("body", _BODIES, ids=range(len(_BODIES)))
@pytest.mark.parametrize("options", [{}, {"version": "1.1"}, {"version": "1.0"}, {"eol": "\r\n"}], ids=str)
def test_hand_made_frames_and_encodings_agree(index: int, body: object, options: Dict[str, Any]) -> None:
    # the compiled twin's own paths for dicts, lists and tuples against the reference, on every odd shape
    def fresh() -> object:
        shape = _HEADER_SHAPES[index]
        if index in (5, 6):  # a generator is consumed once: a fresh one per call
            return iter([("a", "1"), ("b", "2")] if index == 5 else [("x", "y")])
        return shape

    for command in ("SEND", "CONNECT", "MESSAGE"):
        outcomes = []
        for module in (C, P):
            outcomes.append(
                (
                    _outcome(module.Frame, command, fresh(), body if body is not None else b""),
                    _outcome(module.encode, command, fresh(), body, **options),
                    _outcome(module.Encoder(**options).encode, command, fresh(), body),
                )
            )
        assert outcomes[0] == outcomes[1]


def test_encode_writes_every_content_length() -> None:
    for size in (0, 1, 9, 10, 99, 100, 65535, 1_000_001):
        body = b"\0" * size
        assert C.encode("SEND", {}, body) == P.encode("SEND", {}, body)
        assert C.encode("SEND", {}, body, content_length=True, eol="\r\n") == P.encode(
            "SEND", {}, body, content_length=True, eol="\r\n"
        )


def test_headers_changed_while_normalized_are_read_safely() -> None:
    # a str subclass's __str__ runs while headers are normalized: it may empty the caller's list
    def outcome(module: ModuleType) -> object:
        headers: List[Any] = []

        class Shrinking(str):
            def __str__(self) -> str:
                headers.clear()
                return "name"

        headers.extend([(Shrinking("x"), "1")] + [("k%d" % i, "v") for i in range(40)])
        return module.encode("SEND", headers, b"")

    assert outcome(C) == outcome(P) == b"SEND\nname:1\n\n\0"
