"""The layers use fastframe's public API only, and import in one direction."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import fastframe

SRC = Path(fastframe.__file__).parent


def test_protocol_and_aio_do_not_reach_into_the_twins():
    layers = ("protocol", "aio", "server", "broker")
    for path in [path for layer in layers for path in (SRC / layer).glob("*.py")]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"_codec_(py|c)\b", text), path


def test_import_directions():
    code = (
        "import sys, fastframe; assert 'fastframe.protocol' not in sys.modules and 'fastframe.aio' not in sys.modules;"
        "import fastframe.protocol; assert 'fastframe.aio' not in sys.modules;"
        "import fastframe.broker; assert 'fastframe.server' not in sys.modules and 'fastframe.aio' not in sys.modules;"
        "import fastframe.aio; assert 'fastframe.server' not in sys.modules;"  # the server side: on first use
        "import fastframe.server; assert fastframe.aio.serve is fastframe.server.serve; print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr
