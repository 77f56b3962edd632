"""The codec: STOMP frames to bytes and back, in two twins with one behaviour.

The compiled twin (``_codec_c.pyx`` and the ``.pxi`` files it includes) is used when it was built,
unless ``FASTFRAME_NO_EXTENSIONS=1`` is set or the interpreter is not CPython; the pure-Python twin
(``_codec_py.py``) is the reference and the fallback. Both take their rules from the modules beside
them, written once: ``_constants`` (versions, commands, escape tables, limits), ``_errors``,
``_options`` (argument checks), ``_frames`` (header and body normalisation), ``_layout`` (columns)
and ``_diagnose`` (what is wrong with a head line). ``IMPLEMENTATION`` says which twin is active.

Everything here is re-exported by the package root (``fastframe.decode`` is
``fastframe.codec.decode``), except the few rules that only the layers above need:
``COMMANDS_BY_VERSION`` and ``ESCAPE`` (the specification's tables) and ``receive_size`` /
``received_size`` (the buffer-lending rules of ``Decoder.get_buffer`` and ``buffer_updated``, for a
layer that lends its own buffer), ``route_messages`` (the client connection's fast path from a
read's decoded frames to its subscriptions' queues, each message built by a ``SlotMaker``) and
``first_row_without`` (its check of a read decoded into columns).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from ._constants import (
    BODY_COMMANDS,
    CLIENT_COMMANDS,
    COMMANDS_BY_VERSION,
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_HEADER_COUNT,
    DEFAULT_MAX_LINE_LENGTH,
    ESCAPE,
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
from ._options import receive_size, received_size


def _extensions_disabled() -> bool:
    return os.environ.get("FASTFRAME_NO_EXTENSIONS", "") not in ("", "0") or sys.implementation.name != "cpython"


if TYPE_CHECKING:  # type checkers read the reference
    from ._codec_py import (
        IMPLEMENTATION,
        ColumnDecoder,
        Decoder,
        Encoder,
        Frame,
        Heartbeat,
        SlotMaker,
        decode,
        encode,
        first_row_without,
        route_messages,
        to_columns,
    )
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
    route_messages = _twin.route_messages
    first_row_without = _twin.first_row_without
    SlotMaker = _twin.SlotMaker
    del _twin

__all__ = [
    "BODY_COMMANDS",
    "CLIENT_COMMANDS",
    "COMMANDS_BY_VERSION",
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_MAX_HEADER_COUNT",
    "DEFAULT_MAX_LINE_LENGTH",
    "ESCAPE",
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
    "SlotMaker",
    "TruncatedError",
    "decode",
    "encode",
    "first_row_without",
    "receive_size",
    "received_size",
    "route_messages",
    "to_columns",
]
