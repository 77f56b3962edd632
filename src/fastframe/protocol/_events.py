"""Events: what :meth:`receive_data` turns the peer's bytes into.

Small immutable classes with ``__slots__``. Every frame event carries the decoded
:class:`fastframe.Frame` as ``frame`` (binary-safe body, headers in wire order, repeats kept), plus
the fields a program usually wants, already looked up. Two events are equal when they are of the
same class with equal fields; assigning a field raises ``dataclasses.FrozenInstanceError`` (an
``AttributeError``).
"""

from __future__ import annotations

import operator
from dataclasses import FrozenInstanceError
from typing import Any, Optional, Tuple

__all__ = [
    "Event", "FrameEvent", "HeartbeatReceived", "ConnectionClosed",
    "Connected", "Message", "Receipt", "Error",
    "ConnectRequest", "Send", "Subscribe", "Unsubscribe", "Ack", "Nack", "Begin", "Commit", "Abort",
    "Disconnect",
]  # fmt: skip

_set = object.__setattr__  # how a frozen event's own __init__ fills its slots


def _read_only(slot: str, doc: str) -> Any:
    """A read-only field over ``slot``; its getter is C code (``operator.attrgetter``), no Python call."""
    return property(operator.attrgetter(slot), doc=doc)


class Event:
    """Base class of every event."""

    __slots__ = ()
    #: The event's fields, in constructor order (equality, hashing and repr use them).
    fields: Tuple[str, ...] = ()

    def _values(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.fields)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values() == other._values()

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={v!r}' for n, v in zip(self.fields, self._values()))})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


class HeartbeatReceived(Event):
    """An EOL between frames (the one right after a frame's NUL included, as brokers send ``\\0\\n``)."""

    __slots__ = ()


class ConnectionClosed(Event):
    """The peer closed the stream between frames (from :meth:`receive_eof`)."""

    __slots__ = ()


class FrameEvent(Event):
    """A frame from the peer; ``frame`` is the :class:`fastframe.Frame` as decoded."""

    __slots__ = ("frame",)
    frame: Any
    fields: Tuple[str, ...] = ("frame",)

    def __init__(self, frame: Any) -> None:
        _set(self, "frame", frame)

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


class Connected(FrameEvent):
    """CONNECTED: the session is open. ``heartbeat`` is the negotiated ``(send_ms, receive_ms)`` of our side."""

    __slots__ = ("version", "heartbeat")
    version: str
    heartbeat: Tuple[int, int]
    fields = ("frame", "version", "heartbeat")

    def __init__(self, frame: Any, version: str = "1.0", heartbeat: Tuple[int, int] = (0, 0)) -> None:
        _set(self, "frame", frame)
        _set(self, "version", version)
        _set(self, "heartbeat", heartbeat)


class Message(FrameEvent):
    """MESSAGE. ``ack_id`` is what an ACK/NACK must name (``ack`` in 1.2, else ``message-id``).

    The one event built per message received: its fields are read-only properties over slots a
    plain ``__init__`` fills (no frozen-instance call per field). A transport that wraps every
    message (:mod:`fastframe.aio`) subclasses it and passes the subclass as the connection's
    ``message_class``.
    """

    __slots__ = ("_frame", "_subscription", "_message_id", "_ack_id", "_destination")
    fields = ("frame", "subscription", "message_id", "ack_id", "destination")
    # the fields are properties without setters (_read_only): read-only all the same
    __setattr__ = object.__setattr__  # type: ignore[assignment]
    __delattr__ = object.__delattr__

    def __init__(
        self,
        frame: Any,
        subscription: Optional[str] = None,
        message_id: Optional[str] = None,
        ack_id: Optional[str] = None,
        destination: Optional[str] = None,
    ) -> None:
        self._frame = frame
        self._subscription = subscription
        self._message_id = message_id
        self._ack_id = ack_id
        self._destination = destination

    frame: Any = _read_only("_frame", "The :class:`fastframe.Frame` as received.")
    subscription: Optional[str] = _read_only(
        "_subscription", "The ``subscription`` header (``None``: a 1.0 MESSAGE without one)."
    )
    message_id: Optional[str] = _read_only("_message_id", "The ``message-id`` header.")
    ack_id: Optional[str] = _read_only("_ack_id", "What an ACK or NACK of this message names.")
    destination: Optional[str] = _read_only("_destination", "The ``destination`` header.")

    @property
    def body(self) -> bytes:
        """The message body, bytes, NULs included."""
        return bytes(self.frame.body)


