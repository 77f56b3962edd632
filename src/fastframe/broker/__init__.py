"""A small in-memory STOMP broker's routing core (no I/O): see :class:`BrokerCore`.

``fastframe.server.Broker`` (also ``fastframe.aio.Broker``) serves it over TCP; this package never
imports ``fastframe.server`` nor ``fastframe.aio``.
"""

from __future__ import annotations

from ._core import (
    ACK_MODES,
    DEFAULT_MAX_STORED_BYTES,
    DEFAULT_MAX_SUBSCRIPTIONS,
    DEFAULT_MAX_TRANSACTION_BYTES,
    DEFAULT_MAX_TRANSACTIONS,
    BrokerCore,
    Session,
    SessionHandle,
)
from ._errors import ERRORS, error_frame, error_parts
from ._streams import StreamLog, Streams

__all__ = [
    "ACK_MODES",
    "DEFAULT_MAX_STORED_BYTES",
    "DEFAULT_MAX_SUBSCRIPTIONS",
    "DEFAULT_MAX_TRANSACTION_BYTES",
    "DEFAULT_MAX_TRANSACTIONS",
    "ERRORS",
    "BrokerCore",
    "Session",
    "SessionHandle",
    "StreamLog",
    "Streams",
    "error_frame",
    "error_parts",
]
