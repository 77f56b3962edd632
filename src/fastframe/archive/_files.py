"""Files on any filesystem: local paths with the standard library, remote ones
through ``pyarrow.fs`` (s3, gs, hdfs, abfs, ...) or ``fsspec`` (anything else it
knows: memory, http, az, ...), behind one small interface.

A path without a scheme (or ``file:``) is local and needs nothing extra: local
files are read with pyarrow when it is installed (native reads that release
the GIL), else with :func:`open`, so ``fastframe index`` needs no extra. Each
file system yields "display" paths: the string a user would pass back in
(a plain path, or a URI with its scheme), which is what the Spark reader's
``path`` column holds and what travels to the executors.

Used by the split index (``fastframe.archive._split_index``), the Spark layer
(:mod:`fastframe.spark`) and the capture recorder; imports none of them.
"""

from __future__ import annotations

import fnmatch
import glob as _glob
import os
import re
import shutil
import threading
from typing import Any, BinaryIO, Dict, Iterator, List, Optional, Tuple
from urllib.parse import urlsplit

from ._compression import compressed_reader

GLOB_CHARS = "*?["
#: Compression by file name ending (the reader's "auto").
EXTENSIONS = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2"}
#: The split index's sidecar file beside a capture (written by the writer and `fastframe index`, skipped by listings).
INDEX_SUFFIX = ".ffidx"
#: The arrival-time sidecar beside a capture (written by :mod:`fastframe.capture`, skipped by listings).
TIMES_SUFFIX = ".fftimes"

