"""The recorder alone (no network): exact bytes, pieces cut at proven frames, sidecars, gzip and zstd, failing
disks.

Every test that decodes runs against both twins (the ``codec`` fixture points the recorder at it).
"""

from __future__ import annotations

import errno
import importlib.util
import json
import logging
import os
import sys
import threading
import time

import pytest

import fastframe
from fastframe.archive import compression_for, load_checkpoints, open_stream
from fastframe.capture import Archive, _recorder, read_times

from .helpers import client_stream, joined, pieces, read_file, require_zstd, server_stream, stomp_files


@pytest.fixture(autouse=True)
def twin(codec, monkeypatch):
    monkeypatch.setattr(_recorder, "codec", codec)
    return codec


def record(tmp_path, c2s: bytes, s2c: bytes, seed: int = 0, **options):
    """Record the two streams in interleaved random pieces; return the files by direction."""
    with Archive(str(tmp_path), "b", **options) as archive:
        recorder = archive.recorder()
        c_pieces, s_pieces = pieces(c2s, seed), pieces(s2c, seed + 1)
        for k in range(max(len(c_pieces), len(s_pieces))):
            if k < len(c_pieces):
                recorder.c2s(c_pieces[k])
            if k < len(s_pieces):
                recorder.s2c(s_pieces[k])
        recorder.close()
        assert recorder.dropped is None
    files = stomp_files(str(tmp_path))
    return files["conn-0001.c2s"], files["conn-0001.s2c"]


def load_index(path: str) -> dict:
    with open(path + ".ffidx", "rb") as stream:
        return json.loads(stream.read())


def check_piece(path: str, decoder_kwargs=None) -> list:
    """A piece decodes on its own; its sidecars describe it exactly. Returns its frames."""
    data = read_file(path)
    frames = fastframe.decode(data)
    times = read_times(path)
    assert [offset for offset, _ in times] == [f.offset for f in frames]
    assert all(t > 1.6e18 for _, t in times)  # unix ns
    index = load_index(path)
    assert index["frames"] == len(frames) and index["error_offset"] is None
    assert index["size"] == os.path.getsize(path)
    if not path.endswith((".gz", ".zst")):
        checkpoints = load_checkpoints(path, os.path.getsize(path), decoder_kwargs or {}, "auto")
        assert checkpoints and checkpoints[0] == (0, frames[0].offset)
        assert all(frames[i].offset == offset for i, offset in checkpoints)
    return frames


def test_two_directions_recorded_exactly(tmp_path):
    c2s, s2c = client_stream(300), server_stream(400)
    c_paths, s_paths = record(tmp_path, c2s, s2c)
    assert [os.path.basename(p) for p in c_paths] == ["conn-0001.c2s.stomp"]
    assert joined(c_paths) == c2s and joined(s_paths) == s2c
    assert check_piece(c_paths[0]) == fastframe.decode(c2s)
    assert check_piece(s_paths[0]) == fastframe.decode(s2c)
    assert os.path.dirname(c_paths[0]).startswith(str(tmp_path / "b" / "20"))  # OUT/BROKER/DATE/


def test_roll_size_cuts_at_frames_only(tmp_path):
    c2s, s2c = client_stream(400, seed=1), server_stream(600, seed=1)
    c_paths, s_paths = record(tmp_path, c2s, s2c, seed=3, roll_size=4096, index_interval=1024)
    assert len(c_paths) > 5 and len(s_paths) > 5
    assert os.path.basename(c_paths[1]) == "conn-0001.c2s_0002.stomp"
    for paths, stream in ((c_paths, c2s), (s_paths, s2c)):
        assert joined(paths) == stream
        frames = []
        for path in paths:
            got = check_piece(path)
            frames += [(f.command, f.headers, f.body) for f in got]
        assert frames == [(f.command, f.headers, f.body) for f in fastframe.decode(stream)]
        biggest = max(len(fastframe.encode(f)) for f in fastframe.decode(stream))
        for path in paths[:-1]:
            # a piece ends at the last frame boundary of the read that takes it to the size
            assert 4096 - 700 - biggest < os.path.getsize(path) < 4096 + 700 + biggest


