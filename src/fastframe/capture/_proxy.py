"""The recording proxy (``fastframe record``): clients connect here, every byte goes on unchanged to the
broker and back, and each connection's two directions are recorded (asyncio, standard library only).

Flow control passes through: when one side's write buffer passes ``high_water`` the proxy stops reading
from the other side until it drains, so a slow client slows its broker connection (TCP does the rest)
and the proxy holds at most about ``high_water`` plus one read per direction. While a stream flows one way
(reads within ``coalesce`` of each other, with nothing from the other side meanwhile) each side rests
``coalesce`` seconds after a read, so what arrives meanwhile is forwarded and recorded in one larger read
(as the asyncio client's ``coalesce_reads``): a lone frame and an answer go on at once. An end of stream is passed
on as one (a half-close where both transports can, else a close); a connection dropped on one side is
closed on the other after what was already read is written.
"""

from __future__ import annotations

import asyncio
import logging
import ssl as _ssl
from typing import Any, Optional, Set

from ._recorder import Archive, Recorder

__all__ = ["Proxy", "serve_proxy"]

_log = logging.getLogger("fastframe.capture")
DEFAULT_HIGH_WATER = 256 * 1024
DEFAULT_COALESCE = 0.001
_READ_SIZE = 256 * 1024  # what asyncio's socket transports read at most at once (a full read: more waits)


class _Link:
    """One proxied connection: the client's transport, the broker's, and the recorder between them."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.client: Optional[asyncio.Transport] = None
        self.upstream: Optional[asyncio.Transport] = None
        self.client_side: Optional[_Client] = None
        self.upstream_side: Optional[_Upstream] = None
        self.recorder: Optional[Recorder] = None
        self.ends = 0  # ends of stream passed on as half-closes
        self.done = False

    async def open_upstream(self) -> None:
        proxy = self.proxy
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Upstream(self),
                    proxy.upstream_host,
                    proxy.upstream_port,
                    ssl=proxy.upstream_ssl,
                    server_hostname=proxy.upstream_host if proxy.upstream_ssl else None,
                ),
                proxy.connect_timeout,
            )
        except (OSError, asyncio.TimeoutError) as exc:
            _log.warning("proxy: cannot reach %s:%s: %r", proxy.upstream_host, proxy.upstream_port, exc)
            self.end()
            return
        if self.client is None or self.client.is_closing():
            self.end()
            return
        self.client.resume_reading()

    def end(self) -> None:
        """One side is gone: close the other after what it has to write; finish the recording."""
        if self.done:
            return
        self.done = True
        for transport in (self.client, self.upstream):
            if transport is not None and not transport.is_closing():
                transport.close()
        if self.recorder is not None:
            self.recorder.close()
        self.proxy._links.discard(self)


class _Side(asyncio.Protocol):
    """What both ends share: flow control, and the rests of a read stream."""

    def __init__(self, link: _Link) -> None:
        self.link = link
        self.transport: Optional[asyncio.Transport] = None
        self.reads = 0  # reads so far (the other side compares: did this side read since?)
        self._last_read = float("-inf")
        self._other_reads = 0  # the other side's reads at this side's last read
        self._held = False  # the other side's write buffer is full: reading waits for it
        self._rest: Optional[asyncio.TimerHandle] = None

    def _other(self) -> Optional[asyncio.Transport]:
        raise NotImplementedError

    def _other_side(self) -> Optional[_Side]:
        raise NotImplementedError

    def _after_read(self, nbytes: int) -> None:
        # coalesce: while a stream flows (reads within a rest of each other, and the other side said
        # nothing meanwhile, so this is no answer to it) this side rests after each read, and what
        # arrives meanwhile comes in one larger read: fewer wake-ups, reads and writes per message.
        # A lone frame, an answer, and a full read (more is waiting) go on at once.
        self.reads += 1
        proxy = self.link.proxy
        now = proxy._loop.time()
        other = self._other_side()
        other_reads = other.reads if other is not None else 0
        stream = now < self._last_read + proxy.coalesce and other_reads == self._other_reads
        self._last_read, self._other_reads = now, other_reads
        if stream and nbytes < _READ_SIZE and self._rest is None and self.transport is not None:
            self.transport.pause_reading()
            self._rest = proxy._loop.call_later(proxy.coalesce, self._end_rest)

    def _end_rest(self) -> None:
        self._rest = None
        if not self._held and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def _hold(self, held: bool) -> None:
        """Flow control from the other side: stop reading while it cannot write (``held``), then go on."""
        self._held = held
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if held:
            transport.pause_reading()
        elif self._rest is None:
            transport.resume_reading()

    def eof_received(self) -> Optional[bool]:  # noqa: D102
        other = self._other()
        link = self.link
        if link.ends == 0 and other is not None and not other.is_closing() and other.can_write_eof():
            other.write_eof()  # a half-close goes on as one; the other direction keeps flowing
            link.ends += 1
            return True
        link.end()
        return False

    def connection_lost(self, exc: Optional[BaseException]) -> None:  # noqa: D102
        if self._rest is not None:
            self._rest.cancel()
            self._rest = None
        self.link.end()

    def pause_writing(self) -> None:  # noqa: D102
        other = self._other_side()
        if other is not None:
            other._hold(True)  # this side cannot take more: stop reading what would go to it

    def resume_writing(self) -> None:  # noqa: D102
        other = self._other_side()
        if other is not None:
            other._hold(False)


class _Client(_Side):
    """The accepted client connection."""

    def _other(self) -> Optional[asyncio.Transport]:
        return self.link.upstream

    def _other_side(self) -> Optional[_Side]:
        return self.link.upstream_side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # noqa: D102
        assert isinstance(transport, asyncio.Transport)
        self.transport = self.link.client = transport
        self.link.client_side = self
        transport.set_write_buffer_limits(high=self.link.proxy.high_water)
        transport.pause_reading()  # until the broker's side is connected
        self.link.proxy._links.add(self.link)
        self.link.proxy._tasks.add(asyncio.ensure_future(self.link.open_upstream()))

    def data_received(self, data: bytes) -> None:  # noqa: D102
        link = self.link
        if link.upstream is None or link.done:
            return
        link.upstream.write(data)
        if link.recorder is not None:
            link.recorder.c2s(data)
        if link.proxy.coalesce:
            self._after_read(len(data))


class _Upstream(_Side):
    """The proxy's connection to the broker."""

    def _other(self) -> Optional[asyncio.Transport]:
        return self.link.client

    def _other_side(self) -> Optional[_Side]:
        return self.link.client_side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # noqa: D102
        assert isinstance(transport, asyncio.Transport)
        link = self.link
        self.transport = link.upstream = transport
        link.upstream_side = self
        transport.set_write_buffer_limits(high=link.proxy.high_water)
        if link.recorder is None and not link.done:
            link.recorder = link.proxy.archive.recorder()

    def data_received(self, data: bytes) -> None:  # noqa: D102
        link = self.link
        if link.client is None or link.done:
            return
        link.client.write(data)
        if link.recorder is not None:
            link.recorder.s2c(data)
        if link.proxy.coalesce:
            self._after_read(len(data))


