"""ERROR frames shaped as RabbitMQ shapes them.

RabbitMQ's ERROR frames carry ``message`` (a short summary), ``content-type:text/plain``,
``version`` (the versions it speaks) and a ``content-length`` text body, and never a ``receipt-id``
(see the broker corpus notes). The broker sends the same shape for the same mistakes, so a client
tested here sees what it will see there.
"""

from __future__ import annotations

from typing import Any, Tuple

from ..codec import VERSIONS, Frame
from ..protocol import plain_error

__all__ = ["error_frame", "error_parts", "ERRORS"]

_VERSION_LIST = ",".join(VERSIONS)

#: (message header, body) of each error the broker's core sends; ``{}`` fields are filled in. (The
#: asyncio server shapes its own: its limits, time-outs, malformed input, shutdown.)
ERRORS = {
    "version": ("Version mismatch", "Supported versions are " + _VERSION_LIST + "\n"),
    "login": ("Bad CONNECT", "Access refused for user '{}'\n"),
    "not-connected": ("Illegal command", "You must log in using CONNECT first"),
    "command": ("Bad command", 'Could not interpret command "{}"\n'),
    "destination-missing": ("Missing destination", "\"{}\" must include a 'destination' header\n"),
    "destination-unknown": (
        "Unknown destination",
        "'{}' is not a valid destination.\nValid destination types are: /topic, /queue.\n",
    ),
    "ack-id": ("Invalid header", '"{}" must include a valid "{}" header\n'),
    "subscription-id": ("Invalid header", '"{}" must include a valid "id" header\n'),
    "duplicate-subscription": (
        "Duplicated subscription identifier",
        'A subscription identified by "{}" already exists.\n',
    ),
    "transaction-missing": ("Missing transaction", "\"{}\" must include a 'transaction' header\n"),
    "transaction-unknown": ("Bad transaction", 'Invalid transaction identifier: "{}"\n'),
    "transaction-duplicate": ("Bad transaction", 'Transaction "{}" is already active\n'),
    "already-connected": ("Illegal command", "Already connected\n"),
    "full": ("Resource limit", "The broker holds {} bytes of undelivered messages, its limit\n"),
    "transaction-bytes": ("Resource limit", "A connection may hold {} bytes in open transactions, its limit\n"),
    "transactions-open": ("Resource limit", "A connection may have {} transactions open, its limit\n"),
    "subscriptions-open": ("Resource limit", "A connection may have {} subscriptions, its limit\n"),
    # RabbitMQ's stream queue refusals (fastframe.broker._streams), its words
    "precondition": ("precondition_failed", "PRECONDITION_FAILED - {}"),
    "not-found": ("not_found", "NOT_FOUND - no queue '{}' in vhost '/'"),
    "channel-died": (
        "AMQP channel died",
        "Reason: {{shutdown,\n            {{connection_closing,\n                {{server_initiated_close,540,\n"
        '                    "{}"}}}}}}',
    ),
    "processing": ("Processing error", "Processing error"),
}


def error_parts(kind: str, *args: Any) -> Tuple[str, bytes, Tuple[Tuple[str, str], ...]]:
    """``(message, body, headers after message)`` of the ERROR for ``kind`` (a key of :data:`ERRORS`),
    its body formatted with ``args``: what ``error(message, body=, headers=)`` of a connection takes."""
    message, body = ERRORS[kind]
    return plain_error(message, body.format(*args))


def error_frame(kind: str, *args: Any) -> Any:
    """The ERROR frame for ``kind`` (a key of :data:`ERRORS`), its body formatted with ``args``."""
    message, data, headers = error_parts(kind, *args)
    return Frame("ERROR", (("message", message), *headers), data)
