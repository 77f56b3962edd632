"""The arrival-time sidecar ``<file>.fftimes``: when each frame of a capture arrived.

Written by :mod:`fastframe.capture` beside every file it records; read by the
Spark reader (its ``received_at`` column) and by ``fastframe replay --pace
recorded``. The format, little-endian::

    b"FFTIMES1"                      8 bytes, the format
    then one record per frame:       16 bytes each, in frame order
        int64 offset                 the frame's first byte in the (decompressed) file
        int64 unix_ns                when the recorder saw the frame's last byte (ns since the epoch, UTC)

Record ``i`` is the file's frame ``i`` (the reader's ``frame_index``), so a
read of frames ``[first, first + n)`` seeks to ``8 + 16 * first`` and reads
``16 * n`` bytes. Heart-beat EOLs have no record; a file cut short by a decode
error has records for the frames before it. The offsets let a reader check
that its frames are the recorder's (other decoder options may end a file
elsewhere).

The codec and the standard library only.
"""

from __future__ import annotations

import struct
from typing import List, Optional, Tuple

from ._files import TIMES_SUFFIX, open_stream

MAGIC = b"FFTIMES1"
RECORD = struct.Struct("<qq")  # (offset, unix_ns)


def times_path(path: str) -> str:
    """The sidecar of ``path`` (a compressed file's too: ``x.stomp.gz.fftimes``)."""
    return path + TIMES_SUFFIX


def read_raw(path: str, first: int = 0, count: Optional[int] = None, prefer: str = "auto") -> bytes:
    """The records of frames ``[first, first + count)`` (all from ``first`` when ``count`` is None) of ``path``'s
    sidecar as raw bytes (fewer near its end).

    ``b""`` when there is no sidecar or it is not one (no error: arrival times are optional).
    """
    try:
        stream = open_stream(times_path(path), prefer, None)
    except (OSError, ValueError):
        return b""
    try:
        if stream.read(len(MAGIC)) != MAGIC:
            return b""
        if first:
            stream.seek(len(MAGIC) + RECORD.size * first)
        data = bytes(stream.read() if count is None else stream.read(RECORD.size * count))
    except (OSError, ValueError):
        return b""
    finally:
        stream.close()
    return data[: len(data) - len(data) % RECORD.size]


def read_times(path: str, prefer: str = "auto") -> List[Tuple[int, int]]:
    """Every ``(offset, unix_ns)`` record of ``path``'s sidecar (``[]`` when there is none)."""
    data = read_raw(path, prefer=prefer)
    return [RECORD.unpack_from(data, at) for at in range(0, len(data), RECORD.size)]
