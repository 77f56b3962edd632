"""spark.read.format("stomp") in a local SparkSession, compared row for row with the bare decoder."""

from __future__ import annotations

import gzip
import os
from typing import Any, Dict, List

import pytest
from pyspark.errors import AnalysisException, PythonException

import fastframe
from fastframe.archive import generate_archive, generate_stream, write_index
from fastframe.spark import register

from .conftest import WORKER_MEMORY_MB
from .helpers import bare_decode, split_rows


def collect(df: Any) -> List[Dict[str, Any]]:
    return [row.asDict(recursive=True) for row in df.collect()]


def slurp(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if path.endswith(".gz") else data


@pytest.fixture(scope="session")
def corpus_rows(spark: Any, corpus_dir: Any) -> List[Dict[str, Any]]:
    df = spark.read.format("stomp").option("pathGlobFilter", "*.stomp").load(str(corpus_dir / "rabbitmq"))
    return collect(df)


@pytest.fixture(scope="session")
def archive(tmp_path_factory: Any) -> Dict[str, Any]:
    root = tmp_path_factory.mktemp("archive")
    manifest = generate_archive(str(root), connections=6, frames=400, seed=7)
    manifest["root"] = str(root)
    return manifest


@pytest.fixture(scope="session")
def archive_rows(spark: Any, archive: Dict[str, Any]) -> Any:
    df = (
        spark.read.format("stomp")
        .option("recursiveFileLookup", "true")
        .option("minPartitions", 4)
        .option("openCostInBytes", "0")
        .load(archive["root"])
    )
    return df.rdd.getNumPartitions(), collect(df)


def test_the_broker_corpus_reads_as_the_bare_decoder_decodes_it(codec: Any, corpus_rows: Any, corpus_dir: Any) -> None:
    files = split_rows(corpus_rows)
    paths = sorted(str(p) for p in (corpus_dir / "rabbitmq").glob("*.stomp"))
    assert sorted(files) == paths
    for path in paths:
        assert files[path] == bare_decode(codec, slurp(path)), path
    assert sum(len(frames) for frames, _ in files.values()) > 10_000
    # the damaged client streams of the corpus stop at their first malformed frame
    errors = {os.path.basename(p): e[1] for p, (_, e) in files.items() if e is not None}
    assert errors["err-content-length-too-large.c2s.stomp"] == "missing-null"
    assert errors["err-header-no-colon.c2s.stomp"] == "bad-header-line"
    assert {row["codec"] for row in corpus_rows} == {fastframe.IMPLEMENTATION}


def test_header_map_is_first_wins_and_headers_keep_every_repeat(codec: Any, corpus_rows: Any) -> None:
    checked = 0
    for row in corpus_rows:
        if row["command"] is None:
            continue
        frame = codec.Frame(row["command"], [(h["name"], h["value"]) for h in row["headers"]], row["body"])
        assert row["header_map"] == frame.header_map()
        checked += len(row["headers"]) != len(row["header_map"])
    assert checked > 0  # some frames repeat a header (repeated-headers.c2s.stomp)


def test_a_multi_file_archive_reads_in_parallel_as_the_decoder_decodes_it(
    codec: Any, archive: Dict[str, Any], archive_rows: Any
) -> None:
    partitions, rows = archive_rows
    assert partitions >= 4
    files = split_rows(rows)
    root = archive["root"]
    assert sorted(files) == sorted(os.path.join(root, f["path"]) for f in archive["files"])
    for entry in archive["files"]:
        path = os.path.join(root, entry["path"])
        frames, error = files[path]
        assert (frames, error) == bare_decode(codec, slurp(path)), path
        assert len(frames) == entry["frames"]
        assert (error[1] if error else None) == entry["error"]
    assert any(f["gzip"] for f in archive["files"]) and any(f["crlf"] for f in archive["files"])


def test_modes_permissive_dropmalformed_failfast(spark: Any, archive: Dict[str, Any], archive_rows: Any) -> None:
    root = archive["root"]
    permissive = split_rows(archive_rows[1])
    reader = spark.read.format("stomp").option("recursiveFileLookup", True)
    dropped = split_rows(collect(reader.option("mode", "DROPMALFORMED").load(root)))
    assert {p: (frames, None) for p, (frames, _) in permissive.items()} == dropped
    damaged = [os.path.join(root, f["path"]) for f in archive["files"] if f["error"]]
    assert len(damaged) == 2
    with pytest.raises(PythonException, match="Malformed STOMP in .* at offset") as info:
        reader.option("mode", "FAILFAST").load(damaged[0]).collect()
    offset = permissive[damaged[0]][1][0]
    assert f"at offset {offset}:" in str(info.value) and "FAILFAST" in str(info.value)
    # the good files alone pass FAILFAST
    good = [os.path.join(root, f["path"]) for f in archive["files"] if not f["error"]][:3]
    assert reader.option("mode", "FAILFAST").load(good).count() == sum(len(permissive[p][0]) for p in good)


def test_a_file_larger_than_the_worker_memory_is_streamed(spark: Any, tmp_path_factory: Any) -> None:
    # the workers may not map more than WORKER_MEMORY_MB: a reader holding the file would fail
    size_mib = WORKER_MEMORY_MB + 64
    path = str(tmp_path_factory.mktemp("big") / "big.stomp")
    body = os.urandom(1 << 20)
    with open(path, "wb") as out:
        for i in range(size_mib):
            out.write(fastframe.encode("MESSAGE", [("destination", "/queue/big"), ("x-seq", str(i))], body))
    assert os.path.getsize(path) > WORKER_MEMORY_MB << 20
    df = spark.read.format("stomp").load(path)
    got = df.selectExpr(
        "count(*) AS frames", "sum(length(body)) AS body", "max(frame_index) AS last", "count(error_code) AS errors",
        "min(CAST(header_map['x-seq'] AS INT) = frame_index) AS in_order",
    ).collect()[0]  # fmt: skip
    assert got.asDict() == {
        "frames": size_mib,
        "body": size_mib << 20,
        "last": size_mib - 1,
        "errors": 0,
        "in_order": True,
    }
    os.remove(path)


def test_an_indexed_file_is_split_at_proven_frames(codec: Any, spark: Any, tmp_path: Any) -> None:
    data = generate_stream(3000, seed=21)
    path = str(tmp_path / "indexed.stomp")
    with open(path, "wb") as out:
        out.write(data)
    write_index(path, interval=64 * 1024)
    df = spark.read.format("stomp").option("maxPartitionBytes", "512k").load(path)
    assert df.rdd.getNumPartitions() >= 4  # one file, several tasks
    assert split_rows(collect(df)) == {path: bare_decode(codec, data)}
    # without the index the file is one split whatever the size: boundaries are never guessed
    os.remove(path + ".ffidx")
    assert spark.read.format("stomp").option("maxPartitionBytes", "512k").load(path).rdd.getNumPartitions() == 1
    scanned = spark.read.format("stomp").option("maxPartitionBytes", "512k").option("split", "scan").load(path)
    assert scanned.rdd.getNumPartitions() >= 4
    assert split_rows(collect(scanned)) == {path: bare_decode(codec, data)}


def test_a_schema_selects_columns(spark: Any, archive: Dict[str, Any], archive_rows: Any) -> None:
    path = os.path.join(archive["root"], archive["files"][0]["path"])
    df = spark.read.format("stomp").schema("command STRING, offset BIGINT, body BINARY").load(path)
    assert df.columns == ["command", "offset", "body"]
    expected = [(r["command"], r["offset"], r["body"]) for r in archive_rows[1] if r["path"] == path]
    assert sorted(tuple(r) for r in df.collect()) == sorted(expected)
    with pytest.raises(AnalysisException, match="unknown column 'nope'"):
        spark.read.format("stomp").schema("nope STRING").load(path).collect()


@pytest.mark.parametrize("filesystem", ["pyarrow", "fsspec"])
def test_other_filesystem_layers_read_the_same(
    spark: Any, filesystem: str, archive: Dict[str, Any], archive_rows: Any
) -> None:
    root = archive["root"]
    df = spark.read.format("stomp").option("filesystem", filesystem).option("recursiveFileLookup", True).load(root)
    assert split_rows(collect(df)) == split_rows(archive_rows[1])
    uri = spark.read.format("stomp").option("recursiveFileLookup", True).load("file://" + root)
    assert uri.count() == len(archive_rows[1])


def test_empty_folders_missing_paths_and_explicit_registration(spark: Any, tmp_path: Any) -> None:
    assert register(spark) is True  # explicit registration on top of PySpark's own lookup is harmless
    (tmp_path / "empty").mkdir()
    assert spark.read.format("stomp").load(str(tmp_path / "empty")).count() == 0
    with pytest.raises(AnalysisException, match="PATH_NOT_FOUND"):
        spark.read.format("stomp").load(str(tmp_path / "missing")).count()
    with pytest.raises(AnalysisException, match="unknown read option"):
        spark.read.format("stomp").option("recursiveLookup", "true").load(str(tmp_path / "empty")).count()
