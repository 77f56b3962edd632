"""``convert``: STOMP archives to Parquet with Spark, with a progress display and a summary at the end.

    fastframe convert ARCHIVE... --out DIR [--master URL]
        read STOMP archives (folders, globs, files; local or remote URIs)
        with Spark and write them as Parquet

PySpark, pyarrow and the Spark layer (``fastframe.spark``) are imported only when ``convert`` runs, so the
other commands work without the ``spark`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import threading
import time
from typing import IO, Any, Callable, Dict, Iterator, Optional, Sequence

from ._args import add_decoder_arguments, int_at_least, key_value

# the convert job's Spark job group: the summary counts its tasks per executor
CONVERT_JOB_GROUP = "fastframe-convert"

_positive = int_at_least(1)


def add_commands(commands: Any) -> Dict[str, Callable[[argparse.Namespace], int]]:
    """Add ``convert`` to an argparse subparsers object; return its handler by name."""
    conv = commands.add_parser(
        "convert",
        help="convert STOMP archives to Parquet with Spark (local mode by default)",
        description="Read STOMP frame-stream files with Spark (one row per frame) and write them as Parquet.",
    )
    conv.add_argument("archives", nargs="+", metavar="ARCHIVE", help="folders, globs or files (paths or URIs)")
    conv.add_argument("--out", required=True, metavar="DIR", help="output folder for the Parquet files")
    conv.add_argument("--master", default="local[*]", metavar="URL", help="Spark master (default local[*])")
    conv.add_argument(
        "--mode", default="PERMISSIVE", type=str.upper, choices=("PERMISSIVE", "DROPMALFORMED", "FAILFAST"),
        help="malformed input: error rows (PERMISSIVE, default), drop them, or fail the job",
    )  # fmt: skip
    add_decoder_arguments(conv)
    conv.add_argument("--glob", metavar="PATTERN", help="only files whose name matches (pathGlobFilter)")
    conv.add_argument("--no-recursive", action="store_true", help="do not descend into subfolders")
    conv.add_argument("--partitions", type=_positive, metavar="N", help="at least N read partitions")
    conv.add_argument(
        "--option", action="append", type=key_value, default=[], metavar="KEY=VALUE", help="any other reader option"
    )
    conv.add_argument("--parquet-compression", default="snappy", metavar="CODEC", help="default snappy")
    conv.add_argument("--append", action="store_true", help="add to DIR instead of replacing it")
    conv.add_argument("--top", type=_positive, default=5, metavar="N", help="destinations in the summary")
    conv.add_argument("--no-progress", action="store_true", help="no progress display")
    conv.add_argument("--conf", action="append", type=key_value, default=[], metavar="KEY=VALUE", help="Spark setting")
    add_ship_env_argument(conv)
    return {"convert": cmd_convert}


def add_ship_env_argument(parser: argparse.ArgumentParser) -> None:
    """``--ship-env [ENV]``, for every command that runs Spark."""
    parser.add_argument(
        "--ship-env", nargs="?", const="", metavar="ENV",
        help="send a Python environment to the executors (a cluster whose nodes lack fastframe): a packed archive "
        "(venv-pack, conda-pack: .tar.gz, .tar, .zip), a venv folder to pack (an editable install is packed as a "
        "copy), or, without ENV, this interpreter's venv",
    )  # fmt: skip


def start_session(command: str, master: str, app_name: str, conf: Dict[str, str], ship_env: Optional[str]) -> Any:
    """A session for a command, or the exit status when it cannot start (the reason printed in one line).

    ``ship_env`` is ``--ship-env``'s value (None: not given; "": this interpreter's environment).
    """
    from ..spark import get_session

    if ship_env is not None:
        ship_env = ship_env or sys.prefix
        print(f"shipping {ship_env} to the executors ...", file=sys.stderr)
    try:
        with _jvm_stderr_filtered():
            return get_session(master, app_name=app_name, conf=conf, ship_env=ship_env)
    except (OSError, ValueError) as exc:
        if ship_env is None:
            raise
        # the environment to ship could not be packed
        print(f"fastframe {command}: --ship-env: {exc}", file=sys.stderr)
        return 1


# What every JVM Spark 4 starts prints first: its launcher always adds --add-modules=jdk.incubator.vector,
# and Java has no option to silence the warning that follows, so the CLI drops that one line.
_JVM_NOISE = (b"WARNING: Using incubator modules:",)


@contextlib.contextmanager
def _jvm_stderr_filtered() -> Iterator[None]:
    """While Spark starts its JVM (which inherits file descriptor 2), point descriptor 2 at a pipe whose
    lines a thread copies to the real stderr, all but :data:`_JVM_NOISE`; the JVM keeps the pipe for its
    life (its log lines come through it), this process gets its stderr back once the JVM started."""
    try:
        saved = os.dup(2)
        read_end, write_end = os.pipe()
    except OSError:  # no usable stderr: nothing to keep clean
        yield
        return

    def copy() -> None:
        with os.fdopen(read_end, "rb", buffering=0) as lines, os.fdopen(saved, "wb", buffering=0) as out:
            for line in lines:
                if not line.startswith(_JVM_NOISE):
                    out.write(line)

    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)
    threading.Thread(target=copy, name="fastframe-jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the JVM holds the pipe's write end now; ours is closed


def check_cluster(command: str, spark: Any) -> Optional[int]:
    """On a cluster: one small task per core checks the executors' Python, which is printed; None when fine,
    else the exit status after one line saying what is missing and what to set. The check's tasks leave the
    Python workers the job's tasks run in started (the first batch's cold start, see check_executors)."""
    from ..spark import ExecutorProblem, check_executors

    try:
        seen = check_executors(spark, os.environ.get("PYSPARK_PYTHON", "python3"))
    except ExecutorProblem as exc:
        print(f"fastframe {command}: {exc}", file=sys.stderr)
        return 1
    pythons = sorted({f"{s['python']} ({s['version']}, codec {s['codec']})" for s in seen})
    hosts = sorted({s["host"] for s in seen})
    print(f"executors' Python: {'; '.join(pythons)} on {', '.join(hosts)}", file=sys.stderr)
    return None


class Progress:
    """Polls Spark's status tracker and shows the running stage's tasks on one line."""

    def __init__(self, spark: Any, out: IO[str], label: str, enabled: bool = True) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.out = out
        self.label = label
        self.enabled = enabled
        self.tty = out.isatty()
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fastframe-progress", daemon=True)
        self._last = ""
        self._last_print = 0.0

    def __enter__(self) -> "Progress":
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self.enabled:
            self._thread.join()
            if self.tty:
                self.out.write("\r\033[K")
                self.out.flush()

    def line(self) -> Optional[str]:
        done = total = running = 0
        for stage_id in self.tracker.getActiveStageIds():
            info = self.tracker.getStageInfo(stage_id)
            if info is None:
                continue
            done += info.numCompletedTasks
            total += info.numTasks
            running += info.numActiveTasks
        if not total:
            return None
        elapsed = time.monotonic() - self.start
        width = 24
        filled = int(width * done / total)
        bar = "#" * filled + "-" * (width - filled)
        return f"{self.label} [{bar}] {done}/{total} tasks, {running} running, {elapsed:.0f} s"

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                text = self.line()
            except Exception:  # the context is shutting down
                return
            if text is None:
                continue
            now = time.monotonic()
            if self.tty:
                self.out.write("\r\033[K" + text)
                self.out.flush()
            elif text != self._last and now - self._last_print >= 2.0:
                print(text, file=self.out, flush=True)
                self._last_print = now
            self._last = text


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError


def summarize(spark: Any, out_dir: str, top: int) -> Dict[str, Any]:
    """Totals of a converted table, read back from its Parquet files."""
    from pyspark.sql import functions as F

    table = spark.read.parquet(out_dir)
    per_command = (
        table.where("command IS NOT NULL")
        .groupBy("command")
        .agg(F.count("*").alias("frames"), F.sum(F.length("body")).alias("body_bytes"))
        .orderBy(F.desc("frames"), "command")
        .collect()
    )
    destinations = (
        table.where("command IS NOT NULL")
        .select(F.col("header_map").getItem("destination").alias("destination"))
        .where("destination IS NOT NULL")
        .groupBy("destination")
        .count()
        .orderBy(F.desc("count"), "destination")
        .limit(top)
        .collect()
    )
    errors = (
        table.where("error_code IS NOT NULL")
        .select("path", "offset", "frame_index", "error_code", "error_reason")
        .orderBy("path", "offset")
        .collect()
    )
    totals = table.agg(F.count("*").alias("rows"), F.countDistinct("path").alias("files")).collect()[0]
    codecs = table.groupBy("codec").count().orderBy("codec").collect()
    return {
        "rows": totals["rows"],
        "files": totals["files"],
        "commands": [(r["command"], r["frames"], r["body_bytes"] or 0) for r in per_command],
        "destinations": [(r["destination"], r["count"]) for r in destinations],
        "errors": [(r["path"], r["offset"], r["frame_index"], r["error_code"], r["error_reason"]) for r in errors],
        "codecs": [(r["codec"], r["count"]) for r in codecs],
    }


def print_summary(summary: Dict[str, Any], files: int, size: int, elapsed: float, master: str, out: IO[str]) -> None:
    frames = sum(n for _, n, _ in summary["commands"])
    body = sum(b for _, _, b in summary["commands"])
    print(f"converted {files} files ({_human(size)}) to {summary['rows']:,} rows in {elapsed:.1f} s on {master}",
          file=out)  # fmt: skip
    print(f"frames: {frames:,}   body bytes: {body:,} ({_human(body)})   input bytes: {size:,}", file=out)
    print("frames per command:", file=out)
    width = max((len(c) for c, _, _ in summary["commands"]), default=0)
    for command, n, b in summary["commands"]:
        print(f"  {command:<{width}}  {n:>10,}  {_human(b):>9} of bodies", file=out)
    if summary["destinations"]:
        print("top destinations:", file=out)
        width = max(len(d) for d, _ in summary["destinations"])
        for destination, n in summary["destinations"]:
            print(f"  {destination:<{width}}  {n:>10,}", file=out)
    errors = summary["errors"]
    if errors:
        print(f"malformed files ({len(errors)}): the rest of each file was not decoded", file=out)
        for path, offset, index, code, reason in errors:
            print(f"  {path} at offset {offset} (frame {index}): {code}: {reason}", file=out)
    else:
        print("malformed files: none", file=out)
    twins = ", ".join(f"{codec} ({n:,} rows)" for codec, n in summary["codecs"])
    print(f"decoded by: {twins}", file=out)
    if any(codec != "c" for codec, _ in summary["codecs"]):
        print("warning: some executors ran the pure-Python twin (slow): install the fastframe wheel on the nodes",
              file=out)  # fmt: skip


def _absolute(path: str) -> str:
    return path if "://" in path or path.startswith("file:") else os.path.abspath(path)


def java_hint() -> Optional[str]:
    """Why Spark cannot start here (no Java), with the fix; None when a ``java`` is found."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.isfile(os.path.join(java_home, "bin", "java")):
        return None
    if shutil.which("java"):
        return None
    return (
        "Spark needs Java 17 or newer and none was found (no java on PATH, no JAVA_HOME): install it "
        "(Debian, Ubuntu: apt-get install openjdk-17-jre-headless; `make demo` does this when run as root)"
    )


