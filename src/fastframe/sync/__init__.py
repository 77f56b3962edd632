"""fastframe.sync: a blocking STOMP client for programs that are not asyncio (threads, scripts, WSGI).

API summary::

    with fastframe.sync.connect(host, port, *, the options of fastframe.aio.connect,
            max_queue=1000, coalesce_reads=0.02, outbox=10_000) as client:
        client.send(destination, body, headers=None, *, content_type=None, transaction=None,
                    receipt=False, timeout=None, content_length=True)
        reply = client.request(destination, body, headers=None, *, timeout=None)  # from any thread
        client.ack(message_or_kept_id, *, subscription=None, transaction=None, receipt=False)
        with client.subscribe(destination, ack="client-individual") as sub:
            for message in sub:                # Message: frame, body, headers, get(), text()
                message.ack()                  # or nack(); from any thread
            message = sub.get(timeout=1.0)     # TimeoutError when nothing came: a loop can wake up
        client.subscribe(destination, on_message=fn, on_error=None)  # fn runs in a worker thread
        with client.transaction() as tx:       # BEGIN; COMMIT on exit, ABORT if the block raises
            tx.send(destination, body)
        client.flush(timeout=...)              # every earlier call handed to the connection
        client.disconnect(timeout=...)         # DISCONNECT with a receipt, then close (also on exit)

Every method may be called from any thread; frames go out whole, in call order, each as soon as it
is called: a thread waiting for a receipt holds no other thread's frame, and a receipt wait that
times out says whether its frame was sent (one never sent is never sent later). Behaviour is the
asyncio client's (:mod:`fastframe.aio`), because it is the asyncio client: heart-beats sent and
checked in the client's I/O thread whatever user code does, every wait with a deadline
(:class:`TimeoutError`), every waiter (a thread blocked in ``get()`` too) failed at once with
:class:`ConnectionClosedError` (``ServerError``, ``HeartbeatTimeout``) after the messages that arrived
before it, bounded per-subscription queues that pause reading, ``Reconnect`` with backoff that
re-subscribes, TLS through ``ssl=``, ``frame_hook``/``wire_hook`` (run in the I/O thread), the
broker quirk options. A SEND or ACK without a receipt returns once queued for the I/O thread; a
failure of it is raised by the next call (ask for a receipt to know the broker has it).

It is the asyncio client run on a private I/O thread, one thread shared by all clients of a
process; it costs about what the asyncio client costs per message. Why this design, and the
measurements behind it: the documentation's architecture page ("The blocking client").
"""

from __future__ import annotations

from ..aio import ConnectionClosedError, HeartbeatTimeout, Reconnect, ServerError, StaleMessageError
from ._client import Client, connect
from ._subscription import Message, Subscription, Transaction

__all__ = [
    "Client",
    "ConnectionClosedError",
    "HeartbeatTimeout",
    "Message",
    "Reconnect",
    "ServerError",
    "StaleMessageError",
    "Subscription",
    "Transaction",
    "connect",
]
