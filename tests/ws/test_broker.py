"""The broker over WebSocket (``serve(ws_port=)``, ``fastframe broker --ws-port``): TCP and WebSocket
clients of one broker reach each other; frames go out one per message, text or binary by content."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any, List, Tuple

import pytest
from websockets.asyncio.client import connect as raw_connect
from websockets.exceptions import InvalidStatus

from fastframe import aio


def test_tcp_to_websocket_and_back(run: Any) -> None:
    async def main() -> List[bytes]:
        async with aio.Broker(port=0, ws_port=0) as broker:
            url = f"ws://127.0.0.1:{broker.ws_port}/ws"
            async with aio.connect("127.0.0.1", broker.port) as tcp, aio.connect(url, heartbeat=(200, 200)) as ws:
                assert ws.session.transport.get_extra_info("subprotocol") == "v12.stomp"
                to_ws = await ws.subscribe("/queue/to-ws")
                to_tcp = await tcp.subscribe("/queue/to-tcp")
                await tcp.send("/queue/to-ws", b"over tcp \x00\xff", receipt=True)
                await ws.send("/queue/to-tcp", "über ws", receipt=True)
                got = [(await to_ws.get(timeout=5)).body, (await to_tcp.get(timeout=5)).body]
                await asyncio.sleep(0.6)  # heart-beats both ways over the WebSocket
                assert ws.is_connected
                return got

    assert run(main()) == [b"over tcp \x00\xff", "über ws".encode()]


def test_frames_go_out_one_per_message_text_or_binary(run: Any) -> None:
    async def main() -> List[Tuple[type, bytes]]:
        async with aio.Broker(port=0, ws_port=0) as broker:
            async with raw_connect(f"ws://127.0.0.1:{broker.ws_port}/ws", subprotocols=["v12.stomp"]) as ws:
                assert ws.subprotocol == "v12.stomp"
                await ws.send("CONNECT\naccept-version:1.2\nhost:/\n\n\0")
                got = [await ws.recv()]
                await ws.send("SUBSCRIBE\nid:0\ndestination:/queue/q\n\n\0")
                async with aio.connect("127.0.0.1", broker.port) as tcp:  # three deliveries in one turn
                    for body in (b"text", b"\xff\xfe", b"more text"):
                        tcp.send_nowait("/queue/q", body)
                    await tcp.send("/queue/q", b"last", receipt=True)
                for _ in range(4):
                    got.append(await asyncio.wait_for(ws.recv(), 5))
                return [(type(item), item.encode() if isinstance(item, str) else item) for item in got]

    got = run(main())
    assert got[0][0] is str and got[0][1].startswith(b"CONNECTED\n")
    kinds = [kind for kind, _ in got[1:]]
    assert kinds == [str, bytes, str, str]  # text when UTF-8, binary otherwise
    assert all(data.startswith(b"MESSAGE\n") and data.endswith(b"\0") for _, data in got[1:])
    assert [data.rsplit(b"\n\n", 1)[1] for _, data in got[1:]] == [b"text\0", b"\xff\xfe\0", b"more text\0", b"last\0"]


def test_no_subprotocol_offered_is_served_and_other_paths_are_refused(run: Any) -> None:
    async def main() -> Any:
        async with aio.Broker(port=0, ws_port=0) as broker:
            async with raw_connect(f"ws://127.0.0.1:{broker.ws_port}/ws") as ws:
                assert ws.subprotocol is None
                await ws.send(b"CONNECT\naccept-version:1.1\nhost:/\n\n\0")
                assert (await ws.recv()).startswith("CONNECTED\nversion:1.1\n")
            with pytest.raises(InvalidStatus) as refused:
                async with raw_connect(f"ws://127.0.0.1:{broker.ws_port}/other"):
                    pass
            return refused.value.response.status_code

    assert run(main()) == 404


def test_a_message_past_the_frame_limit_closes_the_connection(run: Any) -> None:
    async def main() -> Any:
        async with aio.Broker(port=0, ws_port=0, decoder_options={"max_frame_size": 4096}) as broker:
            async with raw_connect(f"ws://127.0.0.1:{broker.ws_port}/ws", subprotocols=["v12.stomp"]) as ws:
                await ws.send("CONNECT\naccept-version:1.2\nhost:/\n\n\0")
                await ws.recv()
                await ws.send(b"SEND\ndestination:/queue/q\n\n" + b"x" * 100_000 + b"\0")
                await asyncio.wait_for(ws.wait_closed(), 5)
                return ws.protocol.close_code

    assert run(main()) == 1009


def test_the_command_line_serves_websocket_beside_tcp(run: Any) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "fastframe", "broker", "--port", "0", "--ws-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        tcp_port = int(lines[0].rsplit(":", 1)[1])
        url = lines[1].split()[-1]
        assert url.startswith("ws://127.0.0.1:") and url.endswith("/ws")

        async def main() -> bytes:
            async with aio.connect("127.0.0.1", tcp_port) as tcp, aio.connect(url) as ws:
                sub = await ws.subscribe("/queue/cli")
                await tcp.send("/queue/cli", b"from the command line", receipt=True)
                return (await sub.get(timeout=5)).body

        assert run(main()) == b"from the command line"
    finally:
        process.terminate()
        started = time.monotonic()
        process.communicate(timeout=10)
        assert time.monotonic() - started < 10


@pytest.mark.parametrize("size", [125, 126, 65535, 65536, 300_000])
def test_bodies_around_each_frame_header_size_both_ways(run: Any, size: int) -> None:
    body = bytes(range(256)) * (size // 256) + b"\xff" * (size % 256)  # (not UTF-8: binary messages)

    async def main() -> List[bytes]:
        async with aio.Broker(port=0, ws_port=0) as broker:
            url = f"ws://127.0.0.1:{broker.ws_port}/ws"
            async with aio.connect(url) as one, aio.connect(url) as two:
                sub = await two.subscribe("/queue/sizes")
                for _ in range(3):  # several in a row: frames cross the socket's reads
                    one.send_nowait("/queue/sizes", body)
                await one.send("/queue/sizes", b"text " * size, receipt=True)
                return [(await sub.get(timeout=10)).body for _ in range(4)]

    assert run(main()) == [body, body, body, b"text " * size]


def test_connections_still_upgrading_count_against_max_connections(run: Any) -> None:
    async def main() -> int:
        async with aio.Broker(port=0, ws_port=0, max_connections=1) as broker:
            _, idle = await asyncio.open_connection("127.0.0.1", broker.ws_port)  # connected, never upgrades
            try:
                await asyncio.sleep(0.1)
                with pytest.raises(InvalidStatus) as refused:
                    async with raw_connect(f"ws://127.0.0.1:{broker.ws_port}/ws"):
                        pass
            finally:
                idle.close()
            await asyncio.sleep(0.1)
            async with aio.connect(f"ws://127.0.0.1:{broker.ws_port}/ws") as client:  # its place is free again
                assert client.is_connected
            return refused.value.response.status_code

    assert run(main()) == 503
