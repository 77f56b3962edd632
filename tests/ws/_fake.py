"""A scripted WebSocket server on 127.0.0.1 for the clients' tests: it upgrades (choosing the
subprotocol a test asks for), then a test's script speaks STOMP, and misbehaves, through it."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, List, Optional, Sequence, Tuple

from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.server import ServerProtocol

CONNECTED = b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0"


class Peer(asyncio.Protocol):
    """One client connection, seen from the server: data messages in (``recv``), anything out."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.ws = ServerProtocol(select_subprotocol=lambda _, offered: server.choose(offered), max_size=None)
        self.transport: Any = None
        self.messages: asyncio.Queue[Tuple[Opcode, bytes]] = asyncio.Queue()
        self.pongs = 0
        self.offered: List[str] = []
        self.lost = asyncio.get_running_loop().create_future()
        self.task: Optional[asyncio.Task[None]] = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.server.peers.append(self)

    def data_received(self, data: bytes) -> None:
        self.ws.receive_data(data)
        for event in self.ws.events_received():
            if isinstance(event, Request):
                self.offered = [p.strip() for p in event.headers.get("Sec-WebSocket-Protocol", "").split(",") if p]
                if self.server.answer_upgrade:
                    self.ws.send_response(self.ws.accept(event))
                    self.task = asyncio.get_running_loop().create_task(self.server.script(self))
            elif isinstance(event, Frame):
                if event.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
                    self.messages.put_nowait((event.opcode, bytes(event.data)))
                elif event.opcode is Opcode.PONG:
                    self.pongs += 1
        self.flush()

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        if not self.lost.done():
            self.lost.set_result(None)

    def flush(self) -> None:
        for data in self.ws.data_to_send():
            if data and not self.transport.is_closing():
                self.transport.write(data)
            elif not data:
                self.transport.close()

    async def recv(self, timeout: float = 5.0) -> bytes:
        """The payload of the next data message (each fragment is one)."""
        return (await asyncio.wait_for(self.messages.get(), timeout))[1]

    async def recv_frame(self, timeout: float = 5.0) -> bytes:
        """The next message that is not a heart-beat EOL."""
        while True:
            data = await self.recv(timeout)
            if data.strip(b"\r\n"):
                return data

    def send(self, data: bytes, *, text: bool = False, fin: bool = True) -> None:
        (self.ws.send_text if text else self.ws.send_binary)(data, fin=fin)
        self.flush()

    def send_continuation(self, data: bytes, *, fin: bool) -> None:
        self.ws.send_continuation(data, fin=fin)
        self.flush()

    def write_raw(self, data: bytes) -> None:
        self.transport.write(data)

    def close(self, code: int = 1000, reason: str = "") -> None:
        self.ws.send_close(code, reason)
        self.flush()


Script = Callable[[Peer], Awaitable[None]]


async def handshake(peer: Peer) -> bytes:
    """Answer the CONNECT with CONNECTED (1.2, no heart-beats); return the CONNECT."""
    connect = await peer.recv_frame()
    offered = connect.split(b"accept-version:", 1)[1].split(b"\n", 1)[0] if b"accept-version:" in connect else b"1.0"
    peer.send(CONNECTED.replace(b"version:1.2", b"version:" + max(offered.split(b","))), text=True)
    return connect


class FakeServer:
    """``async with FakeServer(script) as server``: ``server.url`` upgrades and runs ``script(peer)``."""

    def __init__(
        self,
        script: Script,
        *,
        subprotocol: Optional[str] = "newest",
        answer_upgrade: bool = True,
    ) -> None:
        self.script = script
        self.subprotocol = subprotocol
        self.answer_upgrade = answer_upgrade
        self.peers: List[Peer] = []
        self._server: Optional[asyncio.Server] = None
        self.url = ""

    def choose(self, offered: Sequence[str]) -> Optional[str]:
        if self.subprotocol == "newest":
            return max(offered) if offered else None
        return self.subprotocol

    async def __aenter__(self) -> FakeServer:
        self._server = await asyncio.get_running_loop().create_server(lambda: Peer(self), "127.0.0.1", 0)
        self.url = f"ws://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/ws"
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.close()
        for peer in self.peers:
            if peer.task is not None:
                peer.task.cancel()
            if peer.transport is not None:
                peer.transport.abort()
        await self._server.wait_closed()
