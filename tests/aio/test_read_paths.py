"""The client's two reading paths (BufferedProtocol, the default, and a plain Protocol) read the same."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

import fastframe
from fastframe import aio
from fastframe.aio._transport import ClientSession

BODIES = [b"\0small\0", b"", b"L\0" * 300_000, b"x" * 70_000, b"tail"]  # large ones cross many reads


@pytest.mark.parametrize("buffered", [True, False])
def test_both_paths_deliver_every_byte_and_the_wire_hook_sees_them(run, monkeypatch, buffered):
    monkeypatch.setattr(ClientSession, "reads_into_buffer", buffered)
    wire = []

    async def main():
        async with aio.Broker(port=0) as broker:
            hook = lambda direction, data: wire.append(data) if direction == "in" else None  # noqa: E731
            async with aio.connect("127.0.0.1", broker.port, wire_hook=hook, timeout=10) as client:
                async with await client.subscribe("/queue/paths", max_queue=2) as sub:
                    for index, body in enumerate(BODIES):
                        await client.send("/queue/paths", body, {"x-i": f"{index}:\\"})
                    got = [await sub.get(timeout=10) for _ in BODIES]
        return got

    got = run(main())
    assert [m.body for m in got] == BODIES and [m.get("x-i") for m in got] == [f"{i}:\\" for i in range(5)]
    # what the hook saw is the stream itself: it decodes to CONNECTED, the RECEIPT, the MESSAGEs
    frames = [f for f in fastframe.Decoder("1.2").feed(b"".join(wire)) if isinstance(f, fastframe.Frame)]
    assert [f.command for f in frames] == ["CONNECTED", "RECEIPT", *["MESSAGE"] * 5, "RECEIPT", "RECEIPT"]
    assert [f.body for f in frames if f.command == "MESSAGE"] == BODIES


def test_the_benchmark_runs_both_paths(monkeypatch):
    repo = Path(__file__).resolve().parents[2]  # bench/ is a package at the repository root, not an installed one
    monkeypatch.syspath_prepend(str(repo))
    from bench import aio_read

    out = io.StringIO()
    with redirect_stdout(out):
        aio_read.main(["--messages", "300", "--large", "2", "--large-size", "300000", "--rounds", "2"])
    rows = [line for line in out.getvalue().splitlines() if line.startswith("| 300 x") or line.startswith("| 2 x")]
    assert len(rows) == 4 and sum("`BufferedProtocol`" in row for row in rows) == 2
    assert ClientSession.reads_into_buffer is True  # the default is back
