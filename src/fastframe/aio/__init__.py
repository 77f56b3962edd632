"""fastframe.aio: a STOMP client for asyncio (standard library only), on :mod:`fastframe.protocol`.

API summary::

    async with fastframe.aio.connect(host, port, *, ssl=None, login=None, passcode=None,
            host_header=None, versions=("1.0", "1.1", "1.2"), heartbeat=(cx, cy), timeout=10.0,
            connect_timeout=10.0, max_queue=100, reconnect=Reconnect(...), servers=[(h, p), ...],
            frame_hook=None, wire_hook=None, coalesce_reads=0.002, headers=None (on every CONNECT),
            on_unrouted=log_unrouted, reply_to=None, **ClientConnection options) as client:
        await client.send(destination, body, headers=None, *, content_type=None, transaction=None,
                          receipt=False, timeout=None, content_length=True)
        reply = await client.request(destination, body, headers=None, *, timeout=None)  # reply-to, correlation-id
        await client.subscribe_into(receiver)  # a Receiver of your own (the blocking client's subscriptions)
        await client.ack(message_or_kept_id, *, subscription=None, transaction=None, receipt=False)
        async with await client.subscribe(destination, ack="client-individual") as sub:
            async for message in sub:          # Message: frame, body, headers, get(), text()
                await message.ack()            # or nack(); also message.ack(transaction=tx.id)
        async with client.transaction() as tx: # BEGIN; COMMIT on exit, ABORT if the block raises
            await tx.send(destination, body)
        await client.disconnect(timeout=...)   # DISCONNECT with a receipt, then close (also on exit)

Every wait has a deadline (``asyncio.TimeoutError``); when the connection drops every waiter
fails at once with :class:`ConnectionClosedError` (``ServerError`` for an ERROR frame,
``HeartbeatTimeout`` for a silent server), after the messages that arrived before it.
Heart-beats are sent and checked by the transport, never by user code. A full subscription queue
pauses reading from the socket (``client.session.is_reading()``) until half of it is consumed.
While messages stream in, the socket rests ``coalesce_reads`` seconds after each read, so a fast
stream costs fewer wake-ups (0 turns it off); a lone message after a quiet spell, and the answer to
what the process just sent, are read at once.
``Reconnect(attempts, initial_delay, max_delay, factor, jitter, going_away)`` retries the servers
with backoff after the connection drops or an ERROR says the server is going away (RabbitMQ
closing a connection by force: AMQP's code 320; any other ERROR ends the client); success means
CONNECTED arrived; subscriptions are re-established with the same ids.
``frame_hook(direction, frame_or_None)`` sees every frame in and out; ``wire_hook(direction,
bytes)`` every byte. TLS: pass an :class:`ssl.SSLContext` as ``ssl``. STOMP over WebSocket: ``host``
(and entries of ``servers``) may be a ``ws://`` or ``wss://`` URL (the ``ws`` extra,
:mod:`fastframe.websocket`); everything else is as over TCP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._client import Client, Reconnect, connect, log_unrouted, start_call
from ._errors import ConnectionClosedError, HeartbeatTimeout, ServerError, StaleMessageError
from ._subscription import BaseMessage, ColumnSubscription, Message, Receiver, Subscription, Transaction
from ._transport import ClientSession

if TYPE_CHECKING:
    from ..server import Broker, serve


def __getattr__(name: str) -> Any:
    # the server side (fastframe.server, and the broker under it) is imported when first used: a
    # client program does not pay for it at start-up
    if name in ("Broker", "serve"):
        from .. import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BaseMessage",
    "Broker",
    "Client",
    "ConnectionClosedError",
    "HeartbeatTimeout",
    "Message",
    "Receiver",
    "Reconnect",
    "ServerError",
    "ClientSession",
    "ColumnSubscription",
    "StaleMessageError",
    "Subscription",
    "Transaction",
    "connect",
    "log_unrouted",
    "serve",
    "start_call",
]
