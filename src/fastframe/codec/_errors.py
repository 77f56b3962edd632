"""Exception types shared by both twins.

Every error the codec raises is a :class:`FrameError` (a ``ValueError``).
Decoding errors carry the absolute stream offset of the offending byte, a
machine-readable ``code`` and a short excerpt of the bytes around it; the
message is built here, once, so the compiled twin and the Python twin say
exactly the same thing.
"""

from __future__ import annotations

from typing import Any, List

__all__ = [
    "FrameError",
    "DecodeError",
    "InvalidEscapeError",
    "HeaderLineError",
    "ContentLengthError",
    "MissingNullError",
    "LimitExceededError",
    "CommandError",
    "BodyNotAllowedError",
    "TruncatedError",
    "EncodeError",
    "make_decode_error",
    "REENTRANT_CALL",
    "NOT_BYTES",
    "NOT_CONTIGUOUS",
    "NOTHING_LENT",
    "BAD_NBYTES",
    "NOT_AN_INT",
]

EXCERPT_RADIUS = 16

#: A decoder entered while a call on it is still running (another thread
#: without a lock, or a finalizer run in the middle of a call). Like CPython's
#: buffered I/O, it raises instead of touching its buffer: RuntimeError.
REENTRANT_CALL = (
    "{}.{}() called while another call on the same decoder is running (use one decoder per connection, or a lock)"
)
#: feed() of something that is not a buffer (TypeError).
NOT_BYTES = "data must be a bytes-like object (bytes, bytearray, memoryview), not {}"
#: feed() of a buffer whose bytes are not in one C-contiguous block (BufferError).
NOT_CONTIGUOUS = "data must be a C-contiguous buffer; copy it first with bytes(data)"
#: buffer_updated() with no buffer lent by get_buffer() since the last buffer_updated() (RuntimeError).
NOTHING_LENT = "buffer_updated() called without a buffer from get_buffer()"
#: buffer_updated(nbytes) with more bytes than the buffer lent holds (ValueError).
BAD_NBYTES = "nbytes must be from 0 to {} (the size of the buffer get_buffer() returned), not {}"
#: sizehint or nbytes that is not an int (TypeError).
NOT_AN_INT = "{} must be an int, not {}"


class FrameError(ValueError):
    """Base class of the errors about frames: the codec's, the specification checks' and the
    protocol's (a dropped connection is a ``ConnectionError`` instead)."""


class DecodeError(FrameError):
    """Malformed input.

    Attributes:
        offset: absolute offset, in the whole stream fed to the decoder, of
            the first offending byte (for limits: the first byte past the limit).
        code: a short machine-readable category, e.g. ``"invalid-escape"``.
        reason: the human-readable reason, without offset or excerpt.
        excerpt: up to 16 bytes either side of ``offset`` from the frame being
            decoded (only bytes already received).
        frames: the frames (and heart-beat events, when enabled) completed by
            the same ``feed()`` call before the error. Nothing is lost: process
            them, then discard the connection or ``reset()`` the decoder.
    """

    code = "decode-error"

    def __init__(self, reason: str, offset: int, excerpt: bytes = b"") -> None:
        self.reason = reason
        self.offset = offset
        self.excerpt = excerpt
        self.frames: List[Any] = []
        super().__init__(f"{reason} at offset {offset} (near {excerpt!r})")

    def __reduce__(self) -> Any:
        return (type(self), (self.reason, self.offset, self.excerpt))


class InvalidEscapeError(DecodeError):
    """An undefined escape sequence (``\\t``, a trailing backslash, ...)."""

    code = "invalid-escape"


class HeaderLineError(DecodeError):
    """A header line that is not ``name:value`` (no colon, empty name, NUL, bare CR,
    a colon in the value under strict rules, invalid UTF-8)."""

    code = "bad-header-line"


class ContentLengthError(DecodeError):
    """A content-length that is not a plain non-negative decimal integer."""

    code = "bad-content-length"


class MissingNullError(DecodeError):
    """The byte after the content-length octets of the body is not NUL."""

    code = "missing-null"


class LimitExceededError(DecodeError):
    """A configured limit was exceeded; ``limit`` names it."""

    code = "limit-exceeded"

    def __init__(self, reason: str, offset: int, excerpt: bytes = b"", limit: str = "") -> None:
        super().__init__(reason, offset, excerpt)
        self.limit = limit

    def __reduce__(self) -> Any:
        return (type(self), (self.reason, self.offset, self.excerpt, self.limit))


class CommandError(DecodeError):
    """A malformed command line, or (strict mode) a command the version does not define."""

    code = "bad-command"


class BodyNotAllowedError(DecodeError):
    """(strict mode) A body on a frame whose command may not carry one."""

    code = "body-not-allowed"


class TruncatedError(DecodeError):
    """The stream ended inside a frame (raised by ``close()``)."""

    code = "truncated"


class EncodeError(FrameError):
    """A frame that cannot be represented on the wire with the chosen options."""

    code = "encode-error"


def make_decode_error(
    cls: type, reason: str, offset: int, buf: Any, buf_base: int, floor: int, end: int, limit: str = ""
) -> DecodeError:
    """Build a decode error with its excerpt.

    ``buf`` holds stream bytes starting at absolute offset ``buf_base``;
    the excerpt is cut from ``[max(offset-16, floor), min(offset+16, end))``
    (absolute offsets), where ``floor`` is the start of the frame being
    decoded, so both twins show the same bytes.
    """
    lo = max(offset - EXCERPT_RADIUS, floor)
    hi = min(offset + EXCERPT_RADIUS, end)
    excerpt = bytes(buf[lo - buf_base : hi - buf_base]) if hi > lo else b""
    if cls is LimitExceededError:
        return LimitExceededError(reason, offset, excerpt, limit)
    err: DecodeError = cls(reason, offset, excerpt)
    return err
