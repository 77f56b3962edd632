"""The ``stomp`` data source for PySpark's Python Data Source API (Spark 4.0+).

One format, chosen by its options: with ``host`` (or ``servers``) it reads
from and writes to a broker (streaming, :mod:`._stream_source`); with a path
it reads and writes frame-stream files.

Importing this module needs only PySpark (pyarrow is imported where rows are
made), so that Spark's automatic lookup of ``pyspark_*`` modules never fails
because of it.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from ._file_options import read_options, write_options
from ._schema import check_read_schema, spark_schema
from ._stream_options import is_broker
from ._worker import freeze_worker_heap


class StompPartition(InputPartition):
    """The splits one task reads (see ``_file_read.Split``)."""

    def __init__(self, splits: Sequence[Any]) -> None:
        self.splits = [tuple(split) for split in splits]


class StompReader(DataSourceReader):
    def __init__(self, options: Any, schema: Any) -> None:
        self.opts = read_options(options)
        self.fields = check_read_schema(schema)

    def partitions(self) -> List[InputPartition]:
        from ._file_read import plan

        parts = plan(self.opts)
        # Spark wants at least one partition, even for an empty folder
        return [StompPartition(part) for part in parts] or [StompPartition([])]

    def read(self, partition: Any) -> Iterator[Any]:
        from ._file_read import Split, read_split

        freeze_worker_heap()
        for split in partition.splits:
            yield from read_split(Split(*split), self.opts, self.fields)


class StompCommitMessage(WriterCommitMessage):
    def __init__(self, message: Optional[Dict[str, Any]]) -> None:
        self.message = message


class StompWriter(DataSourceArrowWriter):
    def __init__(self, options: Any, schema: Any, overwrite: bool) -> None:
        from ._file_write import FrameFileWriter

        self.writer = FrameFileWriter(write_options(options), schema.fieldNames(), overwrite)

    def write(self, iterator: Iterator[Any]) -> StompCommitMessage:
        from pyspark import TaskContext

        freeze_worker_heap()
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        return StompCommitMessage(self.writer.write_partition(iterator, partition, attempt))

    def commit(self, messages: List[Any]) -> None:
        self.writer.commit([m.message if m is not None else None for m in messages])

    def abort(self, messages: List[Any]) -> None:
        self.writer.abort()


class StompDataSource(DataSource):
    """``spark.read.format("stomp")`` / ``df.write.format("stomp")``: STOMP frame-stream files;
    ``spark.readStream.format("stomp")`` / ``df.writeStream.format("stomp")`` (and ``df.write``)
    with a ``host`` option: a broker.

    See ``fastframe.spark`` (and the Spark guide, docs/guides/spark.md) for the rows and the options.
    """

    @classmethod
    def name(cls) -> str:
        return "stomp"

    def schema(self) -> Any:
        if is_broker(self.options):
            from ._stream_schema import stream_spark_schema
            from ._stream_source import checked_source_options

            checked_source_options(self.options)  # load() fails on a bad option, in one line, before start()
            return stream_spark_schema()
        return spark_schema()

    def reader(self, schema: Any) -> DataSourceReader:
        if is_broker(self.options):
            from ._stream_options import source_options

            if source_options(self.options).ending is None:
                raise ValueError(
                    "a broker is read as a stream: spark.readStream.format('stomp') (option host is set; "
                    "give a path instead to read files, or consume=stream and endingOffsets to read a range "
                    "of a stream queue)"
                )
            from ._stream_schema import check_stream_schema
            from ._stream_source import StreamRangeReader

            check_stream_schema(schema)
            return StreamRangeReader(self.options)
        return StompReader(self.options, schema)

    def writer(self, schema: Any, overwrite: bool) -> Any:
        if is_broker(self.options):
            from ._stream_source import BrokerBatchWriter

            return BrokerBatchWriter(self.options, schema)
        return StompWriter(self.options, schema, overwrite)

    def streamReader(self, schema: Any) -> Any:
        if not is_broker(self.options):
            raise ValueError("streaming reads come from a broker: set option host (or servers) and destination")
        from ._stream_schema import check_stream_schema
        from ._stream_source import stream_reader

        check_stream_schema(schema)
        return stream_reader(self.options)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        if not is_broker(self.options):
            raise ValueError("streaming writes go to a broker: set option host (or servers) and destination")
        from ._stream_source import BrokerStreamWriter

        return BrokerStreamWriter(self.options, schema)
