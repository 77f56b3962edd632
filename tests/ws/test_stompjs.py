"""stomp.js (``@stomp/stompjs`` 7 with ``ws``, under Node) against ``fastframe broker --ws-port``: text and
binary messages both ways, across transports with a TCP client of the same broker.

The npm packages are pinned by ``tests/ws/js/package-lock.json`` and installed by ``.ci/run``
(``npm ci``). Without Node or the packages the test skips locally and fails with CI=true.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from _shared import IN_CI
from fastframe import aio

JS = Path(__file__).parent / "js"


def node_or_skip() -> str:
    node = shutil.which("node")
    reason = ""
    if node is None:
        reason = "node is not installed (Debian: apt-get install nodejs npm)"
    elif not (JS / "node_modules" / "@stomp" / "stompjs").is_dir() or not (JS / "node_modules" / "ws").is_dir():
        reason = f"the npm packages are not installed: (cd {JS} && npm ci)"
    if reason:
        if IN_CI:
            pytest.fail(reason + "; .ci/run installs them", pytrace=False)
        pytest.skip(reason)
    assert node is not None
    return node


def test_stompjs_text_and_binary_both_ways_across_transports() -> None:
    node = node_or_skip()
    broker = subprocess.Popen(
        [sys.executable, "-m", "fastframe", "broker", "--port", "0", "--ws-port", "0", "--heartbeat", "1000,1000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    peer = None
    try:
        assert broker.stdout is not None
        tcp_port = int(broker.stdout.readline().rsplit(":", 1)[1])
        url = broker.stdout.readline().split()[-1]
        peer = subprocess.Popen(
            [node, str(JS / "stompjs_peer.js"), url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert peer.stdout is not None

        def line() -> Dict[str, Any]:
            assert peer is not None and peer.stdout is not None
            text = peer.stdout.readline()
            assert text, f"stomp.js ended: {peer.stderr.read() if peer.stderr else ''}"
            item: Dict[str, Any] = json.loads(text)
            assert "error" not in item, item
            return item

        ready = line()
        assert ready == {"ready": True, "version": "1.2"}

        async def exchange() -> List[bytes]:
            async with aio.connect("127.0.0.1", tcp_port, timeout=10) as tcp:
                sub = await tcp.subscribe("/queue/to-py")
                await tcp.send("/queue/to-js", "grüße from python", receipt=True)
                await tcp.send("/queue/to-js", b"\x00\xff\x02 not utf-8", receipt=True)
                return [(await sub.get(timeout=10)).body for _ in range(3)]

        got = asyncio.run(asyncio.wait_for(exchange(), 30))
        first, second = line(), line()
        # a text message, then a binary one (not UTF-8: stomp.js, like browsers, would refuse it as text)
        assert first == {"text": "grüße from python", "hex": "grüße from python".encode().hex()}
        assert second["hex"] == b"\x00\xff\x02 not utf-8".hex()
        assert got == ["grüße from stomp.js".encode(), b"\x00\xff\x01\x00", b"end"]
        assert line() == {"done": True}
        assert peer.wait(10) == 0
    finally:
        for process in (peer, broker):
            if process is not None and process.poll() is None:
                process.terminate()
            if process is not None:
                process.communicate(timeout=10)
