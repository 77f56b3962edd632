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

Decode errors print ``FILE:OFFSET: message`` on stderr and exit with status 1. Every other failure
is one line too (``fastframe COMMAND: what went wrong``) and a non-zero status; ``--debug`` shows the
traceback instead. Each subcommand's ``--help`` ends with examples.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import fastframe

from . import _archive, _capture, _codec, _spark, _stream

__all__ = ["main"]

_Handlers = Dict[str, Callable[[argparse.Namespace], int]]

#: What ``fastframe COMMAND --help`` ends with: a few lines a newcomer can run.
_EXAMPLES = {
    "decode": "fastframe decode capture.stomp\nfastframe sample - | fastframe decode -\n"
    "fastframe decode capture.stomp --version 1.0 --escapes 1.2   # RabbitMQ's 1.0 sessions",
    "sample": "fastframe sample out.stomp --frames 1000\nfastframe sample - --crlf | fastframe decode -",
    "demo": "fastframe demo --frames 20",
    "info": "fastframe info",
    "broker": "fastframe broker --port 61613\nfastframe broker --port 61613 --user guest:guest --ws-port 15674\n"
    "fastframe broker --port 0 --record captures/   # a free port; every connection recorded",
    "convert": "fastframe sample-archive archive/ && fastframe convert archive/ --out parquet/",
    "sample-archive": "fastframe sample-archive archive/ --connections 4 --frames 500",
    "index": "fastframe index archive/*/*/*.stomp",
    "stream": "fastframe stream /queue/orders --out parquet/ --checkpoint ckpt/ --available-now",
    "record": "fastframe record --listen 127.0.0.1:61650 --upstream 127.0.0.1:61613 --out captures/",
    "replay": "fastframe replay captures/127.0.0.1_61613/2026-11-26/conn-0001.c2s.stomp --to 127.0.0.1:61613",
}


def _parser_and_handlers() -> Tuple[argparse.ArgumentParser, _Handlers, Dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="fastframe", description="Decode, generate and inspect STOMP 1.0/1.1/1.2 frame streams."
    )
    parser.add_argument(
        "--version", action="version", version=f"fastframe {fastframe.__version__} ({fastframe.IMPLEMENTATION})"
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure (one line without)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_parser = commands.add_parser

    def add_described(name: str, **options: Any) -> argparse.ArgumentParser:
        # every command's --help: its one-line help as the description, then examples
        options.setdefault("description", options.get("help"))
        if name in _EXAMPLES:
            options["epilog"] = "examples:\n" + "\n".join(f"  {line}" for line in _EXAMPLES[name].split("\n"))
            options["formatter_class"] = argparse.RawDescriptionHelpFormatter
        return add_parser(name, **options)

    commands.add_parser = add_described  # type: ignore[method-assign]
    handlers: _Handlers = {}
    for group in (_codec, _spark, _stream, _archive, _capture):  # the order of the commands in --help
        handlers.update(group.add_commands(commands))
    return parser, handlers, commands.choices


def _build_parser() -> argparse.ArgumentParser:
    return _parser_and_handlers()[0]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser, handlers, subparsers = _parser_and_handlers()
    args, extra = parser.parse_known_args(argv)
    if extra:  # the command's own usage, not the top level's, names what it did not know
        subparsers[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
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
    except KeyboardInterrupt:
        print(f"fastframe {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every failure a command did not word itself: one line, unless --debug
        if args.debug:
            raise
        print(f"fastframe {args.command}: {_one_line(exc)} (--debug shows the traceback)", file=sys.stderr)
        return 1


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, OSError) else f"{type(exc).__name__}: {text}"
