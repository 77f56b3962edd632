"""The codec's commands: ``decode``, ``sample``, ``demo``, ``info``, and ``broker`` (the in-memory broker).

Only the public API is used, so the active twin (``fastframe.IMPLEMENTATION``) does the work; asyncio and
the broker load only when ``broker`` runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from collections import Counter
from typing import IO, Any, Callable, Dict, List, Tuple

import fastframe

from . import _args
from ._args import int_at_least

_READ_SIZE = 1 << 20  # without --chunk, files are fed in 1 MiB pieces
_TEXT_PREVIEW = 60
_BYTES_PREVIEW = 48
_DEMO_CHUNK = 512


_positive_int = int_at_least(1)
_count = int_at_least(0)


def _destination(text: str) -> str:
    if not text.startswith(("/queue/", "/topic/")) or len(text) < 8:
        raise argparse.ArgumentTypeError(f"expected /queue/NAME or /topic/NAME, not {text!r}")
    return text


def add_commands(commands: Any) -> Dict[str, Callable[[argparse.Namespace], int]]:
    """Add the codec's commands to an argparse subparsers object; return their handlers by name."""
    dec = commands.add_parser("decode", help="decode a frame stream and list its frames")
    dec.add_argument("file", metavar="FILE", help="the stream to decode, or - for standard input")
    dec.add_argument("--version", choices=fastframe.VERSIONS, default="1.2", help="STOMP version (default 1.2)")
    dec.add_argument(
        "--escapes",
        choices=fastframe.VERSIONS,
        default=None,
        help="escape set for header unescaping (default: the version's; 1.2 for RabbitMQ on any version)",
    )
    dec.add_argument("--strict", action="store_true", help="refuse unknown commands, bodies where none is allowed, "
                     "raw ':' in values and bare CR")  # fmt: skip
    dec.add_argument(
        "--allow-missing-colon", action="store_true", help="accept header lines without ':' (ActiveMQ 1.0)"
    )
    dec.add_argument(
        "--keep-undefined-escapes", action="store_true", help="keep undefined escapes such as \\t literally (ActiveMQ)"
    )
    dec.add_argument("--chunk", type=_positive_int, metavar="N", help="feed the decoder N bytes at a time")
    dec.add_argument("--heartbeats", action="store_true", help="list heart-beat EOLs as well")
    dec.add_argument("--summary", action="store_true", help="print only the summary line, not each frame")

    smp = commands.add_parser("sample", help="write a generated sample stream")
    smp.add_argument("out", metavar="OUT", help="output file, or - for standard output")
    smp.add_argument("--frames", type=_count, default=100, metavar="N", help="number of frames (default 100)")
    smp.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    smp.add_argument("--crlf", action="store_true", help="end lines with CRLF instead of LF")

    demo = commands.add_parser("demo", help="generate a sample stream in a temporary directory and decode it")
    demo.add_argument("--frames", type=_count, default=8, metavar="N", help="number of frames (default 8)")
    demo.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    demo.add_argument("--crlf", action="store_true", help="end lines with CRLF instead of LF")

    commands.add_parser("info", help="print the version and the active implementation")
    brk = commands.add_parser("broker", help="run the in-memory broker (tests, development, demos; no persistence)")
    brk.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    brk.add_argument("--port", type=_args.port, default=61613, help="port to listen on (default 61613; 0: a free one)")
    brk.add_argument("--ws-port", type=_args.port, default=None, metavar="W",
                     help="serve STOMP over WebSocket too, at ws://HOST:W/ws (0: a free port; the ws extra)")  # fmt: skip
    brk.add_argument("--user", action="append", type=_login_passcode, metavar="LOGIN:PASSCODE",
                     help="accept only these logins (repeat)")  # fmt: skip
    brk.add_argument(
        "--heartbeat", type=_heartbeat_pair, default=(10_000, 10_000), metavar="SX,SY",
        help="the heart-beat header of CONNECTED, in ms: can send every SX, wants one every SY (default 10000,10000)",
    )  # fmt: skip
    brk.add_argument("--record", metavar="DIR", help="record every connection into an archive in DIR "
                     "(DIR/fastframe-broker/DATE/conn-NNNN.c2s.stomp and .s2c.stomp, see fastframe record)")  # fmt: skip
    brk.add_argument(
        "--max-stored-bytes",
        type=_args.size,
        default=None,
        metavar="SIZE",
        help="bytes of messages held for queues without consumers and in transactions (default 64m)",
    )
    brk.add_argument("--max-transaction-bytes", type=_args.size, default=None, metavar="SIZE",
                     help="bytes one connection may hold in open transactions (default 16m)")  # fmt: skip
    brk.add_argument("--dead-letter", type=_destination, default=None, metavar="DEST",
                     help="where a queue's dead letters go, e.g. /queue/ActiveMQ.DLQ (default: dropped)")  # fmt: skip
    brk.add_argument("--max-redeliveries", type=_count, default=None, metavar="N",
                     help="redeliveries of a NACKed or unacknowledged message before it is dead-lettered "
                     "(default: without end, as RabbitMQ's classic queues and ActiveMQ)")  # fmt: skip
    brk.add_argument("--no-requeue-on-nack", dest="requeue_on_nack", action="store_false",
                     help="a NACK dead-letters the message at once, as ActiveMQ (default: redelivered, as RabbitMQ)")  # fmt: skip
    _args.add_credential_arguments(brk)
    return {"decode": _cmd_decode, "sample": _cmd_sample, "demo": _cmd_demo, "info": _cmd_info, "broker": _cmd_broker}


