"""A SparkSession set up for fastframe: quiet local mode by default, any master when given."""

from __future__ import annotations

import atexit
import functools
import glob
import hashlib
import os
import shutil
import sys
import tempfile
import zipfile
from typing import Any, Dict, Optional

from ._cluster import (
    ENV_NAME,
    SHIPPED_PYTHON,
    driver_link_dir,
    home_without_source_zips,
    pack_env,
    python_settings,
)
from .standalone import spark_home

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


def _temporary_folder(prefix: str) -> str:
    folder = tempfile.mkdtemp(prefix=prefix)
    # removed when this process exits (a link in it is removed, not what it leads to)
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _start_in(folder: str, builder: Any) -> Any:
    # the JVM keeps the working folder it starts in; this process goes back to its own at once
    here = os.getcwd()
    os.chdir(folder)
    try:
        return builder.getOrCreate()
    finally:
        os.chdir(here)


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def is_loopback_master(master: str) -> bool:
    """True for a cluster whose master (every one of ``spark://h1:p1,h2:p2``) is on this machine's loopback."""
    import ipaddress
    from urllib.parse import urlsplit

    scheme, sep, rest = master.partition("://")
    if not sep or scheme in ("local", "yarn"):
        return False
    hosts = [urlsplit(f"//{part}").hostname or "" for part in rest.split("/", 1)[0].split(",")]
    if not hosts or not all(hosts):
        return False
    for host in hosts:
        if host == "localhost":
            continue
        try:
            if not ipaddress.ip_address(host).is_loopback:
                return False
        except ValueError:
            return False
    return True


