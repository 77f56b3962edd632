"""A decoder used by two callers at once: the second call raises, memory is never corrupted.

A decoder belongs to one connection (one thread at a time). Sharing one
without a lock is a misuse; it may give garbled frames or errors, never a
crash. Both twins refuse a call that comes while another is running (another
thread, or a finalizer run by the garbage collector in the middle of a
call) with the same RuntimeError, as CPython's buffered I/O does.
"""

from __future__ import annotations

import functools
import gc
import json
import subprocess
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Iterator, List

import pytest

from conftest import compiled_twin
from fastframe import DecodeError, EncodeError
from fastframe.codec._errors import REENTRANT_CALL

# The reproducer, bounded: threads stop once enough calls were refused (or
# after a generous cap) and report what each call gave. A crash fails the test
# through the exit status, without taking pytest down with it.
SHARED_DECODER = r"""
import importlib, json, sys, threading, time
module = importlib.import_module(sys.argv[1])
from fastframe import DecodeError, EncodeError
from fastframe.codec._errors import REENTRANT_CALL
BUSY = {REENTRANT_CALL.format(type_name, method) for type_name in ("Decoder", "ColumnDecoder")
        for method in ("feed", "reset", "close", "take")}
sys.setswitchinterval(1e-6)
decoder = getattr(module, sys.argv[2])()
pieces = [b"SE", b"N\xff\n" + b"x" * 200000, b"SEND\nx:y\n\nhi\0", b"MESSAGE\n" + b"h:v\n" * 300 + b"\n\0"]
stop = threading.Event()
results = []
refused = [0]  # an approximate count (not locked): it only decides when to stop

def work():
    counts = {"busy": 0, "decode": 0, "ok": 0, "other": []}
    while not stop.is_set():
        for data in pieces:
            try:
                decoder.feed(data)
                counts["ok"] += 1
            except RuntimeError as error:
                if str(error) not in BUSY:
                    counts["other"].append(repr(error))
                counts["busy"] += 1
                refused[0] += 1
            except DecodeError:
                counts["decode"] += 1
                try:
                    decoder.reset()
                except RuntimeError as error:
                    if str(error) not in BUSY:
                        counts["other"].append(repr(error))
                    counts["busy"] += 1
            except Exception as error:
                counts["other"].append(repr(error))
    results.append(counts)

threads = [threading.Thread(target=work) for _ in range(4)]
for thread in threads:
    thread.start()
deadline = time.monotonic() + float(sys.argv[3])  # a cap: the run usually ends much sooner
while time.monotonic() < deadline and refused[0] < 200:
    time.sleep(0.01)
stop.set()
for thread in threads:
    thread.join(30)
print(json.dumps({
    "busy": sum(r["busy"] for r in results),
    "decode": sum(r["decode"] for r in results),
    "ok": sum(r["ok"] for r in results),
    "other": [o for r in results for o in r["other"]][:5],
    "threads": len(results),
}))
"""


