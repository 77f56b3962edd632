"""fastframe.sync: a blocking STOMP client for programs that are not asyncio (threads, scripts, WSGI).

API summary::

    with fastframe.sync.connect(host, port, *, the options of fastframe.aio.connect,
            max_queue=500, coalesce_reads=0.02, outbox=10_000) as client:
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

Why the asyncio client on a private loop thread, and not a second client on
:class:`fastframe.protocol.ClientConnection` with a thread that owns the socket: both were measured
side by side (``python -m bench.sync_clients --designs``: RabbitMQ on loopback, client CPU per
message, each in a process of its own). The socket-owning thread, in its cheapest possible form (a
prototype with no heart-beats, flow control, receipts or reconnect), was no cheaper: 11.1-18.1 µs per
message against 10.9-16.2 for this client over five runs on a loaded 2-core machine (14.5 against
8.7 in a later run). What the asyncio client costs is
decoding and routing, which both designs pay; what a thread of our own saves, the asyncio
machinery, the prototype spent again on a system call per SEND (a write under a lock, with no
batching of writes) and on reads that are not coalesced. This client crosses threads in batches: a
SEND is one append to a queue the I/O thread drains, writing each run of queued SENDs as one write
without a coroutine per SEND; the I/O thread hands received messages over in batches (one
``get_batch`` from the asyncio subscription, no lock, a notify only when a consumer waits), a
consumer takes a queued message without a lock, and the socket rests 20 ms between the reads of a
stream (the asyncio client: 2 ms) with room for what arrives meanwhile (``max_queue`` 500, the
asyncio client's 100), so each hand-over carries more messages. It costs about what the
asyncio client costs per message (6.1 µs against 6.0 at the median of ten alternating runs, 5.1x
stomp.py's messages per CPU-second; 7.3 µs with 5 ms rests and ``max_queue`` 100, when a read of a
stream crossed in two batches); under callgrind both execute about the same instructions per
message, so what is left is running on three threads (the GIL passed between them, their wake-ups
in the kernel). In return there is one implementation of every rule the asyncio client already gets right
and tests (flow control with heart-beat probes, read coalescing, receipt bookkeeping, reconnect).
All clients of a process share one such I/O thread.
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
