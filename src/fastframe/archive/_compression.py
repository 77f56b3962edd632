"""Compressed archive files by codec name, without pyarrow: gzip and bz2 with the standard library, zstd with
the standard library's ``compression.zstd`` (Python 3.14+) or else ``zstandard`` (the ``zstd`` extra).

The capture recorder writes ``.stomp.gz`` and ``.stomp.zst`` pieces with :func:`compressed_writer`;
replay, and :func:`fastframe.archive.open_stream` where pyarrow is not installed, read them with
:func:`compressed_reader` (pyarrow, where it is, decompresses all three itself). zstd needs one of its two
modules only to write, or to read without pyarrow: :func:`require_compression` names the missing extra.
"""

from __future__ import annotations

import bz2
import gzip
import importlib
from typing import Any

#: The codecs written and read here, with the ending of their files.
COMPRESSED_SUFFIXES = {"gzip": ".gz", "zstd": ".zst", "bz2": ".bz2"}
#: zstd's level for recordings: zstd's default, fast enough for live traffic.
ZSTD_LEVEL = 3
MISSING_ZSTD = (
    "zstd compression needs the zstd extra: pip install 'fastframe[zstd]' "
    "(the zstandard package; Python 3.14+ has compression.zstd built in)"
)

_zstd: Any = None  # the module found (compression.zstd or zstandard), once looked up


def _find_zstd() -> Any:
    """compression.zstd or zstandard (None when neither is installed)."""
    global _zstd
    if _zstd is None:
        for name in ("compression.zstd", "zstandard"):
            try:
                _zstd = importlib.import_module(name)
                break
            except ImportError:
                continue
    return _zstd


def require_compression(codec: str) -> None:
    """Raise ImportError (naming the extra) when ``codec`` cannot be written or read here, ValueError when
    it is not one of :data:`COMPRESSED_SUFFIXES`."""
    if codec not in COMPRESSED_SUFFIXES:
        raise ValueError(f"compression must be one of {', '.join(COMPRESSED_SUFFIXES)}, not {codec!r}")
    if codec == "zstd" and _find_zstd() is None:
        raise ImportError(MISSING_ZSTD)


def compressed_writer(raw: Any, codec: str) -> Any:
    """A writable stream compressing into the binary file ``raw``: closing it ends the compressed stream
    (gzip's trailer, zstd's frame) and leaves ``raw`` open. Output depends on the bytes only (no time)."""
    require_compression(codec)
    if codec == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)
    if codec == "bz2":
        return bz2.BZ2File(raw, mode="wb")
    zstd = _find_zstd()
    if zstd.__name__ == "zstandard":
        return zstd.ZstdCompressor(level=ZSTD_LEVEL).stream_writer(raw, closefd=False)
    return zstd.ZstdFile(raw, mode="wb", level=ZSTD_LEVEL)


def compressed_reader(raw: Any, codec: str) -> Any:
    """A readable stream of the decompressed bytes of the binary file ``raw`` (closing it closes ``raw``).

    Concatenated gzip members and zstd frames read as one stream, as the ``gzip`` and ``zstd`` tools do.
    """
    require_compression(codec)
    if codec == "gzip":
        return _Owning(gzip.GzipFile(fileobj=raw, mode="rb"), raw)
    if codec == "bz2":
        return _Owning(bz2.BZ2File(raw, mode="rb"), raw)
    zstd = _find_zstd()
    if zstd.__name__ == "zstandard":
        return zstd.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True)
    return _Owning(zstd.ZstdFile(raw, mode="rb"), raw)


class _Owning:
    """A decompressing reader that also closes the file under it."""

    def __init__(self, stream: Any, raw: Any) -> None:
        self._stream = stream
        self._raw = raw

    def read(self, size: int = -1) -> bytes:
        return self._stream.read(size)  # type: ignore[no-any-return]

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            self._raw.close()

    def __enter__(self) -> _Owning:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