class Proxy:
    """A listening recording proxy (from :func:`serve_proxy`)."""

    def __init__(
        self,
        archive: Archive,
        upstream_host: str,
        upstream_port: int,
        upstream_ssl: Optional[_ssl.SSLContext],
        connect_timeout: float,
        high_water: int,
        coalesce: float,
    ) -> None:
        self.archive = archive
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.upstream_ssl = upstream_ssl
        self.connect_timeout = connect_timeout
        self.high_water = high_water
        self.coalesce = coalesce
        self._loop = asyncio.get_running_loop()
        self._links: Set[_Link] = set()
        self._tasks: Set[Any] = set()
        self._server: Optional[asyncio.AbstractServer] = None
        self._ticker: Optional[asyncio.Task[None]] = None
        self.port = 0

    @property
    def connections(self) -> int:
        """Connections being proxied now."""
        return len(self._links)

    @property
    def buffered(self) -> int:
        """Bytes the proxy holds now, read from one side and not yet written to the other (all connections)."""
        total = 0
        for link in self._links:
            for transport in (link.client, link.upstream):
                if transport is not None:
                    total += transport.get_write_buffer_size()
        return total

    async def _tick(self) -> None:
        age = self.archive.roll_age
        assert age is not None
        while True:
            await asyncio.sleep(min(1.0, age / 4))
            for link in list(self._links):
                if link.recorder is not None:
                    link.recorder.tick()
            self._tasks = {task for task in self._tasks if not task.done()}

    async def close(self, timeout: float = 5.0) -> None:
        """Stop listening, close every connection (what was read is written first, for up to ``timeout`` s),
        and end their recordings. The archive stays open (close it to wait for the disk)."""
        if self._server is not None:
            self._server.close()
        if self._ticker is not None:
            self._ticker.cancel()
        links = list(self._links)
        for link in links:
            link.end()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for link in links:
            for transport in (link.client, link.upstream):
                while transport is not None and transport.get_write_buffer_size() and loop.time() < deadline:
                    await asyncio.sleep(0.01)
                if transport is not None:
                    transport.abort()
        for task in self._tasks:
            task.cancel()
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> Proxy:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


async def serve_proxy(
    archive: Archive,
    host: str,
    port: int,
    upstream_host: str,
    upstream_port: int,
    *,
    ssl: Optional[_ssl.SSLContext] = None,
    upstream_ssl: Optional[_ssl.SSLContext] = None,
    connect_timeout: float = 10.0,
    high_water: int = DEFAULT_HIGH_WATER,
    coalesce: float = DEFAULT_COALESCE,
) -> Proxy:
    """Listen on ``host:port`` (0: a free one, see :attr:`Proxy.port`) and proxy each connection to
    ``upstream_host:upstream_port``, recording it into ``archive``.

    ``ssl`` serves TLS to the clients, ``upstream_ssl`` speaks TLS to the broker (the recording holds
    the STOMP bytes, never TLS records). ``high_water``: bytes a side may have waiting to be written
    before the proxy stops reading the other side. ``coalesce`` (seconds, default 1 ms, 0 = off): the
    rest after each read of a stream (see the module's docstring): fewer, larger reads under load.
    """
    if high_water < 1:
        raise ValueError("high_water must be at least 1")
    if isinstance(coalesce, bool) or not (isinstance(coalesce, (int, float)) and 0.0 <= coalesce <= 1.0):
        raise ValueError(f"coalesce must be seconds between 0 and 1, not {coalesce!r}")
    proxy = Proxy(archive, upstream_host, upstream_port, upstream_ssl, connect_timeout, high_water, float(coalesce))
    loop = asyncio.get_running_loop()
    proxy._server = await loop.create_server(lambda: _Client(_Link(proxy)), host, port, ssl=ssl)
    proxy.port = proxy._server.sockets[0].getsockname()[1]
    if archive.roll_age is not None:
        proxy._ticker = loop.create_task(proxy._tick())
    return proxy
