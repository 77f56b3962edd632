"""A small STOMP server for the asyncio tests, on 127.0.0.1, built on ServerConnection.

It routes SEND to the SUBSCRIBEs of the same destination (all connections), answers receipts,
and lets a test misbehave on purpose: drop receipts, stay silent, cut the connection, write raw bytes.
The protocol connection owns the handshake and the frames' shapes; each peer keeps its own small
table of the client's subscriptions (the session's meaning is a broker's, not the protocol's).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, Dict, List, Optional, Tuple

from fastframe.protocol import (
    ConnectRequest,
    Disconnect,
    HeartbeatReceived,
    RemoteProtocolError,
    Send,
    ServerConnection,
    State,
    Subscribe,
    Unsubscribe,
)


class Peer:
    """One accepted connection."""

    def __init__(self, server: FakeServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.conn = ServerConnection(heartbeat=server.heartbeat)
        self.frames: List[Any] = []  # every client frame event, in order
        self.open_subscriptions: Dict[str, Tuple[str, str]] = {}  # id -> (destination, ack mode)
        self.beats = 0
        self.sent_messages = 0
        self.quiet = False  # True: heart-beats stop (a server that hangs with its socket open)

    def write(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)

    async def run(self) -> None:
        beater: Optional[asyncio.Task[None]] = None
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    return
                if self.server.read_delay:
                    await asyncio.sleep(self.server.read_delay)
                events = list(self.conn.receive_data(data)) if self.conn.state is not State.CLOSED else []
                while events:
                    event = events.pop(0)
                    if isinstance(event, HeartbeatReceived):
                        self.beats += 1
                        continue
                    self.frames.append(event)
                    if isinstance(event, ConnectRequest):
                        if self.server.reject:
                            self.write(self.conn.reject(self.server.reject))
                            return
                        if self.server.silent_handshake:
                            continue
                        self.write(self.conn.accept(headers={"server": "fake/1"}))
                        events += self.conn.receive_data(b"")  # frames the client sent early
                        if self.conn.heartbeat[0] and self.server.send_beats:
                            beater = asyncio.get_running_loop().create_task(self.beat(self.conn.heartbeat[0] / 1000))
                        self.server.connected.append(self)
                    elif isinstance(event, Send):
                        self.server.route(event)
                    elif isinstance(event, Subscribe):
                        self.open_subscriptions[event.id] = (event.destination, event.ack)
                    elif isinstance(event, Unsubscribe):
                        self.open_subscriptions.pop(event.id, None)
                    if (isinstance(event, Disconnect) and self.server.answer_disconnect) or (
                        not isinstance(event, Disconnect) and self.server.answer_receipts
                    ):
                        if event.receipt is not None:
                            self.write(self.conn.receipt(event.receipt))
                    if isinstance(event, Disconnect):
                        await self.writer.drain()
                        return
                await self.writer.drain()
        except (ConnectionError, RemoteProtocolError):
            pass
        finally:
            if beater is not None:
                beater.cancel()
            self.writer.close()

    async def beat(self, interval: float) -> None:
        while not self.writer.is_closing():
            await asyncio.sleep(interval)
            if not self.quiet:
                self.write(b"\n")

    def deliver(self, sub_id: str, body: bytes, headers: Any = None) -> None:
        destination, mode = self.open_subscriptions[sub_id]
        message_id = self.conn.new_id("m-")
        ack_id = None if mode == "auto" else message_id
        self.write(
            self.conn.message(sub_id, body, headers, destination=destination, message_id=message_id, ack_id=ack_id)
        )
        self.sent_messages += 1

    def subscriptions(self) -> List[Subscribe]:
        return [e for e in self.frames if isinstance(e, Subscribe)]


class FakeServer:
    """``async with FakeServer() as server``: ``server.port``, ``server.connected`` (peers that got CONNECTED)."""

    def __init__(
        self,
        *,
        heartbeat: Tuple[int, int] = (0, 0),
        ssl_context: Optional[ssl.SSLContext] = None,
        answer_receipts: bool = True,
        send_beats: bool = True,
        reject: Optional[str] = None,
        silent_handshake: bool = False,
        answer_disconnect: bool = True,
    ) -> None:
        self.heartbeat = heartbeat
        self.ssl_context = ssl_context
        self.answer_receipts = answer_receipts
        self.send_beats = send_beats
        self.reject = reject
        self.silent_handshake = silent_handshake
        self.answer_disconnect = answer_disconnect  # False: DISCONNECT is answered by closing, no RECEIPT
        self.read_delay = 0.0
        self.peers: List[Peer] = []
        self.connected: List[Peer] = []
        self._server: Optional[asyncio.base_events.Server] = None
        self._tasks: List[asyncio.Task[None]] = []

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def route(self, send: Send) -> None:
        for peer in self.connected:
            if peer.conn.state is not State.CONNECTED:
                continue
            for sub_id, (destination, _) in list(peer.open_subscriptions.items()):
                if destination == send.destination:
                    headers = [
                        (k, v) for k, v in send.frame.headers if k not in ("destination", "receipt", "content-length")
                    ]
                    peer.deliver(sub_id, send.frame.body, headers)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(self, reader, writer)
        self.peers.append(peer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.append(task)
        await peer.run()

    async def wait_for(self, predicate: Any, timeout: float = 5.0) -> None:
        """Poll ``predicate()`` until it is true (at most ``timeout`` s)."""

        async def poll() -> None:
            while not predicate():
                await asyncio.sleep(0.005)

        await asyncio.wait_for(poll(), timeout)

    async def __aenter__(self) -> FakeServer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, ssl=self.ssl_context)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.close()
        for peer in self.peers:
            peer.writer.close()
        for task in self._tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # each socket closed before the loop ends (a transport still closing is a ResourceWarning at exit)
        closing = [asyncio.wait_for(peer.writer.wait_closed(), 5) for peer in self.peers]
        await asyncio.gather(*closing, return_exceptions=True)
        await asyncio.wait_for(self._server.wait_closed(), 5)
