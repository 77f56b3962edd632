"""Real RabbitMQ byte streams decode to exactly what their sidecars say.

Every recording in ../shared/corpus/brokers/rabbitmq is decoded whole, in the
recv()/send() chunks it was recorded in, and byte by byte (the small ones).
Streams whose sidecar lists ``problems`` must fail at the offending byte with
default options, and decode to the sidecar's frames with the matching
tolerance.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Optional, Tuple

import pytest

import fastframe
from _strategies import feed_chunks
from conftest import CORPUS

RABBITMQ = CORPUS / "rabbitmq"
_BIG = {"messages-10k"}


def _recordings() -> List[str]:
    if not RABBITMQ.is_dir():
        # one placeholder, so the corpus_dir fixture can skip (locally) or fail (CI)
        return ["<corpus missing>"]
    names = [p.name[: -len(".json")] for p in sorted(RABBITMQ.glob("*.json"))]
    return [n for n in names if n != "index" and n not in _BIG]


RECORDINGS = _recordings()


@functools.lru_cache(maxsize=None)
def _load(name: str) -> Tuple[Dict[str, Any], bytes]:
    sidecar = json.loads((RABBITMQ / f"{name}.json").read_text(encoding="utf-8"))
    data = (RABBITMQ / sidecar["file"]).read_bytes()
    return sidecar, data


@pytest.fixture
def recording(corpus_dir: Path, request: pytest.FixtureRequest) -> Tuple[Dict[str, Any], bytes]:
    sidecar, data = _load(request.param)
    assert len(data) == sidecar["bytes"]
    assert hashlib.sha256(data).hexdigest() == sidecar["sha256"]
    return sidecar, data


def _version(sidecar: Dict[str, Any]) -> str:
    return sidecar["negotiated_version"] or "1.2"


def _problems(sidecar: Dict[str, Any]) -> List[str]:
    return [p for item in sidecar["items"] for p in item.get("problems", [])]


def _by_problem(kind: str) -> List[str]:
    out = []
    for name in RECORDINGS:
        if name == "<corpus missing>":
            return [name]
        if any(kind in p for p in _problems(_load(name)[0])):
            out.append(name)
    return out


CLEAN = [n for n in RECORDINGS if n == "<corpus missing>" or not _problems(_load(n)[0])]
PROBLEMATIC = [n for n in RECORDINGS if n != "<corpus missing>" and _problems(_load(n)[0])] or ["<corpus missing>"]
TOLERABLE = _by_problem("invalid escape") + _by_problem("without ':'")
LENIENT_1_2 = [
    n
    for n in RECORDINGS
    if n == "<corpus missing>" or any("headers_if_unescaped_as_1_2" in item for item in _load(n)[0]["items"])
]


# --------------------------------------------------------------------------- comparing


def _expected(items: List[Dict[str, Any]], headers_key: str = "headers") -> List[Tuple[Any, ...]]:
    out: List[Tuple[Any, ...]] = []
    for item in items:
        if item["type"] == "heartbeat":
            out.append(("heartbeat", item["offset"], item["eol"].encode()))
        elif item["type"] == "frame":
            headers = item.get(headers_key, item["headers"])
            out.append(
                (
                    "frame",
                    item["offset"],
                    item["command"],
                    tuple((n, v) for n, v in headers),
                    item["body_length"],
                    item["body_sha256"],
                )
            )
        else:  # pragma: no cover - the corpus has no incomplete tails
            raise AssertionError(f"unexpected item {item['type']}")
    return out


def _actual(events: List[Any]) -> List[Tuple[Any, ...]]:
    out: List[Tuple[Any, ...]] = []
    for event in events:
        if isinstance(event, fastframe.DecodeError):  # pragma: no cover
            raise AssertionError(event)
        if hasattr(event, "command"):
            out.append(
                (
                    "frame",
                    event.offset,
                    event.command,
                    event.headers,
                    len(event.body),
                    hashlib.sha256(event.body).hexdigest(),
                )
            )
        else:
            out.append(("heartbeat", event.offset, event.eol))
    return out


def _check_bodies(items: List[Dict[str, Any]], events: List[Any]) -> None:
    """Short bodies are in the sidecar in full: compare them octet for octet."""
    frames = [e for e in events if hasattr(e, "command")]
    expected = [i for i in items if i["type"] == "frame"]
    assert len(frames) == len(expected)
    for item, frame in zip(expected, frames):
        if "body_text" in item:
            assert frame.body == item["body_text"].encode("utf-8")
        elif "body_hex" in item:
            assert frame.body == bytes.fromhex(item["body_hex"])
        if item["content_length"] is not None:
            assert frame.get("content-length") == str(item["content_length"])


def _timeline_chunks(sidecar: Dict[str, Any]) -> List[int]:
    sizes, at = [], 0
    for _, offset, length in sidecar["timeline"]:
        assert offset == at  # the recording is contiguous
        sizes.append(length)
        at += length
    return sizes


def _decode(codec: ModuleType, data: bytes, sizes: Optional[List[int]], **options: Any) -> Tuple[List[Any], Any]:
    decoder = codec.Decoder(heartbeat_events=True, **options)
    events = decoder.feed(data) if sizes is None else feed_chunks(decoder, data, sizes)
    decoder.close()
    return events, decoder


CHUNKINGS = ["whole", "recorded", "bytewise"]


def _sizes(how: str, sidecar: Dict[str, Any], data: bytes) -> Optional[List[int]]:
    if how == "whole":
        return None
    if how == "recorded":
        return _timeline_chunks(sidecar)
    return [1] * len(data)


# --------------------------------------------------------------------------- clean streams


@pytest.mark.parametrize("how", CHUNKINGS)
@pytest.mark.parametrize("recording", CLEAN, indirect=True)
def test_recording_decodes_to_its_sidecar(codec: ModuleType, recording: Any, how: str) -> None:
    sidecar, data = recording
    events, decoder = _decode(codec, data, _sizes(how, sidecar, data), version=_version(sidecar))
    assert _actual(events) == _expected(sidecar["items"])
    _check_bodies(sidecar["items"], events)
    summary = sidecar["summary"]
    frames = [e for e in events if hasattr(e, "command")]
    assert len(frames) == summary["frame_count"]
    assert [f.command for f in frames] == summary["commands"]
    assert decoder.heartbeats == summary["heartbeat_count"]
    frame_ends = {i["offset"] + i["length"] for i in sidecar["items"] if i["type"] == "frame"}
    after_frame = [e for e in events if not hasattr(e, "command") and e.offset in frame_ends]
    assert len(after_frame) == summary["eol_directly_after_frame_count"]
    assert decoder.bytes_fed == len(data)
    assert decoder.buffered == 0


@pytest.mark.parametrize("recording", CLEAN, indirect=True)
def test_recording_without_heartbeat_events(codec: ModuleType, recording: Any) -> None:
    sidecar, data = recording
    decoder = codec.Decoder(_version(sidecar))
    frames = decoder.feed(data)
    decoder.close()
    assert _actual(frames) == [e for e in _expected(sidecar["items"]) if e[0] == "frame"]
    assert decoder.heartbeats == sidecar["summary"]["heartbeat_count"]


# --------------------------------------------------------------------------- streams with problems


def _head_lines(data: bytes, start: int) -> Tuple[List[Tuple[int, bytes]], int]:
    """(offset, line without EOL) for the command and header lines of the frame at ``start``; body start."""
    lines = []
    at = start
    while True:
        lf = data.index(b"\n", at)
        line = data[at:lf]
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            return lines, lf + 1
        lines.append((at, line))
        at = lf + 1


def _first_undefined_escape(line: bytes, letters: bytes) -> int:
    i = 0
    while True:
        i = line.find(b"\\", i)
        if i < 0:
            return -1
        if i + 1 < len(line) and line[i + 1] in letters:
            i += 2
        else:
            return i


def _expected_error(sidecar: Dict[str, Any], data: bytes) -> Tuple[type, int, Dict[str, Any]]:
    """Error class and offset for the first frame with problems, computed from its raw bytes."""
    item = next(i for i in sidecar["items"] if i.get("problems"))
    problem = item["problems"][0]
    lines, body_start = _head_lines(data, item["offset"])
    headers = lines[1:]
    if "invalid escape" in problem:
        letters = b"rnc\\" if _version(sidecar) == "1.2" else b"nc\\"
        for at, line in headers:
            # names and values are checked separately: a name ending in '\' is an error
            name, colon, value = line.partition(b":")
            i = _first_undefined_escape(name, letters)
            if i < 0 and colon:
                i = _first_undefined_escape(value, letters)
                i = i if i < 0 else len(name) + 1 + i
            if i >= 0:
                return fastframe.InvalidEscapeError, at + i, item
    if "without ':'" in problem:
        at = next(at for at, line in headers if b":" not in line)
        return fastframe.HeaderLineError, at, item
    if "bad content-length" in problem:
        at, line = next((at, line) for at, line in headers if line.startswith(b"content-length:"))
        value = line[len(b"content-length:") :]
        bad = next(k for k, byte in enumerate(value) if not 48 <= byte <= 57)
        return fastframe.ContentLengthError, at + len(b"content-length:") + bad, item
    if "no NUL after content-length" in problem:
        length = next(int(line.split(b":", 1)[1]) for _, line in headers if line.startswith(b"content-length:"))
        return fastframe.MissingNullError, body_start + length, item
    raise AssertionError(f"no rule for problem {problem!r}")


@pytest.mark.parametrize("how", CHUNKINGS)
@pytest.mark.parametrize("recording", PROBLEMATIC, indirect=True)
def test_problem_is_an_error_at_the_offending_byte(codec: ModuleType, recording: Any, how: str) -> None:
    sidecar, data = recording
    cls, offset, bad_item = _expected_error(sidecar, data)
    before = [i for i in sidecar["items"] if i["offset"] < bad_item["offset"]]
    decoder = codec.Decoder(_version(sidecar), heartbeat_events=True)
    sizes = _sizes(how, sidecar, data) or [len(data)]
    view = memoryview(data)
    events: List[Any] = []
    at = 0
    with pytest.raises(fastframe.DecodeError) as info:
        for size in sizes:
            events += decoder.feed(view[at : at + size])
            at += size
        decoder.close()
    err = info.value
    assert type(err) is cls
    assert err.offset == offset
    assert err.code == cls.code
    assert str(err) == f"{err.reason} at offset {offset} (near {err.excerpt!r})"
    # nothing completed before the bad byte is lost
    assert _actual(events + err.frames) == _expected(before)
    if how == "whole":
        assert events == []
    # the error sticks until reset()
    with pytest.raises(cls) as again:
        decoder.feed(b"\n")
    assert (again.value.offset, again.value.frames) == (offset, [])
    decoder.reset()
    assert decoder.feed(b"\n") == [codec.Heartbeat(0, b"\n")]


def _tolerance(sidecar: Dict[str, Any]) -> Dict[str, bool]:
    problems = " ".join(_problems(sidecar))
    options = {}
    if "invalid escape" in problems:
        options["keep_undefined_escapes"] = True
    if "without ':'" in problems:
        options["allow_missing_colon"] = True
    return options


@pytest.mark.parametrize("how", CHUNKINGS)
@pytest.mark.parametrize("recording", TOLERABLE, indirect=True)
def test_problem_tolerated_with_matching_option(codec: ModuleType, recording: Any, how: str) -> None:
    sidecar, data = recording
    options = _tolerance(sidecar)
    assert options
    events, decoder = _decode(codec, data, _sizes(how, sidecar, data), version=_version(sidecar), **options)
    assert _actual(events) == _expected(sidecar["items"])
    _check_bodies(sidecar["items"], events)
    assert decoder.heartbeats == sidecar["summary"]["heartbeat_count"]


@pytest.mark.parametrize("recording", TOLERABLE, indirect=True)
def test_tolerance_is_specific(codec: ModuleType, recording: Any) -> None:
    # the tolerance for one problem does not hide another kind
    sidecar, data = recording
    options = _tolerance(sidecar)
    cls, offset, _ = _expected_error(sidecar, data)
    for name in options:
        others = {"keep_undefined_escapes", "allow_missing_colon"} - {name}
        with pytest.raises(cls) as info:
            codec.decode(data, _version(sidecar), **{o: True for o in others})
        assert info.value.offset == offset


# --------------------------------------------------------------------------- 1.2 escapes on 1.0/1.1


@pytest.mark.parametrize("how", CHUNKINGS)
@pytest.mark.parametrize("recording", LENIENT_1_2, indirect=True)
def test_old_versions_with_1_2_escapes(codec: ModuleType, recording: Any, how: str) -> None:
    # what RabbitMQ means on 1.0/1.1 connections: the 1.2 escape set
    sidecar, data = recording
    assert _version(sidecar) in ("1.0", "1.1")
    events, _ = _decode(codec, data, _sizes(how, sidecar, data), version=_version(sidecar), escapes="1.2")
    assert _actual(events) == _expected(sidecar["items"], "headers_if_unescaped_as_1_2")


# --------------------------------------------------------------------------- the 10k stream


@functools.lru_cache(maxsize=1)
def _load_10k() -> Tuple[Dict[str, Any], bytes]:
    return _load("messages-10k")


@pytest.fixture
def stream10k(corpus_dir: Path) -> Tuple[Dict[str, Any], bytes]:
    sidecar, data = _load_10k()
    assert len(data) == sidecar["bytes"]
    return sidecar, data


def _check_10k(sidecar: Dict[str, Any], events: List[Any], decoder: Any) -> None:
    expected = sidecar["expected"]
    frames = [e for e in events if hasattr(e, "command")]
    beats = [e for e in events if not hasattr(e, "command")]
    assert len(frames) == expected["frame_count"] == len(sidecar["frames"])
    for frame, want in zip(frames, sidecar["frames"]):
        assert frame.command == want["command"]
        assert frame.offset == want["offset"]
        assert len(frame.body) == want["body_length"]
        assert hashlib.sha256(frame.body).hexdigest() == want["body_sha256"], want["i"]
        cl = frame.get("content-length")
        assert cl == (None if want["content_length"] is None else str(want["content_length"]))
        assert frame.get("x-seq") == want["x_seq"]
    for frame, want in zip(frames, sidecar["first_frames_full"]):
        assert frame.headers == tuple((n, v) for n, v in want["headers"])
    counts: Dict[str, int] = {}
    for frame in frames:
        counts[frame.command] = counts.get(frame.command, 0) + 1
    assert counts == expected["command_counts"]
    assert sum(len(f.body) for f in frames) == expected["total_body_bytes"]
    # heart-beats: one LF right after each frame's NUL, plus the standalone ones
    assert len(beats) == decoder.heartbeats == expected["eol_count"]
    frame_ends = {w["offset"] + w["length"] for w in sidecar["frames"]}
    after = [b.offset for b in beats if b.offset in frame_ends]
    standalone = [b.offset for b in beats if b.offset not in frame_ends]
    assert len(after) == expected["eol_directly_after_frame_count"]
    assert standalone == expected["standalone_heartbeat_offsets"]
    assert {b.eol for b in beats} == {b"\n"}  # RabbitMQ sends LF only
    # every 50th message has the 1.2-escaped x-escape header
    escaped = [f.get("x-escape") for f in frames if f.get("x-escape") is not None]
    assert escaped and set(escaped) == {"a:b\\c\nd\re ☃"}
    assert decoder.buffered == 0
    assert decoder.bytes_fed == sidecar["bytes"]


def test_10k_whole(codec: ModuleType, stream10k: Any) -> None:
    sidecar, data = stream10k
    events, decoder = _decode(codec, data, None, version=sidecar["negotiated_version"])
    _check_10k(sidecar, events, decoder)


def test_10k_recorded_chunks(codec: ModuleType, stream10k: Any) -> None:
    sidecar, data = stream10k
    sizes = sidecar["recv_chunk_sizes"]
    assert sum(sizes) == len(data)
    events, decoder = _decode(codec, data, sizes, version=sidecar["negotiated_version"])
    _check_10k(sidecar, events, decoder)
