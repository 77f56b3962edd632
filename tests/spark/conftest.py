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

from _extras import missing, placeholder

# Without the spark extra each module here is one skipped test with the reason (a failure with CI=true).
MISSING_EXTRA = missing(("pyspark", "pyarrow"), "spark")


def pytest_pycollect_makemodule(module_path: Any, parent: Any) -> Any:
    return placeholder(module_path, parent, MISSING_EXTRA)


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
