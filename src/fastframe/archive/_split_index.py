"""Proven frame boundaries: the only places a file is ever split.

A boundary is proven when a decoder walked to it: every byte before it
decoded into whole frames, so a new decoder started there sees exactly the
frames a single pass would. Guessing instead (looking for ``\\0`` followed by
a command line) is unsafe: bodies under content-length can hold NULs and text
that looks exactly like a frame.

Boundaries come from a scan (:func:`scan_checkpoints`, a streaming decode
that keeps one ``(frame_index, offset)`` checkpoint every ``interval`` bytes)
and are kept in an index sidecar ``<file>.ffidx`` (JSON), written by
:func:`write_index` (public as ``fastframe.spark.write_index``), by the
``fastframe index`` command or by the Spark writer (option ``writeIndex``). A
sidecar is used only if the file still has the size it was indexed at and the
read uses the same decoder options (they decide where a malformed file stops,
hence which boundaries exist). The Spark reader cuts its splits here
(:func:`load_checkpoints`, :func:`choose_splits`).

No Spark here: indexing a local file needs the codec and the standard library
only (remote files, as everywhere, pyarrow or fsspec).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..codec import DecodeError, Decoder
from ._files import INDEX_SUFFIX, open_stream, resolve

INDEX_FORMAT = "fastframe-index/1"
Checkpoint = Tuple[int, int]  # (frame_index, offset)


def decoder_signature(decoder_kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The complete decoder options (defaults filled in) an index is valid for."""
    options = Decoder(**decoder_kwargs).options
    out = {name: getattr(options, name) for name in options._fields if name != "heartbeat_events"}
    return out


def scan_checkpoints(
    path: str, decoder_kwargs: Dict[str, Any], interval: int, prefer: str = "auto", buffer_size: int = 1 << 20
) -> Tuple[List[Checkpoint], int, Optional[int]]:
    """Decode a file once; return ``(checkpoints, frames, error_offset)``.

    The first frame is always a checkpoint; then the first frame starting at
    least ``interval`` bytes after the previous checkpoint. A decode error
    ends the scan: no boundary after it is proven.
    """
    decoder = Decoder(**decoder_kwargs)
    checkpoints: List[Checkpoint] = []
    count = 0
    next_at = 0
    error_offset: Optional[int] = None
    stream = open_stream(path, prefer, None)
    try:
        while True:
            data = stream.read(buffer_size)
            if not data:
                decoder.close()
                break
            try:
                frames = decoder.feed(data)
            except DecodeError as err:
                frames = err.frames
                error_offset = err.offset
            for frame in frames:
                if frame.offset >= next_at:
                    checkpoints.append((count, frame.offset))
                    next_at = frame.offset + interval
                count += 1
            if error_offset is not None:
                break
    except DecodeError as err:  # from close(): a truncated last frame
        error_offset = err.offset
    finally:
        stream.close()
    return checkpoints, count, error_offset


def index_path(path: str) -> str:
    return path + INDEX_SUFFIX


def write_index(path: str, interval: int = 4 << 20, prefer: str = "auto", **decoder_kwargs: Any) -> Dict[str, Any]:
    """Scan ``path`` and write its index sidecar ``path + ".ffidx"``; return the index.

    ``decoder_kwargs`` are the codec's Decoder options; reads use the index
    only with the same options.
    """
    fs, inner = resolve(path, prefer)
    info = fs.info(inner)
    if info is None or info.is_dir:
        raise FileNotFoundError(f"not a file: {path}")
    checkpoints, frames, error_offset = scan_checkpoints(path, decoder_kwargs, interval, prefer)
    index = make_index(info.size, decoder_kwargs, checkpoints, frames, error_offset)
    with fs.open_write(index_path(inner)) as out:
        out.write(json.dumps(index).encode("utf-8"))
    return index


def make_index(
    size: int,
    decoder_kwargs: Dict[str, Any],
    checkpoints: Sequence[Sequence[int]],
    frames: int,
    error_offset: Optional[int],
) -> Dict[str, Any]:
    return {
        "format": INDEX_FORMAT,
        "size": size,
        "decoder": decoder_signature(decoder_kwargs),
        "frames": frames,
        "error_offset": error_offset,
        "checkpoints": [list(c) for c in checkpoints],
    }


def load_checkpoints(path: str, size: int, decoder_kwargs: Dict[str, Any], prefer: str) -> Optional[List[Checkpoint]]:
    """The checkpoints of a valid sidecar of ``path``, else None (absent, stale or other options)."""
    fs, inner = resolve(path, prefer)
    sidecar = index_path(inner)
    if fs.info(sidecar) is None:
        return None
    try:
        stream = fs.open_read(sidecar)
        try:
            index = json.loads(stream.read())
        finally:
            stream.close()
    except (OSError, ValueError):
        return None
    if not isinstance(index, dict) or index.get("format") != INDEX_FORMAT or index.get("size") != size:
        return None
    if index.get("decoder") != json.loads(json.dumps(decoder_signature(decoder_kwargs))):
        return None
    return [(int(i), int(o)) for i, o in index.get("checkpoints", [])]


def choose_splits(checkpoints: List[Checkpoint], size: int, target: int) -> List[Tuple[int, int, int]]:
    """``(start, end, first_index)`` pieces of about ``target`` bytes, cut at checkpoints.

    The first piece starts at 0 (the EOLs before the first frame belong to it).
    """
    cuts = [(0, 0)]
    last = 0
    for index, offset in checkpoints:
        if offset <= last or offset >= size:
            continue
        if offset - last >= target:
            cuts.append((index, offset))
            last = offset
    pieces = []
    for k, (index, start) in enumerate(cuts):
        end = cuts[k + 1][1] if k + 1 < len(cuts) else size
        pieces.append((start, end, index))
    return pieces
