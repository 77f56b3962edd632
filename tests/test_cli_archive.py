"""``fastframe sample-archive`` and ``fastframe index``: archives of captures without Spark.

Their code lives outside ``fastframe.spark`` (``fastframe.archive``) and runs with the codec and the standard library only; these tests need no extra.
``fastframe convert`` (Spark): tests/spark/test_spark_cli.py.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Set

import fastframe
from fastframe import cli
from fastframe.archive import generate_stream

SRC = Path(fastframe.__file__).parent


def tree_digest(root: Path) -> Dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def test_sample_archives_are_seeded(tmp_path: Path, capsys: Any) -> None:
    assert cli.main(["sample-archive", str(tmp_path / "a"), "--connections", "3", "--frames", "50"]) == 0
    assert cli.main(["sample-archive", str(tmp_path / "b"), "--connections", "3", "--frames", "50"]) == 0
    assert cli.main(["sample-archive", str(tmp_path / "c"), "--connections", "3", "--frames", "50", "--seed", "1"]) == 0
    a, b, c = (tree_digest(tmp_path / name) for name in "abc")
    assert a == b and len(a) == 7  # 3 connections x 2 sides + _manifest.json
    assert a != c and a.keys() == c.keys()
    out = capsys.readouterr().out
    assert re.search(r"^wrote 6 files \([\d,]+ bytes, [\d,]+ frames, 2 damaged, seed 0\) to ", out, re.M), out
    assert cli.main(["sample-archive", str(tmp_path / "a")]) == 1  # never writes into a non-empty folder
    assert "not empty; choose a new folder" in capsys.readouterr().err


def test_index_command_writes_sidecars(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "s.stomp"
    path.write_bytes(generate_stream(500, seed=2))
    assert cli.main(["index", str(path), "--interval", "16k"]) == 0
    index = json.loads((tmp_path / "s.stomp.ffidx").read_bytes())
    assert index["frames"] == 500 and len(index["checkpoints"]) > 3
    assert f"{path}: 500 frames, {len(index['checkpoints'])} checkpoints\n" == capsys.readouterr().out


def test_index_reports_each_bad_file_and_goes_on(tmp_path: Path, capsys: Any) -> None:
    good, cut = tmp_path / "good.stomp", tmp_path / "cut.stomp"
    data = generate_stream(20, seed=3)
    good.write_bytes(data)
    cut.write_bytes(data[: len(data) - 3])
    status = cli.main(["index", str(tmp_path / "absent.stomp"), str(cut), str(good)])
    out, err = capsys.readouterr()
    assert status == 1
    assert f"{tmp_path / 'absent.stomp'}: not a file" in err
    assert f"{cut}: 19 frames, 1 checkpoints, malformed at offset " in out and f"{good}: 20 frames" in out


def test_archive_commands_need_no_spark(tmp_path: Path) -> None:
    # in a fresh interpreter in which pyspark, pyarrow and fsspec cannot be imported at all
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules.update(dict.fromkeys(("pyspark", "pyarrow", "fsspec")))  # None: importing them fails
        from fastframe.cli import main
        assert main(["sample-archive", {str(tmp_path / "archive")!r}, "--connections", "2", "--frames", "30"]) == 0
        assert main(["index", {str(tmp_path / "archive" / "rabbit-1" / "2026-11-21" / "conn-0001.s2c.stomp")!r},
                     "--interval", "1k"]) == 0
        assert all(sys.modules[name] is None for name in ("pyspark", "pyarrow", "fsspec"))
        assert not [name for name in sys.modules if name.startswith("fastframe.spark")], "imported the Spark layer"
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "wrote 4 files" in result.stdout and "30 frames" in result.stdout
    assert (tmp_path / "archive" / "rabbit-1" / "2026-11-21" / "conn-0001.s2c.stomp.ffidx").is_file()


def test_the_command_line_loads_no_spark_until_convert_runs() -> None:
    script = "import sys; from fastframe.cli import _build_parser; _build_parser(); print(sorted(sys.modules))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    loaded = ast.literal_eval(result.stdout)
    assert not [name for name in loaded if name.split(".")[0] in ("pyspark", "pyarrow", "fsspec", "asyncio")]
    assert not [name for name in loaded if name.startswith("fastframe.spark")]
    # each command imports what it needs when it runs, so that `fastframe decode` starts no slower
    assert not [name for name in loaded if name.startswith("fastframe.archive")]


def _imported_names(path: Path) -> Set[str]:
    """Every module a file imports, relative ones as written (``..cli``), at any depth of the file."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base)
            names.update(f"{base}{'.' if node.module else ''}{alias.name}" for alias in node.names)
    return names


def test_the_spark_layer_never_imports_the_command_line() -> None:
    for path in sorted((SRC / "spark").glob("*.py")):
        cli_names = [
            name
            for name in _imported_names(path)
            if name in ("fastframe.cli", "..cli") or name.startswith(("fastframe.cli.", "..cli."))
        ]
        assert not cli_names, (path.name, cli_names)


def test_the_spark_layer_names_the_archive_helpers_it_needs_no_spark_for() -> None:
    import fastframe.spark
    from fastframe import archive

    assert fastframe.spark.generate_archive is archive.generate_archive
    assert fastframe.spark.write_index is archive.write_index
