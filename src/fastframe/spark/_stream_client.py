"""The asyncio client driven from synchronous code, with errors that name the option to fix.

Spark calls a source and a sink synchronously (on the driver and in tasks).
:class:`BrokerConnection` owns one event loop and one
:func:`fastframe.aio.connect` client and runs the loop only inside its calls,
each bounded by a deadline: between calls, what the broker sends waits in the
socket (no thread, no heart-beats to keep: none are negotiated).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Dict, Optional, TypeVar

from .. import aio
from ..codec import DecodeError
from ._stream_options import Connection

T = TypeVar("T")


class BrokerError(RuntimeError):
    """A broker refused or failed a request; the message says which option to check."""


class UndecodableError(BrokerError):
    """The connection ended on bytes its decoder refused (a columnar subscription's decoder refuses
    header bytes that are not UTF-8, which RabbitMQ passes on: read them again as message objects)."""


def server_reason(exc: BaseException) -> str:
    """The broker's own words for an ERROR frame: its message header and the body's first line."""
    frame = getattr(exc, "frame", None)
    text = str(getattr(exc, "message", "") or exc)
    if frame is not None and frame.body:
        first = bytes(frame.body[:500]).decode("utf-8", "replace").strip().splitlines()
        if first:
            text = f"{text}: {first[0]}"
    return text


def _decode_error(exc: BaseException) -> Optional[DecodeError]:
    """The codec's error behind a closed connection, if bytes the decoder refused closed it."""
    seen = 0
    cause: Optional[BaseException] = exc
    while cause is not None and seen < 8:  # (a chain of causes, bounded)
        if isinstance(cause, DecodeError):
            return cause
        cause, seen = cause.__cause__, seen + 1
    return None


class BrokerConnection:
    """One STOMP connection driven synchronously; ``with BrokerConnection(conn) as broker``."""

    def __init__(self, connection: Connection, *, max_queue: int = 1000, coalesce_reads: float = 0.002) -> None:
        self.connection = connection
        self.loop = asyncio.new_event_loop()
        self.client: Any = None
        host, port = connection.servers[0]
        # a header that is not UTF-8 (RabbitMQ passes it on) is kept, not a reason to end the connection:
        # the message becomes a row saying so (_stream_schema)
        options: Dict[str, Any] = {"keep_invalid_utf8": True}
        if connection.version == "1.2":
            options["escapes"] = "1.2"
        connector = aio.connect(
            host,
            port,
            servers=connection.servers[1:],
            login=connection.login,
            passcode=connection.passcode,
            host_header=connection.vhost,
            versions=(connection.version,),
            timeout=connection.timeout,
            connect_timeout=connection.connect_timeout,
            max_queue=max_queue,
            coalesce_reads=coalesce_reads,
            **options,
        )
        try:
            self.client = self.run(connector, connection.connect_timeout + 1.0, "connect")
        except BaseException:
            self.loop.close()
            raise

    @property
    def server(self) -> str:
        """CONNECTED's ``server`` header (e.g. ``RabbitMQ/3.10.8``), or ``""``."""
        connected = self.client.session.connected.result()
        return str(connected.frame.get("server") or "")

    def run(self, work: Awaitable[T], timeout: float, what: str) -> T:
        """Run ``work`` on the loop for at most ``timeout`` seconds; broker failures become :class:`BrokerError`."""

        async def bounded() -> T:
            return await asyncio.wait_for(work, timeout)

        where = self.connection.describe()
        try:
            return self.loop.run_until_complete(bounded())
        except asyncio.TimeoutError:
            option = "connectTimeout" if what == "connect" else "timeout"
            raise BrokerError(
                f"{what} on {where}: no answer within {timeout:g} s (option {option}; is the broker up and reachable?)"
            ) from None
        except aio.ServerError as exc:
            reason = server_reason(exc)
            if what == "connect":
                raise BrokerError(
                    f"the broker at {where} refused the connection: {reason} (check options login, passcode and vhost)"
                ) from None
            raise BrokerError(f"{what} on {where}: the broker answered ERROR {reason}") from None
        except aio.ConnectionClosedError as exc:
            if what == "connect":
                raise BrokerError(
                    f"cannot connect to the broker at {where}: {exc} (check options host and port, or servers; "
                    "is the broker running?)"
                ) from None
            undecodable = _decode_error(exc)
            kind = BrokerError if undecodable is None else UndecodableError
            raise kind(f"{what} on {where}: the connection closed: {exc}") from undecodable
        except OSError as exc:
            raise BrokerError(f"{what} on {where}: {exc} (check options host and port, or servers)") from None

    def close(self) -> None:
        """DISCONNECT (bounded by ``timeout``), then close the socket and the loop."""
        try:
            if self.client is not None and self.client.is_connected:
                try:
                    self.run(self.client.disconnect(timeout=self.connection.timeout), self.connection.timeout + 1, "")
                except BrokerError:
                    self.loop.run_until_complete(self.client.close())
        finally:
            self.loop.close()

    def abort(self) -> None:
        """Close the socket without DISCONNECT (unacknowledged messages go back to the broker)."""
        try:
            if self.client is not None:
                self.loop.run_until_complete(asyncio.wait_for(self.client.close(), self.connection.timeout))
        except (asyncio.TimeoutError, aio.ConnectionClosedError, OSError):
            pass
        finally:
            self.loop.close()

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
