"""The clients over WebSocket against scripted servers on 127.0.0.1: how frames go out, any split in,
subprotocols, and servers that misbehave (a close mid-frame, a ping flood, a message past the limit,
a refused or silent upgrade)."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any, List

import pytest

import fastframe.sync
from fastframe import aio
from fastframe.protocol import RemoteProtocolError
from fastframe.websocket import WebSocketError

from ._fake import FakeServer, Peer, handshake


def message(body: bytes, sub: str = "sub-1", mid: str = "1") -> bytes:
    head = f"MESSAGE\ndestination:/queue/a\nmessage-id:{mid}\nsubscription:{sub}\ncontent-length:{len(body)}\n\n"
    return head.encode() + body + b"\0"


def causes(error: BaseException) -> List[BaseException]:
    found = []
    seen: Any = error
    while seen is not None:
        found.append(seen)
        seen = seen.__cause__
    return found


def test_each_frame_and_heart_beat_goes_out_as_a_message_of_its_own(run: Any) -> None:
    received: List[bytes] = []

    async def script(peer: Peer) -> None:
        received.append(await handshake(peer))
        while True:
            received.append(await peer.recv())

    async def main() -> None:
        async with FakeServer(script) as server:
            client = await aio.connect(server.url, timeout=5)
            assert client.send_nowait("/queue/a", "one") and client.send_nowait("/queue/a", b"t\xffo")
            client.session.write(b"\n")  # a heart-beat, as the ticker writes it
            await asyncio.sleep(0.2)
            await client.close()

    run(main())
    connect, one, two, beat = received[:4]
    assert connect.startswith(b"CONNECT\n") and connect.endswith(b"\0")
    assert one.startswith(b"SEND\n") and one.endswith(b"\n\none\0")
    assert two.startswith(b"SEND\n") and two.endswith(b"\n\nt\xffo\0")
    assert beat == b"\n"


def test_text_when_utf8_binary_otherwise(run: Any) -> None:
    kinds: List[Any] = []

    async def script(peer: Peer) -> None:
        await handshake(peer)
        for _ in range(2):
            kinds.append(await asyncio.wait_for(peer.messages.get(), 5))

    async def main() -> None:
        async with FakeServer(script) as server:
            client = await aio.connect(server.url, timeout=5)
            await client.send("/queue/a", "héllo")
            await client.send("/queue/a", b"\xff\xfe")
            await asyncio.sleep(0.2)
            await client.close()

    run(main())
    assert [opcode.name for opcode, _ in kinds] == ["TEXT", "BINARY"]


@pytest.mark.parametrize("split", ["several-in-one", "fragments", "byte-by-byte", "eol-messages"])
def test_any_split_in_text_or_binary_messages(run: Any, split: str) -> None:
    bodies = [b"first", b"\xff\x00not utf-8\x00", "ünïcode".encode()]
    wire = b"".join(message(body, mid=str(i)) for i, body in enumerate(bodies))

    async def script(peer: Peer) -> None:
        await handshake(peer)
        await peer.recv_frame()  # SUBSCRIBE
        if split == "several-in-one":
            peer.send(wire, text=True)  # a text message holding bytes that are not UTF-8: taken as bytes
        elif split == "fragments":
            peer.send(wire[:10], text=True, fin=False)
            peer.send_continuation(wire[10:40], fin=False)
            peer.send_continuation(wire[40:], fin=True)
        elif split == "byte-by-byte":
            for i in range(len(wire)):
                peer.send(wire[i : i + 1])
        else:
            for frame in (message(body, mid=str(i)) for i, body in enumerate(bodies)):
                peer.send(frame, text=True)
                peer.send(b"\n", text=True)
        await asyncio.sleep(10)

    async def main() -> List[bytes]:
        async with FakeServer(script) as server:
            client = await aio.connect(server.url, timeout=5)
            sub = await client.subscribe("/queue/a", receipt=False)
            got = [(await sub.get(timeout=5)).body for _ in bodies]
            await client.close()
            return got

    assert run(main()) == bodies


@pytest.mark.parametrize(("chosen", "offered"), [(None, "1.0,1.1,1.2"), ("v11.stomp", "1.1"), ("v12.stomp", "1.2")])
def test_the_chosen_subprotocol_is_the_version_offered(run: Any, chosen: Any, offered: str) -> None:
    seen: List[Any] = []

    async def script(peer: Peer) -> None:
        seen.append(peer.offered)
        seen.append(await handshake(peer))

    async def main() -> None:
        async with FakeServer(script, subprotocol=chosen) as server:
            client = await aio.connect(server.url, timeout=5)
            assert client.session.transport.get_extra_info("subprotocol") == chosen
            await client.close()

    run(main())
    assert seen[0] == ["v12.stomp", "v11.stomp", "v10.stomp"]
    assert f"\naccept-version:{offered}\n".encode() in seen[1]


def test_only_the_versions_asked_are_offered_as_subprotocols(run: Any) -> None:
    seen: List[Any] = []

    async def script(peer: Peer) -> None:
        seen.append(peer.offered)
        await handshake(peer)

    async def main() -> None:
        async with FakeServer(script) as server:
            client = await aio.connect(server.url, versions=("1.1",), timeout=5)
            await client.close()

    run(main())
    assert seen == [["v11.stomp"]]


def test_a_close_frame_inside_a_stomp_frame_is_a_protocol_error(run: Any) -> None:
    async def script(peer: Peer) -> None:
        await handshake(peer)
        await peer.recv_frame()
        peer.send(message(b"cut short")[:30])
        peer.close(1000)

    async def main() -> BaseException:
        async with FakeServer(script) as server:
            client = await aio.connect(server.url, timeout=5)
            await client.subscribe("/queue/a", receipt=False)
            error = await asyncio.wait_for(client.wait_closed(), 5)
            assert error is not None
            return error

    error = run(main())
    assert any(isinstance(e, RemoteProtocolError) and "inside a frame" in str(e) for e in causes(error)), causes(error)


def test_a_close_with_an_error_code_says_so(run: Any) -> None:
    async def script(peer: Peer) -> None:
        await handshake(peer)
        peer.close(1011, "broker trouble")

    async def main() -> BaseException:
        async with FakeServer(script) as server:
            client = await aio.connect(server.url, timeout=5)
            error = await asyncio.wait_for(client.wait_closed(), 5)
            assert error is not None
            return error

    error = run(main())
    assert any(isinstance(e, WebSocketError) and "1011" in str(e) for e in causes(error)), causes(error)


def test_a_ping_flood_is_answered_and_messages_still_flow(run: Any) -> None:
    pings = 20_000

    async def script(peer: Peer) -> None:
        await handshake(peer)
        await peer.recv_frame()
        for i in range(pings):
            peer.ws.send_ping(struct.pack("!I", i))
        peer.flush()
        peer.send(message(b"after the flood"))
        await asyncio.sleep(10)

    async def main() -> int:
        async with FakeServer(script) as server:
            client = await aio.connect(server.url, timeout=5)
            sub = await client.subscribe("/queue/a", receipt=False)
            assert (await sub.get(timeout=10)).body == b"after the flood"
            deadline = time.monotonic() + 5
            while server.peers[0].pongs < pings and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert client.is_connected
            await client.close()
            return server.peers[0].pongs

    assert run(main()) == pings


def test_a_message_past_the_frame_limit_fails_from_its_header(run: Any) -> None:
    limit = 1024 * 1024
    sent: List[int] = []

    async def script(peer: Peer) -> None:
        await handshake(peer)
        await peer.recv_frame()
        # a 16 MiB binary message: its header, then the payload in pieces while the client listens
        peer.write_raw(bytes([0x82, 127]) + struct.pack("!Q", 16 * 1024 * 1024))
        chunk = b"x" * 65536
        for _ in range(256):
            if peer.transport.is_closing() or peer.lost.done():
                break
            peer.write_raw(chunk)
            sent.append(len(chunk))
            await asyncio.sleep(0.01)

    async def main() -> BaseException:
        async with FakeServer(script) as server:
            client = await aio.connect(server.url, timeout=5, max_frame_size=limit)
            await client.subscribe("/queue/a", receipt=False)
            error = await asyncio.wait_for(client.wait_closed(), 10)
            assert error is not None
            return error

    error = run(main())
    found = [e for e in causes(error) if isinstance(e, WebSocketError)]
    assert found and "larger than the limit" in str(found[0]), causes(error)
    assert sum(sent) < limit  # the client gave up on the header, long before 16 MiB were sent


def test_no_server_is_a_connection_error(run: Any) -> None:
    async def main() -> BaseException:
        with pytest.raises(aio.ConnectionClosedError) as caught:
            await aio.connect("ws://127.0.0.1:9/ws", connect_timeout=2)  # (port 9: nothing listens)
        return caught.value

    assert any(isinstance(e, OSError) for e in causes(run(main())))


def test_the_connect_timeout_covers_the_upgrade(run: Any) -> None:
    async def script(peer: Peer) -> None:
        pass

    async def main() -> float:
        async with FakeServer(script, answer_upgrade=False) as server:
            started = time.monotonic()
            with pytest.raises(aio.ConnectionClosedError):
                await aio.connect(server.url, connect_timeout=0.5)
            return time.monotonic() - started

    assert run(main()) < 2.0


def test_urls_that_are_not_websockets_are_refused_at_once() -> None:
    with pytest.raises(ValueError):
        aio.connect("http://127.0.0.1/ws")
    with pytest.raises(ValueError):
        aio.connect("127.0.0.1", servers=["ftp://x"])


def test_a_full_queue_pauses_the_socket_and_the_wire_hook_sees_stomp_bytes(run: Any) -> None:
    wire: List[bytes] = []

    async def script(peer: Peer) -> None:
        await handshake(peer)
        await peer.recv_frame()
        for i in range(20):
            peer.send(message(b"m%d" % i, mid=str(i)))
        await asyncio.sleep(10)

    async def main() -> None:
        async with FakeServer(script) as server:
            client = await aio.connect(
                server.url, timeout=5, max_queue=2, wire_hook=lambda d, data: wire.append(bytes(data))
            )
            sub = await client.subscribe("/queue/a", receipt=False)
            await asyncio.sleep(0.3)
            assert not client.session.is_reading()
            got = [(await sub.get(timeout=5)).body for _ in range(20)]
            assert got == [b"m%d" % i for i in range(20)]
            await client.close()

    run(main())
    assert wire[0].startswith(b"CONNECT\n") and wire[1].startswith(b"CONNECTED\n")


def test_the_blocking_client_over_a_websocket() -> None:
    async def script(peer: Peer) -> None:
        await handshake(peer)
        await peer.recv_frame()
        peer.send(message(b"to the thread"))
        await asyncio.sleep(10)

    async def serve(ready: "asyncio.Future[str]", stop: asyncio.Event) -> None:
        async with FakeServer(script) as server:
            ready.set_result(server.url)
            await stop.wait()

    import threading

    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    ready: "asyncio.Future[str]" = loop.create_future()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(ready, stop),), daemon=True)
    thread.start()
    try:
        url = asyncio.run_coroutine_threadsafe(asyncio.wait_for(asyncio.shield(ready), 5), loop).result(10)
        with fastframe.sync.connect(url, timeout=5) as client:
            sub = client.subscribe("/queue/a", receipt=False)
            assert sub.get(timeout=5).body == b"to the thread"
            client.close()
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


def test_without_the_extra_the_error_names_it() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['websockets'] = None\n"
        "import fastframe.aio, asyncio\n"
        "try:\n"
        "    asyncio.run(fastframe.aio.connect('ws://127.0.0.1:9/ws', connect_timeout=2)._connect())\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert 'pip install "fastframe[ws]"' in result.stdout, result.stderr


def test_a_ping_flood_whose_pongs_are_not_read_is_dropped(run: Any) -> None:
    async def script(peer: Peer) -> None:
        await handshake(peer)
        peer.transport.pause_reading()  # the pongs pile up on the client's side
        ping = b"p" * 125
        for _ in range(200):  # up to 200 x 1,000 pings of 125 bytes: the client gives up long before
            if peer.lost.done():
                return
            for _ in range(1000):
                peer.ws.send_ping(ping)
            peer.flush()
            await asyncio.sleep(0.01)

    async def main() -> BaseException:
        async with FakeServer(script) as server:
            client = await aio.connect(server.url, timeout=5)
            error = await asyncio.wait_for(client.wait_closed(), 20)
            assert error is not None
            return error

    error = run(main(), timeout=30)
    assert any(isinstance(e, WebSocketError) and "pings" in str(e) for e in causes(error)), causes(error)
