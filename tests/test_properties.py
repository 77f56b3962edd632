"""Property tests: encode/decode round trips, chunking invariance, mutated streams.

Default runs use the ``fastframe-default`` profile (200 examples per test);
``HYPOTHESIS_PROFILE=thorough`` runs many more.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from _strategies import (
    PROFILE,
    bodies,
    commands,
    cut_points,
    events_key,
    feed_chunks,
    headers_lists,
    outcome,
    representable,
    streams,
)
from fastframe import EncodeError

# (version, escapes) pairs the encoder and decoder are run with; the last two
# are RabbitMQ's "1.2 escapes whatever the version".
VERSION_ESCAPES = [("1.2", None), ("1.1", None), ("1.0", None), ("1.0", "1.2"), ("1.1", "1.2")]


def _expected_headers(
    headers: List[Tuple[str, str]], body: bytes, content_length: Optional[bool]
) -> Tuple[Tuple[str, str], ...]:
    """What decode() must give back: the headers, plus the content-length the encoder adds."""
    out = tuple(headers)
    if any(name == "content-length" for name, _ in headers):
        return out
    if content_length or (content_length is None and body) or b"\0" in body:
        out += (("content-length", str(len(body))),)
    return out


# --------------------------------------------------------------------------- round trip


@PROFILE
@given(
    command=commands,
    headers=headers_lists,
    body=bodies,
    version_escapes=st.sampled_from(VERSION_ESCAPES),
    content_length=st.sampled_from([None, True, False]),
    eol=st.sampled_from(["\n", "\r\n"]),
    data=st.data(),
)
def test_round_trip(
    codec: ModuleType,
    command: str,
    headers: List[Tuple[str, str]],
    body: bytes,
    version_escapes: Tuple[str, Optional[str]],
    content_length: Optional[bool],
    eol: str,
    data: Any,
) -> None:
    version, escapes = version_escapes
    options: Dict[str, Any] = {"version": version, "escapes": escapes}
    if not representable(command, headers, body, escapes or version):
        event("refused by the encoder")
        with pytest.raises(EncodeError):
            codec.encode(command, headers, body, content_length=content_length, eol=eol, **options)
        return
    wire = codec.encode(command, headers, body, content_length=content_length, eol=eol, **options)
    expected = codec.Frame(command, _expected_headers(headers, body, content_length), body)
    assert codec.decode(wire, **options) == [expected]
    # the same frame, in pieces, strict on what the encoder promises: no bare CR, and no
    # raw ':' in values unless the escape set has no \c (1.0)
    colon_ok = (escapes or version) == "1.0"
    decoder = codec.Decoder(allow_colon_in_value=colon_ok, allow_bare_cr=False, **options)
    frames = feed_chunks(decoder, wire, [1] * 3 + data.draw(st.lists(st.integers(1, 16), max_size=6)))
    decoder.close()
    assert frames == [expected]
    # a Frame encodes the same way as its parts
    assert codec.Frame(command, headers, body).encode(content_length=content_length, eol=eol, **options) == wire


@PROFILE
@given(command=commands, headers=headers_lists, body=bodies, version=st.sampled_from(["1.2", "1.1"]))
def test_decoded_frames_re_encode_identically(
    codec: ModuleType, command: str, headers: List[Tuple[str, str]], body: bytes, version: str
) -> None:
    if not representable(command, headers, body, version):
        return
    wire = codec.encode(command, headers, body, version=version)
    (frame,) = codec.decode(wire, version)
    # the decoded frame carries the content-length the encoder added: encoding it again adds nothing
    assert codec.encode(frame, version=version) == wire


# --------------------------------------------------------------------------- chunking


@PROFILE
@given(data=st.data(), version=st.sampled_from(["1.2", "1.1", "1.0"]))
def test_any_chunking_gives_the_same_events(codec: ModuleType, data: Any, version: str) -> None:
    stream = data.draw(streams(codec, version))
    whole = outcome(codec, stream, version=version, heartbeat_events=True)
    assert whole[0] == "ok"
    assert outcome(codec, stream, list(range(len(stream))), version=version, heartbeat_events=True) == whole
    cuts = data.draw(cut_points(len(stream)))
    assert outcome(codec, stream, cuts, version=version, heartbeat_events=True) == whole
    # without events: the same frames and the same heart-beat count
    decoder = codec.Decoder(version)
    frames = feed_chunks(decoder, stream, [2] * len(stream))
    decoder.close()
    assert events_key(frames) == [e for e in whole[1] if e[0] == "frame"]
    assert decoder.heartbeats == whole[2] == sum(1 for e in whole[1] if e[0] == "heartbeat")


# --------------------------------------------------------------------------- mutated streams

_INSERTS = [
    b"\r", b"\n", b"\0", b"\\", b":", b"\r\n", b"\n\n", b"\xff", b"\xe2\x98",
    b"\\t", b"\\r", b"\\c", b"\ncontent-length:3", b"\ncontent-length:x\n", b"content-length:0\n",
]  # fmt: skip


@st.composite
def mutated(draw: Any, stream: bytes) -> bytes:
    data = bytearray(stream)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "replace"]))
        at = draw(st.integers(0, len(data)))
        if kind == "truncate":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.sampled_from(_INSERTS))
        elif at < len(data):
            if kind == "flip":
                data[at] ^= 1 << draw(st.integers(0, 7))
            elif kind == "delete":
                del data[at]
            else:
                data[at] = draw(st.sampled_from(b"\r\n\0\\:c0 "))
    return bytes(data)


_flags = {
    "strict": st.booleans(),
    "escapes": st.sampled_from(["1.0", "1.1", "1.2"]),
    "keep_undefined_escapes": st.booleans(),
    "keep_invalid_utf8": st.booleans(),
    "allow_missing_colon": st.booleans(),
    "allow_colon_in_value": st.booleans(),
    "allow_bare_cr": st.booleans(),
}
_limits = {
    "max_header_count": st.integers(0, 4),
    "max_line_length": st.integers(1, 40),
    "max_body_size": st.integers(0, 40),
    "max_frame_size": st.integers(2, 120),
}
_version = {"version": st.sampled_from(["1.2", "1.1", "1.0"])}
# half of the examples without small limits, so the other errors get their share
decoder_options = st.one_of(
    st.fixed_dictionaries(_version, optional=_flags),
    st.fixed_dictionaries(_version, optional={**_flags, **_limits}),
)


@PROFILE
@given(data=st.data(), options=decoder_options)
def test_mutated_streams_same_outcome_however_chunked(codec: ModuleType, data: Any, options: Dict[str, Any]) -> None:
    stream = data.draw(streams(codec, options.get("escapes") or options["version"]))
    bad = data.draw(mutated(stream))
    whole = outcome(codec, bad, **options)
    event(whole[1].__name__ if whole[0] == "error" else "still valid")
    assert outcome(codec, bad, list(range(len(bad))), **options) == whole
    assert outcome(codec, bad, data.draw(cut_points(len(bad))), **options) == whole
    if whole[0] == "error":
        _, cls, offset, _, events = whole
        assert 0 <= offset <= len(bad)
        # everything reported happened before the offending byte
        assert all(e[-1] < offset if e[0] == "frame" else e[1] < offset for e in events)


@PROFILE
@given(data=st.data(), options=decoder_options)
def test_valid_streams_under_any_options_however_chunked(codec: ModuleType, data: Any, options: Dict[str, Any]) -> None:
    # limits and strictness make valid streams fail too: at the same place whatever the chunking
    stream = data.draw(streams(codec, options.get("escapes") or options["version"]))
    whole = outcome(codec, stream, **options)
    event(whole[1].__name__ if whole[0] == "error" else "decoded")
    assert outcome(codec, stream, list(range(len(stream))), **options) == whole
    assert outcome(codec, stream, data.draw(cut_points(len(stream))), **options) == whole


@PROFILE
@given(data=st.data())
def test_error_state_after_mutation(codec: ModuleType, data: Any) -> None:
    stream = data.draw(streams(codec))
    bad = data.draw(mutated(stream))
    decoder = codec.Decoder()
    try:
        decoder.feed(bad)
    except Exception as err:  # noqa: BLE001 - any error must stick, whatever it is
        first = err
    else:
        return
    with pytest.raises(type(first)) as again:
        decoder.feed(b"SEND\n\n\0")
    assert str(again.value) == str(first)
    decoder.reset()
    assert decoder.feed(stream) == codec.decode(stream)
