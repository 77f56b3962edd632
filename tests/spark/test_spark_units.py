"""The Spark layer's parts without Spark: options, files, planning, splits, batches, writer.

The reader and writer run on each twin in turn (``codec``), pointed at it
through ``fastframe.spark._file_read.codec`` / ``_write.codec``.
"""

from __future__ import annotations

import bz2
import gzip
import json
import os
from typing import Any, Dict, List

import pyarrow as pa
import pytest

import fastframe
from fastframe.archive import (
    INDEX_SUFFIX,
    choose_splits,
    generate_stream,
    iter_files,
    parse_size,
    scan_checkpoints,
    write_index,
)
from fastframe.spark import _file_read as _read
from fastframe.spark import _file_write as _write
from fastframe.spark._arrow import arrow_schema, default_fields
from fastframe.spark._file_options import read_options, write_options
from fastframe.spark._file_read import MalformedStompError, plan, read_split
from fastframe.spark._file_write import FrameFileWriter

from .helpers import bare_decode, split_rows


@pytest.fixture
def twin(codec: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run the Spark layer's reader and writer on ``codec``."""
    monkeypatch.setattr(_read, "codec", codec)
    monkeypatch.setattr(_write, "codec", codec)
    return codec


def read_all(path: str, **options: Any) -> List[Dict[str, Any]]:
    """Plan and read like Spark would, in this process; rows as dicts."""
    opts = read_options({"path": path, **options})
    rows: List[Dict[str, Any]] = []
    for part in plan(opts):
        for split in part:
            for batch in read_split(split, opts):
                assert batch.schema == arrow_schema()
                rows.extend(batch.to_pylist())
    return rows


def write(path: str, data: bytes) -> str:
    with open(path, "wb") as out:
        out.write(data)
    return path


def slurp(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


FAKE_FRAME_BODY = b"\0\nMESSAGE\ndestination:/queue/x\n\nnot a frame\0\n" * 3


def awkward_stream(n: int, seed: int = 1) -> bytes:
    """A sample stream, plus frames whose bodies hold NULs and text that looks like frames."""
    data = bytearray(generate_stream(n, seed=seed))
    for i in range(3):
        data += fastframe.encode("MESSAGE", [("destination", "/queue/x"), ("x-i", str(i))], FAKE_FRAME_BODY * 50)
        data += b"\n"
    data += generate_stream(n, seed=seed + 1)
    return bytes(data)


# --------------------------------------------------------------------------- schema and options


def test_arrow_schema_is_the_one_spark_derives_from_the_spark_schema() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from fastframe.spark import spark_schema

    assert to_arrow_schema(spark_schema(), timezone="UTC") == arrow_schema()


def test_options_follow_spark_names_case_and_snake_case() -> None:
    opts = read_options(
        {"PATH": "/x", "pathglobfilter": "*.stomp", "recursive_file_lookup": "true", "mode": "dropMalformed",
         "max_body_size": "1m", "maxBytesPerBatch": "64KiB", "allowMissingColon": "yes", "version": "1.1"}
    )  # fmt: skip
    assert opts.paths == ("/x",)
    assert opts.path_glob_filter == "*.stomp" and opts.recursive is True
    assert opts.mode == "DROPMALFORMED"
    assert opts.max_bytes_per_batch == 64 * 1024
    assert opts.decoder_kwargs == {"max_body_size": 1 << 20, "allow_missing_colon": True, "version": "1.1"}
    # Spark passes several load() paths as a JSON array
    assert read_options({"paths": json.dumps(["/a", "/b"]), "path": "/a"}).paths == ("/a", "/b")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"path": "/x", "recursiveFileLookUpp": "true"}, "unknown read option"),
        ({"path": "/x", "mode": "LENIENT"}, "option mode"),
        ({"path": "/x", "maxBodySize": "lots"}, "option maxBodySize"),
        ({"path": "/x", "maxHeaderCount": "-1"}, "max_header_count"),
        ({"path": "/x", "maxRecordsPerBatch": "0"}, "maxRecordsPerBatch"),
        ({"path": "/x", "maxBytesPerBatch": "2g"}, "at most 1g"),
        ({}, "no path"),
    ],
)
def test_bad_read_options_are_refused_with_the_option_named(options: Dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read_options(options)


def test_write_options() -> None:
    opts = write_options({"path": "/o", "eol": "CRLF", "contentLength": "always", "compression": "gzip"})
    assert (opts.eol, opts.content_length, opts.compression) == ("\r\n", True, "gzip")
    with pytest.raises(ValueError, match="writeIndex needs compression none"):
        write_options({"path": "/o", "writeIndex": "true", "compression": "gzip"})
    with pytest.raises(ValueError, match="unknown write option"):
        write_options({"path": "/o", "content_length_": "x", "bogus": "1"})


def test_sizes_use_binary_units_like_spark() -> None:
    assert [parse_size(v) for v in ("123", "4k", "16m", "1g", "2MiB", 7)] == [123, 4096, 16 << 20, 1 << 30, 2 << 20, 7]
    with pytest.raises(ValueError):
        parse_size("12 parsecs")


# --------------------------------------------------------------------------- reading one file


def test_read_split_matches_the_bare_decoder_on_the_corpus(twin: Any, corpus_dir: Any) -> None:
    paths = sorted(str(p) for p in corpus_dir.glob("*/*.stomp"))
    assert len(paths) > 40
    for path in paths:
        rows = read_all(path)
        expected = bare_decode(twin, slurp(path))
        assert split_rows(rows) == {path: expected}, path
        assert {r["codec"] for r in rows} == {twin.IMPLEMENTATION}


def test_header_map_is_the_codecs_first_wins_view(twin: Any, tmp_path: Any) -> None:
    frames = [
        ("MESSAGE", [("destination", "/queue/a"), ("x-rep", "1"), ("destination", "/queue/b"), ("x-rep", "2")], b"1"),
        ("MESSAGE", [("destination", "/queue/c"), ("content-type", "text/plain")], b"22"),
        ("RECEIPT", [("receipt-id", "r"), ("receipt-id", "s"), ("receipt-id", "t")], b""),
    ]
    path = write(str(tmp_path / "rep.stomp"), b"".join(fastframe.encode(c, h, b) for c, h, b in frames))
    rows = read_all(path)
    decoded = twin.decode(slurp(path))
    assert len(rows) == len(decoded) == 3
    for row, frame in zip(rows, decoded):
        assert dict(row["header_map"]) == frame.header_map()
        assert [(h["name"], h["value"]) for h in row["headers"]] == list(frame.headers)  # repeats kept
        assert len(row["header_map"]) == len(set(name for name, _ in frame.headers))  # no duplicate keys


def test_batches_are_capped_by_rows_and_by_bytes(twin: Any, tmp_path: Any) -> None:
    path = write(str(tmp_path / "s.stomp"), generate_stream(1500, seed=3))
    opts_rows = read_options({"path": path, "maxRecordsPerBatch": "100"})
    opts_bytes = read_options({"path": path, "maxBytesPerBatch": "64k", "readBufferSize": "16k"})
    whole = read_all(path)
    for opts, check in (
        (opts_rows, lambda b: b.num_rows <= 100),
        # a batch holds at most 64 KiB of frame data, or one frame alone
        (opts_bytes, lambda b: b.num_rows == 1 or _data_bytes(b) <= 64 * 1024),
    ):
        split = plan(opts)[0][0]
        batches = list(read_split(split, opts))
        assert len(batches) > 5
        assert all(check(b) for b in batches)
        assert [r for b in batches for r in b.to_pylist()] == whole


def _data_bytes(batch: pa.RecordBatch) -> int:
    """Bytes of commands, header names and values, and bodies in a batch."""
    size = 0
    for row in batch.to_pylist():
        size += len(row["command"].encode()) + len(row["body"])
        size += sum(len(h["name"].encode()) + len(h["value"].encode()) for h in row["headers"])
    return size


def test_modes_on_a_malformed_file(twin: Any, tmp_path: Any) -> None:
    good = generate_stream(20, seed=4)
    bad = b"SEND\ndestination:/q\ncontent-length:40\n\nshort\0"
    path = write(str(tmp_path / "bad.stomp"), good + bad + good)
    frames, error = bare_decode(twin, good + bad + good)
    assert error is not None and error[1] == "missing-null" and len(frames) == 20

    permissive = read_all(path)
    assert split_rows(permissive) == {path: (frames, error)}
    assert permissive[-1]["frame_index"] == 20 and permissive[-1]["error_reason"] == error[2]

    dropped = read_all(path, mode="DROPMALFORMED")
    assert split_rows(dropped) == {path: (frames, None)}

    with pytest.raises(MalformedStompError, match=f"bad.stomp at offset {error[0]}: .*missing-null"):
        read_all(path, mode="FAILFAST")


def test_a_truncated_file_ends_with_an_error_row(twin: Any, tmp_path: Any) -> None:
    data = generate_stream(30, seed=5)
    cut = data[: len(data) - 7]
    path = write(str(tmp_path / "cut.stomp"), cut)
    rows = read_all(path)
    assert split_rows(rows) == {path: bare_decode(twin, cut)}
    assert rows[-1]["error_code"] == "truncated"


def test_version_and_tolerance_options_reach_the_decoder(twin: Any, tmp_path: Any) -> None:
    data = b"MESSAGE\nx-path:C:\\temp\nnocolon\n\n\0"
    path = write(str(tmp_path / "v10.stomp"), data)
    assert read_all(path)[0]["error_code"] in ("invalid-escape", "bad-header-line")
    rows = read_all(path, version="1.0", allowMissingColon="true")
    expected = bare_decode(twin, data, version="1.0", allow_missing_colon=True)
    assert split_rows(rows) == {path: expected} and expected[1] is None


@pytest.mark.parametrize("ending, compress", [(".gz", gzip.compress), (".bz2", bz2.compress), (".zst", None)])
def test_compressed_files_are_decompressed_by_their_ending(
    twin: Any, tmp_path: Any, ending: str, compress: Any
) -> None:
    data = awkward_stream(200)
    if compress is None:
        compress = lambda raw: pa.compress(raw, "zstd", asbytes=True)  # noqa: E731
    plain = write(str(tmp_path / "a.stomp"), data)
    packed = write(str(tmp_path / ("a.stomp" + ending)), compress(data))
    assert split_rows(read_all(packed))[packed] == split_rows(read_all(plain))[plain] == bare_decode(twin, data)
    # compression none reads the compressed bytes as frames: certainly not the same rows
    assert split_rows(read_all(packed, compression="none"))[packed] != bare_decode(twin, data)


def test_a_damaged_gzip_file_is_malformed_input(twin: Any, tmp_path: Any) -> None:
    data = generate_stream(3000, seed=6)
    expected = bare_decode(twin, data)[0]
    packed = gzip.compress(data)
    bad_crc = bytearray(packed)
    bad_crc[-6] ^= 0xFF  # the CRC-32 trailer: the check fails at the end
    cut = packed[: len(packed) // 2]  # a copy that stopped half-way
    for name, damaged in (("crc.stomp.gz", bytes(bad_crc)), ("cut.stomp.gz", cut)):
        path = write(str(tmp_path / name), damaged)
        frames, error = split_rows(read_all(path, readBufferSize="16k"))[path]
        assert error is not None and error[1] == "corrupt-compressed-data" and error[2].startswith("gzip:")
        # what the decompressor delivered before the damage was found is intact
        assert 1000 < len(frames) < 3000 and frames == expected[: len(frames)]
        with pytest.raises(MalformedStompError, match="corrupt-compressed-data"):
            read_all(path, mode="FAILFAST")


def test_a_worker_on_the_python_twin_says_so(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from fastframe.codec import _codec_py

    monkeypatch.setattr(_read, "codec", _codec_py)
    monkeypatch.setattr(_read, "_announced", False)
    path = write(str(tmp_path / "s.stomp"), generate_stream(5, seed=13))
    assert {r["codec"] for r in read_all(path)} == {"python"}
    read_all(path)
    err = capsys.readouterr().err
    assert err.count("decodes with the pure-Python twin") == 1  # once per worker process


# --------------------------------------------------------------------------- files and planning


def _tree(root: Any) -> None:
    files = {
        "a/x1.stomp": 1000, "a/x2.stomp.gz": 10, "a/sub/x3.stomp": 2000, "a/_SUCCESS": 0, "a/.hidden.stomp": 5,
        "a/notes.txt": 3, "b/y1.stomp": 500, "a/x1.stomp" + INDEX_SUFFIX: 10,
    }  # fmt: skip
    for name, size in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\n" * size)


def test_listing_follows_spark_file_sources(tmp_path: Any) -> None:
    _tree(tmp_path)
    root = str(tmp_path)

    def names(*paths: str, recursive: bool = False, glob: Any = None, prefer: str = "auto") -> List[str]:
        return [os.path.relpath(p, root) for p, _ in iter_files(paths, prefer, recursive, glob)]

    assert names(root + "/a") == ["a/notes.txt", "a/x1.stomp", "a/x2.stomp.gz"]  # no _, no ., no sidecar
    assert names(root + "/a", recursive=True) == ["a/notes.txt", "a/sub/x3.stomp", "a/x1.stomp", "a/x2.stomp.gz"]
    assert names(root + "/a", recursive=True, glob="*.stomp*") == ["a/sub/x3.stomp", "a/x1.stomp", "a/x2.stomp.gz"]
    assert names(root + "/*/*.stomp") == ["a/x1.stomp", "b/y1.stomp"]
    assert names(root + "/a/.hidden.stomp") == ["a/.hidden.stomp"]  # named explicitly: read
    for prefer in ("pyarrow", "fsspec"):
        assert names(root + "/a", recursive=True, prefer=prefer) == names(root + "/a", recursive=True)
        assert names(root + "/*/*.stomp", prefer=prefer) == ["a/x1.stomp", "b/y1.stomp"]
    with pytest.raises(FileNotFoundError, match="PATH_NOT_FOUND"):
        names(root + "/nope")
    with pytest.raises(FileNotFoundError, match="PATH_NOT_FOUND"):
        names(root + "/nope*/x")


def test_files_are_packed_into_partitions_like_spark_does(tmp_path: Any) -> None:
    for i in range(10):
        (tmp_path / f"f{i}.stomp").write_bytes(b"\n" * (100_000 * (i + 1)))
    few = plan(read_options({"path": str(tmp_path), "minPartitions": "1"}))
    assert len(few) == 1  # 5.5 MB fit under the 128 MB (and 4 MB open-cost) split size
    many = plan(read_options({"path": str(tmp_path), "minPartitions": "4", "openCostInBytes": "0"}))
    assert 4 <= len(many) <= 6
    sizes = [sum(s.size for s in part) for part in many]
    assert max(sizes) <= 1_375_000 + 1_000_000  # the split size (total / 4) plus one file at most
    assert sorted(s.path for part in many for s in part) == sorted(str(p) for p in tmp_path.iterdir())
    assert all(s.start == 0 and s.end == -1 for part in many for s in part)  # no index: files whole


def test_fsspec_memory_filesystem(twin: Any) -> None:
    fsspec = pytest.importorskip("fsspec")
    data = awkward_stream(50)
    fs = fsspec.filesystem("memory")
    fs.pipe("/ffx/arch/one.stomp", data)
    fs.pipe("/ffx/arch/two.stomp.gz", gzip.compress(data))
    rows = split_rows(read_all("memory://ffx/arch"))
    assert sorted(rows) == [fs.unstrip_protocol("/ffx/arch/one.stomp"), fs.unstrip_protocol("/ffx/arch/two.stomp.gz")]
    assert all(value == bare_decode(twin, data) for value in rows.values())


# --------------------------------------------------------------------------- splits at proven boundaries


def test_an_indexed_file_splits_at_frames_and_reads_the_same(twin: Any, tmp_path: Any) -> None:
    data = awkward_stream(1500, seed=8)
    path = write(str(tmp_path / "big.stomp"), data)
    whole = read_all(path)
    index = write_index(path, interval=64 * 1024)
    assert index["frames"] == len(whole) and index["error_offset"] is None
    starts = {r["offset"] for r in whole}
    assert all(offset in starts for _, offset in index["checkpoints"])  # every checkpoint is a frame start

    opts = read_options({"path": path, "maxPartitionBytes": "256k"})
    splits = [s for part in plan(opts) for s in part]
    assert len(splits) > 3
    assert all(s.start in starts or s.start == 0 for s in splits)
    rows = [r for s in sorted(splits, key=lambda s: s.start) for b in read_split(s, opts) for r in b.to_pylist()]
    assert rows == whole

    # other decoder options: the index proves nothing for them, the file is read whole
    assert (
        len([s for p in plan(read_options({"path": path, "maxPartitionBytes": "256k", "strict": "true"})) for s in p])
        == 1
    )
    # a file changed since it was indexed: the stale index is ignored
    write(path, data + generate_stream(5, seed=9))
    assert len([s for p in plan(opts) for s in p]) == 1


def test_a_scan_proves_boundaries_only_up_to_the_first_error(twin: Any, tmp_path: Any) -> None:
    good = generate_stream(2000, seed=10)
    data = good + b"BAD\nx\\t:y\n\n\0" + good
    path = write(str(tmp_path / "bad.stomp"), data)
    checkpoints, frames, error_offset = scan_checkpoints(path, {}, 128 * 1024)
    assert error_offset == len(good) + 5 and frames == 2000
    assert all(offset < len(good) for _, offset in checkpoints)
    opts = read_options({"path": path, "maxPartitionBytes": "512k", "split": "scan"})
    splits = sorted((s for part in plan(opts) for s in part), key=lambda s: s.start)
    assert len(splits) > 1
    rows = [r for s in splits for b in read_split(s, opts) for r in b.to_pylist()]
    assert rows == read_all(path)  # the same rows, the same single error row at the end
    assert rows[-1]["error_code"] == "invalid-escape"


def test_choose_splits_cuts_only_at_checkpoints() -> None:
    checkpoints = [(0, 0), (10, 100), (20, 250), (30, 300), (40, 900)]
    assert choose_splits(checkpoints, 1000, 200) == [(0, 250, 0), (250, 900, 20), (900, 1000, 40)]
    assert choose_splits([(0, 0)], 1000, 200) == [(0, 1000, 0)]


# --------------------------------------------------------------------------- writer


def _batches(path: str) -> List[pa.RecordBatch]:
    opts = read_options({"path": path, "maxRecordsPerBatch": "300"})
    return [b for part in plan(opts) for s in part for b in read_split(s, opts)]


def test_the_writer_encodes_rows_back_to_the_same_frames(twin: Any, tmp_path: Any) -> None:
    data = awkward_stream(700, seed=11) + b"SEND\ncontent-length:9\n\nx\0"  # ends with an error row
    source = write(str(tmp_path / "in.stomp"), data)
    out = str(tmp_path / "out")
    writer = FrameFileWriter(write_options({"path": out, "eol": "crlf"}), [n for n, _, _ in default_fields()], True)
    message = writer.write_partition(iter(_batches(source)), partition=3)
    frames, error = bare_decode(twin, data)
    assert message["frames"] == len(frames) and message["skipped_error_rows"] == 1
    assert os.listdir(out) == ["_temporary"]  # nothing visible before the commit
    totals = writer.commit([message])
    assert totals["files"] == 1 and totals["frames"] == len(frames)
    (name,) = os.listdir(out)
    assert name.startswith("part-00003-") and name.endswith(".stomp")
    written = slurp(os.path.join(out, name))
    assert b"\r\n" in written
    again, again_error = bare_decode(twin, written)
    assert again_error is None
    assert [r[2:] for r in again] == [r[2:] for r in frames]


def test_the_writer_takes_header_map_without_headers_and_refuses_rows_without_command(twin: Any, tmp_path: Any) -> None:
    table = pa.table(
        {
            "command": ["SEND", "MESSAGE"],
            "header_map": pa.array(
                [[("destination", "/q")], [("a", "1"), ("b", "2")]], pa.map_(pa.string(), pa.string())
            ),
            "body": [b"x\0y", None],
        }
    )
    writer = FrameFileWriter(write_options({"path": str(tmp_path / "o")}), table.column_names, False)
    message = writer.write_partition(table.to_batches(), 0)
    writer.commit([message])
    (name,) = os.listdir(tmp_path / "o")
    frames = twin.decode((tmp_path / "o" / name).read_bytes())
    assert [(f.command, f.headers, f.body) for f in frames] == [
        ("SEND", (("destination", "/q"), ("content-length", "3")), b"x\0y"),
        ("MESSAGE", (("a", "1"), ("b", "2")), b""),
    ]
    bad = pa.table({"command": pa.array([None], pa.string())})
    with pytest.raises(ValueError, match="null command"):
        FrameFileWriter(write_options({"path": str(tmp_path / "p")}), ["command"], False).write_partition(
            bad.to_batches(), 0
        )
    with pytest.raises(ValueError, match="needs a 'command' column"):
        FrameFileWriter(write_options({"path": str(tmp_path / "p")}), ["body"], False)


def test_abort_leaves_nothing_behind(twin: Any, tmp_path: Any) -> None:
    source = write(str(tmp_path / "in.stomp"), generate_stream(50, seed=12))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.stomp").write_bytes(b"")
    writer = FrameFileWriter(write_options({"path": str(out)}), [n for n, _, _ in default_fields()], True)
    writer.write_partition(iter(_batches(source)), 0)
    writer.abort()
    assert os.listdir(out) == ["keep.stomp"]
