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
