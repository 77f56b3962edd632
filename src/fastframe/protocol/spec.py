"""Protocol helpers that clients and brokers need on top of the codec.

Everything here is plain Python over the public API, so it works the same
with either twin: frame validation against the specification's tables,
heart-beat and version negotiation, and body decoding by content-type.

The STOMP 1.2 specification is the authority; the rules that differ in 1.0
and 1.1 come from those versions' specifications (their "Frames and
Headers" tables and the sections named in each docstring).
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Tuple, Union

from ..codec import (
    BODY_COMMANDS,
    CLIENT_COMMANDS,
    COMMANDS_BY_VERSION,
    SERVER_COMMANDS,
    VERSIONS,
    EncodeError,
    FrameError,
)

__all__ = [
    "ValidationError",
    "REQUIRED_HEADERS",
    "frame_problems",
    "validate",
    "parse_heartbeat",
    "negotiate_heartbeat",
    "negotiate_version",
    "body_text",
]


class ValidationError(FrameError):
    """A frame that breaks the specification; ``problems`` lists every rule it breaks."""

    code = "invalid-frame"

    def __init__(self, problems: List[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))

    def __reduce__(self) -> Any:
        return (type(self), (self.problems,))


_CONNECT_11 = ("accept-version", "host")

#: Headers each command REQUIRES, per version (spec "Frames and Headers").
#: Standard headers (content-length, content-type, receipt) are never required.
#: 1.0's UNSUBSCRIBE needs ``id`` *or* ``destination``: checked separately.
_REQUIRED_11: Dict[str, Tuple[str, ...]] = {
    "CONNECT": _CONNECT_11,
    "STOMP": _CONNECT_11,
    "CONNECTED": ("version",),
    "SEND": ("destination",),
    "SUBSCRIBE": ("destination", "id"),
    "UNSUBSCRIBE": ("id",),
    "ACK": ("message-id", "subscription"),
    "NACK": ("message-id", "subscription"),
    "BEGIN": ("transaction",),
    "COMMIT": ("transaction",),
    "ABORT": ("transaction",),
    "DISCONNECT": (),
    "MESSAGE": ("destination", "message-id", "subscription"),
    "RECEIPT": ("receipt-id",),
    "ERROR": (),
}

REQUIRED_HEADERS: Dict[str, Dict[str, Tuple[str, ...]]] = {
    "1.0": {
        "CONNECT": (),
        "CONNECTED": (),
        "SEND": ("destination",),
        "SUBSCRIBE": ("destination",),
        "UNSUBSCRIBE": (),
        "ACK": ("message-id",),
        "BEGIN": ("transaction",),
        "COMMIT": ("transaction",),
        "ABORT": ("transaction",),
        "DISCONNECT": (),
        "MESSAGE": ("destination", "message-id"),
        "RECEIPT": ("receipt-id",),
        "ERROR": (),
    },
    "1.1": _REQUIRED_11,
    # 1.2 acknowledges by the MESSAGE's ack header, sent back as id
    "1.2": {**_REQUIRED_11, "ACK": ("id",), "NACK": ("id",)},
}

#: Values of SUBSCRIBE's ``ack`` header (spec "SUBSCRIBE ack Header";
#: client-individual arrived in 1.1).
ACK_MODES: Dict[str, FrozenSet[str]] = {
    "1.0": frozenset({"auto", "client"}),
    "1.1": frozenset({"auto", "client", "client-individual"}),
    "1.2": frozenset({"auto", "client", "client-individual"}),
}

_SENDERS = (None, "client", "server")


def _check_version(version: str) -> None:
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {', '.join(VERSIONS)}, not {version!r}")


def _is_decimal(text: str) -> bool:
    return text.isdigit() and text.isascii()


def frame_problems(frame: Any, version: str = "1.2", sender: Optional[str] = None) -> List[str]:
    """Every way ``frame`` breaks the STOMP ``version`` specification, as messages.

    An empty list means the frame is valid. ``sender`` is ``"client"``,
    ``"server"`` or ``None`` (either side). The rules, and where they come from:

    * the command exists in the version ("Client Frames", "Server Frames":
      1.0 has neither NACK nor STOMP) and belongs to the sender's side (a
      client must not send MESSAGE, RECEIPT, ERROR or CONNECTED; a server only
      sends those);
    * the REQUIRED headers of "Frames and Headers" are present (1.2: ACK/NACK
      need ``id``, SUBSCRIBE ``id``, CONNECT/STOMP ``accept-version`` and
      ``host``, CONNECTED ``version``; 1.1: ACK/NACK need ``message-id`` and
      ``subscription``; 1.0: ACK needs ``message-id``, UNSUBSCRIBE ``id`` or
      ``destination``, SUBSCRIBE no ``id``). Repeated headers count once: the
      first entry is the one that matters ("Repeated Header Entries");
    * "Body": only SEND, MESSAGE and ERROR may have a body;
    * "Header content-length": when present (first entry) it is the decimal
      octet count of the body;
    * "SUBSCRIBE ack Header": ``ack`` is auto, client or client-individual
      (no client-individual in 1.0);
    * "Heart-beating": the ``heart-beat`` of CONNECT, STOMP and CONNECTED is
      two integers ``cx,cy`` (1.1 and later);
    * the frame can be written in the version at all: header names and values
      that ``encode`` refuses ("Value Encoding": CONNECT and CONNECTED headers
      cannot carry CR, LF, nor ``:`` in names; 1.1 cannot escape CR).

    Required headers are checked for presence only: the spec does not
    forbid empty values.
    """
    _check_version(version)
    if sender not in _SENDERS:
        raise ValueError(f"sender must be 'client', 'server' or None, not {sender!r}")
    command = frame.command
    problems: List[str] = []
    known = command in COMMANDS_BY_VERSION[version]
    if not known:
        if command in CLIENT_COMMANDS or command in SERVER_COMMANDS:
            problems.append(f"{command} does not exist in STOMP {version}")
        else:
            problems.append(f"unknown command {command!r}")
    elif sender == "client" and command in SERVER_COMMANDS:
        problems.append(f"a client must not send {command} frames")
    elif sender == "server" and command in CLIENT_COMMANDS:
        problems.append(f"a server must not send {command} frames")

    if known:
        for name in REQUIRED_HEADERS[version][command]:
            if frame.get(name) is None:
                problems.append(f"{command} requires header {name!r} in STOMP {version}")
        if version == "1.0" and command == "UNSUBSCRIBE" and frame.get("id") is None:
            if frame.get("destination") is None:
                problems.append("UNSUBSCRIBE requires header 'id' or 'destination' in STOMP 1.0")

    body = frame.body
    if body and command not in BODY_COMMANDS:
        problems.append(f"{command} frames must not have a body ({len(body)} bytes)")

    length_ok = True
    length = frame.get("content-length")
    if length is not None:
        if not _is_decimal(length):
            problems.append(f"content-length {length!r} is not a non-negative decimal integer")
            length_ok = False
        elif int(length) != len(body):
            problems.append(f"content-length {length} does not match the {len(body)}-byte body")
            length_ok = False

    if command == "SUBSCRIBE":
        ack = frame.get("ack")
        if ack is not None and ack not in ACK_MODES[version]:
            modes = ", ".join(sorted(ACK_MODES[version]))
            problems.append(f"SUBSCRIBE ack {ack!r} is not one of {modes} in STOMP {version}")

    if command in ("CONNECT", "STOMP", "CONNECTED") and version != "1.0":
        beat = frame.get("heart-beat")
        if beat is not None:
            try:
                parse_heartbeat(beat)
            except ValueError as exc:
                problems.append(str(exc))

    if length_ok:
        # encode() knows what the wire can carry; a bad content-length is reported above
        try:
            frame.encode(version)
        except EncodeError as exc:
            problems.append(f"cannot be written in STOMP {version}: {exc}")
    return problems


def validate(frame: Any, version: str = "1.2", sender: Optional[str] = None) -> Any:
    """Return ``frame`` if :func:`frame_problems` finds nothing, else raise :class:`ValidationError`."""
    problems = frame_problems(frame, version, sender)
    if problems:
        raise ValidationError(problems)
    return frame


# --------------------------------------------------------------------------- heart-beating

HeartbeatLike = Union[str, Tuple[int, int], None]


def parse_heartbeat(value: Optional[str]) -> Tuple[int, int]:
    """Parse a ``heart-beat`` header value ``"cx,cy"`` into ``(cx, cy)``.

    Spec "Heart-beating": the header holds two integers separated by a
    comma (0 = none), and a missing header is the same as ``0,0``, so
    ``None`` gives ``(0, 0)``. Strict: ASCII digits only, no spaces or
    signs; anything else raises ``ValueError``.
    """
    if value is None:
        return (0, 0)
    if not isinstance(value, str):
        raise TypeError(f"heart-beat value must be str or None, not {type(value).__name__}")
    parts = value.split(",")
    if len(parts) != 2 or not all(_is_decimal(part) for part in parts):
        raise ValueError(f"heart-beat {value!r} is not two non-negative integers 'cx,cy'")
    return (int(parts[0]), int(parts[1]))


def _heartbeat_pair(value: HeartbeatLike) -> Tuple[int, int]:
    if isinstance(value, tuple):
        if len(value) != 2 or not all(type(v) is int and v >= 0 for v in value):
            raise ValueError(f"heart-beat {value!r} is not two non-negative ints")
        return (value[0], value[1])
    return parse_heartbeat(value)


def negotiate_heartbeat(client_value: HeartbeatLike, server_value: HeartbeatLike) -> Tuple[int, int]:
    """The heart-beat intervals of a session: ``(client_to_server_ms, server_to_client_ms)``.

    ``client_value`` is CONNECT's ``heart-beat`` (``cx,cy``), ``server_value``
    CONNECTED's (``sx,sy``); each may be the header string, ``None`` (header
    absent, i.e. ``0,0``) or an already parsed pair. Spec "Heart-beating":
    client to server there are none if ``cx`` or ``sy`` is 0, otherwise one
    every ``max(cx, sy)`` ms; server to client likewise with ``sx`` and
    ``cy``. 0 in the result means no heart-beats in that direction.
    """
    cx, cy = _heartbeat_pair(client_value)
    sx, sy = _heartbeat_pair(server_value)
    client_to_server = 0 if cx == 0 or sy == 0 else max(cx, sy)
    server_to_client = 0 if sx == 0 or cy == 0 else max(sx, cy)
    return (client_to_server, server_to_client)


# --------------------------------------------------------------------------- versions


def _version_key(version: str) -> Tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        raise ValueError(f"supported version {version!r} is not dotted integers") from None


def negotiate_version(accept_version: Optional[str], supported: Iterable[str] = VERSIONS) -> Optional[str]:
    """The version a server picks from a CONNECT's ``accept-version``, or ``None``.

    Spec "Protocol Negotiation": the session uses the highest version both
    sides support; a missing header means the client supports only 1.0.
    ``accept-version`` is a comma-separated list; spaces around entries are
    ignored, and entries the server does not know (``2.0``) are skipped.
    ``None`` means no common version: the server should answer with an ERROR
    frame and close the connection.
    """
    wanted = {"1.0"} if accept_version is None else {v.strip() for v in accept_version.split(",")}
    common = [v for v in supported if v in wanted]
    return max(common, key=_version_key) if common else None


# --------------------------------------------------------------------------- bodies


def _content_type(value: str) -> Tuple[str, Dict[str, str]]:
    """Split ``type/subtype; name=value; ...`` into the lower-cased type and parameters.

    Parameter names are lower-cased; quoted values lose their quotes (and
    backslash escapes).
    """
    media, _, rest = value.partition(";")
    params: Dict[str, str] = {}
    while rest:
        name, eq, rest = rest.partition("=")
        name = name.strip().lower()
        rest = rest.lstrip()
        if rest.startswith('"'):
            chars = []
            i = 1
            while i < len(rest) and rest[i] != '"':
                if rest[i] == "\\" and i + 1 < len(rest):
                    i += 1
                chars.append(rest[i])
                i += 1
            param = "".join(chars)
            _, _, rest = rest[i + 1 :].partition(";")
        else:
            param, _, rest = rest.partition(";")
            param = param.strip()
        if eq and name and name not in params:
            params[name] = param
    return media.strip().lower(), params


def body_text(frame: Any, default_charset: Optional[str] = None) -> str:
    """Decode the body of ``frame`` to text following its ``content-type``.

    Spec "Header content-type": a ``charset`` parameter names the encoding
    (matched case-insensitively, quotes allowed: ``text/plain; CHARSET="utf-8"``);
    ``text/*`` types without one are UTF-8. Any other type without a charset,
    and a frame without content-type (the spec calls that a binary blob), is
    decoded with ``default_charset``; when that is ``None`` a ``ValueError``
    is raised. An unknown charset raises ``ValueError`` too, and bytes
    invalid in the charset raise ``UnicodeDecodeError`` (a ``ValueError``).
    """
    content_type = frame.get("content-type")
    charset: Optional[str] = None
    media = ""
    if content_type is not None:
        media, params = _content_type(content_type)
        charset = params.get("charset") or None
    if charset is None:
        if media.startswith("text/"):
            charset = "utf-8"
        elif default_charset is not None:
            charset = default_charset
        elif content_type is None:
            raise ValueError("the frame has no content-type and no default_charset was given")
        else:
            raise ValueError(f"content-type {content_type!r} names no charset and no default_charset was given")
    try:
        text: str = frame.body.decode(charset)
    except LookupError:  # unknown, or not a text encoding (base64)
        raise ValueError(f"unknown charset {charset!r}") from None
    return text
