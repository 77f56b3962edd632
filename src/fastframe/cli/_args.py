"""Argument types and options shared by the command groups of ``fastframe.cli``.

A leaf module: every command group imports it; it imports none of them, only argparse and the codec's
version list (and the size parser of ``fastframe.archive`` when a size is parsed).
"""

from __future__ import annotations

import argparse
from typing import Callable, Tuple

import fastframe


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an int of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    return parse


def port(text: str) -> int:
    """An argparse type: a TCP port, 0 (a free one) to 65535."""
    value = int_at_least(0)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {value}")
    return value


def key_value(text: str) -> Tuple[str, str]:
    """``KEY=VALUE`` (a reader option, a Spark setting) as a pair; the value may be empty or hold ``=``."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return name, value


def size(text: str) -> int:
    """An argparse type: bytes, written as ``4194304``, ``4m``, ``512KiB`` (binary units)."""
    from ..archive import parse_size  # on use: listing files is not every command's business

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_decoder_arguments(parser: argparse.ArgumentParser) -> None:
    """``--version``, ``--escapes``, ``--strict``: the decoder options of ``convert`` and ``index``."""
    parser.add_argument("--version", choices=fastframe.VERSIONS, default="1.2", help="STOMP version (default 1.2)")
    parser.add_argument("--escapes", choices=fastframe.VERSIONS, help="escape set (default: the version's)")
    parser.add_argument("--strict", action="store_true", help="refuse unknown commands and misplaced bodies")


def add_credential_arguments(parser: argparse.ArgumentParser) -> None:
    """``--redact-login`` and ``--keep-credentials``, for the commands that record connections."""
    keep = parser.add_mutually_exclusive_group()
    keep.add_argument(
        "--redact-login",
        action="store_true",
        help="replace the CONNECT's login too (its passcode is always replaced by <redacted>)",
    )
    keep.add_argument("--keep-credentials", action="store_true",
                      help="record CONNECT's login and passcode as sent (the archive then holds secrets)")  # fmt: skip


def redacted_headers(args: argparse.Namespace) -> Tuple[str, ...]:
    """The ``Archive(redact=...)`` the credential arguments ask for."""
    if args.keep_credentials:
        return ()
    return ("passcode", "login") if args.redact_login else ("passcode",)
