"""``stream``: messages from a broker into Parquet with Spark Structured Streaming, resumable.

    fastframe stream DESTINATION... --out DIR [--checkpoint DIR] [--host H --port P ...]
        read a broker's queue (consume=ack) or RabbitMQ stream queue (consume=stream)
        into Parquet under DIR, with Spark's checkpoint in DIR.checkpoint (or --checkpoint)

Progress goes to stderr, one line per finished batch. Ctrl-C (or SIGTERM) stops the query between
batches' bookkeeping steps, cleanly: a rerun with the same folders resumes where it stopped
(consume=stream: exactly once; consume=ack: at-least-once, what was not acknowledged comes again).
``--available-now`` stops on its own once what the broker held at the start is written (consume=ack:
once the queue has had nothing more to deliver for pollTimeout).

PySpark is imported only when ``stream`` runs, and only through the public ``fastframe.spark`` API.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._args import int_at_least, key_value
from ._spark import add_ship_env_argument, check_cluster, start_session

_positive = int_at_least(1)


def add_commands(commands: Any) -> Dict[str, Callable[[argparse.Namespace], int]]:
    """Add ``stream`` to an argparse subparsers object; return its handler by name."""
    cmd = commands.add_parser(
        "stream",
        help="stream a broker's messages into Parquet with Spark (checkpointed, resumable)",
        description="Read messages from a STOMP broker with Spark Structured Streaming and write them as Parquet. "
        "Ctrl-C stops cleanly; a rerun with the same --out and --checkpoint resumes.",
    )
    cmd.add_argument("destinations", nargs="+", metavar="DESTINATION", help="e.g. /queue/events")
    cmd.add_argument("--out", required=True, metavar="DIR", help="output folder for the Parquet files")
    cmd.add_argument("--checkpoint", metavar="DIR", help="Spark's checkpoint folder (default: DIR.checkpoint)")
    cmd.add_argument("--host", default="127.0.0.1", help="broker host (default 127.0.0.1)")
    cmd.add_argument("--port", type=_positive, default=61613, help="broker STOMP port (default 61613)")
    cmd.add_argument("--login", help="login")
    cmd.add_argument("--passcode", help="passcode (also FASTFRAME_PASSCODE)")
    cmd.add_argument("--vhost", default="/", help="CONNECT's host header, RabbitMQ's virtual host (default /)")
    cmd.add_argument(
        "--consume", choices=("ack", "stream"), default="ack",
        help="ack: any queue, acknowledged once written (at-least-once, default); "
        "stream: RabbitMQ stream queues by offset (exactly once)",
    )  # fmt: skip
    cmd.add_argument("--starting-offsets", default="earliest", metavar="WHERE", help="consume=stream: earliest "
                     "(default), latest, an offset, timestamp=SECONDS")  # fmt: skip
    cmd.add_argument("--max-messages", type=_positive, metavar="N", help="per batch (default 10000; with "
                     "consume=stream on PySpark 4.0/4.1, which have no admission control: no limit)")  # fmt: skip
    cmd.add_argument("--trigger", type=float, default=0.0, metavar="SECONDS", help="start a batch at most this often")
    cmd.add_argument("--available-now", action="store_true", help="stop once what the broker holds now is written "
                     "(consume=ack: once the queue has nothing more)")  # fmt: skip
    cmd.add_argument("--master", default="local[2]", metavar="URL", help="Spark master (default local[2])")
    cmd.add_argument("--option", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                     help="any other source option (e.g. timeout=60)")  # fmt: skip
    cmd.add_argument("--conf", action="append", type=key_value, default=[], metavar="KEY=VALUE", help="Spark setting")
    cmd.add_argument("--no-progress", action="store_true", help="no progress lines")
    cmd.add_argument("--connect-timeout", type=float, default=5.0, metavar="SECONDS",
                     help="how long the check that the broker answers may take, before Spark starts (default 5)")  # fmt: skip
    add_ship_env_argument(cmd)
    return {"stream": cmd_stream}


def _source_options(args: argparse.Namespace) -> Dict[str, str]:
    options = {
        "host": args.host,
        "port": str(args.port),
        "vhost": args.vhost,
        "destination": ",".join(args.destinations),
        "consume": args.consume,
    }
    if args.max_messages is not None or args.consume == "ack" or _admission_control():
        options["maxMessagesPerTrigger"] = str(args.max_messages or 10_000)
    passcode = args.passcode if args.passcode is not None else os.environ.get("FASTFRAME_PASSCODE")
    for name, value in (("login", args.login), ("passcode", passcode)):
        if value is not None:
            options[name] = value
    if args.consume == "stream":
        options["startingOffsets"] = args.starting_offsets
    options.update(dict(args.option))
    return options


def _unreachable(options: Dict[str, str], timeout: float) -> Optional[str]:
    """Why the driver cannot log in to the broker (a STOMP CONNECT, as the source's first), or None.

    Checked before Spark starts: its start and the query's failure take half a minute and print a Java
    trace before the reason."""
    host, port = options.get("host", ""), options.get("port", "")
    if "://" in host or "servers" in options or not port.isdigit():
        return None  # other forms of address: the source checks them itself
    import asyncio  # (here: the other commands load no asyncio)

    from .. import aio

    login, passcode, vhost = options.get("login"), options.get("passcode"), options.get("vhost")

    async def connect() -> None:
        client = await aio.connect(
            host, int(port), login=login, passcode=passcode, host_header=vhost, connect_timeout=timeout, timeout=timeout
        )
        await client.disconnect()

    try:
        asyncio.run(connect())
    except (OSError, aio.ConnectionClosedError, ValueError) as exc:  # refused, no answer, an ERROR
        why = " ".join(str(exc).split()) or type(exc).__name__
        return f"cannot connect to the broker at {host}:{port}: {why} (is it running? check --host, --port, --login)"
    return None


def _admission_control() -> bool:
    """Whether PySpark passes read limits to a Python streaming source (4.2+)."""
    import pyspark

    return tuple(int(part) for part in pyspark.__version__.split(".")[:2] if part.isdigit()) >= (4, 2)


def _reason(exc: BaseException) -> str:
    """The cause (the Python exception at the end of the traceback, ``BrokerError: ...``) in one line."""
    from ..spark import failure_reason

    return str(failure_reason(exc, limit=600))


def _progress_line(progress: Dict[str, Any], total: int, started: float) -> str:
    rows = int(progress.get("numInputRows") or 0)
    rate = float(progress.get("processedRowsPerSecond") or 0.0)
    return (
        f"fastframe stream: batch {progress.get('batchId')}: {rows} messages ({rate:,.0f}/s); "
        f"{total} in {time.monotonic() - started:.0f} s"
    )


def cmd_stream(args: argparse.Namespace) -> int:
    out = os.path.abspath(args.out)
    checkpoint = os.path.abspath(args.checkpoint or out.rstrip(os.sep) + ".checkpoint")
    if args.trigger < 0:
        print("fastframe stream: --trigger must not be negative", file=sys.stderr)
        return 2
    if args.available_now and _source_options(args).get("consume") == "ack" and not _admission_control():
        print("fastframe stream: --available-now with consume=ack needs PySpark 4.2 or later (before it Spark "
              "never plans the batch that acknowledges the last one): use --trigger and Ctrl-C", file=sys.stderr)  # fmt: skip
        return 2
    from ..spark import is_local_master

    if args.ship_env is not None and is_local_master(args.master):
        print("fastframe stream: --ship-env is for a cluster --master (local mode runs this interpreter)",
              file=sys.stderr)  # fmt: skip
        return 2
    unreachable = _unreachable(_source_options(args), args.connect_timeout)
    if unreachable:  # before Spark: its start and its failure would take half a minute and a Java trace
        print(f"fastframe stream: {unreachable}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    spark = start_session("stream", args.master, "fastframe stream", dict(args.conf), args.ship_env)
    if isinstance(spark, int):
        return spark
    # after the session: PySpark's own SIGINT handler (cancel every job) would replace ours
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # on a cluster, before the query: the executors' Python must import fastframe (one line if not)
        problem = None if is_local_master(args.master) else check_cluster("stream", spark)
        if problem is not None:
            return problem
        reader = spark.readStream.format("stomp")
        for name, value in _source_options(args).items():
            reader = reader.option(name, value)
        writer = reader.load().writeStream.format("parquet").option("checkpointLocation", checkpoint)
        if args.available_now:
            writer = writer.trigger(availableNow=True)
        elif args.trigger:
            writer = writer.trigger(processingTime=f"{args.trigger} seconds")
        if not getattr(args, "debug", False):
            # a failed query is reported below in one line, its Python cause first: Spark's log would
            # print the same failure as a Java trace of 40-odd lines before it (--debug keeps the log)
            spark.sparkContext.setLogLevel("FATAL")
        query = writer.start(out)
        # consume=ack: Ctrl-C waits this long for the batch that acknowledges the last one written
        settle = 5.0 + 2 * args.trigger if _source_options(args).get("consume", "").lower() == "ack" else 0.0
        return _follow(query, stop, args.no_progress, out, checkpoint, settle)
    except Exception as exc:  # a bad option: Spark's analysis error holds the reason
        print(f"fastframe stream: {_reason(exc)}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _follow(query: Any, stop: threading.Event, quiet: bool, out: str, checkpoint: str, settle: float = 0.0) -> int:
    started = time.monotonic()
    total = 0
    seen: Optional[int] = None
    failure: Optional[BaseException] = None
    while not stop.is_set():
        try:
            if query.awaitTermination(0.5):
                break
        except Exception as exc:
            failure = exc
            break
        seen, total = _report(query, seen, total, started, quiet)
    if stop.is_set():
        print("fastframe stream: stopping (a rerun resumes from the checkpoint)", file=sys.stderr, flush=True)
        if settle and failure is None:
            seen, total = _until_acknowledged(query, seen, total, started, quiet, settle)
    query.stop()
    seen, total = _report(query, seen, total, started, quiet)
    if failure is None:
        failure = query.exception()
    if failure is not None:
        print(f"fastframe stream: the query failed: {_reason(failure)}", file=sys.stderr)
        return 1
    print(f"fastframe stream: {total} messages written to {out} (checkpoint {checkpoint})", file=sys.stderr)
    if settle:
        pending = _unacknowledged(query, checkpoint)
        if pending:
            print(f"fastframe stream: the last {pending} messages written are not acknowledged (the source "
                  "acknowledges a batch when Spark plans the next): the broker redelivers them and a rerun "
                  "writes them again", file=sys.stderr)  # fmt: skip
    return 0


def _until_acknowledged(
    query: Any, seen: Optional[int], total: int, started: float, quiet: bool, settle: float
) -> Tuple[Optional[int], int]:
    """consume=ack: Spark acknowledges a batch to the source only when it plans the next one, so wait (at
    most ``settle`` seconds) for a batch without messages after the last one with messages: the source
    asks for one as soon as the queue pauses, and once it ran every message written is acknowledged."""
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        seen, total = _report(query, seen, total, started, quiet)
        last = query.lastProgress
        if last is None or not int(last.get("numInputRows") or 0):
            break
        try:
            if query.awaitTermination(0.2):
                break
        except Exception:
            break
    return seen, total


def _unacknowledged(query: Any, checkpoint: str) -> int:
    """Messages of the last committed batch when no later batch was planned (so never acknowledged)."""

    def ids(kind: str) -> List[int]:
        folder = os.path.join(checkpoint, kind)
        names = os.listdir(folder) if os.path.isdir(folder) else []
        return [int(name) for name in names if name.isdigit()]

    committed, planned = ids("commits"), ids("offsets")
    if not committed or max(planned, default=-1) > max(committed):
        return 0
    last = max(committed)
    rows = [int(p.get("numInputRows") or 0) for p in query.recentProgress if p.get("batchId") == last]
    return rows[-1] if rows else 0


def _report(query: Any, seen: Optional[int], total: int, started: float, quiet: bool) -> Tuple[Optional[int], int]:
    """Print a line for each batch that ended since ``seen``; return the last batch id and the new total."""
    for progress in query.recentProgress:
        if seen is not None and progress["batchId"] <= seen:
            continue
        seen = progress["batchId"]
        total += int(progress.get("numInputRows") or 0)
        if not quiet:
            print(_progress_line(progress, total, started), file=sys.stderr, flush=True)
    return seen, total
