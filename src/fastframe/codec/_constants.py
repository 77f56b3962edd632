"""Protocol constants shared by both twins: versions, commands, escape tables, limits.

Everything the two implementations must agree on is written here once.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, Tuple

VERSIONS: Tuple[str, ...] = ("1.0", "1.1", "1.2")
DEFAULT_VERSION = "1.2"

CLIENT_COMMANDS: FrozenSet[str] = frozenset(
    {"SEND", "SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT", "ACK", "NACK", "DISCONNECT", "CONNECT", "STOMP"}
)
SERVER_COMMANDS: FrozenSet[str] = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})

#: Commands each version defines (1.0 has neither NACK nor STOMP).
COMMANDS_BY_VERSION: Dict[str, FrozenSet[str]] = {
    "1.0": (CLIENT_COMMANDS | SERVER_COMMANDS) - {"NACK", "STOMP"},
    "1.1": CLIENT_COMMANDS | SERVER_COMMANDS,
    "1.2": CLIENT_COMMANDS | SERVER_COMMANDS,
}

#: Only these frames may carry a body (spec, "Body").
BODY_COMMANDS: FrozenSet[str] = frozenset({"SEND", "MESSAGE", "ERROR"})

#: Headers of these frames are never escaped nor unescaped (spec, "Value
#: Encoding"; STOMP is CONNECT's 1.2 synonym and is treated the same, as
#: RabbitMQ and ActiveMQ do).
UNESCAPED_COMMANDS: FrozenSet[str] = frozenset({"CONNECT", "STOMP", "CONNECTED"})

#: Header names that seed the compiled twin's field cache, so every frame reuses one str object.
COMMON_HEADER_NAMES: Tuple[str, ...] = (
    "destination", "content-length", "content-type", "message-id", "subscription", "ack", "id",
    "receipt", "receipt-id", "transaction", "version", "heart-beat", "host", "login", "passcode",
    "accept-version", "server", "session", "message", "redelivered", "persistent", "priority",
    "expires", "timestamp", "reply-to",
)  # fmt: skip

#: Escape sequence letter -> decoded character, per escape set.
UNESCAPE: Dict[str, Dict[str, str]] = {
    "1.0": {},
    "1.1": {"n": "\n", "c": ":", "\\": "\\"},
    "1.2": {"r": "\r", "n": "\n", "c": ":", "\\": "\\"},
}
#: Character -> escape sequence, per escape set (the reverse of UNESCAPE).
ESCAPE: Dict[str, Dict[str, str]] = {
    version: {char: "\\" + letter for letter, char in table.items()} for version, table in UNESCAPE.items()
}

# Default limits. They follow ActiveMQ's defaults (1000 headers, 10 KiB header
# lines, 100 MiB bodies); the frame limit leaves room for a full head on top
# of the largest body.
DEFAULT_MAX_HEADER_COUNT = 1000
DEFAULT_MAX_LINE_LENGTH = 10 * 1024
DEFAULT_MAX_BODY_SIZE = 100 * 1024 * 1024
DEFAULT_MAX_FRAME_SIZE = DEFAULT_MAX_BODY_SIZE + 16 * 1024 * 1024

#: The buffer Decoder.get_buffer() lends (asyncio.BufferedProtocol): its size when the
#: transport gives no size hint, and the largest it lends whatever the hint.
RECEIVE_BUFFER_SIZE = 64 * 1024
MAX_RECEIVE_BUFFER_SIZE = 4 * 1024 * 1024

#: content-length values above this are malformed, whatever the limits say.
MAX_CONTENT_LENGTH = 2**63 - 1
