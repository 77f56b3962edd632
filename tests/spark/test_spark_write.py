"""df.write.format("stomp"): frame-stream files, one per partition, that read back to the same rows."""

from __future__ import annotations

import gzip
import os
from collections import Counter
from typing import Any, Dict, List, Tuple

import pytest
from pyspark.errors import AnalysisException

from fastframe.archive import generate_archive, generate_stream

Frame = Tuple[str, Tuple[Tuple[str, str], ...], bytes]


def frames_of(df: Any) -> List[Frame]:
    rows = df.where("command IS NOT NULL").select("command", "headers", "body").collect()
    return [(r["command"], tuple((h["name"], h["value"]) for h in r["headers"]), bytes(r["body"])) for r in rows]


def stomp_files(folder: str) -> List[str]:
    return sorted(n for n in os.listdir(folder) if ".stomp" in n and not n.endswith(".ffidx"))


@pytest.fixture(scope="session")
def source(spark: Any, tmp_path_factory: Any) -> Any:
    root = str(tmp_path_factory.mktemp("write-src"))
    generate_archive(root, connections=4, frames=300, seed=3)
    df = spark.read.format("stomp").option("recursiveFileLookup", True).option("minPartitions", 3).load(root)
    return df.cache()


def test_what_is_written_reads_back_to_the_same_rows(spark: Any, source: Any, tmp_path: Any) -> None:
    out = str(tmp_path / "out")
    source.write.format("stomp").mode("overwrite").save(out)
    files = stomp_files(out)
    partitions = source.rdd.getNumPartitions()
    assert 2 <= len(files) <= partitions and all(f.startswith("part-") for f in files)
    assert not any(n.startswith("_temporary") for n in os.listdir(out))
    back = spark.read.format("stomp").load(out)
    assert back.where("error_code IS NOT NULL").count() == 0  # error rows are not written
    assert Counter(frames_of(back)) == Counter(frames_of(source))
    # each output file keeps the order of its partition
    first = spark.read.format("stomp").load(os.path.join(out, files[0])).orderBy("frame_index")
    got = frames_of(first)
    expected = frames_of(source)
    start = expected.index(got[0])
    assert expected[start : start + len(got)] == got


def test_overwrite_replaces_and_append_adds(spark: Any, source: Any, tmp_path: Any) -> None:
    out = str(tmp_path / "out")
    os.makedirs(out)
    with open(os.path.join(out, "old.stomp"), "wb") as f:
        f.write(generate_stream(5))
    small = source.limit(50).repartition(2)
    small.write.format("stomp").mode("overwrite").save(out)
    assert "old.stomp" not in os.listdir(out)
    assert spark.read.format("stomp").load(out).count() == 50
    small.write.format("stomp").mode("append").save(out)
    assert spark.read.format("stomp").load(out).count() == 100
    assert len(stomp_files(out)) == 4
    # Spark's Python data sources know only append and overwrite
    with pytest.raises(AnalysisException, match="ErrorIfExists"):
        small.write.format("stomp").save(out)


@pytest.mark.parametrize(
    "options, check",
    [
        ({"eol": "CRLF"}, lambda data: data.count(b"MESSAGE\r\n") == 300 and b"MESSAGE\n" not in data),
        ({"contentLength": "always"}, lambda data: data.count(b"\ncontent-length:") == 300),
        ({"version": "1.1", "compression": "gzip"}, lambda data: True),
    ],
)
def test_encoder_options(spark: Any, source: Any, tmp_path: Any, options: Dict[str, str], check: Any) -> None:
    out = str(tmp_path / "out")
    frames = source.where("command = 'MESSAGE'").limit(300).coalesce(1)
    writer = frames.write.format("stomp").mode("overwrite")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(out)
    (name,) = stomp_files(out)
    with open(os.path.join(out, name), "rb") as f:
        data = f.read()
    if options.get("compression") == "gzip":
        assert name.endswith(".stomp.gz")
        data = gzip.decompress(data)
    assert check(data)
    back = spark.read.format("stomp").option("version", options.get("version", "1.2")).load(out)
    expected = frames_of(frames)
    got = frames_of(back.orderBy("frame_index"))
    if options.get("contentLength") == "always":  # content-length added where it was missing
        expected = [(c, h if any(n == "content-length" for n, _ in h) else h + (("content-length", str(len(b))),), b)
                    for c, h, b in expected]  # fmt: skip
    assert got == expected


def test_write_index_lets_big_outputs_split(spark: Any, source: Any, tmp_path: Any) -> None:
    out = str(tmp_path / "out")
    source.coalesce(1).write.format("stomp").mode("overwrite").option("writeIndex", True).option(
        "indexInterval", "32k"
    ).save(out)
    (name,) = stomp_files(out)
    assert os.path.exists(os.path.join(out, name + ".ffidx"))
    back = spark.read.format("stomp").option("maxPartitionBytes", "256k").load(out)
    assert back.rdd.getNumPartitions() >= 3
    assert frames_of(back.orderBy("frame_index")) == frames_of(
        spark.read.format("stomp").load(out).orderBy("frame_index")
    )
