"""Ctrl-C for the long-running commands (``fastframe broker``, ``fastframe record``): SIGINT and SIGTERM
set an event the command waits on, so it closes down inside its event loop (connections told, files
finished) instead of being cut by a KeyboardInterrupt. Standard library only."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Iterator, List

__all__ = ["stop_on_signals"]


@contextlib.contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[List[int]]:
    """Within the block, SIGINT (Ctrl-C) and SIGTERM set ``stop``; yields the signals handled (their numbers).

    The handlers are the running loop's own, in place as soon as the block starts (install them before
    printing the line a parent waits for): the disposition a process inherits is no guide (a background
    job of a non-interactive shell starts with SIGINT ignored, so Python's KeyboardInterrupt never
    comes). None are installed on Windows or off the main thread; they are removed when the block ends.
    """
    loop = asyncio.get_running_loop()
    handled: List[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):  # Windows; a thread other than the main one
            continue
        handled.append(sig)
    try:
        yield handled
    finally:
        for number in handled:
            loop.remove_signal_handler(number)
