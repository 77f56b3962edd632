"""A Spark standalone cluster on loopback, started from the installed PySpark: for tests and benchmarks.

    with StandaloneCluster(workers=2, cores=1, memory="1g") as cluster:
        subprocess.run(["fastframe", "convert", "archive/", "--out", "out/", "--master", cluster.url])

One Master and N Workers, each its own ``spark-class`` process (no
``sbin/`` scripts: pip's PySpark does not ship them), bound to 127.0.0.1, each
in its own process group so that stopping kills the Workers' executors and
their Python workers too. The Workers' environment has no ``PYSPARK_PYTHON``,
as on a node nobody prepared. :meth:`start` waits until every Worker is
registered, polling the Master's JSON page.

``worker_prefix`` puts a command before each Worker's ``spark-class`` (given
the Worker's index), which must end by running the rest of its arguments
(``exec "$@"``); what it sets up holds for the Worker and everything it starts.
``bench/spark_cluster_bench.py --worker-cpu`` uses it to start each Worker in
its own CPU-capped cgroup.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Sequence

__all__ = ["ClusterError", "StandaloneCluster", "spark_home"]

# variables a prepared node would have; the Workers start without them
_DRIVER_ONLY = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_CONF_DIR", "PYTHONPATH")


class ClusterError(RuntimeError):
    """The cluster did not start (the message has the end of the daemons' logs)."""


def spark_home() -> str:
    """The installed PySpark's folder, which is a Spark home (``bin/spark-class``, ``jars/``)."""
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class StandaloneCluster:
    """Master and ``workers`` Workers (``cores`` and ``memory`` each) on 127.0.0.1; a context manager.

    ``worker_prefix(i)``: the command run before Worker ``i``'s ``spark-class`` (see the module's docstring).
    """

    def __init__(
        self,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        root: Optional[str] = None,
        daemon_memory: str = "256m",
        worker_prefix: Optional[Callable[[int], Sequence[str]]] = None,
    ) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.worker_prefix = worker_prefix
        self._own_root = root is None
        self.root = root or tempfile.mkdtemp(prefix="fastframe-cluster-")
        self.port = _free_port()
        self.ui_port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.ui_url = f"http://127.0.0.1:{self.ui_port}"
        self.procs: List[subprocess.Popen[bytes]] = []
        self.worker_dirs: List[str] = []

    def _env(self) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _DRIVER_ONLY}
        env.update(
            {
                "SPARK_HOME": spark_home(),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": self.daemon_memory,
                "SPARK_LOG_DIR": os.path.join(self.root, "logs"),
            }
        )
        return env

    def _spawn(self, name: str, args: List[str], prefix: Sequence[str] = ()) -> None:
        log = open(os.path.join(self.root, f"{name}.log"), "wb")
        try:
            proc = subprocess.Popen(
                [*prefix, os.path.join(spark_home(), "bin", "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env(),
                cwd=self.root,
                start_new_session=True,  # its own process group: stop() kills executors and Python workers too
            )
        finally:
            log.close()
        self.procs.append(proc)

    def state(self) -> Dict[str, Any]:
        """The Master's JSON page (workers, applications)."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as response:
            data: Dict[str, Any] = json.load(response)
            return data

    def alive_workers(self) -> List[Dict[str, Any]]:
        try:
            workers: List[Dict[str, Any]] = self.state().get("workers", [])
        except (OSError, ValueError):  # not up yet, or a page that is not the Master's JSON yet (empty)
            return []
        return [w for w in workers if w.get("state") == "ALIVE"]

    def logs(self, tail: int = 3000) -> str:
        out = []
        for name in sorted(os.listdir(self.root)):
            if name.endswith(".log"):
                with open(os.path.join(self.root, name), "rb") as f:
                    out.append(f"--- {name}\n{f.read()[-tail:].decode(errors='replace')}")
        return "\n".join(out)

    def start(self, timeout: float = 120.0) -> "StandaloneCluster":
        """Start the Master and the Workers; return once all Workers are registered (else ClusterError)."""
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise ClusterError("no Java: Spark needs Java 17 or newer")
        os.makedirs(os.path.join(self.root, "logs"), exist_ok=True)
        try:
            self._spawn(
                "master",
                ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                 "--webui-port", str(self.ui_port)],
            )  # fmt: skip
            for i in range(self.workers):
                work = os.path.join(self.root, f"worker-{i}")
                os.makedirs(work, exist_ok=True)
                self.worker_dirs.append(work)
                self._spawn(
                    f"worker-{i}",
                    ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(self.cores),
                     "--memory", self.memory, "--work-dir", work, "--webui-port", str(_free_port()), self.url],
                    self.worker_prefix(i) if self.worker_prefix else (),
                )  # fmt: skip
            deadline = time.monotonic() + timeout
            while len(self.alive_workers()) < self.workers:
                dead = [p for p in self.procs if p.poll() is not None]
                if dead or time.monotonic() > deadline:
                    why = "a daemon exited" if dead else f"not all {self.workers} workers registered in {timeout:.0f} s"
                    raise ClusterError(f"standalone cluster did not start: {why}\n{self.logs()}")
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise
        return self

    def executor_dirs(self, app_id: str) -> List[List[str]]:
        """Per Worker, the working folders of ``app_id``'s executors on it (where they ran and logged)."""
        found = []
        for work in self.worker_dirs:
            app = os.path.join(work, app_id)
            found.append(sorted(os.path.join(app, e) for e in os.listdir(app)) if os.path.isdir(app) else [])
        return found

    def stop(self) -> None:
        """Kill every daemon's process group (executors and Python workers included); remove the folder if made."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for proc in self.procs:
                try:
                    os.killpg(proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            # then SIGKILL whatever is left in each group (an executor slow to stop, a Python worker)
            deadline = time.monotonic() + 10
            for proc in self.procs:
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
