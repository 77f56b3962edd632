"""Errors of the connection layer: our misuse versus the peer's violations.

Both are :class:`fastframe.FrameError` (a ``ValueError``) so one ``except`` catches every fastframe
problem, and both carry the frame involved (``None`` when no frame was: a heart-beat at the wrong
time, a stream cut inside a frame).
"""

from __future__ import annotations

from typing import Any, List, Optional

from ..codec import FrameError

__all__ = ["ProtocolError", "LocalProtocolError", "RemoteProtocolError"]


class ProtocolError(FrameError):
    """Base class of the connection errors.

    Attributes:
        frame: the :class:`fastframe.Frame` involved, or ``None``.
        events: the events completed before the problem by the same call (only
            :meth:`receive_data` fills it): nothing decoded is lost.
    """

    code = "protocol-error"

    def __init__(self, message: str, frame: Optional[Any] = None) -> None:
        super().__init__(message)
        self.message = message
        self.frame = frame
        self.events: List[Any] = []

    def __reduce__(self) -> Any:
        return (type(self), (self.message, self.frame))


class LocalProtocolError(ProtocolError):
    """Our side misused the connection (sending before CONNECTED, acking an unknown message, ...).

    Nothing was sent and the connection's state did not change: fix the call and go on.
    """

    code = "local-protocol-error"


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol (a bad frame, a frame at the wrong time, a stream cut mid-frame).

    The connection is dead afterwards: receiving raises this error again. A server may still answer
    the frames in ``events`` (RECEIPT, MESSAGE: what the client sent before the violation), then
    send its :meth:`~fastframe.protocol.ServerConnection.error`, after which nothing goes out.
    ``offset`` is where in the peer's whole stream (the handshake counted) undecodable bytes were
    found, the same number as the message's text (``None`` when the bytes decoded but broke the protocol).
    """

    code = "remote-protocol-error"
    offset: Optional[int] = None
