"""Error paths leak nothing, in either twin: every error code, raised again and again, leaves
reference counts, the number of objects the GC tracks, and traced memory flat.

(test_twins.py checks the compiled twin over a corpus of good frames; this covers each way to fail.)
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from types import ModuleType
from typing import Any, Callable, Dict, List, Tuple

import pytest

from fastframe import DecodeError, EncodeError
from fastframe.codec import _errors

# (input, decoder options, the error's code); each is fed whole, in 3-byte pieces, and to a ColumnDecoder
BAD_STREAMS: List[Tuple[bytes, Dict[str, Any], str]] = [
    (b"SEND\nx:a\\tb\n\n\0", {}, "invalid-escape"),
    (b"SEND\nnocolon\n\n\0", {}, "bad-header-line"),
    (b"SEND\n:empty-name\n\n\0", {}, "bad-header-line"),
    (b"SEND\nx:\xff\n\n\0", {}, "bad-header-line"),
    (b"SEND\nx:a\0b\n\n\0", {}, "bad-header-line"),
    (b"SEND\nx:a\rb\n\n\0", {"strict": True}, "bad-header-line"),
    (b"SEND\nx:a:b\n\n\0", {"strict": True}, "bad-header-line"),
    (b"SEND\ncontent-length:abc\n\n\0", {}, "bad-content-length"),
    (b"SEND\ncontent-length:\n\n\0", {}, "bad-content-length"),
    (b"SEND\ncontent-length:99999999999999999999\n\n\0", {}, "bad-content-length"),
    (b"SEND\ncontent-length:2\n\nabc\0", {}, "missing-null"),
    (b"SEND\na:1\nb:2\n\n\0", {"max_header_count": 1}, "limit-exceeded"),
    (b"SEND\nx:" + b"y" * 100 + b"\n\n\0", {"max_line_length": 50}, "limit-exceeded"),
    (b"SEND\n\n" + b"z" * 100 + b"\0", {"max_body_size": 50}, "limit-exceeded"),
    (b"SEND\ncontent-length:99\n\n", {"max_body_size": 50}, "limit-exceeded"),
    (b"SEND\nx:y\n\n" + b"z" * 100 + b"\0", {"max_frame_size": 50}, "limit-exceeded"),
    (b"SE\xffND\n\n\0", {}, "bad-command"),
    (b"SE\rND\n\n\0", {}, "bad-command"),
    (b"HELLO\n\n\0", {"strict": True}, "bad-command"),
    (b"ACK\nid:1\n\nbody\0", {"strict": True}, "body-not-allowed"),
    (b"ACK\nid:1\ncontent-length:1\n\nb\0", {"strict": True}, "body-not-allowed"),
    (b"SEND\nx:y\n\npartial", {}, "truncated"),
    (b"\r", {}, "truncated"),
]
GOOD = b"MESSAGE\ndestination:/q\nx-seq:1\ncontent-length:5\n\nhello\0\n"


def test_every_error_code_is_covered() -> None:
    codes = {cls.code for cls in vars(_errors).values() if isinstance(cls, type) and issubclass(cls, DecodeError)}
    codes.discard("decode-error")  # the base class; EncodeError is exercised by _encode_errors
    assert {code for _, _, code in BAD_STREAMS} == codes


def _decode_errors(module: ModuleType) -> None:
    for data, options, code in BAD_STREAMS:
        for size in (len(data), 3):
            decoder = module.Decoder(**options)
            try:
                decoder.feed(GOOD)
                for start in range(0, len(data), size):
                    decoder.feed(data[start : start + size])
                decoder.close()
            except DecodeError as error:
                assert error.code == code
            else:
                raise AssertionError(f"no error for {data!r}")
            try:
                decoder.feed(b"more")  # the error is raised again until reset()
            except DecodeError:
                pass
            decoder.reset()
        columns = module.ColumnDecoder(**options)
        try:
            columns.feed(GOOD + data)
            columns.close()
        except DecodeError:
            columns.take()


def _encode_errors(module: ModuleType) -> None:
    for args, options in [
        (("SEND", [("", "x")], b""), {}),
        (("SEND", [("x\0", "y")], b""), {}),
        (("SEND", [("content-length", "9")], b"x"), {}),
        (("", [], b""), {}),
        (("CONNECT", [("a:b", "c")], b""), {}),
        (("SEND", [("x", "a\rb")], b""), {"version": "1.1"}),
        (("SEND", [("x", "\ud800")], b""), {}),
    ]:
        try:
            module.encode(*args, **options)
        except EncodeError:
            pass
        else:
            raise AssertionError(f"no error for {args!r}")


def _misuse(module: ModuleType) -> None:
    decoder = module.Decoder()
    for bad in ("text", None, 7, memoryview(b"abcd")[::2]):
        try:
            decoder.feed(bad)
        except (TypeError, BufferError):
            pass


def _every_error(module: ModuleType) -> None:
    _decode_errors(module)
    _encode_errors(module)
    _misuse(module)


def _measure(run: Callable[[], None], repeats: int) -> Tuple[int, int, List[int]]:
    probes: List[Any] = [DecodeError, EncodeError, _errors.LimitExceededError, "destination", "SEND", b"more", None]
    for _ in range(10):  # caches, interned strings, type caches
        run()
    gc.collect()
    refcounts = [sys.getrefcount(probe) for probe in probes]
    objects = len(gc.get_objects())
    tracemalloc.start()
    try:
        run()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(repeats):
            run()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    gc.collect()
    growth = [sys.getrefcount(probe) - count for probe, count in zip(probes, refcounts)]
    return grown, len(gc.get_objects()) - objects, growth


def test_error_paths_leak_nothing(codec: ModuleType) -> None:
    repeats = 100
    grown, objects, refs = _measure(lambda: _every_error(codec), repeats)
    # a leak would add at least one object (or reference) per error per repeat: thousands
    assert grown < 64 * 1024, f"traced memory grew by {grown} bytes"
    assert objects < 100, f"{objects} more objects tracked by the GC"
    assert max(map(abs, refs)) < 10, refs


@pytest.mark.parametrize("method", ["feed", "reset", "close", "take"])
def test_refused_reentry_leaks_nothing(codec: ModuleType, method: str) -> None:
    # a refused call must leave no reference behind (and must not leave the decoder busy)
    decoder = codec.ColumnDecoder()
    calls = {
        "feed": lambda: decoder.feed(b""),
        "reset": decoder.reset,
        "close": decoder.close,
        "take": decoder.take,
    }
    refused: List[int] = []
    threshold = gc.get_threshold()

    def callback(phase: str, info: Any) -> None:
        if phase == "start":
            try:
                calls[method]()
            except RuntimeError:
                refused.append(1)
            except DecodeError:
                pass

    def run() -> None:
        gc.callbacks.append(callback)
        gc.set_threshold(1)
        try:
            decoder.feed(b"SEND\nx:\xff\n\n\0")  # the diagnosis runs Python code: the GC runs in it
        except DecodeError:
            pass
        finally:
            gc.set_threshold(*threshold)
            gc.callbacks.remove(callback)
        decoder.reset()

    grown, objects, refs = _measure(run, 200)
    assert len(refused) > 200
    assert grown < 64 * 1024, f"traced memory grew by {grown} bytes"
    assert objects < 100
    assert max(map(abs, refs)) < 10, refs