@pytest.mark.parametrize("compression,ending", [("gzip", ".gz"), ("zstd", ".zst")])
def test_compressed_pieces_with_sidecars(tmp_path, compression, ending):
    if compression == "zstd":
        require_zstd()
    c2s, s2c = client_stream(200, seed=2), server_stream(300, seed=2)
    c_paths, s_paths = record(tmp_path, c2s, s2c, roll_size=8192, compression=compression)
    assert all(p.endswith(".stomp" + ending) for p in c_paths + s_paths) and len(s_paths) > 1
    assert joined(c_paths) == c2s and joined(s_paths) == s2c
    for path in c_paths + s_paths:
        check_piece(path)
        magic = b"\x1f\x8b\x08" if compression == "gzip" else b"\x28\xb5\x2f\xfd"
        with open(path, "rb") as raw:
            assert raw.read(len(magic)) == magic
    # the readers, with pyarrow and without it (the base install: the standard library, zstd's extra)
    for path in c_paths[:2] + s_paths[:2]:
        expected = read_file(path)
        for blocked in (False, True):
            with pytest.MonkeyPatch.context() as patch:
                if blocked:
                    patch.setitem(sys.modules, "pyarrow", None)  # import pyarrow: ImportError
                elif importlib.util.find_spec("pyarrow") is None:
                    continue
                stream = open_stream(path, "auto", compression_for(path))
                try:
                    assert bytes(stream.read()) == expected
                finally:
                    stream.close()


def test_gzip_flag_is_compression_gzip(tmp_path):
    assert Archive(str(tmp_path), "b", gzip=True).compression == "gzip"
    with pytest.raises(ValueError, match="choose one"):
        Archive(str(tmp_path), "b", gzip=True, compression="zstd")
    with pytest.raises(ValueError, match="compression must be"):
        Archive(str(tmp_path), "b", compression="lz4")


def test_zstd_without_its_module_names_the_extra(tmp_path, monkeypatch):
    from fastframe.archive import _compression

    monkeypatch.setattr(_compression, "_find_zstd", lambda: None)
    with pytest.raises(ImportError, match=r"fastframe\[zstd\]"):
        Archive(str(tmp_path), "b", compression="zstd")
    (tmp_path / "x.stomp.zst").write_bytes(b"\x28\xb5\x2f\xfd")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"fastframe\[zstd\]"):
        open_stream(str(tmp_path / "x.stomp.zst"), "auto", "zstd")


def test_roll_age_and_tick(tmp_path):
    frame = fastframe.encode("SEND", [("destination", "/q")], b"x")
    with Archive(str(tmp_path), "b", roll_age=0.05) as archive:
        recorder = archive.recorder()
        recorder.c2s(frame + frame[:5])  # the piece is old enough only after the next read...
        time.sleep(0.1)
        recorder.c2s(frame[5:] + frame)  # ...which ends at a frame: cut there
        recorder.c2s(frame)
        time.sleep(0.1)
        recorder.tick()  # idle and between frames: cut
        recorder.c2s(frame)
        recorder.close()
    (paths,) = [stomp_files(str(tmp_path))["conn-0001.c2s"]]
    assert [read_file(p) for p in paths] == [frame + frame + frame, frame, frame]


def test_malformed_stream_recorded_as_is(tmp_path):
    good = client_stream(50, seed=4)
    bad = good + b"SEND\ncontent-length:9999\n\nshort\0" + client_stream(50, seed=5)
    c_paths, s_paths = record(tmp_path, bad, server_stream(20), roll_size=1024)
    assert joined(c_paths) == bad
    # cut at frames until the error; the piece that holds it is never cut again
    last = c_paths[-1]
    index = load_index(last)
    start = len(bad) - os.path.getsize(last)
    with pytest.raises(fastframe.DecodeError) as err:
        fastframe.decode(bad)
    assert index["error_offset"] == err.value.offset - start
    assert len(read_times(last)) == index["frames"]
    for path in c_paths[:-1]:
        check_piece(path)


