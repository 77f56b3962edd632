"""What both twins' frames and encoders share: the reference rules for frames built by hand.

The compiled twin takes its own fast path for the usual arguments (a dict, a
list or tuple of ``(str, str)`` tuples, ``bytes``) and comes here for anything
else, so the conversions and errors are these, in both twins.
:func:`encode_error` says why a frame cannot be encoded; both encoders raise
what it returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._constants import ESCAPE, UNESCAPED_COMMANDS
from ._errors import EncodeError

Header = Tuple[str, str]


def normalize_headers(headers: Any) -> Tuple[Header, ...]:
    """A mapping or an iterable of ``(str, str)`` pairs as a tuple of exact-str pairs (TypeError otherwise)."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for item in items:
        if isinstance(item, (str, bytes)):  # "ab" would unpack as ("a", "b")
            raise TypeError(f"each header must be a (name, value) pair, not {item!r}")
        try:
            name, value = item
        except (TypeError, ValueError):
            raise TypeError(f"each header must be a (name, value) pair, not {item!r}") from None
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(f"header names and values must be str, not {name!r}: {value!r}")
        # exact str: a subclass instance could carry a __dict__ and form a cycle
        out.append((name if type(name) is str else str(name), value if type(value) is str else str(value)))
    return tuple(out)


def first_wins_map(headers: Sequence[Header]) -> Dict[str, str]:
    """A dict of the first value of each name, in wire order of first appearance."""
    result: Dict[str, str] = {}
    for name, value in headers:
        if name not in result:
            result[name] = value
    return result


def body_bytes(body: Any) -> bytes:
    """The body as exact ``bytes`` (TypeError for anything but bytes, bytearray or memoryview)."""
    if type(body) is bytes:
        return body
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    raise TypeError(f"body must be bytes, bytearray or memoryview, not {type(body).__name__}")


def body_repr(body: bytes) -> str:
    """A body in a frame's repr: whole up to 64 bytes, else its size and first 48 bytes."""
    if len(body) <= 64:
        return repr(body)
    return f"<{len(body)} bytes: {body[:48]!r}...>"


def encode_error(command: str, headers: Sequence[Header], body: bytes, escapes: str) -> Optional[EncodeError]:
    """The error for a frame the wire cannot carry, or None when it can.

    The first problem in wire order wins: the command, then each header (empty
    name, NUL, then what the escape set cannot escape), then a content-length
    that contradicts the body, then text that is not encodable as UTF-8.
    """
    if not command or "\n" in command or "\r" in command or "\0" in command:
        return EncodeError(f"invalid command {command!r}")
    table = ESCAPE[escapes] if command not in UNESCAPED_COMMANDS else {}
    translate = str.maketrans(table) if table else None
    escaped: List[Header] = []
    for name, value in headers:
        if not name:
            return EncodeError("empty header name")
        if "\0" in name or "\0" in value:
            return EncodeError(f"NUL in header {name!r}")
        if translate is not None:
            if "\r" not in table and ("\r" in name or "\r" in value):
                return EncodeError(f"header {name!r}: CR cannot be escaped in STOMP {escapes}")
            escaped.append((name.translate(translate), value.translate(translate)))
        elif ":" in name or "\n" in name or "\r" in name or "\n" in value or "\r" in value:
            return EncodeError(
                f"header {name!r}: ':' in a name, CR or LF cannot be sent unescaped ({command}, STOMP {escapes})"
            )
        else:
            escaped.append((name, value))
    for name, value in escaped:
        if name == "content-length":
            size = str(len(body))
            if value != size and not (value.isdigit() and value.isascii() and int(value) == len(body)):
                return EncodeError(f"content-length {value!r} contradicts the {size}-byte body")
            break
    for text in (command, *(text for header in escaped for text in header)):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return EncodeError(f"cannot encode as UTF-8: {exc.object[exc.start : exc.end]!r}")
    return None
