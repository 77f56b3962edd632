"""Hypothesis strategies and feeding helpers shared by the behavioural tests.

Nothing here knows a twin: helpers take the codec module the test got from
the ``codec`` fixture.
"""

from __future__ import annotations

import os
from array import array
from types import ModuleType
from typing import Any, Iterable, List, Optional, Sequence, Tuple

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from fastframe import DecodeError

# --------------------------------------------------------------------------- profiles

# Default runs stay at a few seconds per test on a shared 2-core machine;
# HYPOTHESIS_PROFILE=thorough digs deeper. Applied per test (``PROFILE``), so
# loading this module never changes the settings of other test modules.
settings.register_profile(
    "fastframe-default",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_PROFILE_NAME = os.environ.get("HYPOTHESIS_PROFILE", "fastframe-default")
PROFILE = settings.get_profile(_PROFILE_NAME if _PROFILE_NAME == "thorough" else "fastframe-default")

CONNECT_LIKE = frozenset({"CONNECT", "STOMP", "CONNECTED"})

# --------------------------------------------------------------------------- feeding


def feed_chunks(decoder: Any, data: bytes, sizes: Iterable[int]) -> List[Any]:
    """Feed ``data`` in pieces of the given sizes (the rest in one last piece)."""
    out: List[Any] = []
    view = memoryview(data)
    pos = 0
    for size in sizes:
        if pos >= len(data):
            break
        out += decoder.feed(view[pos : pos + size])
        pos += size
    if pos < len(data):
        out += decoder.feed(view[pos:])
    return out


def outcome(codec: ModuleType, data: bytes, cuts: Optional[Sequence[int]] = None, **options: Any) -> Tuple[Any, ...]:
    """Decode ``data`` (whole, or split at ``cuts``) and close.

    Returns ``("ok", events, heartbeats)`` or ``("error", class, offset,
    reason, events)`` where ``events`` is everything returned before the
    error, whichever feed() returned it (err.frames included).
    """
    decoder = codec.Decoder(**options)
    events: List[Any] = []
    points = [0, len(data)] if cuts is None else [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
    try:
        for a, b in zip(points, points[1:]):
            events += decoder.feed(data[a:b])
        decoder.close()
    except DecodeError as err:
        events += err.frames
        return ("error", type(err), err.offset, err.reason, events_key(events))
    return ("ok", events_key(events), decoder.heartbeats)


def events_key(events: Iterable[Any]) -> List[Tuple[Any, ...]]:
    """Frames and heart-beats as plain tuples, offsets included (Frame equality ignores them)."""
    out: List[Tuple[Any, ...]] = []
    for event in events:
        if hasattr(event, "command"):
            out.append(("frame", event.command, event.headers, event.body, event.offset))
        else:
            out.append(("heartbeat", event.offset, event.eol))
    return out


# --------------------------------------------------------------------------- strategies

# Text without surrogates (they have no UTF-8 form); occasionally heavy on the
# characters that matter to STOMP framing and escaping.
_special_chars = st.sampled_from(["\r", "\n", ":", "\\", " ", "c", "r", "n", "t", "é", "☃", "\U0001f600"])
_any_char = st.characters(blacklist_categories=("Cs",))
_char = st.one_of(_special_chars, _any_char)

header_text = st.text(_char, max_size=12)
header_names = st.one_of(
    st.text(_char, min_size=1, max_size=12),
    st.sampled_from(["destination", "content-type", "receipt", "id", "x-a", "content-length"]),
)
commands = st.one_of(
    st.sampled_from(
        ["SEND", "MESSAGE", "ERROR", "SUBSCRIBE", "RECEIPT", "CONNECT", "STOMP", "CONNECTED", "ACK", "NACK"]
    ),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\0"), min_size=1, max_size=10),
)
bodies = st.one_of(
    st.binary(max_size=64),
    st.lists(st.sampled_from([b"\0", b"\n", b"\r", b"\r\n", b"x", b"\\", b":"]), max_size=12).map(b"".join),
)
headers_lists = st.lists(st.tuples(header_names, header_text), max_size=5)


def representable(command: str, headers: Sequence[Tuple[str, str]], body: bytes, escapes: str) -> bool:
    """Whether the encoder can put this frame on the wire with this escape set."""
    raw = command in CONNECT_LIKE or escapes == "1.0"
    for name, value in headers:
        if not name or "\0" in name or "\0" in value:
            return False
        if raw and (":" in name or any(ch in name + value for ch in "\r\n")):
            return False
        if escapes == "1.1" and not raw and "\r" in name + value:
            return False
    lengths = [value for name, value in headers if name == "content-length"]
    if lengths:
        value = lengths[0]
        if not (value.isascii() and value.isdigit() and int(value) == len(body)):
            return False
    return True


def _safe_headers(headers: List[Tuple[str, str]], body: bytes) -> List[Tuple[str, str]]:
    """Make a generated content-length header agree with the body (most of the time it should)."""
    return [(n, str(len(body)) if n == "content-length" else v) for n, v in headers]


@st.composite
def valid_frames(draw: Any, escapes: str = "1.2") -> Tuple[str, List[Tuple[str, str]], bytes]:
    """A (command, headers, body) the encoder accepts with ``escapes``."""
    command = draw(commands)
    body = draw(bodies)
    headers = _safe_headers(draw(headers_lists), body)
    raw = command in CONNECT_LIKE or escapes == "1.0"
    cleaned = []
    for name, value in headers:
        name = name.replace("\0", "")
        value = value.replace("\0", "")
        if raw:
            name = name.translate({ord(c): None for c in ":\r\n"})
            value = value.translate({ord(c): None for c in "\r\n"})
        elif escapes == "1.1":
            name, value = name.replace("\r", ""), value.replace("\r", "")
        if name:
            cleaned.append((name, value))
    return command, cleaned, body


@st.composite
def streams(draw: Any, codec: ModuleType, escapes: str = "1.2", max_frames: int = 4) -> bytes:
    """A valid byte stream made by ``codec``'s encoder: frames with LF/CRLF heart-beats around them."""
    parts = []
    eol_runs = st.lists(st.sampled_from([b"\n", b"\r\n"]), max_size=3).map(b"".join)
    parts.append(draw(eol_runs))
    for _ in range(draw(st.integers(0, max_frames))):
        command, headers, body = draw(valid_frames(escapes))
        content_length = draw(st.sampled_from([None, True, False]))
        eol = draw(st.sampled_from(["\n", "\r\n"]))
        parts.append(codec.encode(command, headers, body, version=escapes, content_length=content_length, eol=eol))
        parts.append(draw(eol_runs))
    return b"".join(parts)


def cut_points(data_len: int) -> st.SearchStrategy[List[int]]:
    return st.lists(st.integers(0, max(data_len, 0)), max_size=8)


# --------------------------------------------------------------------------- columns


def column_rows(columns: Any) -> List[Tuple[Any, ...]]:
    """(command, headers, body, offset) of each row of a Columns, checked against its first-wins map."""

    def unpack(offsets: bytes, data: bytes) -> List[bytes]:
        bounds = array("i", offsets)
        assert bounds[0] == 0 and list(bounds) == sorted(bounds) and bounds[-1] == len(data)
        return [data[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]

    commands = unpack(columns.command_offsets, columns.command_data)
    names = [n.decode() for n in unpack(columns.name_offsets, columns.name_data)]
    values = [v.decode() for v in unpack(columns.value_offsets, columns.value_data)]
    bodies = unpack(columns.body_offsets, columns.body_data)
    header_bounds = array("i", columns.header_offsets)
    keep = columns.map_keep or bytes([1]) * len(names)
    map_bounds = array("i", columns.map_offsets or columns.header_offsets)
    rows = []
    for i, offset in enumerate(array("q", columns.frame_offsets)):
        span = range(header_bounds[i], header_bounds[i + 1])
        headers = tuple((names[j], values[j]) for j in span)
        first_wins = [headers[j - span.start] for j in span if keep[j]]
        assert dict(first_wins) == dict(reversed(headers)) and len(first_wins) == len(dict(headers))
        assert map_bounds[i + 1] - map_bounds[i] == len(first_wins)
        rows.append((commands[i].decode(), headers, bodies[i], offset))
    assert len(rows) == columns.rows
    return rows
