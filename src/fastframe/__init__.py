"""fastframe: a fast, exact STOMP 1.2 frame codec (with 1.0 and 1.1).

The compiled twin (``fastframe._codec_c``) is used when it was built, unless
``FASTFRAME_NO_EXTENSIONS=1`` is set or the interpreter is not CPython; the
pure-Python twin (``fastframe._codec_py``) is the reference and the fallback.
``fastframe.IMPLEMENTATION`` says which one is active: ``"c"`` or ``"python"``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from ._constants import (
    BODY_COMMANDS,
    CLIENT_COMMANDS,
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_HEADER_COUNT,
    DEFAULT_MAX_LINE_LENGTH,
    SERVER_COMMANDS,
    VERSIONS,
)
from ._errors import (
    BodyNotAllowedError,
    CommandError,
    ContentLengthError,
    DecodeError,
    EncodeError,
    FrameError,
    HeaderLineError,
    InvalidEscapeError,
    LimitExceededError,
    MissingNullError,
    TruncatedError,
)
from ._layout import Columns

__version__ = "0.1.0"


def _extensions_disabled() -> bool:
    return os.environ.get("FASTFRAME_NO_EXTENSIONS", "") not in ("", "0") or sys.implementation.name != "cpython"


if TYPE_CHECKING:  # type checkers read the reference
    from ._codec_py import IMPLEMENTATION, ColumnDecoder, Decoder, Encoder, Frame, Heartbeat, decode, encode, to_columns
else:
    _twin = None
    if not _extensions_disabled():
        try:
            from . import _codec_c as _twin
        except ImportError:  # not built (a source checkout, or a pure-Python install): the reference
            pass
    if _twin is None:  # imported only when it is the one in use (the compiled twin does not need it)
        from . import _codec_py as _twin
    IMPLEMENTATION = _twin.IMPLEMENTATION
    ColumnDecoder = _twin.ColumnDecoder
    Decoder = _twin.Decoder
    Encoder = _twin.Encoder
    Frame = _twin.Frame
    Heartbeat = _twin.Heartbeat
    decode = _twin.decode
    encode = _twin.encode
    to_columns = _twin.to_columns
    del _twin

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
