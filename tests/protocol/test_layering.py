"""The layers use fastframe's public API only, and import in one direction."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
