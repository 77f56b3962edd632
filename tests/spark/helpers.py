"""Comparing the Spark layer's rows with what the bare decoder makes of the same bytes."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

Row = Tuple[int, int, str, Tuple[Tuple[str, str], ...], bytes]
Error = Tuple[int, str, str]


def bare_decode(codec: Any, data: bytes, **options: Any) -> Tuple[List[Row], Optional[Error]]:
    """What the bare decoder makes of a whole file: frame rows, then the error (offset, code, reason) if any."""
    decoder = codec.Decoder(**options)
    frames: List[Any] = []
    error: Optional[Error] = None
    try:
        frames = decoder.feed(data)
        decoder.close()
    except Exception as err:  # a DecodeError of either twin
        if not hasattr(err, "offset"):
            raise
        frames = frames or list(err.frames)
        error = (err.offset, err.code, err.reason)
    rows = [(f.offset, i, f.command, tuple(f.headers), f.body) for i, f in enumerate(frames)]
    return rows, error


def split_rows(rows: List[Any]) -> Dict[str, Tuple[List[Row], Optional[Error]]]:
    """Spark rows grouped per file, in frame order: frame rows, then the error row if any."""
    out: Dict[str, Tuple[List[Row], Optional[Error]]] = {}
    grouped: Dict[str, List[Any]] = {}
    for row in rows:
        grouped.setdefault(row["path"], []).append(row)
    for path, items in grouped.items():
        items.sort(key=lambda r: r["frame_index"])
        frames: List[Row] = []
        error: Optional[Error] = None
        for r in items:
            if r["error_code"] is not None:
                assert error is None, f"two error rows for {path}"
                error = (r["offset"], r["error_code"], r["error_reason"])
                assert r["command"] is None and r["body"] is None and r["headers"] is None
                assert r["frame_index"] == len(frames)
            else:
                assert error is None, f"a frame row after the error row in {path}"
                headers = tuple((h["name"], h["value"]) for h in r["headers"])
                frames.append((r["offset"], r["frame_index"], r["command"], headers, bytes(r["body"])))
        out[path] = (frames, error)
    return out
