"""The file reader's ``received_at`` column from a capture's ``.fftimes`` sidecar, without a JVM: the reader's
own planning and split reading (what Spark's tasks run), on files cut into several splits at their ``.ffidx``."""

from __future__ import annotations

import os

import pytest

from _extras import missing

from .helpers import client_stream, pieces, server_stream, stomp_files

_reason = missing(["pyarrow"], "spark")  # the reader's splits make Arrow batches (a failure with CI=true)
if _reason:
    pytest.skip(_reason, allow_module_level=True)

from fastframe.capture import Archive, read_times  # noqa: E402
from fastframe.spark import _file_read as _read  # noqa: E402
from fastframe.spark._file_options import read_options  # noqa: E402


@pytest.fixture(autouse=True)
def twin(codec, monkeypatch):
    monkeypatch.setattr(_read, "codec", codec)


def rows(path: str, **options):
    opts = read_options({"path": path, "recursiveFileLookup": "true", **options})
    out = []
    splits = [split for part in _read.plan(opts, parallelism=4) for split in part]
    for split in splits:
        for batch in _read.read_split(split, opts):
            out += batch.to_pylist()
    return splits, out


def test_received_at_is_each_frames_arrival(tmp_path):
    stream = server_stream(3000, seed=5)
    with Archive(str(tmp_path / "a"), "b", index_interval=8 << 10) as archive:
        with archive.recorder() as recorder:
            for piece in pieces(stream, most=5000):
                recorder.s2c(piece)
            recorder.c2s(client_stream(5) + b"SEND\ncontent-length:2\n\nshort\0")  # ends in an error
    files = stomp_files(str(tmp_path / "a"))
    (path,) = files["conn-0001.s2c"]
    splits, got = rows(path, maxPartitionBytes="64k", openCostInBytes="0")
    assert len(splits) > 3 and {s.path for s in splits} == {os.path.abspath(path)}  # cut at its .ffidx
    times = read_times(path)
    assert len(got) == len(times)
    for row, (offset, ns) in zip(sorted(got, key=lambda r: r["frame_index"]), times):
        assert row["offset"] == offset
        assert int(row["received_at"].timestamp() * 1e6) == pytest.approx(ns // 1000, abs=2)
    # the client side: the frames before the error are dated, the error row is not
    _, client = rows(files["conn-0001.c2s"][0])
    assert [r["received_at"] is None for r in client] == [False] * 7 + [True]
    assert client[-1]["error_code"] == "missing-null"


def test_without_a_sidecar_or_with_other_frames_received_at_is_null(tmp_path):
    data = server_stream(200)
    path = str(tmp_path / "plain.stomp")
    with open(path, "wb") as out:
        out.write(data)
    _, got = rows(path)
    assert len(got) == 200 and all(r["received_at"] is None for r in got)
    # a sidecar whose offsets are not the rows' (another file's) is not used
    with Archive(str(tmp_path / "rec"), "b") as archive:
        with archive.recorder() as recorder:
            recorder.s2c(b"\n" + data)  # every offset one further
    (recorded,) = stomp_files(str(tmp_path / "rec"))["conn-0001.s2c"]
    os.replace(recorded + ".fftimes", path + ".fftimes")
    _, got = rows(path)
    assert all(r["received_at"] is None for r in got)
    # and a selection of received_at alone still has every row
    from pyspark.sql.types import StructField, StructType, TimestampType

    from fastframe.spark._schema import check_read_schema

    fields = check_read_schema(StructType([StructField("received_at", TimestampType(), True)]))
    opts = read_options({"path": path})
    (split,) = [s for part in _read.plan(opts) for s in part]
    assert sum(b.num_rows for b in _read.read_split(split, opts, fields)) == 200
