"""The bytes of MESSAGE deliveries, built from cached pieces (the broker's hot path).

A delivery is the subscription's encoded first lines, the delivery's ids, and :func:`message_tail`:
the message's headers, content-length and body, encoded once per escape set and shared by every
delivery. ``tests/broker/test_core.py`` holds the result to the encoder's bytes.
"""

from __future__ import annotations

from typing import Tuple

from ..codec import ESCAPE, VERSIONS

__all__ = ["DELIVERY", "PLAIN_DELIVERY", "PLAIN_EMPTY_DELIVERY", "forwarded_headers", "message_tail", "first_of_each"]

Headers = Tuple[Tuple[str, str], ...]

_TABLES = {version: str.maketrans(ESCAPE[version]) for version in VERSIONS}

#: The MESSAGE template: ``DELIVERY % (prefix, message_id, b"true" or b"false", ack_line, tail)``; the
#: prefix is the subscription's encoded first lines up to ``message-id:``, ``ack_line`` is
#: ``b"ack:<id>\n"`` (1.2, acknowledged subscriptions) or empty, the tail :func:`message_tail`'s.
DELIVERY = b"%b%d\nredelivered:%b\n%b%b"
#: :data:`DELIVERY` of a first, auto-acknowledged delivery of a message without headers, the tail
#: written in (the broker's flat loop formats it in one step): ``% (prefix, id, len(body), body)``.
PLAIN_DELIVERY = b"%b%d\nredelivered:false\ncontent-length:%d\n\n%b\0"
#: The same for an empty body: ``% (prefix, id)``.
PLAIN_EMPTY_DELIVERY = b"%b%d\nredelivered:false\n\n\0"
# SEND headers the broker sets itself or that concern only the SEND (RabbitMQ leaks receipt and
# transaction into the MESSAGE; the spec says nothing, and a client reading them would be confused).
_DROPPED = frozenset({"destination", "content-length", "receipt", "transaction", "message-id", "subscription", "ack"})


def message_tail(version: str, headers: Headers, body: bytes) -> Tuple[bool, bytes]:
    """MESSAGE after its first line and per-delivery headers: the message's headers, content-length, body.

    The hot path of every delivery, so the lines are built here with the version's escape table; a
    value the version cannot carry (CR in 1.1; LF, CR, or ':' in a name in 1.0) makes the whole frame
    use the 1.2 escapes (the first item says so). A test holds this to the encoder's bytes.
    """
    text = ""
    if headers:
        if version != "1.2":
            raw = "".join([name + "\0" + value for name, value in headers])
            if "\r" in raw or (version == "1.0" and ("\n" in raw or any(":" in name for name, _ in headers))):
                return True, message_tail("1.2", headers, body)[1]
        table = _TABLES[version]
        text = "".join([name.translate(table) + ":" + value.translate(table) + "\n" for name, value in headers])
    try:
        data = text.encode()
    except UnicodeEncodeError:  # bytes that are not UTF-8, kept by a decoder with keep_invalid_utf8: as they came
        data = text.encode("utf-8", "surrogateescape")
    if body:
        return False, b"%bcontent-length:%d\n\n%b\0" % (data, len(body), body)
    return False, data + b"\n\0"


def forwarded_headers(headers: Headers) -> Headers:
    """The SEND's headers a MESSAGE carries: not those the broker sets or that concern only the
    SEND, and the first of each repeated name."""
    kept = tuple([item for item in headers if item[0] not in _DROPPED])
    if len(kept) > 1 and len({name for name, _ in kept}) != len(kept):
        kept = first_of_each(kept)
    return kept


def first_of_each(headers: Headers) -> Headers:
    """Keep the first of each repeated name, as both big brokers forward them."""
    seen = set()
    kept = []
    for name, value in headers:
        if name not in seen:
            seen.add(name)
            kept.append((name, value))
    return tuple(kept)
