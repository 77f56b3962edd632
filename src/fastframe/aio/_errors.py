"""Errors of the asyncio client. Waits that run out of time raise :class:`asyncio.TimeoutError`."""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["ConnectionClosedError", "ServerError", "HeartbeatTimeout", "StaleMessageError"]


class ConnectionClosedError(ConnectionError):
    """The connection is gone; every waiter fails with this at once. ``__cause__`` says why."""


class ServerError(ConnectionClosedError):
    """The server sent an ERROR frame (``frame``; its ``message`` header is in ``message``)."""

    def __init__(self, message: str, frame: Optional[Any] = None) -> None:
        super().__init__(message)
        self.message = message
        self.frame = frame


class HeartbeatTimeout(ConnectionClosedError):
    """The server sent nothing for longer than its heart-beat interval times the grace."""


class StaleMessageError(ConnectionClosedError):
    """ACK or NACK of a message received on an earlier connection: the broker redelivers it instead."""
