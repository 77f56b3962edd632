"""The same read and write as plain functions over ``mapInArrow`` (Spark 3.3+).

For Spark versions without the Python Data Source API, and usable on any
version: planning runs here on the driver (which also knows the cluster's
parallelism), one row per partition carries its splits to a task, and the
task runs the same :func:`~fastframe.spark._read.read_split`.
"""

from __future__ import annotations

import json
import pickle
from typing import Any, Dict, Iterator, Optional, Sequence, Union

from ._options import read_options, write_options


def read_stomp(spark: Any, paths: Union[str, Sequence[str]], schema: Any = None, **options: Any) -> Any:
    """A DataFrame of the frames in ``paths`` (files, folders or globs), as ``spark.read.format("stomp")``.

    ``options`` are the reader options (``mode="FAILFAST"``, ``version="1.1"``,
    ``recursiveFileLookup=True``, ...); ``schema`` may select columns.
    """
    from ._read import Split, plan, read_split
    from ._schema import check_read_schema, spark_schema

    if isinstance(paths, str):
        paths = [paths]
    opts = read_options({**options, "paths": list(paths)})
    schema = spark_schema() if schema is None else schema
    fields = check_read_schema(schema)
    parts = plan(opts, parallelism=spark.sparkContext.defaultParallelism)
    payloads = [pickle.dumps([tuple(s) for s in part]) for part in parts] or [pickle.dumps([])]
    rdd = spark.sparkContext.parallelize([(p,) for p in payloads], len(payloads))
    plans = spark.createDataFrame(rdd, "splits binary")

    def read_partition(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for payload in batch.column(0).to_pylist():
                for split in pickle.loads(payload):
                    yield from read_split(Split(*split), opts, fields)

    return plans.mapInArrow(read_partition, schema)


def write_stomp(df: Any, path: str, mode: str = "errorifexists", **options: Any) -> Dict[str, int]:
    """Write ``df`` (command, headers or header_map, body) to frame-stream files under ``path``.

    One file per partition, encoded with the writer options (``version``,
    ``contentLength``, ``eol``, ``compression``, ``writeIndex``). ``mode`` is
    Spark's save mode: ``overwrite``, ``append``, ``ignore`` or
    ``errorifexists``. Returns the totals (files, frames, bytes,
    skipped_error_rows).
    """
    import pyarrow as pa  # type: ignore[import-untyped]

    from ._fs import resolve
    from ._write import FrameFileWriter

    mode = mode.lower()
    if mode not in ("overwrite", "append", "ignore", "error", "errorifexists"):
        raise ValueError(f"unknown save mode {mode!r}: use overwrite, append, ignore or errorifexists")
    opts = write_options({**options, "path": path})
    fs, inner = resolve(opts.path, opts.filesystem)
    existing = fs.info(inner)
    if existing is not None and mode in ("ignore", "error", "errorifexists"):
        if not existing.is_dir or fs.listdir(inner):
            if mode == "ignore":
                return {"files": 0, "frames": 0, "bytes": 0, "skipped_error_rows": 0}
            raise FileExistsError(f"[PATH_ALREADY_EXISTS] Path {path} already exists; use mode overwrite or append")
    writer = FrameFileWriter(opts, df.columns, overwrite=mode == "overwrite")

    def write_partition(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None, "write_stomp's tasks run inside Spark"
        message = writer.write_partition(batches, context.partitionId(), context.attemptNumber())
        yield pa.RecordBatch.from_pydict({"message": [json.dumps(message)]})

    try:
        rows = df.mapInArrow(write_partition, "message string").collect()
    except BaseException:
        writer.abort()
        raise
    messages: Sequence[Optional[Dict[str, Any]]] = [json.loads(row.message) for row in rows]
    return writer.commit(messages)