# --------------------------------------------------------------------------- listing


def _show(text: str) -> str:
    """Header text as it reads best: unchanged when printable, else as a quoted repr."""
    return text if text.isprintable() else repr(text)


def _preview(frame: Any) -> str:
    body = frame.body
    if not body:
        return "body: 0 bytes"
    from ..protocol import spec  # (imported on use: `fastframe` starts without the protocol)

    try:
        text = spec.body_text(frame, default_charset="utf-8")
    except ValueError:  # binary: not decodable with its (or the default) charset
        shown = repr(body[:_BYTES_PREVIEW])
        more = "..." if len(body) > _BYTES_PREVIEW else ""
    else:
        shown = repr(text[:_TEXT_PREVIEW])
        more = "..." if len(text) > _TEXT_PREVIEW else ""
    return f"body: {len(body)} bytes {shown}{more}"


class _Listing:
    """Prints frames as they are decoded and keeps the totals for the summary."""

    def __init__(self, out: IO[str], quiet: bool) -> None:
        self.out = out
        self.quiet = quiet
        self.commands: Counter[str] = Counter()
        self.body_bytes = 0

    def show(self, items: List[Any]) -> None:
        for item in items:
            if isinstance(item, fastframe.Heartbeat):
                if not self.quiet:
                    print(f"@{item.offset} heart-beat {item.eol!r}", file=self.out)
                continue
            self.commands[item.command] += 1
            self.body_bytes += len(item.body)
            if self.quiet:
                continue
            lines = [f"#{sum(self.commands.values())} @{item.offset} {_show(item.command)}"]
            lines += [f"  {_show(name)}: {_show(value)}" for name, value in item.headers]
            lines.append("  " + _preview(item))
            print("\n".join(lines), file=self.out)

    def summary(self, heartbeats: int, size: int) -> str:
        frames = sum(self.commands.values())
        kinds = ", ".join(f"{command} {n}" for command, n in sorted(self.commands.items()))
        return (
            f"summary: {frames} frames ({kinds or 'none'}), {heartbeats} heart-beats, "
            f"{size} bytes ({self.body_bytes} in bodies)"
        )


def _decode_stream(stream: IO[bytes], name: str, chunk: int, decoder: Any, listing: _Listing) -> int:
    """Feed ``stream`` to ``decoder`` in ``chunk``-byte pieces; 0, or 1 after a decode error."""
    try:
        while True:
            data = stream.read(chunk)
            if not data:
                break
            listing.show(decoder.feed(data))
        decoder.close()
    except fastframe.DecodeError as err:
        listing.show(err.frames)  # what the failing feed() completed is still valid
        print(f"{name}:{err.offset}: {err.reason} (near {err.excerpt!r})", file=sys.stderr)
        return 1
    print(listing.summary(decoder.heartbeats, decoder.bytes_fed), file=listing.out)
    return 0