def cmd_convert(args: argparse.Namespace) -> int:
    from ..spark import list_files, read_options
    from ..spark.session import is_local_master

    cluster = not is_local_master(args.master)
    archives = list(args.archives)
    out_dir = args.out
    if args.ship_env is not None:
        if not cluster:
            print("fastframe convert: --ship-env is for a cluster --master (local mode runs this interpreter)",
                  file=sys.stderr)  # fmt: skip
            return 2
        # the driver's JVM starts in another folder: relative paths would resolve there
        archives = [_absolute(p) for p in archives]
        out_dir = _absolute(out_dir)
    options: Dict[str, Any] = {
        "mode": args.mode,
        "version": args.version,
        "strict": args.strict,
        "recursiveFileLookup": not args.no_recursive,
    }
    if args.escapes:
        options["escapes"] = args.escapes
    if args.glob:
        options["pathGlobFilter"] = args.glob
    if args.partitions:
        options["minPartitions"] = args.partitions
    options.update(dict(args.option))
    try:
        opts = read_options({**options, "paths": archives})
        files = list_files(opts)
    except (OSError, ValueError) as exc:
        print(f"fastframe convert: {exc}", file=sys.stderr)
        return 1
    if not files:
        print("fastframe convert: no input files", file=sys.stderr)
        return 1
    hint = java_hint()
    if hint:
        print(f"fastframe convert: {hint}", file=sys.stderr)
        return 1

    size = sum(s for _, s in files)
    print(f"reading {len(files)} files ({_human(size)}) with Spark ({args.master}) ...", file=sys.stderr)
    start = time.monotonic()
    spark = start_session("convert", args.master, "fastframe convert", dict(args.conf), args.ship_env)
    if isinstance(spark, int):
        return spark
    if not args.no_progress:  # the JVM's start is most of a small job's time: say when it is over
        print(f"Spark started in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    try:
        return _convert(spark, args, archives, out_dir, options, len(files), size, start, cluster)
    finally:
        spark.stop()


def _convert(
    spark: Any, args: argparse.Namespace, archives: Sequence[str], out_dir: str, options: Dict[str, Any],
    files: int, size: int, start: float, cluster: bool,
) -> int:  # fmt: skip
    from ..spark import failure_reason, tasks_per_executor

    sc = spark.sparkContext
    try:
        problem = check_cluster("convert", spark) if cluster else None
        if problem is not None:
            return problem
        if args.partitions is None:
            options["minPartitions"] = sc.defaultParallelism
        reader = spark.read.format("stomp")
        for key, value in options.items():
            reader = reader.option(key, value)
        df = reader.load(list(archives))
        writer = df.write.mode("append" if args.append else "overwrite").option("compression", args.parquet_compression)
        sc.setJobGroup(CONVERT_JOB_GROUP, "fastframe convert: read STOMP, write Parquet")
        with Progress(spark, sys.stderr, "converting", enabled=not args.no_progress):
            writer.parquet(out_dir)
        sc.setJobGroup("fastframe-summary", "fastframe convert: summary")
        converted = time.monotonic() - start
        ran = tasks_per_executor(spark, CONVERT_JOB_GROUP) if cluster else None
        summary = summarize(spark, out_dir, args.top)
        print_summary(summary, files, size, converted, args.master, sys.stdout)
        if ran:
            where = ", ".join(f"{executor} ({host}): {n}" for executor, (host, n) in ran.items())
            print(f"tasks per executor: {where}", file=sys.stdout)
    except Exception as exc:
        message = str(exc).strip().splitlines()
        print(f"fastframe convert failed: {failure_reason(exc)}", file=sys.stderr)
        for line in message[1:40]:
            if "MalformedStompError" in line or "Malformed STOMP" in line:
                print(f"  {line.strip()}", file=sys.stderr)
        return 1
    return 0
