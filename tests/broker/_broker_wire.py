"""A raw-socket STOMP client for the broker tests: bytes out, decoded frames in, every wait bounded."""

from __future__ import annotations

import asyncio
from typing import Any, List, Optional

import fastframe

WAIT = 10.0  # seconds any single wait may take before the test fails (generous: CI boxes are loaded)


class Wire:
    """One TCP connection to the broker, speaking raw bytes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, version: str) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = fastframe.Decoder(version, heartbeat_events=True)
        self.frames: List[Any] = []
        self.heartbeats = 0
        self.eof = False

    @classmethod
    async def open(cls, port: int, version: str = "1.2", ssl: Any = None) -> Wire:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=ssl), WAIT)
        return cls(reader, writer, version)

    @classmethod
    async def connected(cls, port: int, version: str = "1.2", headers: str = "") -> Wire:
        wire = await cls.open(port, version)
        wire.write(f"CONNECT\naccept-version:{version}\nhost:/\n{headers}\n\0".encode())
        (frame,) = await wire.read(1)
        assert frame.command == "CONNECTED", frame
        return wire

    def write(self, data: bytes) -> None:
        self.writer.write(data)

    def frame(self, command: str, headers: Any = (), body: bytes = b"") -> None:
        self.write(fastframe.encode(command, headers, body))

    async def _more(self, timeout: float) -> bool:
        data = await asyncio.wait_for(self.reader.read(65536), timeout)
        if not data:
            self.eof = True
            return False
        for item in self.decoder.feed(data):
            if isinstance(item, fastframe.Heartbeat):
                self.heartbeats += 1
            else:
                self.frames.append(item)
        return True

    async def read(self, count: int, timeout: float = WAIT) -> List[Any]:
        """The next ``count`` frames (fails on EOF or timeout first)."""
        while len(self.frames) < count:
            assert await self._more(timeout), f"EOF after {self.frames}"
        taken, self.frames = self.frames[:count], self.frames[count:]
        return taken

    async def until_eof(self, timeout: float = WAIT) -> List[Any]:
        """Every frame until the server closes."""
        while not self.eof:
            try:
                await self._more(timeout)
            except ConnectionError:  # the server closed while we were still writing
                self.eof = True
        taken, self.frames = self.frames, []
        return taken

    async def close(self) -> None:
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), WAIT)
        except (ConnectionError, OSError):
            pass


async def wait_for(condition: Any, timeout: float = WAIT, message: Optional[str] = None) -> None:
    """Poll ``condition()`` until true; fail after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, message or "condition not met in time"
        await asyncio.sleep(0.01)
