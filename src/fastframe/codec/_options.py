"""Option checking shared by both twins, so both accept and refuse the same options."""

from __future__ import annotations

from typing import NamedTuple, Optional

from ._constants import (
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_HEADER_COUNT,
    DEFAULT_MAX_LINE_LENGTH,
    MAX_RECEIVE_BUFFER_SIZE,
    RECEIVE_BUFFER_SIZE,
    VERSIONS,
)
from ._errors import BAD_NBYTES, NOT_AN_INT, NOTHING_LENT


class DecoderOptions(NamedTuple):
    version: str
    strict: bool
    escapes: str  # the escape set applied when unescaping
    allow_colon_in_value: bool
    allow_bare_cr: bool
    allow_missing_colon: bool
    keep_undefined_escapes: bool
    keep_invalid_utf8: bool  # header bytes that are not UTF-8 become surrogates (surrogateescape)
    max_header_count: int
    max_line_length: int
    max_body_size: int
    max_frame_size: int
    heartbeat_events: bool


class EncoderOptions(NamedTuple):
    version: str
    escapes: str
    content_length: Optional[bool]
    eol: str


def _check_version(name: str, value: object) -> str:
    if value not in VERSIONS:
        raise ValueError(f"{name} must be one of {', '.join(VERSIONS)}, not {value!r}")
    return str(value)


#: Limits stay far from overflowing the compiled twin's 64-bit offsets.
MAX_LIMIT = 2**62


def _check_limit(name: str, value: object, minimum: int) -> int:
    if type(value) is not int or not minimum <= value <= MAX_LIMIT:
        raise ValueError(f"{name} must be an int from {minimum} to 2**62, not {value!r}")
    return value


def _check_flag(name: str, value: object) -> bool:
    if type(value) is not bool:
        raise TypeError(f"{name} must be True or False, not {value!r}")
    return value


def decoder_options(
    version: str = "1.2",
    *,
    strict: bool = False,
    escapes: Optional[str] = None,
    allow_colon_in_value: Optional[bool] = None,
    allow_bare_cr: Optional[bool] = None,
    allow_missing_colon: bool = False,
    keep_undefined_escapes: bool = False,
    keep_invalid_utf8: bool = False,
    max_header_count: int = DEFAULT_MAX_HEADER_COUNT,
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    heartbeat_events: bool = False,
) -> DecoderOptions:
    """Check and normalise the keyword arguments of ``Decoder``/``decode``."""
    version = _check_version("version", version)
    strict = _check_flag("strict", strict)
    lenient = not strict
    return DecoderOptions(
        version=version,
        strict=strict,
        escapes=version if escapes is None else _check_version("escapes", escapes),
        allow_colon_in_value=lenient
        if allow_colon_in_value is None
        else _check_flag("allow_colon_in_value", allow_colon_in_value),
        allow_bare_cr=lenient if allow_bare_cr is None else _check_flag("allow_bare_cr", allow_bare_cr),
        allow_missing_colon=_check_flag("allow_missing_colon", allow_missing_colon),
        keep_undefined_escapes=_check_flag("keep_undefined_escapes", keep_undefined_escapes),
        keep_invalid_utf8=_check_flag("keep_invalid_utf8", keep_invalid_utf8),
        max_header_count=_check_limit("max_header_count", max_header_count, 0),
        max_line_length=_check_limit("max_line_length", max_line_length, 1),
        max_body_size=_check_limit("max_body_size", max_body_size, 0),
        max_frame_size=_check_limit("max_frame_size", max_frame_size, 2),
        heartbeat_events=_check_flag("heartbeat_events", heartbeat_events),
    )


def receive_size(sizehint: object) -> int:
    """The size of the buffer ``get_buffer(sizehint)`` lends (asyncio passes -1: any size)."""
    if type(sizehint) is not int:
        raise TypeError(NOT_AN_INT.format("sizehint", type(sizehint).__name__))
    return RECEIVE_BUFFER_SIZE if sizehint <= 0 else min(sizehint, MAX_RECEIVE_BUFFER_SIZE)


def received_size(nbytes: object, lent: int) -> int:
    """Check ``buffer_updated(nbytes)`` against the size of the buffer lent (-1: none is lent)."""
    if type(nbytes) is not int:
        raise TypeError(NOT_AN_INT.format("nbytes", type(nbytes).__name__))
    if lent < 0:
        raise RuntimeError(NOTHING_LENT)
    if not 0 <= nbytes <= lent:
        raise ValueError(BAD_NBYTES.format(lent, nbytes))
    return nbytes


def encoder_options(
    version: str = "1.2",
    *,
    escapes: Optional[str] = None,
    content_length: Optional[bool] = None,
    eol: str = "\n",
) -> EncoderOptions:
    """Check and normalise the keyword arguments of ``Encoder``/``encode``."""
    version = _check_version("version", version)
    if content_length is not None:
        _check_flag("content_length", content_length)
    if eol not in ("\n", "\r\n"):
        raise ValueError(f"eol must be '\\n' or '\\r\\n', not {eol!r}")
    return EncoderOptions(
        version=version,
        escapes=version if escapes is None else _check_version("escapes", escapes),
        content_length=content_length,
        eol=eol,
    )
