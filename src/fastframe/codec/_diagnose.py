"""What is wrong with a head line, and where: one definition for both twins.

The twins scan lines their own way, but when a line is not plainly clean both
ask these functions, so every error class, offset and message is the same.
A line may have several problems; the one at the lowest offset is reported
(on a tie, the one checked first below).
"""

from __future__ import annotations

from typing import FrozenSet, List, Optional, Tuple

from ._constants import MAX_CONTENT_LENGTH
from ._errors import (
    CommandError,
    ContentLengthError,
    HeaderLineError,
    InvalidEscapeError,
    LimitExceededError,
)

#: (index in the line, error class, reason, limit name)
Problem = Tuple[int, type, str, str]

# Reasons that are built outside this module, shared by both twins.
LINE_TOO_LONG = "line longer than {} bytes"
FRAME_TOO_LARGE = "frame larger than {} bytes"
BODY_TOO_LARGE = "body larger than {} bytes"
TOO_MANY_HEADERS = "more than {} headers"
BODY_NOT_ALLOWED = "{} frames cannot have a body"
MISSING_NULL = "no NUL after the {} body bytes of content-length"
TRUNCATED = "stream ended inside {} (started at offset {})"


def first_undefined_escape(field: bytes, letters: bytes) -> int:
    """Index of the first backslash in ``field`` that starts no defined escape, or -1."""
    i = field.find(b"\\")
    while i >= 0:
        if i + 1 < len(field) and field[i + 1] in letters:
            i = field.find(b"\\", i + 2)
        else:
            return i
    return -1


def command_problem(line: bytes, strict: bool, commands: FrozenSet[str], version: str) -> Optional[Problem]:
    """The first problem of a command line (without its EOL), or None."""
    problems: List[Tuple[int, str]] = []
    i = line.find(b"\0")
    if i >= 0:
        problems.append((i, "NUL byte in command"))
    i = line.find(b"\r")
    if i >= 0:
        problems.append((i, "CR in command"))
    try:
        command = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append((exc.start, "invalid UTF-8 in command"))
        command = ""
    if strict and not problems and command not in commands:
        problems.append((0, f"unknown command {command!r} in STOMP {version}"))
    if not problems:
        return None
    index, reason = min(problems, key=lambda p: p[0])
    return (index, CommandError, reason, "")


def header_problem(
    line: bytes,
    *,
    escape_letters: Optional[bytes],
    colon_ok: bool,
    bare_cr_ok: bool,
    missing_colon_ok: bool,
    content_length_max: int,
    invalid_utf8_ok: bool = False,
) -> Optional[Problem]:
    """The first problem of a header line (without its EOL), or None.

    ``escape_letters`` are the letters that may follow a backslash, or None
    when the line is not unescaped (STOMP 1.0, CONNECT/CONNECTED frames, or
    undefined escapes kept); ``colon_ok`` says whether ':' may appear in the
    value; ``content_length_max`` is -1 unless this line, if it is a
    content-length header, is the first one (then: max_body_size);
    ``invalid_utf8_ok`` says whether bytes that are not UTF-8 are kept
    (``keep_invalid_utf8``).
    """
    problems: List[Tuple[int, int, type, str, str]] = []

    def problem(index: int, cls: type, reason: str, limit: str = "") -> None:
        problems.append((index, len(problems), cls, reason, limit))

    i = line.find(b"\0")
    if i >= 0:
        problem(i, HeaderLineError, "NUL byte in header line")
    if not bare_cr_ok:
        i = line.find(b"\r")
        if i >= 0:
            problem(i, HeaderLineError, "CR in header line")
    if not invalid_utf8_ok:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            problem(exc.start, HeaderLineError, "invalid UTF-8 in header line")
    colon = line.find(b":")
    if colon < 0:
        if not missing_colon_ok:
            problem(0, HeaderLineError, "header line without ':'")
        name, value, value_at = line, b"", len(line)
    else:
        if colon == 0:
            problem(0, HeaderLineError, "empty header name")
        name, value, value_at = line[:colon], line[colon + 1 :], colon + 1
    if escape_letters is not None:
        i = first_undefined_escape(name, escape_letters)
        if i < 0:
            i = first_undefined_escape(value, escape_letters)
            if i >= 0:
                i += value_at
        if i >= 0:
            sequence = line[i : i + 2].decode("utf-8", "backslashreplace")
            problem(i, InvalidEscapeError, f"undefined escape sequence {sequence!r}")
    if not colon_ok:
        i = value.find(b":")
        if i >= 0:
            problem(value_at + i, HeaderLineError, "':' in header value")
    if content_length_max >= 0 and name == b"content-length":
        bad = next((k for k, byte in enumerate(value) if not 48 <= byte <= 57), -1)
        if not value:
            problem(value_at, ContentLengthError, "empty content-length")
        elif bad >= 0:
            problem(value_at + bad, ContentLengthError, "content-length is not a decimal number")
        elif len(value.lstrip(b"0")) > 19 or int(value) > MAX_CONTENT_LENGTH:  # no int() of huge strings
            problem(value_at, ContentLengthError, "content-length out of range")
        elif int(value) > content_length_max:
            problem(
                value_at,
                LimitExceededError,
                f"content-length above max_body_size ({content_length_max})",
                "max_body_size",
            )
    if not problems:
        return None
    index, _, cls, reason, limit = min(problems)
    return (index, cls, reason, limit)