class Receipt(FrameEvent):
    """RECEIPT for the frame we sent with ``receipt:<receipt_id>``; ``for_command`` names that frame."""

    __slots__ = ("receipt_id", "for_command")
    receipt_id: str
    for_command: str
    fields = ("frame", "receipt_id", "for_command")

    def __init__(self, frame: Any, receipt_id: str = "", for_command: str = "") -> None:
        _set(self, "frame", frame)
        _set(self, "receipt_id", receipt_id)
        _set(self, "for_command", for_command)


class Error(FrameEvent):
    """ERROR: the server reports a problem and usually closes the connection."""

    __slots__ = ("message", "receipt_id")
    message: Optional[str]
    receipt_id: Optional[str]
    fields = ("frame", "message", "receipt_id")

    def __init__(self, frame: Any, message: Optional[str] = None, receipt_id: Optional[str] = None) -> None:
        _set(self, "frame", frame)
        _set(self, "message", message)
        _set(self, "receipt_id", receipt_id)


# --------------------------------------------------------------------------- server side (client frames)


class ConnectRequest(FrameEvent):
    """CONNECT or STOMP: answer with ``accept()`` or ``reject()``."""

    __slots__ = ("accept_version", "host", "login", "passcode", "heartbeat")
    accept_version: Optional[str]
    host: Optional[str]
    login: Optional[str]
    passcode: Optional[str]
    heartbeat: Tuple[int, int]
    fields = ("frame", "accept_version", "host", "login", "passcode", "heartbeat")

    def __init__(
        self,
        frame: Any,
        accept_version: Optional[str] = None,
        host: Optional[str] = None,
        login: Optional[str] = None,
        passcode: Optional[str] = None,
        heartbeat: Tuple[int, int] = (0, 0),
    ) -> None:
        _set(self, "frame", frame)
        _set(self, "accept_version", accept_version)
        _set(self, "host", host)
        _set(self, "login", login)
        _set(self, "passcode", passcode)
        _set(self, "heartbeat", heartbeat)


class Send(FrameEvent):
    """SEND."""

    __slots__ = ("destination", "transaction")
    destination: str
    transaction: Optional[str]
    fields = ("frame", "destination", "transaction")

    def __init__(self, frame: Any, destination: str = "", transaction: Optional[str] = None) -> None:
        _set(self, "frame", frame)
        _set(self, "destination", destination)
        _set(self, "transaction", transaction)


class Subscribe(FrameEvent):
    """SUBSCRIBE (``id`` is the subscription id; 1.0 frames without one get ``destination``)."""

    __slots__ = ("id", "destination", "ack")
    id: str
    destination: str
    ack: str
    fields = ("frame", "id", "destination", "ack")

    def __init__(self, frame: Any, id: str = "", destination: str = "", ack: str = "auto") -> None:
        _set(self, "frame", frame)
        _set(self, "id", id)
        _set(self, "destination", destination)
        _set(self, "ack", ack)


class Unsubscribe(FrameEvent):
    """UNSUBSCRIBE."""

    __slots__ = ("id",)
    id: str
    fields = ("frame", "id")

    def __init__(self, frame: Any, id: str = "") -> None:
        _set(self, "frame", frame)
        _set(self, "id", id)


class Ack(FrameEvent):
    """ACK. ``id`` is the ack id the client names (``id`` in 1.2, ``message-id`` before)."""

    __slots__ = ("id", "subscription", "transaction")
    id: str
    subscription: Optional[str]
    transaction: Optional[str]
    fields = ("frame", "id", "subscription", "transaction")

    def __init__(
        self, frame: Any, id: str = "", subscription: Optional[str] = None, transaction: Optional[str] = None
    ) -> None:
        _set(self, "frame", frame)
        _set(self, "id", id)
        _set(self, "subscription", subscription)
        _set(self, "transaction", transaction)


class Nack(Ack):
    """NACK (1.1 and later)."""

    __slots__ = ()


class Begin(FrameEvent):
    """BEGIN a transaction."""

    __slots__ = ("transaction",)
    transaction: str
    fields = ("frame", "transaction")

    def __init__(self, frame: Any, transaction: str = "") -> None:
        _set(self, "frame", frame)
        _set(self, "transaction", transaction)


class Commit(Begin):
    """COMMIT a transaction."""

    __slots__ = ()


class Abort(Begin):
    """ABORT a transaction."""

    __slots__ = ()


class Disconnect(FrameEvent):
    """DISCONNECT: answer its receipt (if any) with ``receipt()``, then close."""

    __slots__ = ()
