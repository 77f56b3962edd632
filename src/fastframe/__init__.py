"""fastframe: a fast, exact STOMP 1.2 frame codec (with 1.0 and 1.1).

The codec lives in :mod:`fastframe.codec`; its API is re-exported here. The
compiled twin is used when it was built, unless ``FASTFRAME_NO_EXTENSIONS=1``
is set or the interpreter is not CPython; the pure-Python twin is the
reference and the fallback. ``fastframe.IMPLEMENTATION`` says which one is
active: ``"c"`` or ``"python"``.
"""

from __future__ import annotations

from .codec import (
    BODY_COMMANDS,
    CLIENT_COMMANDS,
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_HEADER_COUNT,
    DEFAULT_MAX_LINE_LENGTH,
    IMPLEMENTATION,
    SERVER_COMMANDS,
    VERSIONS,
    BodyNotAllowedError,
    ColumnDecoder,
    Columns,
    CommandError,
    ContentLengthError,
    DecodeError,
    Decoder,
    EncodeError,
    Encoder,
    Frame,
    FrameError,
    HeaderLineError,
    Heartbeat,
    InvalidEscapeError,
    LimitExceededError,
    MissingNullError,
    TruncatedError,
    decode,
    encode,
    to_columns,
)

__version__ = "0.1.0"

__all__ = [
    "BODY_COMMANDS",
    "CLIENT_COMMANDS",
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_MAX_HEADER_COUNT",
    "DEFAULT_MAX_LINE_LENGTH",
    "IMPLEMENTATION",
    "SERVER_COMMANDS",
    "VERSIONS",
    "BodyNotAllowedError",
    "ColumnDecoder",
    "Columns",
    "CommandError",
    "ContentLengthError",
    "DecodeError",
    "Decoder",
    "EncodeError",
    "Encoder",
    "Frame",
    "FrameError",
    "HeaderLineError",
    "Heartbeat",
    "InvalidEscapeError",
    "LimitExceededError",
    "MissingNullError",
    "TruncatedError",
    "decode",
    "encode",
    "to_columns",
]
