"""A SparkSession set up for fastframe: quiet local mode by default, any master when given."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from typing import Any, Dict, Optional

_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# PySpark's gateway counts as a shell: with its logger at the root level, Spark does not
# announce "Setting default log level"
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def _quiet_log4j_file() -> str:
    digest = hashlib.sha256(_QUIET_LOG4J.encode()).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"fastframe-log4j2-{digest}.properties")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as out:
            out.write(_QUIET_LOG4J)
        os.replace(tmp, path)
    return path


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def get_session(
    master: Optional[str] = None,
    app_name: str = "fastframe",
    quiet: bool = True,
    conf: Optional[Dict[str, str]] = None,
    register_source: bool = True,
) -> Any:
    """A SparkSession with the ``stomp`` source registered.

    ``register_source=False`` leaves the registration to PySpark's own lookup
    of the ``pyspark_stomp`` module (4.0+; fastframe must be installed in the
    workers' interpreter, which is also what reading needs).

    ``master`` defaults to ``local[*]``. For local masters: the workers run
    this very interpreter (``PYSPARK_PYTHON`` = ``sys.executable``, else they
    may start another Python that lacks pyarrow and fastframe), everything
    binds to 127.0.0.1, the UI is off, and (with ``quiet``) Spark's own
    logging shows errors only. For a cluster master nothing of that is forced:
    the driver must be reachable, and the nodes need fastframe installed (see
    the README).
    """
    from pyspark.sql import SparkSession

    master = master or "local[*]"
    local = is_local_master(master)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings: Dict[str, str] = {"spark.ui.showConsoleProgress": "false"}
    if local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings.update(
            {
                "spark.ui.enabled": "false",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.driver.host": "127.0.0.1",
                "spark.sql.shuffle.partitions": str(max(2, 2 * (os.cpu_count() or 1))),
            }
        )
    if quiet:
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{_quiet_log4j_file()}"
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("ERROR")
    if register_source:
        register(spark)
    return spark


def has_data_source_api() -> bool:
    """True when this PySpark has the Python Data Source API (4.0+)."""
    try:
        import pyspark.sql.datasource  # noqa: F401
    except ImportError:
        return False
    return True


def register(spark: Any) -> bool:
    """Register the ``stomp`` source on ``spark`` (a no-op without the Data Source API); True if registered."""
    if not has_data_source_api():
        return False
    from ._source import StompDataSource

    spark.dataSource.register(StompDataSource)
    return True
