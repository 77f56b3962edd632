"""Servers for the blocking client's tests, each on an event loop in a thread of its own (the client
under test blocks the test's thread): the in-memory broker and the misbehaving fake server."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Coroutine, Optional, TypeVar

from aio.fake_server import FakeServer
from fastframe import aio

T = TypeVar("T")


class Background:
    """An event loop in a daemon thread; ``run(coro)`` / ``call(fn)`` from the test's thread, bounded."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        async def on_loop() -> T:
            return fn()

        return self.run(on_loop(), timeout)

    def close(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(cancel_all())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        assert not self.thread.is_alive()
        self.loop.close()


class BrokerThread:
    """``fastframe.aio.Broker`` on 127.0.0.1 (port 0 first, then the same port on restart)."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.background = Background()
        self.broker: Optional[Any] = None
        self.port = 0

    def start(self) -> None:
        broker = aio.Broker("127.0.0.1", self.port, **self.options)
        self.background.run(broker.start())
        self.broker, self.port = broker, broker.port

    def stop(self) -> None:
        """Stop listening and drop every connection (the broker's memory goes with it)."""
        if self.broker is not None:
            self.background.run(self.broker.close(2.0))
            self.broker = None

    def __enter__(self) -> BrokerThread:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.background.close()


class FakeServerThread:
    """``tests/aio/fake_server.FakeServer`` in a background loop; ``call(fn)`` runs ``fn`` on its loop."""

    def __init__(self, **options: Any) -> None:
        self.background = Background()
        self.server = FakeServer(**options)

    @property
    def port(self) -> int:
        return self.server.port

    def call(self, fn: Callable[[], T]) -> T:
        return self.background.call(fn)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.call(predicate):
            assert time.monotonic() < deadline, "the fake server did not get there in time"
            time.sleep(0.005)

    def __enter__(self) -> FakeServerThread:
        self.background.run(self.server.__aenter__())
        return self

    def __exit__(self, *exc: Any) -> None:
        self.background.run(self.server.__aexit__(None, None, None))
        self.background.close()


class BrokerProcess:
    """``fastframe broker`` in a child process on 127.0.0.1: ``kill()`` stops it the hard way (no ERROR,
    no goodbye: what a crash or a power cut looks like to a client), ``start()`` brings it back on the
    same port."""

    def __init__(self) -> None:
        with socket.socket() as probe:  # a free port (the child binds it a moment later)
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process: Optional[subprocess.Popen[bytes]] = None

    def start(self, timeout: float = 20.0) -> None:
        command = [sys.executable, "-m", "fastframe", "broker", "--port", str(self.port), "--user", "guest:guest"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"fastframe broker did not start on port {self.port}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None

    def __enter__(self) -> BrokerProcess:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.kill()
