"""fastframe.server: the asyncio STOMP server and the in-memory broker served by it.

``serve(handler, host, port, **options)`` runs a :class:`fastframe.protocol.ServerConnection` per
connection over asyncio (the handshake, the negotiated version, heart-beats, escaping, limits, flow
control and deadlines) and hands the client's frames to a *handler*, which answers with calls
(``accept``, ``receipt``, ``error``, ``write``, ``send``, ``close``). :class:`Broker` is
:class:`fastframe.broker.BrokerCore` served that way. Both are also ``fastframe.aio.serve`` and
``fastframe.aio.Broker`` (imported there on first use). :func:`stop_on_signals` turns Ctrl-C into an
event for a long-running command (``fastframe broker``, ``fastframe record``). Standard library only.
"""

from __future__ import annotations

from ._broker import Broker, BrokerHandler, run_broker
from ._serve import FrameHandler, ServedConnection, Server, SlowConsumerError, TimeoutClosed, serve
from ._signals import stop_on_signals

__all__ = [
    "Broker",
    "BrokerHandler",
    "FrameHandler",
    "ServedConnection",
    "Server",
    "SlowConsumerError",
    "TimeoutClosed",
    "run_broker",
    "serve",
    "stop_on_signals",
]
