"""The cluster helpers that need no cluster: which Python, the packed environment's order, the messages."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from fastframe.cli import main as cli_main
from fastframe.cli._spark import java_hint
from fastframe.spark import _cluster


def test_the_driver_interpreter_unless_the_user_set_one() -> None:
    me = "/venv/bin/python"
    assert _cluster.python_settings({}, {}, me) == {"PYSPARK_PYTHON": me, "PYSPARK_DRIVER_PYTHON": me}
    # a user's executors' Python also runs the auto-registered source, on the driver and the executors
    env = {"PYSPARK_PYTHON": "/opt/py/bin/python"}
    assert _cluster.python_settings({}, env, me) == {
        "PYSPARK_PYTHON": "/opt/py/bin/python",
        "PYSPARK_DRIVER_PYTHON": "/opt/py/bin/python",
    }
    # the Spark setting wins over the variable (PySpark alone would ignore it once started from Python)
    conf = {"spark.pyspark.python": "/a/python", "spark.pyspark.driver.python": "/b/python"}
    assert _cluster.python_settings(conf, env, me) == {
        "PYSPARK_PYTHON": "/a/python",
        "PYSPARK_DRIVER_PYTHON": "/b/python",
    }
    assert _cluster.python_settings({}, {"PYSPARK_DRIVER_PYTHON": "/d"}, me) == {
        "PYSPARK_PYTHON": me,
        "PYSPARK_DRIVER_PYTHON": "/d",
    }


def test_a_packed_environment_becomes_a_zip_hadoop_unpacks_whole(tmp_path: Path) -> None:
    import zipfile

    # as venv-pack writes a tar: bin/python3, a link to the base interpreter, before anything else in bin/
    source = tmp_path / "venv-pack.tar.gz"
    interpreter = tmp_path / "base-python"  # outside the environment
    interpreter.write_bytes(b"\x7fELF interpreter")
    with tarfile.open(source, "w:gz") as tar:
        for name, target in (("bin/python3", str(interpreter)), ("bin/gone", "/nonexistent/python")):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            tar.addfile(link)
        for name, data, mode in (("bin/activate", b"# activate\n", 0o644),
                                 ("lib/python3.11/site-packages/m.py", b"x = 1\n", 0o644),
                                 ("bin/tool", b"#!/bin/sh\n", 0o755)):  # fmt: skip
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        # links inside the environment
        for name, target in (("bin/python", "python3"), ("lib64", "lib"), ("bin/activate2", "activate")):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            tar.addfile(link)
    packed = _cluster.pack_env(str(source), str(tmp_path))
    assert packed.endswith(".zip")
    with zipfile.ZipFile(packed) as zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        modes = {i.filename: i.external_attr >> 16 for i in infos}
        # folders first, each before what it holds
        assert names[:4] == ["bin/", "lib/", "lib/python3.11/", "lib/python3.11/site-packages/"]
        assert zf.read("lib/python3.11/site-packages/m.py") == b"x = 1\n"
        # the modes survive (Hadoop's unzip restores them; its untar would not): the interpreter can run
        assert modes["bin/tool"] & 0o777 == 0o755 and modes["bin/activate"] & 0o777 == 0o644
        # links: copies of the file they end at; the interpreter by its link and by the chain to it
        for name in ("bin/python3", "bin/python"):
            assert zf.read(name) == b"\x7fELF interpreter" and modes[name] & 0o777 == 0o755
        assert zf.read("bin/activate2") == b"# activate\n"
        # left out: a link to a folder inside (lib64), one to a file this machine lacks
        assert "lib64" not in names and "lib64/" not in names and "bin/gone" not in names
    with pytest.raises(ValueError, match="not a virtual environment"):
        _cluster.pack_env(str(tmp_path), str(tmp_path))
    with pytest.raises(ValueError, match="ends with"):
        _cluster.pack_env(__file__, str(tmp_path))


def test_the_driver_link_leads_to_this_environment(tmp_path: Path) -> None:
    import sys

    folder = _cluster.driver_link_dir(str(tmp_path))
    python = Path(folder) / _cluster.SHIPPED_PYTHON
    assert python.exists() and python.resolve() == Path(sys.executable).resolve()


def test_messages_without_java_and_with_an_empty_reason(monkeypatch: Any) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    hint = java_hint()
    assert hint is not None and "openjdk-17-jre-headless" in hint
    # PySpark's "...from the Python worker:" with the reason on the next line
    error = RuntimeError("An exception was thrown from the Python worker:\nModuleNotFoundError: No module named 'x'")
    assert _cluster.failure_reason(error) == (
        "An exception was thrown from the Python worker: ModuleNotFoundError: No module named 'x'"
    )
    assert _cluster.failure_reason(RuntimeError("")) == "RuntimeError"


# what PySpark 4.3 raised when the driver's Python lacked fastframe (issue 36: the CLI printed the first line only)
NO_FASTFRAME = """\
[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/sql/worker/utils.py", line 98, in worker_run
    main(infile, outfile)
  File "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/serializers.py", line 483, in loads
    return cloudpickle.loads(obj, encoding=encoding)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ModuleNotFoundError: No module named 'fastframe'
 SQLSTATE: 38000"""

# a query that failed in the source's latestOffset: Spark's classes nested, the source's error at the end
QUERY_FAILED = """\
[STREAM_FAILED] Query [id = cb96, runId = 5ccb] terminated with exception: [PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] \
Failed when Python streaming data source perform latestOffset: Traceback (most recent call last):
  File "/work/main/src/fastframe/spark/_stream_read.py", line 82, in _stream_subscription
    raise _subscribe_error(exc, destination, "stream") from None
fastframe.spark._stream_client.BrokerError: destination '/queue/x' does not exist on the broker; check option destination
 SQLSTATE: 38000 SQLSTATE: XXKST
=== Streaming Query ===
Current State: ACTIVE
Logical Plan:
~WriteToMicroBatchDataSourceV1 FileSink[file:/tmp/out]"""

# an error raised while PySpark handled the source's own (4.3 hides a construction error this way)
HIDDEN = """\
[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: Traceback (most recent call last):
  File "/x/_source.py", line 3, in __init__
ValueError: unknown broker source option 'bogus'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/x/pyspark/worker.py", line 9, in main
UnboundLocalError: cannot access local variable 'reader' where it is not associated with a value
"""

# a task that failed on an executor: the Java exception's class before the traceback says nothing more
TASK_FAILED = """\
Job aborted due to stage failure: Task 0 in stage 1.0 failed 2 times, most recent failure: Lost task 0.1 in stage \
1.0 (TID 3) (127.0.0.1 executor 1): org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/_stream_read.py", line 9, in read
fastframe.spark._stream_client.BrokerError: the broker closed the connection
\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)"""


@pytest.mark.parametrize(
    "text, reason",
    [
        (NO_FASTFRAME, "ModuleNotFoundError: No module named 'fastframe' "
         "([PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance)"),
        (QUERY_FAILED, "BrokerError: destination '/queue/x' does not exist on the broker; check option destination "
         "([PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform latestOffset)"),
        (HIDDEN, "ValueError: unknown broker source option 'bogus' "
         "([PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance)"),
        (TASK_FAILED, "BrokerError: the broker closed the connection (Job aborted due to stage failure: Task 0 in "
         "stage 1.0 failed 2 times, most recent failure: Lost task 0.1 in stage 1.0 (TID 3) (127.0.0.1 executor 1))"),
    ],
)  # fmt: skip
def test_a_spark_failure_is_one_line_with_the_python_cause_first(text: str, reason: str) -> None:
    assert _cluster.failure_reason(RuntimeError(text)) == reason
    assert len(_cluster.failure_reason(RuntimeError(text), limit=40)) == 40


def test_the_stream_command_prints_the_cause_not_the_first_line(monkeypatch: Any, capsys: Any, tmp_path: Path) -> None:
    from fastframe.cli import _stream

    class FailingSession:
        readStream = property(lambda self: (_ for _ in ()).throw(RuntimeError(NO_FASTFRAME)))

        def stop(self) -> None:
            pass

    monkeypatch.setattr(_stream, "start_session", lambda *args: FailingSession())
    monkeypatch.setattr(_stream, "_unreachable", lambda *args: None)  # no broker needed: the query fails first
    assert cli_main(["stream", "/queue/a", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "fastframe stream: ModuleNotFoundError: No module named 'fastframe' "
        "([PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance)"
    ]


def test_the_driver_binds_to_loopback_when_the_master_is_there() -> None:
    from fastframe.spark.session import is_loopback_master

    for master in ("spark://127.0.0.1:7077", "spark://localhost:7077", "spark://[::1]:7077",
                   "spark://127.0.0.1:7077,127.0.0.2:7077"):  # fmt: skip
        assert is_loopback_master(master), master
    for master in ("spark://10.0.0.1:7077", "spark://node-1:7077", "spark://127.0.0.1:7077,10.0.0.1:7077",
                   "yarn", "local[2]", "k8s://https://127.0.0.1:6443"):  # fmt: skip
        assert not is_loopback_master(master), master


def make_editable_venv(root: Path) -> Path:
    """A venv with an editable install of a project in ``root/project/src`` (a path .pth, as setuptools
    writes for a src layout) and one through an editable finder (setuptools' other mode)."""
    import subprocess
    import sys

    base = getattr(sys, "_base_executable", "") or sys.executable
    env = root / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next(env.glob("lib/python3*/site-packages"))
    src = root / "project" / "src"
    (src / "mypkg" / "__pycache__").mkdir(parents=True)
    (src / "mypkg" / "__init__.py").write_text("VALUE = 1\n")
    (src / "mypkg" / "_fast.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (src / "mypkg" / "__pycache__" / "x.pyc").write_bytes(b"")
    (src / "mypkg.egg-info").mkdir()
    (src / "single.py").write_text("X = 2\n")
    (site / "__editable__.mypkg-0.1.pth").write_text(f"{src}\n")
    other = root / "other" / "otherpkg"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("Y = 3\n")
    (site / "__editable__.otherpkg-1.0.pth").write_text("import __editable___otherpkg_1_0_finder; x.install()\n")
    (site / "__editable___otherpkg_1_0_finder.py").write_text(
        f"import sys\nMAPPING: dict[str, str] = {{'otherpkg': {str(other)!r}}}\nNAMESPACES = {{}}\n"
    )
    (site / "pyspark").mkdir()
    (site / "pyspark" / "__init__.py").write_text("")
    (site / "keep.py").write_text("K = 1\n")
    return env


def test_an_editable_install_is_packed_as_a_copy(tmp_path: Path) -> None:
    import zipfile

    env = make_editable_venv(tmp_path)
    site = next(env.glob("lib/python3*/site-packages"))
    found = _cluster.editable_locations(str(env))
    assert found == {
        str(site / "__editable__.mypkg-0.1.pth"): [str(tmp_path / "project" / "src")],
        str(site / "__editable__.otherpkg-1.0.pth"): [str(tmp_path / "other" / "otherpkg")],
    }
    out = tmp_path / "out"
    out.mkdir()
    packed = _cluster.pack_env(str(env), str(out))
    with zipfile.ZipFile(packed) as zf:
        names = set(zf.namelist())
        inside = site.relative_to(env)
        # what the editable installs point at is in site-packages, not the links to it
        assert zf.read(f"{inside}/mypkg/__init__.py") == b"VALUE = 1\n"
        assert f"{inside}/mypkg/_fast.cpython-311-x86_64-linux-gnu.so" in names  # the compiled twin, built in place
        assert zf.read(f"{inside}/single.py") == b"X = 2\n" and zf.read(f"{inside}/otherpkg/__init__.py") == b"Y = 3\n"
        assert zf.read(f"{inside}/keep.py") == b"K = 1\n"
        assert not [n for n in names if "__editable__" in n or "egg-info" in n or "__pycache__" in n]
        # PySpark is left out: the cluster's own comes first on the workers' path
        assert not [n for n in names if "/pyspark/" in n]
        assert "bin/python3" in names
    # the environment itself is untouched, and no copy is left behind
    assert (site / "__editable__.mypkg-0.1.pth").exists() and (site / "pyspark" / "__init__.py").exists()
    assert sorted(p.name for p in out.iterdir()) == ["fastframe-env.zip"]


def test_ship_env_is_refused_in_local_mode(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "a.stomp").write_bytes(b"SEND\n\n\x00")
    code = cli_main(["convert", str(tmp_path), "--out", str(tmp_path / "o"), "--ship-env", "env.tar.gz"])
    assert code == 2 and "--ship-env is for a cluster --master" in capsys.readouterr().err
    code = cli_main(["stream", "/queue/a", "--out", str(tmp_path / "o"), "--ship-env"])
    assert code == 2 and "fastframe stream: --ship-env is for a cluster --master" in capsys.readouterr().err


FAKE_SPARK_CLASS = """#!{python}
# spark-class stand-in: the Master serves its JSON page (a Worker is alive once it wrote its file), a Worker
# writes what the prefix set up and its pid, then waits to be killed
import http.server, json, os, sys, time

args = sys.argv[1:]
if args[0].endswith(".Master"):
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            alive = [{{"state": "ALIVE"}} for name in os.listdir(".") if name.endswith(".worker")]
            body = json.dumps({{"workers": alive}}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    http.server.HTTPServer(("127.0.0.1", int(args[args.index("--webui-port") + 1])), Page).serve_forever()
else:
    work = args[args.index("--work-dir") + 1]
    with open(os.path.basename(work) + ".worker", "w") as f:
        json.dump({{"prefix": os.environ.get("FF_PREFIX"), "pid": os.getpid()}}, f)
    time.sleep(120)
"""


def test_a_worker_prefix_runs_before_each_worker_and_stop_still_kills_it(tmp_path: Path, monkeypatch: Any) -> None:
    import json
    import os
    import sys

    from fastframe.spark import standalone

    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    fake = home / "bin" / "spark-class"
    fake.write_text(FAKE_SPARK_CLASS.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setattr(standalone, "spark_home", lambda: str(home))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # start() asks for Java, which the stand-in does not need
    root = tmp_path / "cluster"
    root.mkdir()
    cluster = standalone.StandaloneCluster(
        workers=2, root=str(root), worker_prefix=lambda i: ["env", f"FF_PREFIX=w{i}"]
    )
    with cluster:
        workers = [json.loads((root / f"worker-{i}.worker").read_text()) for i in range(2)]
        # each Worker ran under its own prefix, which exec'd spark-class in place: stop() kills the same process
        assert [w["prefix"] for w in workers] == ["w0", "w1"]
        assert [w["pid"] for w in workers] == [p.pid for p in cluster.procs[1:]]
        assert (root / "master.log").exists()
    assert all(p.poll() is not None for p in cluster.procs)
    for w in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(w["pid"], 0)