def get_session(
    master: Optional[str] = None,
    app_name: str = "fastframe",
    quiet: bool = True,
    conf: Optional[Dict[str, str]] = None,
    register_source: bool = True,
    ship_env: Optional[str] = None,
) -> Any:
    """A SparkSession with the ``stomp`` source registered.

    ``register_source=False`` leaves the registration to PySpark's own lookup
    of the ``pyspark_stomp`` module (4.0+; fastframe must be installed in the
    workers' interpreter, which is also what reading needs).

    ``master`` defaults to ``local[*]``. For local masters: the workers run
    this very interpreter (``PYSPARK_PYTHON`` = ``sys.executable``, else they
    may start another Python that lacks pyarrow and fastframe), everything
    binds to 127.0.0.1, the UI is off, and (with ``quiet``) Spark's own
    logging shows errors only. For any other master the executors run the
    Python the user named (``spark.pyspark.python`` in ``conf``, else
    ``PYSPARK_PYTHON``), else this interpreter's path, which the nodes must
    have with fastframe installed; the source's Python on the driver follows
    (see :func:`fastframe.spark._cluster.python_settings`). A master on
    loopback (``spark://127.0.0.1:7077``, ``localhost``) binds the driver to
    127.0.0.1 too (``SPARK_LOCAL_IP`` unless set, ``spark.driver.host`` and
    ``spark.driver.bindAddress`` unless in ``conf``); any other master leaves
    the driver's address to Spark (``SPARK_LOCAL_IP``, ``spark.driver.host``).

    ``ship_env`` (any master but a local one): a virtual environment's folder
    (packed here by venv-pack; an editable install is packed as a copy
    holding what it points at) or a packed environment (venv-pack or
    conda-pack archive) to send to the executors instead (``spark.archives``);
    they run its ``bin/python3``. The driver's JVM then starts in a folder
    where that relative path leads to this interpreter's environment, so
    paths given to Spark later must be absolute. The session must not exist
    yet.
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
    else:
        if is_loopback_master(master):
            # the executors on this machine must reach the driver at an address the master's side uses: Spark
            # would pick the host's other address, which a cluster bound to loopback may not reach
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            settings.update({"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"})
        if ship_env is not None:
            os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = SHIPPED_PYTHON
        else:
            os.environ.update(python_settings(conf or {}, os.environ, sys.executable))
    driver_python = os.environ.get("PYSPARK_DRIVER_PYTHON") or os.environ.get("PYSPARK_PYTHON")
    if "SPARK_HOME" not in os.environ and driver_python == sys.executable:
        # the Python processes this driver's JVM starts run this interpreter: they import its PySpark's
        # bytecode instead of compiling PySpark from Spark's zip (the source's planner, a local master's workers)
        home = home_without_source_zips(spark_home())
        if home is not None:
            os.environ["SPARK_HOME"] = home
    if quiet:
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{_quiet_log4j_file()}"
    settings.update(conf or {})
    if ship_env is not None and not local:
        packed = pack_env(ship_env, _temporary_folder("fastframe-env-"))
        settings["spark.archives"] = ",".join(filter(None, [settings.get("spark.archives"), f"{packed}#{ENV_NAME}"]))
    for key, value in settings.items():
        builder = builder.config(key, value)
    if ship_env is not None and not local:
        spark = _start_in(driver_link_dir(_temporary_folder("fastframe-driver-")), builder)
    else:
        spark = builder.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("ERROR")
    if (local or is_loopback_master(master)) and CHECKPOINT_MANAGER_KEY not in settings:
        _checkpoint_without_forks(spark)
    if register_source:
        register(spark)
    return spark


#: Spark's SQL setting for the class that writes a streaming query's checkpoint and a file sink's log.
CHECKPOINT_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
#: The FileSystem-based one, in its package (``checkpointing`` in PySpark 4.3; 4.0 has it one level up).
_FILE_SYSTEM_CHECKPOINT_MANAGER = "org/apache/spark/sql/execution/streaming/{}FileSystemBasedCheckpointFileManager"


@functools.lru_cache(maxsize=None)
def file_system_checkpoint_manager() -> Optional[str]:
    """The class name of Spark's FileSystem-based checkpoint manager, as the jars of the PySpark that runs
    (or of ``SPARK_HOME``) hold it; None where they cannot be read."""
    import pyspark

    folders = [os.path.join(os.path.dirname(pyspark.__file__), "jars")]
    if os.environ.get("SPARK_HOME"):
        folders.insert(0, os.path.join(os.environ["SPARK_HOME"], "jars"))
    for folder in folders:
        for jar in sorted(glob.glob(os.path.join(folder, "spark-sql_*.jar"))):
            try:
                with zipfile.ZipFile(jar) as archive:
                    names = set(archive.namelist())
            except (OSError, zipfile.BadZipFile):
                continue
            for package in ("checkpointing/", ""):
                entry = _FILE_SYSTEM_CHECKPOINT_MANAGER.format(package)
                if f"{entry}.class" in names:
                    return entry.replace("/", ".")
    return None


def _checkpoint_without_forks(spark: Any) -> None:
    """Checkpoints through Hadoop's FileSystem API rather than FileContext (Spark's default).

    On a local file system without Hadoop's native library (PySpark ships none), FileContext's
    rename forks ``readlink`` for each file it writes, and each fork of the driver's JVM took
    10-100 ms here: each batch's ``walCommit`` took 58-86 ms and its ``commitOffsets`` 70-107 ms,
    against 19-25 and 11-37 ms with the FileSystem one, which renames with the same rename(2). Where the master is local or on loopback the checkpoint is almost surely
    on a local disk; on HDFS both managers rename atomically (FileSystem's without overwriting,
    which the offset and commit logs do not ask for). A ``conf`` that sets the class wins.
    """
    name = file_system_checkpoint_manager()
    if name is not None:
        spark.conf.set(CHECKPOINT_MANAGER_KEY, name)


def register(spark: Any) -> bool:
    """Register the ``stomp`` source on ``spark`` explicitly; returns True.

    Where PySpark already found it by itself (PySpark 4.0 registers the ``pyspark_stomp`` module's
    source when a session starts, and refuses a second registration of the name), that one stands.
    """
    from ._source import StompDataSource

    try:
        spark.dataSource.register(StompDataSource)
    except Exception as exc:  # (PySpark's AnalysisException, through py4j)
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
    return True