def test_truncated_last_frame_is_in_the_index(tmp_path):
    stream = server_stream(30)
    cut = stream[: len(stream) - 7]
    _, s_paths = record(tmp_path, client_stream(3), cut)
    assert joined(s_paths) == cut
    index = load_index(s_paths[0])
    assert index["error_offset"] is not None and index["frames"] == len(fastframe.decode(stream)) - 1


def test_wire_hook_perspectives(tmp_path):
    with Archive(str(tmp_path), "b") as archive:
        client = archive.recorder("client")
        client("out", b"CONNECT\n\n\0")
        client("in", memoryview(b"CONNECTED\nversion:1.2\n\n\0"))
        client.close()
        server = archive.server_hook(None)
        server("in", bytearray(b"CONNECT\n\n\0"))
        server("out", b"CONNECTED\nversion:1.2\n\n\0")
        server.close()
        with pytest.raises(ValueError):
            archive.recorder("middle")
    files = stomp_files(str(tmp_path))
    assert joined(files["conn-0001.c2s"]) == joined(files["conn-0002.c2s"]) == b"CONNECT\n\n\0"
    assert joined(files["conn-0001.s2c"]) == joined(files["conn-0002.s2c"]) == b"CONNECTED\nversion:1.2\n\n\0"


def test_numbers_continue_after_existing_connections(tmp_path):
    for _ in range(2):
        with Archive(str(tmp_path), "b") as archive:
            for _ in range(2):
                with archive.recorder() as recorder:
                    recorder.c2s(b"\n")
    assert sorted(stomp_files(str(tmp_path))) == [f"conn-000{n}.c2s" for n in (1, 2, 3, 4)]


class FullDisk:
    """An opener whose files take ``room`` bytes in all, then raise ENOSPC."""

    def __init__(self, room: int) -> None:
        self.room = room

    def __call__(self, path: str, mode: str):
        disk = self
        real = open(path, mode)

        class File:
            def write(self, data):
                if len(data) > disk.room:
                    raise OSError(errno.ENOSPC, "No space left on device")
                disk.room -= len(data)
                return real.write(data)

            def flush(self):
                real.flush()

            def close(self):
                real.close()

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.close()

        return File()


def test_a_full_disk_drops_the_recording_not_the_caller(tmp_path, caplog):
    stream = client_stream(200)
    with caplog.at_level(logging.WARNING, logger="fastframe.capture"):
        with Archive(str(tmp_path), "b", opener=FullDisk(5000)) as archive:
            recorder = archive.recorder()
            for piece in pieces(stream):
                recorder.c2s(piece)  # never raises
                archive.flush(10)
            assert recorder.dropped is not None and "No space left" in recorder.dropped
            recorder.s2c(b"more")  # still fine, ignored
            recorder.close()
    assert [r for r in caplog.records if "dropped" in r.getMessage()]
    (path,) = stomp_files(str(tmp_path))["conn-0001.c2s"]
    assert stream.startswith(read_file(path)) and 0 < os.path.getsize(path) <= 5000


def test_a_slow_disk_drops_the_recording_without_waiting(tmp_path):
    gate = threading.Event()

    def slow_open(path: str, mode: str):
        gate.wait(10)  # the disk does not answer until released
        return open(path, mode)

    stream = client_stream(500)
    with Archive(str(tmp_path), "b", opener=slow_open, max_pending=20_000) as archive:
        fine = Archive(str(tmp_path / "other"), "b")
        recorder, other = archive.recorder(), fine.recorder()
        started = time.monotonic()
        for piece in pieces(stream):
            recorder.c2s(piece)
            other.c2s(piece)
        assert time.monotonic() - started < 2.0  # the caller never waited for the disk
        assert recorder.dropped is not None and "too slow" in recorder.dropped
        gate.set()
        recorder.close()
        other.close()
        fine.close()
    assert joined(stomp_files(str(tmp_path / "other"))["conn-0001.c2s"]) == stream
