"""Live interop against real brokers: RabbitMQ (127.0.0.1:61613, and STOMP over WebSocket at
ws://127.0.0.1:15674/ws: ``rabbitmq-ws``) and ActiveMQ (127.0.0.1:61614).

``.ci/brokers start`` starts both (``.ci/run`` does it before ``make test``). Locally a broker that does
not answer CONNECT makes its tests skip with the reason; with ``CI=true`` it is a failure.

Every broker quirk the tests meet is answered by a documented client option or a documented
capability of the broker (:class:`Broker`), never by a special case in the codec.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Dict, FrozenSet, Iterator, Optional, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[2]
BROKERS_SCRIPT = REPO / ".ci" / "brokers"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
HOST = "127.0.0.1"
VERSIONS = ("1.0", "1.1", "1.2")

T = TypeVar("T")


@dataclass(frozen=True)
class Broker:
    """One live broker: where it listens, the client options its quirks need, what it does.

    ``options(version)`` gives the keyword arguments for ``fastframe.aio.connect``; each entry is a
    documented option (docs/guides/brokers.md and the codec guide's tolerances).
    """

    name: str
    port: int
    #: client options on every version
    common: Dict[str, Any] = field(default_factory=dict)
    #: extra client options per version
    per_version: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    #: NACK makes the broker redeliver the message (RabbitMQ); ActiveMQ drops it (its default policy)
    nack_redelivers: bool = False
    #: characters that survive a round trip in header names / values, per version (see the quirk table)
    name_chars: Dict[str, FrozenSet[str]] = field(default_factory=dict)
    value_chars: Dict[str, FrozenSet[str]] = field(default_factory=dict)
    #: a ws:// URL: the clients connect over WebSocket (``port`` is then the URL's)
    url: Optional[str] = None

    @property
    def address(self) -> str:
        """What the clients' ``connect`` takes first: the URL, or the host (with ``port``)."""
        return self.url or HOST

    def options(self, version: str) -> Dict[str, Any]:
        return {**self.common, **self.per_version.get(version, {})}


ALL = frozenset(":\n\r\\")
NO_CR = frozenset(":\n\\")
BROKERS = {
    "rabbitmq": Broker(
        name="rabbitmq",
        port=61613,
        # RabbitMQ takes CONNECT's host header as the virtual host ("/" here), and applies the 1.2 escape
        # set on every version, in both directions (it drops the connection on a backslash that is not a
        # 1.2 escape)
        common={"login": "guest", "passcode": "guest", "host_header": "/", "escapes": "1.2"},
        # validate=True checks outgoing frames against the version's own escape set, which cannot carry
        # LF, CR or ':' in names on 1.0 (nor CR on 1.1) even though escapes="1.2" can: see the report
        per_version={"1.0": {"validate": False}, "1.1": {"validate": False}},
        nack_redelivers=True,
        name_chars={v: ALL for v in VERSIONS},
        value_chars={v: ALL for v in VERSIONS},
    ),
    "activemq": Broker(
        name="activemq",
        port=61614,
        common={"login": "guest", "passcode": "guest"},
        # 1.0 output is not escaped: a value with LF splits into a line without ':'
        per_version={"1.0": {"allow_missing_colon": True}},
        name_chars={"1.0": frozenset(), "1.1": NO_CR, "1.2": ALL},
        # 1.0: no escapes at all (LF, CR cannot be carried; ActiveMQ unescapes 1.0 input, so '\\' stays
        # only before a letter that is no escape); 1.1 has no CR escape
        value_chars={"1.0": frozenset(":\\"), "1.1": NO_CR, "1.2": ALL},
    ),
    # this project's own broker (fastframe broker, started by the fixture below): each version's own escapes
    "fastframe": Broker(
        name="fastframe",
        port=61615,
        common={"login": "guest", "passcode": "guest"},
        nack_redelivers=True,
        name_chars={"1.0": frozenset(), "1.1": NO_CR, "1.2": ALL},
        value_chars={"1.0": frozenset(), "1.1": NO_CR, "1.2": ALL},
    ),
}
# RabbitMQ's Web-STOMP plugin: the same broker and quirks, every scenario over WebSocket
BROKERS["rabbitmq-ws"] = dataclasses.replace(
    BROKERS["rabbitmq"], name="rabbitmq-ws", port=15674, url="ws://127.0.0.1:15674/ws"
)
#: brokers this suite starts itself (in a child process, for the session), rather than .ci/brokers
STARTED_HERE = {
    # heart-beats of 0.5 s as offered by the heart-beat test (RabbitMQ takes the client's; the default is 10 s)
    "fastframe": [sys.executable, "-m", "fastframe", "broker", "--port", "61615", "--user", "guest:guest",
                  "--heartbeat", "500,500"],
}  # fmt: skip


def websocket_stomp_answers(url: str, timeout: float = 5.0) -> bool:
    """True when ``url`` (ws://) answers a STOMP CONNECT with CONNECTED within ``timeout`` seconds."""
    import fastframe.aio

    async def probe() -> None:
        client = await fastframe.aio.connect(url, login="guest", passcode="guest", connect_timeout=timeout)
        await client.disconnect(timeout=timeout)

    try:
        asyncio.run(asyncio.wait_for(probe(), timeout * 2))
    except (OSError, asyncio.TimeoutError, ImportError):
        return False
    return True


def stomp_answers(port: int, timeout: float = 5.0) -> bool:
    """True when 127.0.0.1:port answers a STOMP CONNECT with CONNECTED within ``timeout`` seconds."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as sock:
            sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\0")
            data = b""
            while b"\0" not in data and len(data) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            try:
                sock.sendall(b"DISCONNECT\n\n\0")
            except OSError:
                pass
            return data.lstrip(b"\r\n").startswith(b"CONNECTED\n")
    except OSError:
        return False


_seen_up: Dict[str, bool] = {}


def require_broker(broker: Broker) -> None:
    """Skip (locally) or fail (CI=true) when the broker does not answer CONNECT."""
    if broker.name not in _seen_up or not _seen_up[broker.name]:
        _seen_up[broker.name] = websocket_stomp_answers(broker.url) if broker.url else stomp_answers(broker.port)
    if not _seen_up[broker.name]:
        where = broker.url or f"{HOST}:{broker.port}"
        reason = f"{broker.name} does not answer CONNECT on {where} (start it: .ci/brokers start)"
        if IN_CI:
            pytest.fail(reason + "; CI=true requires the live brokers", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def own_broker() -> Iterator[None]:
    """``fastframe broker`` on 127.0.0.1:61615 for the session, stopped at the end."""
    process = subprocess.Popen(STARTED_HERE["fastframe"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not stomp_answers(BROKERS["fastframe"].port, timeout=2):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"fastframe broker did not start: {process.communicate(timeout=5)[1][-2000:]!r}")
            time.sleep(0.2)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


@pytest.fixture(params=sorted(BROKERS), scope="session")
def broker(request: pytest.FixtureRequest) -> Broker:
    """Each live broker in turn (``activemq``, ``fastframe``, ``rabbitmq``, ``rabbitmq-ws``); skips or fails
    when it is not up."""
    found = BROKERS[request.param]
    if found.name in STARTED_HERE:
        request.getfixturevalue("own_broker")
    require_broker(found)
    return found


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    """Each STOMP version in turn."""
    return str(request.param)


def brokers_cmd(*args: str, timeout: float = 180.0) -> None:
    """Run ``.ci/brokers ARGS`` (bounded); raise with its output when it fails."""
    proc = subprocess.run(
        ["bash", str(BROKERS_SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f".ci/brokers {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")


def run(coro: Awaitable[T], timeout: float = 60.0) -> T:
    """Run a coroutine to completion in a fresh event loop, bounded by ``timeout`` seconds."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def unique(prefix: str, broker: Broker, version: Optional[str] = None) -> str:
    """A queue destination no other test (or earlier run) uses."""
    tag = os.urandom(4).hex()
    return f"/queue/ff-{prefix}-{broker.name}-{(version or 'x').replace('.', '')}-{tag}"


# -- the client under test: fastframe.aio, with a few bounded helpers ---------------------------------------
class Session:
    """One live :func:`fastframe.aio.connect` client and the helpers the tests share.

    ``client`` is the :class:`fastframe.aio.Client`; heart-beats are counted in both directions through
    its ``frame_hook`` (a ``None`` frame is a heart-beat). Every wait is bounded.
    """

    def __init__(self, client: Any, beats: Dict[str, int]) -> None:
        self.client = client
        self._beats = beats

    @property
    def version(self) -> str:
        return str(self.client.version)

    @property
    def connected(self) -> Any:
        """The ``Connected`` event of the current connection (a done future)."""
        return self.client.session.connected

    @property
    def heartbeat(self) -> tuple[int, int]:
        return tuple(self.client.session.conn.heartbeat)  # type: ignore[return-value]

    @property
    def heartbeats_received(self) -> int:
        return self._beats["in"]

    @property
    def heartbeats_sent(self) -> int:
        return self._beats["out"]

    async def send(self, destination: str, body: bytes = b"", headers: Any = None, **kw: Any) -> None:
        await self.client.send(destination, body, headers, **kw)

    async def subscribe(self, destination: str, ack: str = "auto", **kw: Any) -> Any:
        return await self.client.subscribe(destination, ack=ack, **kw)

    async def next_message(self, sub: Any, timeout: float = 10.0) -> Any:
        return await sub.get(timeout=timeout)

    async def no_message(self, sub: Any, wait: float = 1.0) -> bool:
        """True when nothing arrives on ``sub`` within ``wait`` seconds."""
        try:
            await sub.get(timeout=wait)
        except asyncio.TimeoutError:
            return True
        return False

    async def ack(self, message: Any, nack: bool = False) -> None:
        await (message.nack if nack else message.ack)(receipt=True)


class open_session:
    """``async with open_session(broker, version, heartbeat=(cx, cy)) as session``: CONNECTED or raises."""

    def __init__(self, broker: Broker, version: str, heartbeat: tuple[int, int] = (0, 0), **options: Any) -> None:
        import fastframe.aio

        self.beats = {"in": 0, "out": 0}

        def count(direction: str, frame: Any) -> None:
            if frame is None:
                self.beats[direction] += 1

        options = {**broker.options(version), "frame_hook": count, **options}
        self.connector = fastframe.aio.connect(
            broker.address, broker.port, versions=(version,), heartbeat=heartbeat, timeout=20.0, **options
        )

    async def __aenter__(self) -> Session:
        return Session(await self.connector.__aenter__(), self.beats)

    async def __aexit__(self, *exc: Any) -> None:
        await self.connector.__aexit__(*exc)
