"""STOMP archives as Spark tables: a ``stomp`` data source.

Needs the ``spark`` extra (``pip install fastframe[spark]``: PySpark 4.0 or
newer and pyarrow); the codec itself never does. It uses the Python Data
Source API: ``spark.read.format("stomp").load(path)`` and
``df.write.format("stomp").mode("overwrite").save(path)`` work once the
source is registered, which happens on its own when fastframe is installed
in the interpreter Spark's Python workers run (PySpark imports the
``pyspark_stomp`` module and finds its ``DefaultSource``); or explicitly
with :func:`register` (``spark.dataSource.register(StompDataSource)``).

The rows (:data:`COLUMNS`, :func:`spark_schema`): one per frame with
``path, offset, frame_index, command, headers`` (array of name/value structs
in wire order), ``header_map`` (first wins), ``body`` (binary),
``error_code, error_reason`` (error rows only) and ``codec`` (the twin that
decoded it). Reader and writer options: the Spark guide (docs/guides/spark.md) and
:func:`option_names`.

With a ``host`` (or ``servers``) option the same format talks to a broker:
``spark.readStream.format("stomp")`` reads RabbitMQ stream queues by offset
(``consume=stream``, exactly once into a checkpointed file sink) or any queue
with acknowledgements after each batch commits (``consume=ack``,
at-least-once), and ``df.write.format("stomp")`` /
``df.writeStream.format("stomp")`` send rows as SENDs confirmed by receipts;
the rows and the options: the Spark guide's "Streaming from a broker".
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "COLUMNS",
    "SPARK_DDL",
    "MalformedStompError",
    "StompDataSource",
    "generate_archive",
    "get_session",
    "option_names",
    "register",
    "spark_schema",
    "write_index",
]

_LAZY = {
    "COLUMNS": "._columns",
    "SPARK_DDL": "._columns",
    "MalformedStompError": "._file_read",
    "StompDataSource": "._source",
    "generate_archive": "..archive",  # needs no Spark: fastframe.archive
    "get_session": ".session",
    "register": ".session",
    "option_names": "._file_options",
    "spark_schema": "._schema",
    "write_index": "..archive",  # needs no Spark: fastframe.archive
    # what the command line's `fastframe convert` uses (imported from here, not from the private
    # modules; not in __all__: no API of their own)
    "read_options": "._file_options",
    "list_files": "._file_read",
    "ExecutorProblem": "._cluster",
    "check_executors": "._cluster",
    "tasks_per_executor": "._cluster",
    "failure_reason": "._cluster",
    "warm_python_workers": "._cluster",
    "is_local_master": ".session",
}


def __getattr__(name: str) -> Any:
    # imported on use, so that `import fastframe.spark` works before the extra is installed
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> Any:
    return sorted(list(globals()) + list(_LAZY))
