"""A Spark standalone cluster on loopback for the tests in this folder: one Master, two Workers.

Started once per test session from the installed PySpark (``spark-class``,
see :mod:`fastframe.spark.standalone`): each Worker has one core and 1 GiB for
executors, everything is bound to 127.0.0.1, and every daemon's process group
(executors and their Python workers included) is killed at the end, also when
a test fails. The jobs run in their own processes (the CLI, or a script), so
they never meet the local session of tests/spark. With CI=true a cluster that
does not start is a failure; elsewhere the tests skip only when Java is
missing.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from _extras import missing, placeholder
from _shared import IN_CI

# Without the spark extra each module here is one skipped test with the reason (a failure with CI=true).
MISSING_EXTRA = missing(("pyspark", "pyarrow"), "spark")


def pytest_pycollect_makemodule(module_path: Any, parent: Any) -> Any:
    return placeholder(module_path, parent, MISSING_EXTRA)


# the installed command beside this interpreter, as users run it
FASTFRAME = shutil.which("fastframe", path=str(Path(sys.executable).parent)) or "fastframe"


def driver_env(**extra: str) -> Dict[str, str]:
    """The environment of a new user's shell: none of PySpark's variables (tests/spark sets them in this process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: Any) -> Iterator[Any]:
    from fastframe.spark.standalone import ClusterError, StandaloneCluster

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if IN_CI:
            pytest.fail("the cluster tests need Java 17+ (.ci/run installs it)")
        pytest.skip("the cluster tests need Java 17+ (Debian: apt-get install openjdk-17-jre-headless)")
    standalone = StandaloneCluster(workers=2, cores=1, memory="1g", root=str(tmp_path_factory.mktemp("cluster")))
    try:
        standalone.start(timeout=180)
    except ClusterError as exc:
        pytest.fail(str(exc))  # Java is there: a cluster that does not start is a failure, in CI or not
    try:
        yield standalone
    finally:
        standalone.stop()


@pytest.fixture(scope="session")
def archive(tmp_path_factory: Any) -> Dict[str, Any]:
    """A sample archive (both damaged files) plus a gzip file damaged half-way; its manifest."""
    from fastframe.archive import generate_archive, generate_stream

    root = tmp_path_factory.mktemp("archive")
    manifest = generate_archive(str(root), connections=3, frames=250, seed=11)
    data = generate_stream(1500, seed=12)
    packed = gzip.compress(data)
    corrupt = root / "damaged" / "conn-0099.s2c.stomp.gz"
    corrupt.parent.mkdir()
    corrupt.write_bytes(packed[: len(packed) // 2])  # a copy that stopped half-way
    return {"root": root, "manifest": manifest, "corrupt": corrupt, "corrupt_data": data}
