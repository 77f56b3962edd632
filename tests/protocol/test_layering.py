"""The layers use fastframe's public API only, and import in one direction."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Set

import fastframe

SRC = Path(fastframe.__file__).parent


# every package above the codec, and the root's modules beside it
LAYERS = ("protocol", "broker", "aio", "sync", "server", "archive", "capture", "spark", "cli")
# a private module of the codec, however imported: fastframe.codec._x, from ..codec._x, from .codec import _x
PRIVATE_CODEC = re.compile(r"codec\._[a-z]|codec import[^\n]*\b_[a-z]|\b_codec_(py|c)\b")


def test_layers_above_the_codec_use_its_public_api_only():
    paths = [path for layer in LAYERS for path in (SRC / layer).rglob("*.py")]
    paths += [path for path in SRC.glob("*.py") if path.name != "__init__.py"]
    assert len(paths) > 40
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert not PRIVATE_CODEC.search(text), path


def test_the_codec_imports_nothing_of_fastframe_outside_itself():
    codec = SRC / "codec"
    for path in [*codec.glob("*.py"), *codec.glob("*.pyx"), *codec.glob("*.pxi")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.match(r"\s*(from|c?import)\s", line):
                assert not re.search(r"from \.\.|fastframe", line), (path.name, line)


def test_import_directions():
    code = (
        "import sys, fastframe.codec; assert [m for m in sys.modules if m.startswith('fastframe.') and"
        " not m.startswith('fastframe.codec')] == [];"
        "import fastframe; assert 'fastframe.protocol' not in sys.modules and 'fastframe.aio' not in sys.modules;"
        "import fastframe.protocol; assert 'fastframe.aio' not in sys.modules;"
        "import fastframe.broker; assert 'fastframe.server' not in sys.modules and 'fastframe.aio' not in sys.modules;"
        "import fastframe.aio; assert 'fastframe.server' not in sys.modules;"  # the server side: on first use
        "import fastframe.server; assert fastframe.aio.serve is fastframe.server.serve; print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr


# Each wing (a package under fastframe/, or a module beside them) and the wings it may import, at
# module level or on use. "root" is `import fastframe` / `from .. import X`: the codec's names through
# the package root, a hallway the wings do not use (they import `..codec` or the wing owning a name);
# the Spark wing and the command line still do (issue 32 left them: they were being edited).
WING_IMPORTS: Dict[str, Set[str]] = {
    "codec": set(),
    "protocol": {"codec"},  # spec.py, the specification's rules, is the protocol's
    "broker": {"codec", "protocol", "__version__"},  # protocol: spec and the ERROR shape
    "aio": {"protocol", "server", "websocket"},  # server and websocket on first use
    "sync": {"aio", "protocol"},
    "server": {"codec", "protocol", "broker", "websocket"},  # broker: in _broker.py only (below)
    "websocket": {"codec"},
    "archive": {"codec"},  # the sample generators are the archive's
    "capture": {"codec", "archive"},
    "spark": {"codec", "archive", "aio", "__version__"},
    "cli": {"aio", "archive", "capture", "protocol", "server", "spark", "root"},
    "testing": {"codec", "server"},
    "pytest_plugin": {"testing"},
    "__main__": {"cli"},
}


def _wing_imports(path: Path) -> Dict[str, int]:
    """The other wings ``path`` imports, each with the line of its first import."""
    rel = path.relative_to(SRC)
    own, package = (rel.parts[0] if len(rel.parts) > 1 else rel.stem), list(rel.parts[:-1])
    found: Dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.level:
            module = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            names = module[:1] or [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "fastframe":
            names = node.module.split(".")[1:2] or ["root"]  # type: ignore[union-attr]
        elif isinstance(node, ast.Import):
            names = [
                (alias.name.split(".")[1:2] or ["root"])[0]
                for alias in node.names
                if alias.name.split(".")[0] == "fastframe"
            ]
        for name in names:
            if name != own:
                found.setdefault(name, node.lineno)
    return found


def test_each_wing_imports_only_the_wings_below_it():
    paths = [path for path in SRC.rglob("*.py") if path.name != "__init__.py" or path.parent != SRC]
    assert len(paths) > 60
    for path in paths:
        rel = path.relative_to(SRC)
        own = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for name, line in _wing_imports(path).items():
            assert name in WING_IMPORTS[own], f"{rel}:{line} imports {name}"


def test_the_server_imports_the_broker_only_to_serve_it():
    importers = [path.name for path in (SRC / "server").glob("*.py") if "broker" in _wing_imports(path)]
    assert importers == ["_broker.py"]


def test_the_moved_modules_are_gone_from_the_root():
    # fastframe.spec is fastframe.protocol.spec, fastframe.sample is in fastframe.archive; the
    # re-export modules of paths never released are gone (no aliases: 0.1.0 is the first release)
    for name in ("spec.py", "sample.py", "sample_archive.py"):
        assert not (SRC / name).exists(), name
    assert not (SRC / "spark" / "archive.py").exists()
