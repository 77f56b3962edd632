"""The cluster helpers that need no cluster: which Python, the packed environment's order, the messages."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from fastframe.cli import main as cli_main
from fastframe.cli._spark import _failure_reason, java_hint
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
    assert _failure_reason(error) == (
        "An exception was thrown from the Python worker: ModuleNotFoundError: No module named 'x'"
    )


def test_ship_env_is_refused_in_local_mode(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "a.stomp").write_bytes(b"SEND\n\n\x00")
    code = cli_main(["convert", str(tmp_path), "--out", str(tmp_path / "o"), "--ship-env", "env.tar.gz"])
    assert code == 2 and "--ship-env is for a cluster --master" in capsys.readouterr().err


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
