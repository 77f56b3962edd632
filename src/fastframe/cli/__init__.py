"""The ``fastframe`` command line: decode, generate and inspect STOMP streams; archives to Parquet with Spark.

Subcommands::

    fastframe decode FILE|-   list the frames of a stream (offset, command,
                              headers, body preview), then a summary line
    fastframe sample OUT      write a generated sample stream (OUT may be -)
    fastframe demo            generate a sample stream in a temporary
                              directory and decode it
    fastframe info            version and active implementation
    fastframe broker          run the in-memory broker
    fastframe convert ARCHIVE... --out DIR [--master URL]
                              STOMP archives to Parquet with Spark
    fastframe sample-archive DIR
                              write a seeded sample archive of captures
    fastframe index FILE...   write index sidecars (proven frame boundaries)
                              so Spark can split big files
    fastframe stream DESTINATION... --out DIR
                              a broker's messages to Parquet with Spark
                              Structured Streaming (checkpointed, resumable)
    fastframe record --upstream HOST:PORT --out DIR
                              a recording proxy: every byte forwarded and
                              recorded into an archive
    fastframe replay FILE --to HOST:PORT
                              send a recorded client stream, print the answers

One module per group of commands, each adding its subparsers and returning
their handlers: ``_codec`` (decode, sample, demo, info, broker), ``_archive``
(sample-archive, index: the codec and the standard library only),
``_spark`` (convert) and ``_stream`` (stream; PySpark is imported only when they run), ``_capture``
(record, replay: asyncio and the standard library). ``_args`` holds
the argument types they share. Nothing outside this package imports it
(``fastframe.spark`` never does); ``python -m fastframe`` and the
``fastframe`` script run :func:`main`.

Decode errors print ``FILE:OFFSET: message`` on stderr and exit with status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Dict, Optional, Sequence, Tuple

from . import _archive, _capture, _codec, _spark, _stream

__all__ = ["main"]

_Handlers = Dict[str, Callable[[argparse.Namespace], int]]


def _parser_and_handlers() -> Tuple[argparse.ArgumentParser, _Handlers]:
    parser = argparse.ArgumentParser(
        prog="fastframe", description="Decode, generate and inspect STOMP 1.0/1.1/1.2 frame streams."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    handlers: _Handlers = {}
    for group in (_codec, _spark, _stream, _archive, _capture):  # the order of the commands in --help
        handlers.update(group.add_commands(commands))
    return parser, handlers


def _build_parser() -> argparse.ArgumentParser:
    return _parser_and_handlers()[0]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser, handlers = _parser_and_handlers()
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):
        # header values are any Unicode: never die on a console that cannot show them
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        return handlers[args.command](args)
    except BrokenPipeError:
        # the reader went away (| head): stop quietly, and keep Python from
        # complaining again when it flushes stdout at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
