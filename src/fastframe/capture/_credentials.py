"""Credentials out of captures: the values of ``passcode`` (and ``login``) in CONNECT and STOMP frames.

A recorder's client-to-server direction passes through :class:`Redactor` before its decoder sees it,
so the files, their ``.ffidx`` checkpoints and their ``.fftimes`` offsets all describe the redacted
bytes. A CONNECT is the first frame of a connection, so it starts the first read a server or a proxy
records; a client's ``wire_hook`` sees each frame it writes on its own, so the CONNECT of a reconnect
through the same recorder starts a read too. A CONNECT is looked for where a read starts at a frame
boundary (not inside a read: one there would be a protocol error, which servers refuse). Its header
block is held until it is complete (at most ``limit`` bytes; past that the recording is dropped rather
than a secret written).
:func:`restore` is the way back for a replay: it puts credentials where the marker stands.
"""

from __future__ import annotations

from typing import Mapping, Optional, Tuple

#: What a redacted header value is replaced with.
REDACTED = "<redacted>"
_MARKER = REDACTED.encode()
_COMMANDS = (b"CONNECT", b"STOMP")
_LONGEST = max(len(c) for c in _COMMANDS) + 2  # a command, then CR LF


class CredentialsTooLong(Exception):
    """A CONNECT's header block grew past the redactor's limit before it ended."""


def _skip_eols(data: bytes) -> int:
    at = 0
    while at < len(data):
        if data[at] == 0x0A:
            at += 1
        elif data[at] == 0x0D and data[at + 1 : at + 2] == b"\n":
            at += 2
        else:
            break
    return at


def _connect_at(data: bytes, at: int) -> Optional[bool]:
    """Whether a CONNECT or STOMP command line starts at ``at`` (None: too few bytes to say)."""
    head = data[at : at + _LONGEST]
    for command in _COMMANDS:
        for line in (command + b"\n", command + b"\r\n"):
            if head.startswith(line):
                return True
            if line.startswith(head):
                return None
    return False


def _rewrite(block: bytes, values: Mapping[bytes, bytes], only_marked: bool) -> bytes:
    """The header lines of ``block`` with the named headers' values replaced."""
    lines = block.split(b"\n")
    for k, line in enumerate(lines):
        name, colon, value = line.partition(b":")
        if colon and name in values:
            cr = b"\r" if value.endswith(b"\r") else b""
            if not only_marked or value[: len(value) - len(cr)] == _MARKER:
                lines[k] = name + b":" + values[name] + cr
    return b"\n".join(lines)


def _header_end(data: bytes, at: int) -> int:
    """Where the header block of the frame at ``at`` ends (the blank line's end), or -1."""
    lf = data.find(b"\n\n", at)
    crlf = data.find(b"\n\r\n", at)
    ends = [end + 2 for end in (lf,) if end >= 0] + [end + 3 for end in (crlf,) if end >= 0]
    return min(ends) if ends else -1


class Redactor:
    """Replaces credential values in the CONNECT/STOMP frames of a client's stream, read in pieces.

    :meth:`feed` takes each piece with whether it starts at a frame boundary and returns what may be
    written (``b""`` while a CONNECT's header block is incomplete).
    """

    def __init__(self, names: Tuple[str, ...] = ("passcode",), limit: int = 1 << 20) -> None:
        self._values = {name.encode(): _MARKER for name in names}
        self._limit = limit
        self._held = b""

    def feed(self, data: bytes, at_boundary: bool) -> bytes:
        if self._held:
            data, self._held = self._held + data, b""
        elif not at_boundary:
            return data
        start = _skip_eols(data)
        if start == len(data) or (data[start] == 0x0D and start + 1 == len(data)):
            return self._hold(data) if data[start:] else data
        found = _connect_at(data, start)
        if found is None:
            return self._hold(data)
        if not found:
            return data
        end = _header_end(data, start)
        if end < 0:
            return self._hold(data)
        return _rewrite(data[:end], self._values, only_marked=False) + data[end:]

    def _hold(self, data: bytes) -> bytes:
        if len(data) > self._limit:
            raise CredentialsTooLong(f"a CONNECT's headers ran past {self._limit} bytes")
        self._held = data
        return b""

    def close(self) -> bytes:
        """What is still held (the stream ended inside a CONNECT's headers), redacted."""
        data, self._held = self._held, b""
        return _rewrite(data, self._values, only_marked=False) if data else b""


def restore(data: bytes, credentials: Mapping[str, str]) -> bytes:
    """``data`` (a recorded client stream) with the redacted values of its first frame, if a CONNECT or
    STOMP, replaced by ``credentials`` (header name -> value); anything else is returned unchanged."""
    start = _skip_eols(data)
    end = _header_end(data, start)
    if not credentials or end < 0 or not _connect_at(data, start):
        return data
    values = {name.encode(): value.encode() for name, value in credentials.items()}
    return _rewrite(data[:end], values, only_marked=True) + data[end:]


def was_redacted(data: bytes) -> bool:
    """Whether the first frame of ``data`` is a CONNECT or STOMP with a redacted value."""
    start = _skip_eols(data)
    end = _header_end(data, start)
    return end >= 0 and bool(_connect_at(data, start)) and (b":" + _MARKER) in data[start:end]