def _cmd_decode(args: argparse.Namespace) -> int:
    decoder = fastframe.Decoder(
        args.version,
        strict=args.strict,
        escapes=args.escapes,
        allow_missing_colon=args.allow_missing_colon,
        keep_undefined_escapes=args.keep_undefined_escapes,
        heartbeat_events=args.heartbeats,
    )
    listing = _Listing(sys.stdout, quiet=args.summary)
    chunk = args.chunk or _READ_SIZE
    if args.file == "-":
        return _decode_stream(sys.stdin.buffer, "<stdin>", chunk, decoder, listing)
    try:
        stream = open(args.file, "rb")
    except OSError as exc:
        print(f"{args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    with stream:
        return _decode_stream(stream, args.file, chunk, decoder, listing)


def _cmd_sample(args: argparse.Namespace) -> int:
    from ..archive import generate_stream  # (imported on use, as every command's needs)

    data = generate_stream(args.frames, seed=args.seed, crlf=args.crlf)
    if args.out == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    try:
        with open(args.out, "wb") as out:
            out.write(data)
    except OSError as exc:
        print(f"{args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.frames} frames ({len(data)} bytes, seed {args.seed}) to {args.out}")
    return 0


def _implementation_line() -> str:
    twin = "the compiled Cython twin" if fastframe.IMPLEMENTATION == "c" else "the pure-Python twin"
    return f"implementation: {fastframe.IMPLEMENTATION} ({twin})"


def _cmd_demo(args: argparse.Namespace) -> int:
    print(f"fastframe {fastframe.__version__} demo, {_implementation_line()}")
    from ..archive import generate_stream

    data = generate_stream(args.frames, seed=args.seed, crlf=args.crlf)
    with tempfile.TemporaryDirectory(prefix="fastframe-demo-") as tmp:
        path = os.path.join(tmp, "sample.stomp")
        with open(path, "wb") as out:
            out.write(data)
        print(f"generated {args.frames} frames ({len(data)} bytes, seed {args.seed}) in {path}")
        print(f"decoding it in {_DEMO_CHUNK}-byte pieces:")
        with open(path, "rb") as stream:
            return _decode_stream(stream, path, _DEMO_CHUNK, fastframe.Decoder("1.2"), _Listing(sys.stdout, False))


def _cmd_info(args: argparse.Namespace) -> int:
    print(f"fastframe {fastframe.__version__}")
    print(_implementation_line())
    print(f"python: {platform.python_version()} ({platform.python_implementation()})")
    print(f"STOMP versions: {', '.join(fastframe.VERSIONS)}")
    return 0


def _heartbeat_pair(text: str) -> Tuple[int, int]:
    from ..protocol import spec

    try:
        return spec.parse_heartbeat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _login_passcode(text: str) -> Tuple[str, str]:
    login, colon, passcode = text.partition(":")
    if not colon or not login:
        raise argparse.ArgumentTypeError(f"not LOGIN:PASSCODE: {text!r}")
    return login, passcode


def _cmd_broker(args: argparse.Namespace) -> int:
    import asyncio

    from ..server import run_broker  # asyncio and the broker load only for this command

    users = dict(args.user) if args.user else None
    options: Dict[str, Any] = {}
    if args.ws_port is not None:
        options["ws_port"] = args.ws_port
    for limit in ("max_stored_bytes", "max_transaction_bytes", "dead_letter", "max_redeliveries"):
        if getattr(args, limit) is not None:
            options[limit] = getattr(args, limit)
    if not args.requeue_on_nack:
        options["requeue_on_nack"] = False
    archive = None
    if args.record:
        from ..capture import Archive

        archive = Archive(args.record, "fastframe-broker", redact=_args.redacted_headers(args))
        options["wire_hook"] = archive.server_hook  # a recorder per connection
    try:
        asyncio.run(run_broker(args.host, args.port, users=users, heartbeat=args.heartbeat, **options))
    except KeyboardInterrupt:
        pass
    finally:
        if archive is not None:
            archive.close()  # the connections still open: their files are finished
    return 0
