"""The bytes of MESSAGE deliveries, built from cached pieces (the broker's hot path).

A delivery is the subscription's encoded first lines, the delivery's ids, and :func:`message_tail`:
the message's headers, content-length and body, encoded once per escape set and shared by every
delivery. ``tests/broker/test_core.py`` holds the result to the encoder's bytes.
"""

from __future__ import annotations

from typing import Tuple

from .._constants import ESCAPE, VERSIONS

__all__ = ["message_tail", "first_wins"]

Headers = Tuple[Tuple[str, str], ...]

_TABLES = {version: str.maketrans(ESCAPE[version]) for version in VERSIONS}


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
    if body:
        return False, b"%bcontent-length:%d\n\n%b\0" % (text.encode(), len(body), body)
    return False, text.encode() + b"\n\0"


def first_wins(headers: Headers) -> Headers:
    """Keep the first of each repeated name, as both big brokers forward them."""
    seen = set()
    kept = []
    for name, value in headers:
        if name not in seen:
            seen.add(name)
            kept.append((name, value))
    return tuple(kept)
