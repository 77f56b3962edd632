"""The Spark layer on a real standalone cluster (one Master, two one-core Workers on 127.0.0.1).

Each test runs a driver in its own process, as a user would: the installed
``fastframe`` command, or ``cluster_job.py``. Rows are compared one by one
with what the bare decoder makes of each file (what the local-mode tests in
tests/spark prove the local read gives), and every job shows, from Spark's own
status store, that its tasks ran in the executors of both Workers and none
in the driver.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import fastframe
from spark.helpers import bare_decode, split_rows

from .conftest import FASTFRAME, driver_env

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent


def run(args: List[str], env: Optional[Dict[str, str]] = None, timeout: float = 480) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env or driver_env())


def expected_files(codec: Any, archive: Dict[str, Any]) -> Dict[str, Any]:
    """Per file, the frame rows and the error the bare decoder gives (the damaged gzip: a prefix, then its error)."""
    import gzip

    out = {}
    for path in sorted(archive["root"].rglob("*.stomp*")):
        if path == archive["corrupt"]:
            continue
        data = path.read_bytes()
        out[str(path)] = bare_decode(codec, gzip.decompress(data) if path.suffix == ".gz" else data)
    return out


def check_rows(table_dir: Path, archive: Dict[str, Any]) -> Dict[str, Any]:
    """The table's rows, file by file, equal the bare decoder's; returns them."""
    import pyarrow.parquet as pq

    got = split_rows(pq.read_table(table_dir).to_pylist())
    expected = expected_files(fastframe, archive)
    corrupt = str(archive["corrupt"])
    assert set(got) == set(expected) | {corrupt}
    for path, rows in expected.items():
        assert got[path] == rows, path
    # the damaged gzip: the frames the decompressor delivered before it found the damage (with a 1 MiB read
    # buffer and this small file, none), then one error row
    frames, error = got[corrupt]
    assert error is not None and error[1] == "corrupt-compressed-data" and error[2].startswith("gzip:")
    whole = bare_decode(fastframe, archive["corrupt_data"])[0]
    assert len(frames) < len(whole) and frames == whole[: len(frames)]
    return got


def ran_on_both_workers(cluster: Any, app_id: str, tasks: Dict[str, int]) -> None:
    """Tasks ran in an executor of each Worker, none in the driver (executor ids = folders in each Worker's dir)."""
    per_worker = [{Path(d).name for d in dirs} for dirs in cluster.executor_dirs(app_id)]
    assert "driver" not in tasks
    assert all(n > 0 for n in tasks.values())
    for worker, executors in enumerate(per_worker):
        assert executors & set(tasks), (worker, per_worker, tasks)


def tasks_line(stdout: str) -> Dict[str, int]:
    line = re.search(r"^tasks per executor: (.*)$", stdout, re.M)
    assert line, stdout
    return {m[0]: int(m[1]) for m in re.findall(r"(\S+) \(\S+\): (\d+)", line.group(1))}


def app_id_of(cluster: Any, name: str) -> str:
    apps = [a for a in cluster.state()["completedapps"] + cluster.state()["activeapps"] if a["name"] == name]
    assert apps, cluster.state()
    return str(max(apps, key=lambda a: a["starttime"])["id"])


def test_convert_on_the_cluster_gives_the_local_rows(cluster: Any, archive: Dict[str, Any], tmp_path: Path) -> None:
    # the README's command, unchanged, from a shell with none of PySpark's variables
    out = tmp_path / "parquet"
    done = run([FASTFRAME, "convert", str(archive["root"]), "--out", str(out), "--master", cluster.url])
    assert done.returncode == 0, done.stderr[-4000:]
    check_rows(out, archive)
    assert f"executors' Python: {sys.executable} (" in done.stderr
    assert re.search(rf"^decoded by: {fastframe.IMPLEMENTATION} \(", done.stdout, re.M)
    assert f"converted {len(list(archive['root'].rglob('*.stomp*')))} files" in done.stdout
    assert "corrupt-compressed-data" in done.stdout  # PERMISSIVE: the damaged file is a row; the job goes on
    ran_on_both_workers(cluster, app_id_of(cluster, "fastframe convert"), tasks_line(done.stdout))


def test_python_read_write_and_failures_on_the_cluster(cluster: Any, archive: Dict[str, Any], tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    done = run([sys.executable, str(HERE / "cluster_job.py"), cluster.url, str(archive["root"]), str(tmp_path)])
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    tasks = {k: v[1] for k, v in result["read_tasks"].items()}

    # spark.read.format("stomp") with no registration call: the rows of the bare decoder, on both Workers
    got = check_rows(tmp_path / "read", archive)
    ran_on_both_workers(cluster, result["app_id"], tasks)

    # the write path: the frames written by the executors read back to the same frames
    def frames_of(rows: Dict[str, Any]) -> List[Tuple[Any, ...]]:
        return sorted((f[2], f[3], f[4]) for frames, _ in rows.values() for f in frames)

    assert result["write_tasks"] and "driver" not in result["write_tasks"]
    written = list((tmp_path / "stomp").glob("part-*.stomp"))
    assert len(written) == 2
    assert frames_of(split_rows(pq.read_table(tmp_path / "back").to_pylist())) == frames_of(got)

    # FAILFAST: the first task to meet a malformed file (the damaged gzip, or a capture the sample generator
    # damaged: which one comes first depends on which executor gets there first) fails the job, naming the
    # file and the error's code
    assert result["failfast"] is not None
    failed = [(Path(path).name, error[1]) for path, (_, error) in got.items() if error is not None]
    assert (archive["corrupt"].name, "corrupt-compressed-data") in failed
    assert any(name in result["failfast"] and code in result["failfast"] for name, code in failed), failed

    # an executor killed mid-job: its task runs again elsewhere and the job gives every row
    assert result["kill_failed_tasks"] >= 1
    assert result["kill_rows"] == sum(len(f) + (e is not None) for f, e in got.values())
    assert "driver" not in result["kill_tasks"]


def test_a_missing_module_on_the_executors_is_one_clear_message(
    cluster: Any, archive: Dict[str, Any], tmp_path: Path
) -> None:
    bare = getattr(sys, "_base_executable", "") or shutil.which("python3") or ""
    if run([bare, "-c", "import pyarrow"]).returncode == 0:
        pytest.skip(f"{bare} has pyarrow: no Python without it to point the executors at")
    env = driver_env(PYSPARK_PYTHON=bare)  # set by the user: respected, and it lacks pyarrow
    done = run([FASTFRAME, "convert", str(archive["root"]), "--out", str(tmp_path / "o"), "--master", cluster.url],
               env=env)  # fmt: skip
    assert done.returncode == 1
    message = [line for line in done.stderr.splitlines() if line.startswith("fastframe convert:")]
    assert len(message) == 1, done.stderr
    assert "cannot import pyarrow" in message[0] and "spark.pyspark.python" in message[0] and bare in message[0]
    assert "Traceback" not in done.stderr and "Py4J" not in done.stderr


def make_env_without_fastframe(dest: Path) -> Path:
    """A virtual environment with only what the executors need (pyarrow, fastframe): not the driver's."""
    import pyarrow

    import pyspark_stomp

    base = getattr(sys, "_base_executable", "") or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(dest)], check=True)
    site = next(dest.glob("lib/python3*/site-packages"))
    ignore = shutil.ignore_patterns("__pycache__", "*.c", "*.pyx", "tests")
    for module in (pyarrow, fastframe):
        shutil.copytree(Path(module.__file__).parent, site / module.__name__, ignore=ignore)
    shutil.copytree(Path(pyspark_stomp.__file__).parent, site / "pyspark_stomp", ignore=ignore)
    return dest


def test_ship_env_runs_on_nodes_without_fastframe(cluster: Any, archive: Dict[str, Any], tmp_path: Path) -> None:
    env_dir = make_env_without_fastframe(tmp_path / "env")
    out = tmp_path / "parquet"
    done = run([FASTFRAME, "convert", str(archive["root"]), "--out", str(out), "--master", cluster.url,
                "--ship-env", str(env_dir)])  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    check_rows(out, archive)
    app_id = app_id_of(cluster, "fastframe convert")
    ran_on_both_workers(cluster, app_id, tasks_line(done.stdout))
    # the executors ran the unpacked environment in their own folders, not the driver's interpreter
    pythons = re.search(r"^executors' Python: (.*)$", done.stderr, re.M)
    assert pythons, done.stderr
    executor_dirs = [d for dirs in cluster.executor_dirs(app_id) for d in dirs]
    assert any(f"{d}/fastframe-env/bin/python3" in pythons.group(1) for d in executor_dirs), (pythons, executor_dirs)
    assert sys.executable not in pythons.group(1)