_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]?)(i?b)?\s*", re.I)
_SIZE_FACTORS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: Any) -> int:
    """Bytes from an int or a string such as ``"16m"``, ``"1g"``, ``"512KiB"`` (binary units, as Spark's)."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        return value
    match = _SIZE.fullmatch(str(value))
    if not match:
        raise ValueError(f"not a size: {value!r} (use bytes, or a number with k, m, g or t)")
    return int(match.group(1)) * _SIZE_FACTORS[match.group(2).lower()]


class FileInfo:
    __slots__ = ("path", "size", "is_dir")

    def __init__(self, path: str, size: int, is_dir: bool) -> None:
        self.path = path
        self.size = size
        self.is_dir = is_dir

    def __repr__(self) -> str:
        return f"FileInfo({self.path!r}, {self.size}, dir={self.is_dir})"


class LocalFS:
    """The local file system, with the standard library only."""

    kind = "local"

    def to_display(self, path: str) -> str:
        # absolute, as Spark qualifies paths: relative ones resolve against the directory the
        # JVM (and so every Python worker) started in, and rows should say where they come from
        return os.path.abspath(path)

    def info(self, path: str) -> Optional[FileInfo]:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return FileInfo(path, st.st_size, os.path.isdir(path))

    def listdir(self, path: str) -> List[FileInfo]:
        out = []
        with os.scandir(path) as entries:
            for entry in entries:
                is_dir = entry.is_dir()
                out.append(FileInfo(entry.path, 0 if is_dir else entry.stat().st_size, is_dir))
        return out

    def glob(self, pattern: str) -> List[str]:
        return _glob.glob(pattern)

    def open_read(self, path: str) -> Any:
        try:
            import pyarrow as pa  # type: ignore[import-untyped]
        except ImportError:  # the base install (fastframe index): the standard library's reads
            return open(path, "rb")
        return pa.OSFile(path, "rb")  # native reads that release the GIL

    def open_write(self, path: str) -> BinaryIO:
        return open(path, "wb")

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def move(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)

    def join(self, *parts: str) -> str:
        return os.path.join(*parts)


class ArrowFS:
    """A ``pyarrow.fs.FileSystem``; ``prefix`` turns its paths back into URIs."""

    kind = "pyarrow"

    def __init__(self, fs: Any, prefix: str) -> None:
        self.fs = fs
        self.prefix = prefix

    def to_display(self, path: str) -> str:
        return self.prefix + path

    def info(self, path: str) -> Optional[FileInfo]:
        from pyarrow.fs import FileType  # type: ignore[import-untyped]

        got = self.fs.get_file_info(path)
        if got.type == FileType.NotFound:
            return None
        is_dir = got.type == FileType.Directory
        return FileInfo(path, 0 if is_dir else (got.size or 0), is_dir)

    def listdir(self, path: str) -> List[FileInfo]:
        from pyarrow.fs import FileSelector, FileType

        out = []
        for got in self.fs.get_file_info(FileSelector(path, recursive=False)):
            is_dir = got.type == FileType.Directory
            out.append(FileInfo(got.path, 0 if is_dir else (got.size or 0), is_dir))
        return out

    def glob(self, pattern: str) -> List[str]:
        return _generic_glob(self, pattern)

    def open_read(self, path: str) -> Any:
        return self.fs.open_input_file(path)  # random access, no guessing of compression

    def open_write(self, path: str) -> Any:
        return self.fs.open_output_stream(path, compression=None)

    def makedirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    def move(self, src: str, dst: str) -> None:
        self.fs.move(src, dst)

    def remove(self, path: str) -> None:
        got = self.info(path)
        if got is not None and got.is_dir:
            self.fs.delete_dir(path)
        else:
            self.fs.delete_file(path)

    def join(self, *parts: str) -> str:
        return "/".join(p.rstrip("/") for p in parts[:-1]) + "/" + parts[-1] if len(parts) > 1 else parts[0]


class FsspecFS:
    """An ``fsspec`` file system."""

    kind = "fsspec"

    def __init__(self, fs: Any, plain: bool = False) -> None:
        self.fs = fs
        self.plain = plain  # a path given without a scheme is shown without one

    def to_display(self, path: str) -> str:
        return path if self.plain else str(self.fs.unstrip_protocol(path))

    def _info(self, got: Dict[str, Any]) -> FileInfo:
        is_dir = got.get("type") == "directory"
        return FileInfo(self.fs._strip_protocol(got["name"]), 0 if is_dir else int(got.get("size") or 0), is_dir)

    def info(self, path: str) -> Optional[FileInfo]:
        try:
            return self._info(self.fs.info(path))
        except FileNotFoundError:
            return None

    def listdir(self, path: str) -> List[FileInfo]:
        return [self._info(got) for got in self.fs.ls(path, detail=True)]

    def glob(self, pattern: str) -> List[str]:
        return [self.fs._strip_protocol(p) for p in self.fs.glob(pattern)]

    def open_read(self, path: str) -> Any:
        import pyarrow as pa

        return pa.PythonFile(self.fs.open(path, "rb"), mode="r")

    def open_write(self, path: str) -> Any:
        return self.fs.open(path, "wb")

    def makedirs(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def move(self, src: str, dst: str) -> None:
        self.fs.mv(src, dst)

    def remove(self, path: str) -> None:
        self.fs.rm(path, recursive=True)

    def join(self, *parts: str) -> str:
        return "/".join(p.rstrip("/") for p in parts[:-1]) + "/" + parts[-1] if len(parts) > 1 else parts[0]


def _generic_glob(fs: Any, pattern: str) -> List[str]:
    """Expand a glob one path component at a time with listdir (pyarrow.fs has no glob)."""
    parts = pattern.split("/")
    first = next(i for i, part in enumerate(parts) if any(c in part for c in GLOB_CHARS))
    bases = ["/".join(parts[:first])]
    for part in parts[first:]:
        is_glob = any(c in part for c in GLOB_CHARS)
        next_bases = []
        for base in bases:
            if not is_glob:
                candidate = f"{base}/{part}" if base else part
                if fs.info(candidate) is not None:
                    next_bases.append(candidate)
                continue
            got = fs.info(base) if base else None
            if base and (got is None or not got.is_dir):
                continue
            for child in fs.listdir(base):
                if fnmatch.fnmatchcase(child.path.rstrip("/").rsplit("/", 1)[-1], part):
                    next_bases.append(child.path.rstrip("/"))
        bases = next_bases
    return sorted(bases)


_CACHE: Dict[Tuple[str, str, str], Tuple[Any, str]] = {}
_CACHE_LOCK = threading.Lock()


def _scheme(path: str) -> str:
    scheme = urlsplit(path).scheme
    return "" if len(scheme) <= 1 else scheme.lower()  # "C:\\x" is a Windows drive, not a scheme


def is_local(path: str, prefer: str = "auto") -> bool:
    return prefer == "auto" and _scheme(path) in ("", "file")


def resolve(path: str, prefer: str = "auto") -> Tuple[Any, str]:
    """``(filesystem, path inside it)`` for a user path or URI.

    ``prefer``: ``auto`` (local paths with the standard library, schemes
    ``pyarrow.fs`` knows with it, any other with fsspec), ``pyarrow`` or
    ``fsspec`` (force one, e.g. to read s3 through s3fs).
    """
    scheme = _scheme(path)
    if prefer == "auto" and scheme in ("", "file"):
        if scheme == "file":
            path = urlsplit(path).path
        return LocalFS(), path
    parts = urlsplit(path)
    key = (prefer, scheme, parts.netloc)
    if prefer in ("auto", "pyarrow"):
        import pyarrow as pa
        import pyarrow.fs as pafs

        if not scheme:
            return ArrowFS(pafs.LocalFileSystem(), ""), os.path.abspath(path)
        try:
            with _CACHE_LOCK:
                cached = _CACHE.get(key)
            if cached is None:
                fs, inner = pafs.FileSystem.from_uri(path)
                prefix = path[: len(path) - len(inner)] if path.endswith(inner) else f"{scheme}://"
                with _CACHE_LOCK:
                    _CACHE[key] = (fs, prefix)
                return ArrowFS(fs, prefix), inner
            fs, prefix = cached
            inner = path[len(prefix) :] if path.startswith(prefix) else pafs.FileSystem.from_uri(path)[1]
            return ArrowFS(fs, prefix), inner
        except pa.ArrowInvalid:
            if prefer == "pyarrow":
                raise
    try:
        import fsspec  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError(
            f"reading {path!r} needs fsspec (pip install fsspec, plus the package for {scheme or 'the'} "
            "scheme, e.g. s3fs), or a scheme pyarrow.fs knows"
        ) from None
    fs, inner = fsspec.core.url_to_fs(path)
    return FsspecFS(fs, plain=not scheme), inner


def compression_for(path: str, setting: str = "auto") -> Optional[str]:
    """The codec a file is decompressed with: by its ending when ``setting`` is auto."""
    if setting == "none":
        return None
    if setting != "auto":
        return setting
    lower = path.lower()
    for ending, codec in EXTENSIONS.items():
        if lower.endswith(ending):
            return codec
    return None


def open_stream(path: str, prefer: str, compression: Optional[str], start: int = 0) -> Any:
    """A readable binary stream over a file's bytes, decompressed when ``compression`` is set (by pyarrow,
    or where it is not installed by :mod:`._compression`)."""
    if compression is not None and start:
        raise ValueError("a compressed file cannot be read from an offset")
    fs, inner = resolve(path, prefer)
    raw = fs.open_read(inner)
    if compression is not None:
        try:
            import pyarrow as pa
        except ImportError:  # the base install: the standard library's gzip and bz2, zstd with its extra
            try:
                return compressed_reader(raw, compression)
            except BaseException:
                raw.close()
                raise
        return pa.CompressedInputStream(raw, compression)
    if start:
        raw.seek(start)
    return raw


def iter_files(paths: Any, prefer: str, recursive: bool, glob_filter: Optional[str]) -> Iterator[Tuple[str, int]]:
    """``(display path, size)`` of every file the given paths, globs and folders name.

    As Spark's file sources do: folders are listed (recursively with
    ``recursive``), skipping names that start with ``.`` or ``_`` (and index
    sidecars); ``glob_filter`` applies to file names; a path that matches
    nothing is an error.
    """
    seen = set()
    for given in paths:
        fs, inner = resolve(given, prefer)
        if any(c in inner for c in GLOB_CHARS) and fs.info(inner) is None:
            matches = fs.glob(inner)
            if not matches:
                raise FileNotFoundError(f"[PATH_NOT_FOUND] Path does not exist: {given}")
            # what a glob matches is listed, so hidden names are skipped as in folders
            infos = [fs.info(m) for m in sorted(matches) if not basename(m).startswith((".", "_"))]
        else:
            got = fs.info(inner)
            if got is None:
                raise FileNotFoundError(f"[PATH_NOT_FOUND] Path does not exist: {given}")
            infos = [got]
        for got in infos:
            if got is None:
                continue
            if got.is_dir:
                found = _walk(fs, got.path, recursive)
            else:
                found = [got]
            for item in found:
                base = basename(item.path)
                if item.is_dir:
                    continue
                if glob_filter is not None and not fnmatch.fnmatchcase(base, glob_filter):
                    continue
                display = fs.to_display(item.path)
                if display in seen:
                    continue
                if got.is_dir and base.endswith((INDEX_SUFFIX, TIMES_SUFFIX)):
                    continue
                seen.add(display)
                yield display, item.size


def basename(path: str) -> str:
    """The last component of a local path or a URI."""
    return path.rstrip("/" + os.sep).replace(os.sep, "/").rsplit("/", 1)[-1]


def _walk(fs: Any, root: str, recursive: bool) -> List[FileInfo]:
    out: List[FileInfo] = []
    stack = [root]
    while stack:
        current = stack.pop()
        for child in sorted(fs.listdir(current), key=lambda c: c.path):
            base = basename(child.path)
            if base.startswith((".", "_")):
                continue  # hidden, _SUCCESS, _temporary: as Spark skips them
            if child.is_dir:
                if recursive:
                    stack.append(child.path)
            else:
                out.append(child)
    out.sort(key=lambda c: c.path)
    return out
