"""``record`` and ``replay``: capture live STOMP traffic into an archive, and send a capture again.

    fastframe record --listen 127.0.0.1:61650 --upstream 127.0.0.1:61613 --out archive/
        a recording proxy (fastframe.capture.serve_proxy) until Ctrl-C, which closes every file
    fastframe replay archive/BROKER/DATE/conn-0003.c2s.stomp --to 127.0.0.1:61613 [--pace recorded]
        send a recorded client stream, print the broker's answers decoded

asyncio and the standard library only; asyncio and the capture package load when one of them runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import ssl as _ssl
import sys
from typing import Any, Callable, Dict, Optional, Tuple

from . import _args
from ._args import size

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*")
_DURATION_FACTORS = {"ms": 0.001, "s": 1.0, "": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _duration(text: str) -> float:
    match = _DURATION.fullmatch(text)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use seconds, or a number with ms, s, m, h or d)")
    return float(match.group(1)) * _DURATION_FACTORS[match.group(2) or ""]


def _milliseconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1000.0:
        raise argparse.ArgumentTypeError(f"not milliseconds from 0 to 1000: {text!r}")
    return value


def _address(text: str) -> Tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"not HOST:PORT: {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _add_ssl_client_arguments(parser: argparse.ArgumentParser, prefix: str, what: str) -> None:
    parser.add_argument(f"--{prefix}", action="store_true", help=f"speak TLS to {what}")
    parser.add_argument(f"--{prefix}-cafile", metavar="FILE", help=f"CA certificates to verify {what} with")
    parser.add_argument(f"--{prefix}-insecure", action="store_true", help=f"do not verify {what}'s certificate")


def add_commands(commands: Any) -> Dict[str, Callable[[argparse.Namespace], int]]:
    """Add ``record`` and ``replay`` to an argparse subparsers object; return their handlers by name."""
    rec = commands.add_parser("record", help="a recording proxy: clients connect to it, it records every byte")
    rec.add_argument("--listen", type=_address, default=("127.0.0.1", 61650), metavar="HOST:PORT",
                     help="where clients connect (default 127.0.0.1:61650; port 0: a free one)")  # fmt: skip
    rec.add_argument("--upstream", type=_address, required=True, metavar="HOST:PORT", help="the broker")
    rec.add_argument("--out", required=True, metavar="DIR", help="the archive's folder")
    rec.add_argument("--name", default=None, metavar="BROKER",
                     help="the folder for this broker under DIR (default: HOST_PORT of --upstream)")  # fmt: skip
    rec.add_argument("--roll-size", type=size, metavar="SIZE", help="start a new file past this size (e.g. 64m)")
    rec.add_argument("--roll-age", type=_duration, metavar="AGE", help="start a new file past this age (e.g. 1h)")
    packing = rec.add_mutually_exclusive_group()
    packing.add_argument("--gzip", action="store_const", const="gzip", dest="compression",
                         help="compress the files with gzip (.stomp.gz)")  # fmt: skip
    packing.add_argument("--zstd", action="store_const", const="zstd", dest="compression",
                         help="compress the files with zstd (.stomp.zst; the zstd extra before Python 3.14)")  # fmt: skip
    rec.add_argument("--coalesce", type=_milliseconds, default=1.0, metavar="MS",
                     help="while a stream flows, rest this long after each read: fewer, larger reads "
                     "(default 1; 0: read at once)")  # fmt: skip
    _args.add_credential_arguments(rec)
    rec.add_argument("--ssl-certfile", metavar="FILE", help="serve TLS to the clients with this certificate chain")
    rec.add_argument("--ssl-keyfile", metavar="FILE", help="the key of --ssl-certfile (if not in it)")
    _add_ssl_client_arguments(rec, "ssl-upstream", "the broker")

    rep = commands.add_parser("replay", help="send a recorded client stream to a broker, print its answers")
    rep.add_argument("file", metavar="FILE", help="a recorded client stream (conn-NNNN.c2s.stomp[.gz|.zst]; its "
                     "later pieces conn-NNNN.c2s_0002.stomp... follow)")  # fmt: skip
    rep.add_argument("--to", type=_address, required=True, metavar="HOST:PORT", help="the broker")
    rep.add_argument("--pace", choices=("fast", "recorded"), default="fast",
                     help="fast (default), or the recorded pace (from the .fftimes sidecar)")  # fmt: skip
    rep.add_argument("--speed", type=float, default=1.0, metavar="X", help="with --pace recorded: X times as fast")
    rep.add_argument("--idle", type=_duration, default=2.0, metavar="AGE",
                     help="stop after this long without an answer once all is sent (default 2s)")  # fmt: skip
    rep.add_argument("--summary", action="store_true", help="print only the summary line")
    rep.add_argument("--login", metavar="USER", help="the login to send where the capture's was redacted")
    rep.add_argument("--passcode", metavar="SECRET", help="the passcode to send where the capture's was redacted "
                     "(or the environment variable FASTFRAME_PASSCODE, which ps does not show)")  # fmt: skip
    _add_ssl_client_arguments(rep, "ssl", "the broker")
    return {"record": _cmd_record, "replay": _cmd_replay}


def _client_context(args: argparse.Namespace, prefix: str) -> Optional[_ssl.SSLContext]:
    if not getattr(args, prefix):
        return None
    context = _ssl.create_default_context(cafile=getattr(args, f"{prefix}_cafile"))
    if getattr(args, f"{prefix}_insecure"):
        context.check_hostname = False
        context.verify_mode = _ssl.CERT_NONE
    return context


async def _record(args: argparse.Namespace) -> int:
    import asyncio

    from ..capture import Archive, serve_proxy
    from ..server import stop_on_signals

    server_ssl = None
    if args.ssl_certfile:
        server_ssl = _ssl.create_default_context(_ssl.Purpose.CLIENT_AUTH)
        server_ssl.load_cert_chain(args.ssl_certfile, args.ssl_keyfile)
    (host, port), (up_host, up_port) = args.listen, args.upstream
    name = args.name or f"{up_host}_{up_port}".replace(":", "_")
    archive = Archive(
        args.out,
        name,
        roll_size=args.roll_size,
        roll_age=args.roll_age,
        compression=args.compression,
        redact=_args.redacted_headers(args),
    )
    stop = asyncio.Event()
    try:
        with stop_on_signals(stop):  # before the "listening" line: a parent may send Ctrl-C right after it
            proxy = await serve_proxy(
                archive,
                host,
                port,
                up_host,
                up_port,
                ssl=server_ssl,
                upstream_ssl=_client_context(args, "ssl_upstream"),
                coalesce=args.coalesce / 1000,
            )
            print(
                f"fastframe record: listening on {host}:{proxy.port}, forwarding to {up_host}:{up_port}, "
                f"recording into {args.out}/{name}/ (Ctrl-C stops)",
                flush=True,
            )
            try:
                await stop.wait()
            finally:
                await proxy.close()
    finally:
        await asyncio.get_running_loop().run_in_executor(None, archive.close)  # waits for the disk
    print("fastframe record: stopped, every file closed", flush=True)
    return 0


def _cmd_record(args: argparse.Namespace) -> int:
    import asyncio

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        return asyncio.run(_record(args))
    except (OSError, ImportError) as exc:  # (ImportError: --zstd without its extra)
        print(f"fastframe record: {exc}", file=sys.stderr)
        return 1


def _cmd_replay(args: argparse.Namespace) -> int:
    import asyncio

    from ..capture import pieces_of, replay
    from ._codec import _Listing

    if not os.path.isfile(args.file):
        print(f"fastframe replay: {args.file}: no such file (a recorded conn-NNNN.c2s.stomp)", file=sys.stderr)
        return 1
    paths = pieces_of(args.file)
    listing = _Listing(sys.stdout, quiet=args.summary)
    host, port = args.to
    credentials = {"login": args.login, "passcode": args.passcode or os.environ.get("FASTFRAME_PASSCODE")}
    try:
        result = asyncio.run(
            replay(
                paths,
                host,
                port,
                pace=args.pace,
                speed=args.speed,
                ssl=_client_context(args, "ssl"),
                idle=args.idle,
                on_answer=lambda frame: listing.show([frame]),
                credentials={name: value for name, value in credentials.items() if value is not None},
            )
        )
    except ImportError as exc:  # a .zst capture without the zstd extra
        print(f"fastframe replay: {exc}", file=sys.stderr)
        return 1
    except (OSError, asyncio.TimeoutError) as exc:
        print(f"fastframe replay: {host}:{port}: {exc or type(exc).__name__}", file=sys.stderr)
        return 1
    ending = "the broker closed the connection" if result.closed_by_broker else f"no answer for {args.idle:g}s"
    print(f"sent {result.bytes_sent} bytes from {len(paths)} file(s); {ending}")
    kinds = ", ".join(f"{command} {n}" for command, n in sorted(listing.commands.items()))
    print(f"answers: {sum(listing.commands.values())} frames ({kinds or 'none'})")
    if result.redacted and listing.commands.get("ERROR"):
        print(
            "fastframe replay: the capture's credentials were redacted when it was recorded and the broker "
            "answered ERROR: give them with --login/--passcode (or FASTFRAME_PASSCODE)",
            file=sys.stderr,
        )
    if result.error is not None:
        print(f"{host}:{port}: the answers stopped decoding: {result.error}", file=sys.stderr)
        return 1
    return 0