@pytest.mark.parametrize("kind", ["Decoder", "ColumnDecoder"])
@pytest.mark.parametrize("twin", ["fastframe.codec._codec_c", "fastframe.codec._codec_py"], ids=["c", "py"])
def test_a_decoder_shared_by_threads_refuses_the_second_caller(twin: str, kind: str) -> None:
    if twin.endswith("_c"):
        compiled_twin()  # a skip when absent by design, a failure when expected
    result = subprocess.run(
        [sys.executable, "-c", SHARED_DECODER, twin, kind, "20"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"exit status {result.returncode}: {result.stderr[-2000:]}"
    report = json.loads(result.stdout)
    assert report["threads"] == 4
    assert report["other"] == []  # only frames, DecodeErrors and the documented RuntimeError
    assert report["busy"] > 0, report  # the second caller was refused, not let in
    assert report["ok"] + report["decode"] > 0


@pytest.fixture
def collector_runs() -> Iterator[Callable[[Callable[[], None]], None]]:
    """Run a function at every collection of the cyclic GC, with the GC made to run on every allocation."""
    callbacks: List[Any] = []
    threshold = gc.get_threshold()

    def install(function: Callable[[], None]) -> None:
        def callback(phase: str, info: Any) -> None:
            if phase == "start":
                function()

        while callbacks:  # one at a time
            gc.callbacks.remove(callbacks.pop())
        callbacks.append(callback)
        gc.callbacks.append(callback)
        gc.set_threshold(1)

    yield install
    gc.set_threshold(*threshold)
    for callback in callbacks:
        gc.callbacks.remove(callback)


def _stream() -> bytes:
    # distinct headers: each one a new tuple (an allocation the GC counts), in both twins
    head = b"".join(b"x-%d:value-%d\n" % (i, i) for i in range(40))
    return b"\n".join(b"MESSAGE\ndestination:/q\n" + head + b"content-length:3\n\nabc\0" for _ in range(5))


@pytest.mark.parametrize("split", [None, 30, 700], ids=["whole", "buffered-head", "buffered-frame"])
def test_a_finalizer_that_feeds_the_busy_decoder_is_refused(
    codec: ModuleType, collector_runs: Callable[[Callable[[], None]], None], split: Any
) -> None:
    data = _stream()
    expected = codec.decode(data)
    decoder = codec.Decoder()
    outcomes: List[str] = []

    def probe() -> None:
        # harmless when the decoder is idle (an empty feed), refused when it is busy
        try:
            outcomes.append(repr(decoder.feed(b"")))
        except RuntimeError as error:
            outcomes.append(str(error))

    frames = decoder.feed(data[:split]) if split else []
    collector_runs(probe)
    frames += decoder.feed(data[split:] if split else data)
    gc.set_threshold(700, 10, 10)  # the probe has done its work
    busy = REENTRANT_CALL.format("Decoder", "feed")
    assert busy in outcomes
    assert set(outcomes) <= {busy, "[]"}
    assert frames == expected
    assert [frame.offset for frame in frames] == [frame.offset for frame in expected]


def test_reentry_message_is_the_same_in_both_twins(collector_runs: Callable[[Callable[[], None]], None]) -> None:
    from fastframe.codec import _codec_py as P

    C = compiled_twin()

    messages = {}
    for module in (C, P):
        decoder = module.ColumnDecoder()
        seen: List[str] = []

        def probe(decoder: Any = decoder, seen: List[str] = seen) -> None:
            for call in (lambda: decoder.feed(b""), decoder.take, decoder.close, decoder.reset):
                try:
                    call()
                except RuntimeError as error:
                    seen.append(f"{type(error).__name__}: {error}")
                except DecodeError:
                    pass

        gc.set_threshold(700, 10, 10)
        collector_runs(probe)
        with pytest.raises(DecodeError):
            # the error path calls into Python (the diagnosis) in both twins: the GC runs there
            decoder.feed(_stream() + b"\nSEND\nx:\xff\n\n\0")
        gc.set_threshold(700, 10, 10)
        messages[module.IMPLEMENTATION] = sorted(set(seen))
    assert messages["c"] == messages["python"]
    assert messages["c"] == sorted(
        f"RuntimeError: {REENTRANT_CALL.format('ColumnDecoder', method)}"
        for method in ("feed", "take", "close", "reset")
    )


def test_a_finalizer_that_resets_or_grows_the_busy_decoder_cannot_corrupt_it(
    codec: ModuleType, collector_runs: Callable[[Callable[[], None]], None]
) -> None:
    # what freed the buffer under the parser before: a reset, or a feed that reallocates it
    decoder = codec.Decoder()
    refused: List[str] = []

    def attack() -> None:
        for call in (decoder.reset, lambda: decoder.feed(b"SEND\n" + b"y" * 100_000)):
            try:
                call()
            except RuntimeError as error:
                refused.append(str(error))
            except DecodeError:
                pass

    data = _stream()
    decoder.feed(data[:700])
    collector_runs(attack)
    try:
        decoder.feed(data[700:] + b"\nSEND\nx:\xff\n\n\0")  # an error path too
    except DecodeError as error:
        assert error.code == "bad-header-line"
    gc.set_threshold(700, 10, 10)
    assert REENTRANT_CALL.format("Decoder", "reset") in refused
    assert REENTRANT_CALL.format("Decoder", "feed") in refused
    decoder.reset()
    assert decoder.feed(data) == codec.decode(data)


def _in_threads(targets: List[Callable[[], None]], timeout: float = 300) -> None:
    """Run each target in its own thread, switching threads as often as CPython allows; all must end."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=target) for target in targets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout)
        assert not any(thread.is_alive() for thread in threads)
    finally:
        sys.setswitchinterval(switch)


@pytest.mark.parametrize("twin", ["fastframe.codec._codec_c", "fastframe.codec._codec_py"], ids=["c", "py"])
def test_encoders_may_be_shared_by_threads(twin: str) -> None:
    # encode() uses one module-level Encoder: threads share it, and must get exact bytes
    import importlib

    if twin.endswith("_c"):
        compiled_twin()  # a skip when absent by design, a failure when expected
    module = importlib.import_module(twin)
    frames = [module.Frame("SEND", [("destination", f"/q/{i}"), ("x", "a:b\\c\n")], b"x" * i) for i in range(50)]
    expected = [module.encode(frame) for frame in frames]
    failures: List[int] = []

    def work() -> None:
        for _ in range(200):
            for i, frame in enumerate(frames):
                if (
                    module.encode(frame) != expected[i]
                    or module.encode("SEND", frame.headers, frame.body) != expected[i]
                ):
                    failures.append(i)

    _in_threads([work] * 4)
    assert failures == []


def _stomp_stream(count: int) -> bytes:
    # headers that need escaping, bodies with NULs (content-length), heart-beats between frames
    parts = []
    for i in range(count):
        body = bytes(range(i % 7)) * (i % 50)
        parts.append(
            f"MESSAGE\ndestination:/q/{i % 5}\nmessage-id:{i}\nx:a\\cb\\n{i}\ncontent-length:{len(body)}\n\n".encode()
            + body
            + b"\0\n"
        )
    return b"".join(parts)


def test_separate_decoders_and_encoders_in_many_threads_match_one_thread(codec: ModuleType) -> None:
    # one decoder and one encoder per thread (the documented rule): the same frames as one thread gets
    data = _stomp_stream(300)
    expected = codec.decode(data)
    expected_bytes = [codec.Encoder("1.2").encode(frame) for frame in expected]
    expected_columns = codec.ColumnDecoder()
    expected_columns.feed(data)
    expected_rows = expected_columns.take()
    failures: List[str] = []

    def work(seed: int) -> None:
        decoder, columns, encoder = codec.Decoder(), codec.ColumnDecoder(), codec.Encoder("1.2")
        for round_ in range(5):
            step = 1 + (seed * 7 + round_ * 13) % 997  # each thread cuts the stream its own way
            decoder.reset()
            columns.reset()  # offsets count from the start of the stream again
            frames = []
            for start in range(0, len(data), step):
                frames.extend(decoder.feed(data[start : start + step]))
                columns.feed(data[start : start + step])
            if frames != expected:
                failures.append(f"thread {seed}: frames differ at step {step}")
            if columns.take() != expected_rows:
                failures.append(f"thread {seed}: columns differ at step {step}")
            if [encoder.encode(frame) for frame in frames] != expected_bytes:
                failures.append(f"thread {seed}: encoded bytes differ")

    _in_threads([functools.partial(work, seed) for seed in range(8)])
    assert failures == []


@pytest.mark.parametrize("container", ["dict", "list"])
def test_headers_changed_by_another_thread_while_encoding_give_a_whole_frame(codec: ModuleType, container: str) -> None:
    # A caller's race (one thread edits the headers another thread encodes): every result is a whole
    # frame of one of the states the headers passed through, or a typed error; never a crash or torn bytes.
    states = [{"destination": "/q/a", "x": "1"}, {"destination": "/q/a", "x": "2", "y": "a:b"}, {"destination": "/q/a"}]
    allowed = {codec.encode("SEND", state, b"body") for state in states}
    shared: Any = dict(states[0]) if container == "dict" else list(states[0].items())
    seen_pairs = {pair for state in states for pair in state.items()} | {("content-length", "4")}
    stop = threading.Event()
    bad: List[bytes] = []

    def edit() -> None:
        i = 0
        while not stop.is_set():
            state = states[i % len(states)]
            if container == "dict":
                shared.clear()
                shared.update(state)
            else:
                shared[:] = list(state.items())
            i += 1

    def encode() -> None:
        for _ in range(3000):
            try:
                made = codec.encode("SEND", shared, b"body")
            except (EncodeError, RuntimeError):  # RuntimeError: the dict changed size while iterated
                continue
            if made in allowed:
                continue
            # a state between two edits (a dict half cleared or half updated): still one whole frame
            frames = codec.decode(made)
            if len(frames) != 1 or frames[0].body != b"body" or not set(frames[0].headers) <= seen_pairs:
                bad.append(made)

    def encoders() -> None:
        try:
            _in_threads([encode] * 3)
        finally:
            stop.set()

    _in_threads([edit, encoders])
    assert bad == []


def test_reinitialising_an_encoder_mid_encode_writes_one_whole_frame(codec: ModuleType) -> None:
    # A str subclass's __str__ (normalization runs it) re-initialises the encoder with another escape
    # set or EOL: the frame is written with one set of options throughout, and sized for that set
    # (a verdict cached under 1.2's escapes must not size a 1.1 frame).
    encoder = codec.Encoder("1.2")
    value = "a\rb"  # escaped on 1.2, not representable on 1.1
    assert encoder.encode("SEND", [("x", value)], b"") == b"SEND\nx:a\\rb\n\n\0"

    class Reinit(str):
        options: dict = {}

        def __str__(self) -> str:
            encoder.__init__(**self.options)
            return "y"

    Reinit.options = {"version": "1.1"}
    with pytest.raises(EncodeError, match="CR cannot be escaped in STOMP 1.1"):
        encoder.encode("SEND", [("x", value), (Reinit("y"), "z")], b"")
    encoder.__init__("1.2")
    Reinit.options = {"version": "1.2", "eol": "\r\n"}
    made = encoder.encode("SEND", [("x", value), (Reinit("y"), "z")], b"b")
    assert made == b"SEND\r\nx:a\\rb\r\ny:z\r\ncontent-length:1\r\n\r\nb\0"


def test_a_free_threaded_build_keeps_the_gil_off_after_import() -> None:
    # The compiled twin declares itself free-threading compatible: importing it must not turn the GIL
    # back on (CPython does, with a warning, for an extension that does not declare it).
    import sysconfig

    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("not a free-threaded build of CPython (the wheels workflow runs this on 3.14t)")
    compiled_twin()
    assert not sys._is_gil_enabled()  # type: ignore[attr-defined]
