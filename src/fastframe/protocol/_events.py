"""Events: what :meth:`receive_data` turns the peer's bytes into.

Small immutable classes. Every frame event carries the decoded :class:`fastframe.Frame` as
``frame`` (binary-safe body, headers in wire order, repeats kept), plus the fields a program
usually wants, already looked up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

__all__ = [
    "Event", "FrameEvent", "HeartbeatReceived", "ConnectionClosed",
    "Connected", "Message", "Receipt", "Error",
    "ConnectRequest", "Send", "Subscribe", "Unsubscribe", "Ack", "Nack", "Begin", "Commit", "Abort",
    "Disconnect",
]  # fmt: skip


class Event:
    """Base class of every event."""

    __slots__ = ()


@dataclass(frozen=True)
class HeartbeatReceived(Event):
    """An EOL between frames (the one right after a frame's NUL included, as brokers send ``\\0\\n``)."""


@dataclass(frozen=True)
class ConnectionClosed(Event):
    """The peer closed the stream between frames (from :meth:`receive_eof`)."""


@dataclass(frozen=True)
class FrameEvent(Event):
    """A frame from the peer; ``frame`` is the :class:`fastframe.Frame` as decoded."""

    frame: Any

    @property
    def command(self) -> str:
        """The frame's command."""
        return str(self.frame.command)

    @property
    def receipt(self) -> Optional[str]:
        """The ``receipt`` header the peer asked for (client frames), or ``None``."""
        value = self.frame.get("receipt")
        return None if value is None else str(value)


# --------------------------------------------------------------------------- client side (server frames)


@dataclass(frozen=True)
class Connected(FrameEvent):
    """CONNECTED: the session is open. ``heartbeat`` is the negotiated ``(send_ms, receive_ms)`` of our side."""

    version: str = "1.0"
    heartbeat: Tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Message(FrameEvent):
    """MESSAGE. ``ack_id`` is what an ACK/NACK must name (``ack`` in 1.2, else ``message-id``)."""

    subscription: Optional[str] = None
    message_id: Optional[str] = None
    ack_id: Optional[str] = None
    destination: Optional[str] = None

    @property
    def body(self) -> bytes:
        """The message body, bytes, NULs included."""
        return bytes(self.frame.body)


@dataclass(frozen=True)
class Receipt(FrameEvent):
    """RECEIPT for the frame we sent with ``receipt:<receipt_id>``; ``for_command`` names that frame."""

    receipt_id: str = ""
    for_command: str = ""


@dataclass(frozen=True)
class Error(FrameEvent):
    """ERROR: the server reports a problem and usually closes the connection."""

    message: Optional[str] = None
    receipt_id: Optional[str] = None


# --------------------------------------------------------------------------- server side (client frames)


@dataclass(frozen=True)
class ConnectRequest(FrameEvent):
    """CONNECT or STOMP: answer with ``accept()`` or ``reject()``."""

    accept_version: Optional[str] = None
    host: Optional[str] = None
    login: Optional[str] = None
    passcode: Optional[str] = None
    heartbeat: Tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Send(FrameEvent):
    """SEND."""

    destination: str = ""
    transaction: Optional[str] = None


@dataclass(frozen=True)
class Subscribe(FrameEvent):
    """SUBSCRIBE (``id`` is the subscription id; 1.0 frames without one get ``destination``)."""

    id: str = ""
    destination: str = ""
    ack: str = "auto"


@dataclass(frozen=True)
class Unsubscribe(FrameEvent):
    """UNSUBSCRIBE."""

    id: str = ""


@dataclass(frozen=True)
class Ack(FrameEvent):
    """ACK. ``id`` is the ack id the client names (``id`` in 1.2, ``message-id`` before)."""

    id: str = ""
    subscription: Optional[str] = None
    transaction: Optional[str] = None


@dataclass(frozen=True)
class Nack(Ack):
    """NACK (1.1 and later)."""


@dataclass(frozen=True)
class Begin(FrameEvent):
    """BEGIN a transaction."""

    transaction: str = ""


@dataclass(frozen=True)
class Commit(Begin):
    """COMMIT a transaction."""


@dataclass(frozen=True)
class Abort(Begin):
    """ABORT a transaction."""


@dataclass(frozen=True)
class Disconnect(FrameEvent):
    """DISCONNECT: answer its receipt (if any) with ``receipt()``, then close."""
