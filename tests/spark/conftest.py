"""One local SparkSession for every Spark test, and helpers to compare its rows with the bare decoder.

The session is quiet and small (local[2], UI off, everything on 127.0.0.1,
two shuffle partitions); its Python workers run this interpreter and may use
at most ``WORKER_MEMORY`` of address space, so a read that loaded a whole
file bigger than that would fail. The ``stomp`` source is *not* registered
explicitly: PySpark finds it through the ``pyspark_stomp`` module, so every
test here also proves the automatic registration.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from conftest import IN_CI

# The Spark tests need the `spark` extra. Where the package is installed without it (a wheel tested with the
# `test` extra only) each module is reported as one skipped test with the reason; the clone-based CI installs
# every extra, so there a missing module is a failure.
MISSING_EXTRA = ""
for _module in ("pyspark", "pyarrow"):
    try:
        __import__(_module)
    except ImportError as _exc:
        if IN_CI:
            raise
        MISSING_EXTRA = MISSING_EXTRA or f"the Spark tests need the spark extra: {_exc}"


class _NeedsSparkExtra(pytest.File):
    def collect(self) -> Any:
        yield _Skipped.from_parent(self, name="needs-spark-extra")


class _Skipped(pytest.Item):
    def runtest(self) -> None:
        pytest.skip(MISSING_EXTRA)


def pytest_pycollect_makemodule(module_path: Any, parent: Any) -> Any:
    # without the extra the module would fail at import: collect a placeholder that skips instead
    return _NeedsSparkExtra.from_parent(parent, path=module_path) if MISSING_EXTRA else None


WORKER_MEMORY_MB = 640

# Smaller address-space baseline for the workers: Arrow's default allocator
# reserves a gigabyte up front, glibc one arena per thread, OpenBLAS buffers.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
os.environ.setdefault("MALLOC_ARENA_MAX", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def spark() -> Any:
    from fastframe.spark.session import get_session

    session = get_session(
        "local[2]",
        app_name="fastframe-tests",
        register_source=False,
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.executor.pyspark.memory": f"{WORKER_MEMORY_MB}m",
            "spark.driver.memory": "1g",
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
        },
    )
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    yield session
    session.stop()
