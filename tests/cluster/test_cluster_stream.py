"""The streaming source on the standalone cluster (issue 36), each driver in its own process as a user runs it.

A RabbitMQ stream read into a checkpointed Parquet sink through an executor killed mid-batch and the driver
killed once: every message once, byte for byte, read through the sink's ``_spark_metadata`` log (what Spark
and every reader that honours the log see). ``fastframe stream --ship-env`` from this very virtual environment
(the editable install ``make`` builds): the executors run the shipped copy. A worker Python without fastframe:
one line that says so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List
from urllib.parse import unquote, urlsplit

import pytest

from spark.stream_helpers import (  # noqa: F401 (delete_streams: the streams declared here are deleted at the end)
    RABBIT,
    batches,
    check_rows,
    delete_streams,
    new_queue,
    publish_stream,
    require_broker,
)

from .conftest import FASTFRAME, driver_env

pytestmark = [pytest.mark.slow, pytest.mark.interop]
HERE = Path(__file__).parent


def committed_files(out: Path) -> List[Path]:
    """The Parquet files a file sink's log (``out/_spark_metadata``) lists: what Spark's readers read."""
    log = out / "_spark_metadata"
    entries = sorted(
        (p for p in log.iterdir() if p.name.split(".")[0].isdigit()), key=lambda p: int(p.name.split(".")[0])
    )
    compacts = [i for i, p in enumerate(entries) if p.name.endswith(".compact")]
    files: List[Path] = []
    for entry in entries[compacts[-1] if compacts else 0 :]:  # a compact file holds every batch up to its own
        lines = entry.read_text().splitlines()[1:]  # after the version line
        for record in map(json.loads, filter(None, lines)):
            path = Path(unquote(urlsplit(record["path"]).path))
            if record["action"] == "add":
                files.append(path)
            else:
                files.remove(path)
    return files


def rows_of(files: List[Path]) -> List[Dict[str, Any]]:
    import pyarrow.parquet as pq

    return [row for path in files for row in pq.read_table(path, columns=["body", "headers"]).to_pylist()]


def stream_options(queue: str, **extra: Any) -> Dict[str, str]:
    options = {"host": "127.0.0.1", "port": str(RABBIT.port), "login": "guest", "passcode": "guest",
               "destination": f"/amq/queue/{queue}", "consume": "stream"}  # fmt: skip
    options.update({k: str(v) for k, v in extra.items()})
    return options


class Driver:
    """``stream_job.py`` in its own process group (its JVM included), its output in a file."""

    def __init__(self, cluster: Any, options: Dict[str, str], tmp: Path, run: int) -> None:
        self.log_path = tmp / f"driver-{run}.log"
        self.log = open(self.log_path, "wb")
        args = [sys.executable, str(HERE / "stream_job.py"), cluster.url, json.dumps(options), str(tmp / "out"),
                str(tmp / "checkpoint"), str(tmp / "killed-an-executor")]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=driver_env(),
                                        start_new_session=True)  # fmt: skip

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.log.close()


def test_a_stream_on_the_cluster_survives_an_executor_kill_and_a_driver_kill(cluster: Any, tmp_path: Path) -> None:
    require_broker(RABBIT)
    queue = new_queue("cluster")
    numbers = range(6000)
    publish_stream(queue, numbers)
    # six batches of 1,000 messages, each read by two tasks (one per Worker's executor)
    options = stream_options(queue, minPartitions=2, maxMessagesPerTrigger=1000)
    checkpoint = tmp_path / "checkpoint"

    first = Driver(cluster, options, tmp_path, 1)
    try:
        deadline = time.monotonic() + 420  # about a minute on a quiet machine, four with a load average of 13
        # killed once two batches are committed (the executor kill is in the first), with the next one planned
        while len(batches(checkpoint, "commits")) < 2 or len(batches(checkpoint, "offsets")) <= 2:
            assert first.process.poll() is None, first.output()
            assert time.monotonic() < deadline, first.output()
            time.sleep(0.05)
    finally:
        first.kill()
    assert (tmp_path / "killed-an-executor").exists(), first.output()
    committed_before = len(batches(checkpoint, "commits"))
    assert committed_before < 6, "the driver was killed after the last batch: nothing was left to resume"

    second = Driver(cluster, options, tmp_path, 2)
    try:
        second.process.wait(timeout=480)
    finally:
        second.kill()
    assert second.process.returncode == 0, second.output()
    assert "done" in second.output()

    # every message once, byte for byte, through the sink's log
    check_rows(rows_of(committed_files(tmp_path / "out")), numbers)


def make_env(dest: Path, modules: List[Any]) -> Path:
    """A virtual environment holding copies of ``modules`` only (not the driver's environment)."""
    base = getattr(sys, "_base_executable", "") or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(dest)], check=True)
    site = next(dest.glob("lib/python3*/site-packages"))
    for module in modules:
        shutil.copytree(Path(module.__file__).parent, site / module.__name__,
                        ignore=shutil.ignore_patterns("__pycache__", "tests"))  # fmt: skip
    return dest


def stream_command(cluster: Any, queue: str, out: Path, *extra: str) -> List[str]:
    return [FASTFRAME, "stream", f"/amq/queue/{queue}", "--consume", "stream", "--out", str(out), "--master",
            cluster.url, "--login", "guest", "--passcode", "guest", "--available-now", "--option",
            "minPartitions=2", *extra]  # fmt: skip


def test_stream_ship_env_from_this_editable_environment(cluster: Any, tmp_path: Path) -> None:
    from fastframe.spark._cluster import editable_locations

    require_broker(RABBIT)
    queue = new_queue("ship")
    publish_stream(queue, range(1000))
    # the Workers have no PYSPARK_PYTHON; the driver's shell none either: the executors run what is shipped
    done = subprocess.run(stream_command(cluster, queue, tmp_path / "out", "--ship-env"), capture_output=True,
                          text=True, timeout=480, env=driver_env(), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"shipping {sys.prefix} to the executors" in done.stderr
    pythons = re.search(r"^executors' Python: (.*)$", done.stderr, re.M)
    assert pythons, done.stderr
    # the executors (those the check's tasks met) ran the unpacked copy, in their own folders, with the compiled twin
    assert pythons.group(1).count("/fastframe-env/bin/python3 (") >= 1, pythons.group(1)
    assert "codec c" in pythons.group(1) and sys.executable not in pythons.group(1)
    assert "1000 messages written" in done.stderr
    check_rows(rows_of(committed_files(tmp_path / "out")), range(1000))
    if os.environ.get("CI") == "true" and sys.prefix != sys.base_prefix:
        # .ci/run's venv is make's, an editable install: the case venv-pack alone refuses
        assert editable_locations(sys.prefix), "CI's venv was expected to hold an editable install"


def test_stream_says_in_one_line_that_the_workers_lack_fastframe(cluster: Any, tmp_path: Path) -> None:
    import pyarrow

    bare = make_env(tmp_path / "env", [pyarrow])  # pyarrow, and no fastframe
    env = driver_env(PYSPARK_PYTHON=str(bare / "bin" / "python"))
    done = subprocess.run(stream_command(cluster, new_queue("never"), tmp_path / "out"), capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip
    assert done.returncode == 1, done.stderr[-4000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("fastframe stream:")]
    assert len(lines) == 1, done.stderr
    assert "cannot import fastframe (ModuleNotFoundError: No module named 'fastframe')" in lines[0]
    assert "--ship-env" in lines[0] and str(bare) in lines[0]
    assert "Traceback" not in done.stderr and "Py4J" not in done.stderr
