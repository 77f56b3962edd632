"""Replay (``fastframe replay``): send a recorded client stream to a broker, collect what it answers.

The recorded bytes go out unchanged: as fast as the socket takes them, or at the recorded pace, each
frame (with the heart-beat EOLs after it) at its arrival time from the ``.fftimes`` sidecar relative to
the first. The answers are decoded as they arrive; the replay ends when the broker closes the
connection, or when it stayed silent for ``idle`` seconds after everything was sent.
"""

from __future__ import annotations

import asyncio
import os
import re
import ssl as _ssl
from typing import Any, Callable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..archive import compressed_reader, compression_for, read_times
from ..codec import DecodeError, Decoder
from ._credentials import restore, was_redacted

__all__ = ["ReplayResult", "pieces_of", "replay"]

_PIECE = re.compile(r"^(?P<stem>.*\.(?:c2s|s2c))(?:_\d+)?(?P<ext>\.stomp(?:\.gz|\.zst)?)$")


class ReplayResult(NamedTuple):
    """What a replay sent and got back."""

    bytes_sent: int
    answers: List[Any]  # the frames the broker sent (fastframe.Frame), in order
    error: Optional[str]  # why the answers stopped decoding (a DecodeError's text), or None
    closed_by_broker: bool  # the broker ended the connection (else the idle wait ended it)
    #: the capture's CONNECT still held a ``<redacted>`` value when it was sent (no ``credentials`` for it)
    redacted: bool = False


def pieces_of(path: str) -> List[str]:
    """``path`` and the pieces it rolled into (``conn-0003.c2s_0002.stomp`` ...), in stream order."""
    folder, name = os.path.split(path)
    match = _PIECE.match(name)
    if match is None or name != match.group("stem") + match.group("ext"):
        return [path]  # not a first piece of the capture layout: just this file
    stem, ext = match.group("stem"), match.group("ext")
    later = []
    for other in os.listdir(folder or "."):
        found = _PIECE.match(other)
        if found and found.group("stem") == stem and found.group("ext") == ext and other != name:
            later.append(other)
    return [path] + [os.path.join(folder, other) for other in sorted(later)]


def _read(path: str) -> bytes:
    codec = compression_for(path)
    with open(path, "rb") as raw:
        if codec is None:
            return raw.read()
        with compressed_reader(raw, codec) as stream:
            return bytes(stream.read())


def _schedule(paths: Sequence[str], paced: bool) -> List[Tuple[Optional[int], bytes]]:
    """``(unix_ns or None, bytes)`` pieces to send in order: one per frame when paced, else one per file."""
    out: List[Tuple[Optional[int], bytes]] = []
    for path in paths:
        data = _read(path)
        times = read_times(path) if paced else []
        if not times:
            out.append((None, data))
            continue
        cuts = [offset for offset, _ in times] + [len(data)]
        if cuts[0]:
            out.append((times[0][1], data[: cuts[0]]))  # EOLs before the first frame
        for k, (offset, at) in enumerate(times):
            out.append((at, data[offset : cuts[k + 1]]))
    return out


class _State:
    def __init__(self) -> None:
        self.error: Optional[str] = None
        self.closed = False
        self.received = 0


async def replay(
    paths: Sequence[str],
    host: str,
    port: int,
    *,
    pace: str = "fast",
    speed: float = 1.0,
    ssl: Optional[_ssl.SSLContext] = None,
    idle: float = 2.0,
    connect_timeout: float = 10.0,
    max_answer_bytes: int = 64 << 20,
    on_answer: Optional[Callable[[Any], None]] = None,
    decoder_options: Optional[Mapping[str, Any]] = None,
    credentials: Optional[Mapping[str, str]] = None,
) -> ReplayResult:
    """Send the recorded client stream in ``paths`` (pieces in order) to ``host:port``.

    ``pace``: ``"fast"`` or ``"recorded"`` (``speed`` 2.0 replays twice as fast; files without an
    arrival-time sidecar go at once). Each decoded answer is passed to ``on_answer`` as it arrives.
    ``credentials`` (header name -> value, such as ``{"passcode": "..."}``) fill the values that
    recording redacted in the capture's CONNECT; the result's ``redacted`` says whether one was left.
    At most ``max_answer_bytes`` of answers are read; the replay ends at the broker's close or after
    ``idle`` silent seconds once everything was sent.
    """
    if pace not in ("fast", "recorded"):
        raise ValueError(f"pace must be 'fast' or 'recorded', not {pace!r}")
    if not speed > 0:
        raise ValueError("speed must be positive")
    schedule = _schedule(paths, pace == "recorded")
    first_frame = next((k for k, (_, data) in enumerate(schedule) if data.strip(b"\r\n")), None)
    redacted = False
    if first_frame is not None:  # the CONNECT: its redacted values filled in from credentials
        at, data = schedule[first_frame]
        data = restore(data, credentials or {})
        schedule[first_frame] = (at, data)
        redacted = was_redacted(data)
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(host, port, ssl=ssl, server_hostname=host if ssl else None), connect_timeout
    )
    answers: List[Any] = []
    decoder = Decoder(**(decoder_options or {}))
    state = _State()
    activity = asyncio.Event()

    async def read_answers() -> None:
        while True:
            data = await reader.read(1 << 16)
            activity.set()
            if not data:
                state.closed = True
                return
            state.received += len(data)
            if state.error is not None:
                continue
            try:
                frames = decoder.feed(data)
            except DecodeError as err:
                frames = err.frames
                state.error = f"{err.reason} at offset {err.offset}"
            for frame in frames:
                answers.append(frame)
                if on_answer is not None:
                    on_answer(frame)
            if state.received > max_answer_bytes:
                state.error = f"stopped after max_answer_bytes ({max_answer_bytes})"
                return

    reading = asyncio.ensure_future(read_answers())
    sent = 0
    try:
        loop = asyncio.get_running_loop()
        start = loop.time()
        first: Optional[int] = next((at for at, _ in schedule if at is not None), None)
        for at, data in schedule:
            if at is not None and first is not None:
                delay = start + (at - first) / 1e9 / speed - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            if reading.done():
                break  # the broker closed the connection: the rest cannot be sent
            writer.write(data)
            sent += len(data)
            await writer.drain()
        while not reading.done():
            activity.clear()
            try:
                await asyncio.wait_for(activity.wait(), idle)
            except asyncio.TimeoutError:
                break
    except (ConnectionError, OSError):
        pass  # the broker dropped the connection while we sent: its answers so far are the result
    finally:
        reading.cancel()
        try:
            await reading
        except (asyncio.CancelledError, ConnectionError, OSError):
            pass
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 1.0)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
    return ReplayResult(sent, answers, state.error, state.closed, redacted)
