"""What a job needs beyond one machine: the Python the executors run, a shipped environment, a check.

Which Python runs where (PySpark 4.x, a session started from Python, as
``fastframe convert`` and :func:`~fastframe.spark.get_session` do): the
driver process's environment variables decide, not the nodes' and not
``spark.pyspark.python`` given to the builder (the JVM is already running by
then). ``PYSPARK_PYTHON`` names the executors' Python for RDD code and for an
explicitly registered source; ``PYSPARK_DRIVER_PYTHON`` (else
``PYSPARK_PYTHON``) names the Python of the auto-registered ``stomp`` source,
on the driver (planning) *and* on the executors (reading). A relative path
such as ``./env/bin/python`` is resolved in each JVM's working folder: the
executors' (where ``spark.archives`` unpacks) and the driver's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import time
from typing import IO, Any, Dict, List, Mapping, Optional, Set, Tuple

__all__ = [
    "ENV_NAME",
    "SHIPPED_PYTHON",
    "ExecutorProblem",
    "check_executors",
    "driver_link_dir",
    "editable_locations",
    "failure_reason",
    "home_without_source_zips",
    "pack_env",
    "python_settings",
    "tasks_per_executor",
    "warm_python_workers",
]

# the folder name a shipped environment unpacks to, in the executors' and (as a link) the driver's working folder
ENV_NAME = "fastframe-env"
SHIPPED_PYTHON = f"./{ENV_NAME}/bin/python3"
ARCHIVE_ENDINGS = (".tar.gz", ".tgz", ".tar", ".zip")
# what a read task imports; the compiled twin is checked apart (fastframe.IMPLEMENTATION; without it the pure-Python
# twin runs, slowly)
NEEDED_MODULES = ("pyarrow", "fastframe", "fastframe.spark._file_read", "pyspark_stomp")


def home_without_source_zips(spark_home: str) -> Optional[str]:
    """A Spark home whose Python processes import this interpreter's installed PySpark and py4j (with
    their cached bytecode) instead of compiling them from ``python/lib``'s source zips, or None.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip first on the ``PYTHONPATH`` of
    every Python process it starts (the source's planner on the driver, the Python workers), and
    Python caches no bytecode for a zip: each process compiles PySpark again, 0.6-0.9 s of CPU at a
    full core. The folder made here (once, in the temporary folder) links to everything of
    ``spark_home`` but those zips; the processes of a JVM started with it as ``SPARK_HOME`` must
    run this interpreter. None when this interpreter's PySpark or py4j is not in a folder of its own
    (then the zips are what it imports) or the folder cannot be made.
    """
    if not os.path.isdir(os.path.join(spark_home, "jars")):
        return None  # (not a Spark home: PySpark from a distribution's python/ folder)
    for name in ("pyspark", "py4j"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None or not os.path.isfile(spec.origin):
            return None
    lib = os.path.join(spark_home, "python", "lib")
    digest = hashlib.sha256(os.path.realpath(spark_home).encode()).hexdigest()[:16]
    home = os.path.join(tempfile.gettempdir(), f"fastframe-spark-home-{os.getuid()}-{digest}")
    if os.path.isdir(os.path.join(home, "jars")):
        return home
    try:
        build = tempfile.mkdtemp(prefix=f"{os.path.basename(home)}.", dir=os.path.dirname(home))
    except OSError:
        return None
    try:
        # links to each entry of the home, of its python/ and of python/lib/ but the zips
        for folder, skipped in ((spark_home, "python"), (os.path.join(spark_home, "python"), "lib"), (lib, None)):
            into = os.path.join(build, os.path.relpath(folder, spark_home))
            os.makedirs(into, exist_ok=True)
            for name in os.listdir(folder) if os.path.isdir(folder) else ():
                if name != skipped and not (skipped is None and name.endswith(".zip")):
                    os.symlink(os.path.join(folder, name), os.path.join(into, name))
        os.rename(build, home)  # whole or not at all
    except OSError:  # (another process made it first, or the folder is not writable)
        shutil.rmtree(build, ignore_errors=True)
    return home if os.path.isdir(os.path.join(home, "jars")) else None


class ExecutorProblem(RuntimeError):
    """The executors cannot run the job's Python; the message says what is missing and what to set."""


def python_settings(conf: Mapping[str, str], environ: Mapping[str, str], executable: str) -> Dict[str, str]:
    """The ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` a cluster session needs.

    What the user set wins: the Spark settings ``spark.pyspark.python`` and
    ``spark.pyspark.driver.python`` first (exported, since PySpark reads only
    the variables when it starts from Python), then the variables; anything
    unset becomes ``executable`` (the interpreter running the driver, whose
    path the nodes must have, with the same packages).
    """
    python = conf.get("spark.pyspark.python") or environ.get("PYSPARK_PYTHON") or executable
    driver = conf.get("spark.pyspark.driver.python") or environ.get("PYSPARK_DRIVER_PYTHON")
    if not driver:
        # the auto-registered source runs PYSPARK_DRIVER_PYTHON on the executors too: keep it their Python
        driver = python if (conf.get("spark.pyspark.python") or environ.get("PYSPARK_PYTHON")) else executable
    return {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": driver}


def driver_link_dir(folder: str, prefix: Optional[str] = None) -> str:
    """``folder``, given ``fastframe-env``: a link to this interpreter's environment.

    The driver's JVM starts in it, so that ``./fastframe-env/bin/python3``
    (the shipped environment on the executors) is the driver's own Python
    there: the source's planning runs on the driver with the same path.
    """
    prefix = prefix or sys.prefix
    link = os.path.join(folder, ENV_NAME)
    if os.path.exists(os.path.join(prefix, "bin", "python3")):
        # linking the whole prefix keeps a virtual environment's pyvenv.cfg beside bin/
        os.symlink(prefix, link)
    else:
        os.makedirs(os.path.join(link, "bin"))
        os.symlink(sys.executable, os.path.join(link, "bin", "python3"))
    return folder


def pack_env(source: Optional[str], workdir: str) -> str:
    """A packed environment Spark can unpack on the executors (``spark.archives``), written under ``workdir``.

    ``source`` is a virtual environment's folder, packed by venv-pack, or an
    archive made by venv-pack or conda-pack (``.tar.gz``, ``.tgz``, ``.tar``,
    ``.zip``, taken as it is); None packs the environment of this
    interpreter. A tar becomes a zip for Hadoop, which Spark unpacks with: its
    Java untar drops the files' modes (``bin/python3`` could not run) and
    refuses symbolic links that lead outside, while its unzip keeps modes. A
    link becomes a copy of its file, the base interpreter's included (as
    ``venv --copies`` makes), so the nodes need that base Python's
    installation (its standard library) at the same path.
    """
    if source is not None and os.path.isfile(source):
        if not source.endswith(ARCHIVE_ENDINGS):
            raise ValueError(f"{source}: a packed environment ends with {', '.join(ARCHIVE_ENDINGS)}")
        if source.endswith(".zip"):
            return os.path.abspath(source)
        return _as_zip(source, os.path.join(workdir, f"{ENV_NAME}.zip"))
    prefix = os.path.abspath(source or sys.prefix)
    if not os.path.isfile(os.path.join(prefix, "pyvenv.cfg")):
        raise ValueError(
            f"{prefix}: not a virtual environment; give --ship-env a venv folder or an archive made by "
            "venv-pack or conda-pack"
        )
    try:
        import venv_pack  # type: ignore[import-untyped]
    except ImportError:
        raise ValueError("packing an environment needs venv-pack (pip install venv-pack)") from None
    packed = os.path.join(workdir, "venv-pack.tar")
    editable = editable_locations(prefix)
    copy = None
    try:
        if editable:
            # venv-pack refuses editable installs (a clone's `pip install -e .`, what `make` builds): pack a copy
            # whose site-packages holds what they point at instead
            copy = _non_editable_copy(prefix, editable, os.path.join(workdir, "venv-copy"))
        env = venv_pack.Env(copy or prefix)
        # the executors' Python workers import the cluster's own PySpark (Spark puts it first on their
        # PYTHONPATH): the environment's copy, half its size here, would never be imported
        env = env.exclude("lib/python*/site-packages/pyspark/*")
        # uncompressed: packing and unpacking are several times faster, and it travels on the cluster's network
        env.pack(output=packed, format="tar", force=True)
    except (venv_pack.VenvPackException, OSError) as exc:
        raise ValueError(f"venv-pack cannot pack {prefix}: {exc}") from None
    finally:
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)
    try:
        return _as_zip(packed, os.path.join(workdir, f"{ENV_NAME}.zip"))
    finally:
        os.remove(packed)


def editable_locations(prefix: str) -> Dict[str, List[str]]:
    """The editable installs of a virtual environment: each ``.pth`` file that reaches outside it -> the paths.

    A line of a ``.pth`` file is a folder put on ``sys.path`` (setuptools' editable install of a ``src``
    layout, and venv-pack's test) or an ``import`` of an editable finder (setuptools' other mode), whose
    ``MAPPING`` names each package's folder.
    """
    import ast
    import glob

    found: Dict[str, List[str]] = {}
    for site in glob.glob(os.path.join(prefix, "lib", "python*", "site-packages")):
        for pth in sorted(glob.glob(os.path.join(site, "*.pth"))):
            with open(pth, encoding="utf-8", errors="replace") as lines:
                for line in (raw.strip() for raw in lines):
                    if not line or line.startswith("#"):
                        continue
                    if line.startswith("import "):
                        finder = re.match(r"import (__editable___\w+_finder)\b", line)
                        source = os.path.join(site, f"{finder.group(1)}.py") if finder else ""
                        if finder and os.path.isfile(source):
                            with open(source, encoding="utf-8") as code:
                                mapping = re.search(r"^MAPPING\s*(?::[^=]*)?=\s*(\{.*?\})$", code.read(), re.M | re.S)
                            if mapping:
                                found.setdefault(pth, []).extend(ast.literal_eval(mapping.group(1)).values())
                        continue
                    location = os.path.normpath(os.path.join(site, line))
                    if not location.startswith(os.path.normpath(prefix) + os.sep):
                        found.setdefault(pth, []).append(location)
    return found


def _non_editable_copy(prefix: str, editable: Mapping[str, List[str]], dest: str) -> str:
    """A copy of the environment at ``dest`` (hard links where the file system allows) whose editable installs
    are replaced by copies of what they point at, in site-packages; PySpark is left out (see pack_env)."""

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    def skip(folder: str, names: List[str]) -> Set[str]:
        if os.path.basename(folder) == "site-packages":
            return {n for n in names if n == "pyspark" or n.startswith("__editable__")} | {
                os.path.basename(p) for p in editable
            }
        return set()

    shutil.copytree(prefix, dest, symlinks=True, ignore=skip, copy_function=link_or_copy)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.dist-info", "*.c", "*.o", "build", "tests")
    for pth, locations in editable.items():
        site = os.path.join(dest, os.path.relpath(os.path.dirname(pth), prefix))
        for location in locations:
            # a folder on sys.path: what it holds is importable; a finder's package: that package
            is_path_entry = not os.path.isfile(os.path.join(location, "__init__.py"))
            entries = sorted(os.listdir(location)) if is_path_entry else [os.path.basename(location)]
            base = location if is_path_entry else os.path.dirname(location)
            for name in entries:
                source = os.path.join(base, name)
                if os.path.isdir(source) and os.path.isfile(os.path.join(source, "__init__.py")):
                    shutil.copytree(source, os.path.join(site, name), ignore=ignore, dirs_exist_ok=True)
                elif os.path.isfile(source) and name.endswith((".py", ".so", ".pyd")):
                    shutil.copy2(source, os.path.join(site, name))
    return dest


def _as_zip(source: str, output: str) -> str:
    import posixpath
    import tarfile
    import zipfile

    def add(name: str, mode: int, data: Optional[IO[bytes]]) -> None:
        info = zipfile.ZipInfo(name + "/" if data is None else name, date_time=(2020, 1, 1, 0, 0, 0))
        info.create_system = 3  # Unix, so that the mode below is read back
        info.external_attr = ((0o40000 if data is None else 0o100000) | mode) << 16
        if data is None:
            out.writestr(info, b"")
        else:
            with out.open(info, "w", force_zip64=True) as dest:
                shutil.copyfileobj(data, dest, 1 << 20)

    with tarfile.open(source) as src, zipfile.ZipFile(output, "w", zipfile.ZIP_STORED, allowZip64=True) as out:
        # a name may come twice (venv-pack adds its own pyvenv.cfg): the last wins, as when untarring
        by_name = {m.name.strip("/"): m for m in src.getmembers() if m.name.strip("/") not in ("", ".")}
        members = list(by_name.values())
        folders: Set[str] = set()
        for name, member in by_name.items():
            parts = name.split("/") if member.isdir() else name.split("/")[:-1]
            folders.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        for name in sorted(folders, key=lambda n: (n.count("/"), n)):
            add(name, 0o755, None)
        for member in members:
            name, target, hard = member.name.strip("/"), member.linkname, member.islnk()
            if member.isfile():
                add(name, member.mode & 0o7777, src.extractfile(member))
                continue
            if not (member.issym() or hard):
                continue
            # a link becomes a copy of the file it ends at, inside the environment or not (bin/python3 -> the
            # base interpreter, as `venv --copies` makes); a link to a folder inside (lib64 -> lib) is left out
            resolved = ""
            for _ in range(40):
                if target.startswith("/"):
                    break
                resolved = posixpath.normpath(posixpath.join("" if hard else posixpath.dirname(name), target))
                inner = by_name.get(resolved)
                if inner is None or not (inner.issym() or inner.islnk()):
                    break
                name, target, hard = resolved, inner.linkname, inner.islnk()
            if target.startswith("/"):
                if os.path.isfile(target):
                    with open(target, "rb") as data:
                        add(member.name.strip("/"), 0o755, data)
                continue
            inner = by_name.get(resolved)
            if inner is not None and inner.isfile():
                add(member.name.strip("/"), inner.mode & 0o7777, src.extractfile(inner))
    return output


def _probe_function() -> Any:
    needed = NEEDED_MODULES

    # a function made in here is pickled by value (its code, not its module's name), and it imports nothing
    # but the standard library before its checks: a missing fastframe is reported, not raised while unpickling
    def probe(_: Any) -> Any:
        import importlib
        import os
        import socket
        import sys

        result: Dict[str, Any] = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "cwd": os.getcwd(),
            "python": sys.executable,
            "prefix": sys.prefix,
            "version": "%d.%d.%d" % sys.version_info[:3],
            "missing": None,
            "codec": None,
        }
        for name in needed:
            try:
                importlib.import_module(name)
            except ImportError as exc:
                result["missing"] = (getattr(exc, "name", None) or name, f"{type(exc).__name__}: {exc}")
                break
        if result["missing"] is None:
            result["codec"] = importlib.import_module("fastframe").IMPLEMENTATION
        yield result

    return probe


# a Python exception's last line in a traceback (``ModuleNotFoundError: No module named 'fastframe'``), at column 0
_PYTHON_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Problem))(?:: (.*))?$")
_TRACEBACK = "Traceback (most recent call last):"
# printed between two chained exceptions when the second was raised while handling the first (an accident in
# the handler: PySpark 4.3 hides a data source's construction error behind an UnboundLocalError this way)
_DURING_HANDLING = "During handling of the above exception, another exception occurred:"


def failure_reason(exc: BaseException, limit: int = 400) -> str:
    """One line saying why a Spark job or query failed: the Python exception at the end of the traceback.

    Spark wraps a Python worker's failure in a long message whose first line
    is Spark's own (``[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data
    source instance: Traceback (most recent call last):``); the cause is the
    traceback's last exception line, which comes first here, followed by
    Spark's words in parentheses. An exception raised while handling another
    gives way to that other one. Without a Python traceback: the first line of
    the message (with the next one when it ends with a colon), or a line
    naming a Python that could not start. At most ``limit`` characters.
    """
    text = str(exc)
    lines = text.splitlines()
    found: List[Tuple[int, str]] = []  # (line number, "Name: message") after a traceback
    in_traceback = False
    for number, line in enumerate(lines):
        if line.rstrip().endswith(_TRACEBACK):
            in_traceback = True
            continue
        match = _PYTHON_EXCEPTION.match(line.rstrip())
        if in_traceback and match:
            found.append((number, f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(2) or ''}".rstrip(": ")))
            in_traceback = False
    while len(found) > 1:
        between = lines[found[-2][0] + 1 : found[-1][0]]
        if not any(line.strip() == _DURING_HANDLING for line in between):
            break
        found.pop()
    first = next((line.strip() for line in lines if line.strip()), "")
    if found:
        head = first.replace(_TRACEBACK, "").strip().rstrip(":").strip()
        # a Java exception's class before the Python one says nothing more
        head = re.sub(r":?\s*(?:org\.apache\.spark\.api\.python\.)?PythonException:?$", "", head).strip()
        # of Spark's nested error classes ([STREAM_FAILED] Query [id = ...] terminated with exception: [...] ...)
        # the innermost says what Spark was doing
        classes = list(re.finditer(r"\[[A-Z][A-Z0-9_.]+\] ", head))
        head = head[classes[-1].start() :] if classes else head
        reason = found[-1][1] + (f" ({head})" if head else "")
    else:
        reason = next((line.strip() for line in lines if "Cannot run program" in line), "")
        if not reason:
            reason = first or type(exc).__name__
            rest = [line.strip() for line in lines[1:4] if line.strip()]
            for line in rest:  # PySpark ends a first line with a colon and puts the reason on the next ones
                if not reason.endswith(":") or line.startswith(("at ", "JVM stacktrace")):
                    break
                reason = f"{reason} {line}"
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."


def _java_error_reason(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("Cannot run program", "PYTHON_VERSION_MISMATCH"):
        for line in text.splitlines():
            if marker in line:
                return line.strip()
    return failure_reason(exc)


def check_executors(spark: Any, python: str, tasks: Optional[int] = None, wait: float = 120.0) -> List[Dict[str, Any]]:
    """Run one small task per core and check that the executors' Python can import what a read needs.

    Waits up to ``wait`` seconds for a first executor. Returns what each task
    saw (host, pid, working folder, python, version, codec); raises :class:`ExecutorProblem` with one clear sentence when a
    module is missing or the Python does not start. The tasks run in the
    Python workers of Spark's SQL path, the ones a ``stomp`` task runs in
    (see :func:`warm_python_workers`), and leave them started, with what a
    task imports: the job's first batch does not start them again.
    """
    sc = spark.sparkContext
    deadline = time.monotonic() + wait
    # the driver counts itself; a cluster without room for an executor would leave the job waiting forever
    while sc._jsc.sc().getExecutorMemoryStatus().size() < 2:
        if time.monotonic() > deadline:
            raise ExecutorProblem(
                f"no executor joined in {wait:.0f} s: the cluster may have no free core, or no worker with "
                f"spark.executor.memory ({sc.getConf().get('spark.executor.memory', '1g')}) to spare"
            )
        time.sleep(0.5)
    count = tasks or max(2, sc.defaultParallelism)
    fix = (
        f"the executors run {python!r}; point spark.pyspark.python (or PYSPARK_PYTHON on the driver) at a Python "
        "with fastframe[spark] installed on every node, or ship this environment with --ship-env"
    )
    if python == SHIPPED_PYTHON:
        fix = "the executors run the shipped environment's bin/python3: ship one with fastframe[spark] installed"
    try:
        seen = _sql_probe(spark, count)
    except Exception as sql_failure:
        # a Python that fails before the probe runs (no pyarrow, which Spark's SQL worker imports first; a path
        # that does not exist): RDD code runs without pyarrow, and its probe says which module is missing
        try:
            seen = sc.parallelize(range(count), count).mapPartitions(_probe_function()).collect()
        except Exception as exc:
            raise ExecutorProblem(f"the executors' Python failed: {_java_error_reason(exc)}; {fix}") from None
        if all(item["missing"] is None for item in seen):
            raise ExecutorProblem(f"the executors' Python failed: {failure_reason(sql_failure)}; {fix}") from None
    for item in seen:
        if item["missing"] is not None:
            module, error = item["missing"]
            raise ExecutorProblem(
                f"the executors' Python ({item['python']} on {item['host']}) cannot import {module} ({error}); {fix}"
            )
    return seen


# what a read or stream task of the stomp source imports on an executor (the ones missing in this release skipped)
WARM_MODULES = ("pyarrow", "fastframe.spark._source", "fastframe.spark._file_read", "fastframe.spark._stream_source",
                "fastframe.spark._stream_read")  # fmt: skip


def _sql_probe(spark: Any, count: int) -> List[Dict[str, Any]]:
    """The probe's findings from ``count`` mapInArrow tasks, which then import what a task imports."""
    import json

    probe = _probe_function()
    warm = WARM_MODULES

    def in_arrow(batches: Any) -> Any:
        import importlib
        import json

        import pyarrow  # type: ignore[import-untyped]

        for _ in batches:
            pass
        found = next(probe(None))
        if found["missing"] is None:
            for name in warm:
                try:
                    importlib.import_module(name)
                except ImportError:
                    pass
            try:
                importlib.import_module("fastframe.spark._worker").freeze_worker_heap()
            except (ImportError, AttributeError):
                pass
        yield pyarrow.RecordBatch.from_pydict({"seen": [json.dumps(found)]})

    rows = spark.range(count, numPartitions=count).mapInArrow(in_arrow, "seen string").collect()
    return [json.loads(row["seen"]) for row in rows]


def warm_python_workers(spark: Any, tasks: Optional[int] = None) -> float:
    """Start, on the executors, the Python workers a ``stomp`` read or stream task runs in; return the seconds.

    Spark runs a data source's tasks in the Python workers of its SQL path,
    not in those of RDD code (:func:`check_executors`' probe): a new
    application's first batch would start them and import pyarrow and
    fastframe's Spark layer (seconds per executor core, more on a busy
    node). One small ``mapInArrow`` task per core does it ahead, imports
    what a task imports and freezes the worker's heap as a first task does;
    PySpark reuses the worker for the next task. Failures are the real
    job's to report: this raises nothing.
    """
    needed = WARM_MODULES

    def warm(batches: Any) -> Any:
        import importlib

        for name in needed:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        try:
            importlib.import_module("fastframe.spark._worker").freeze_worker_heap()
        except (ImportError, AttributeError):
            pass
        yield from batches

    started = time.monotonic()
    count = tasks or max(2, spark.sparkContext.defaultParallelism)
    try:
        spark.range(count, numPartitions=count).mapInArrow(warm, "id long").collect()
    except Exception:
        pass
    return time.monotonic() - started


def _seq(scala_seq: Any) -> List[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def tasks_per_executor(spark: Any, job_group: str) -> Optional[Dict[str, Tuple[str, int]]]:
    """For the jobs of ``job_group``: executor id -> (host:port, successful tasks), from Spark's status store.

    None when Spark's internals do not answer (the store is not public API).
    In cluster mode the driver runs no task, so its id (``driver``) is absent.
    """
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    try:
        jsc = sc._jsc.sc()
        jsc.listenerBus().waitUntilEmpty()
        store = jsc.statusStore()
        hosts = {e.id(): e.hostPort() for e in _seq(store.executorList(False))}
        counts: Dict[str, int] = {}
        for job_id in tracker.getJobIdsForGroup(job_group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                for attempt in range(stage.currentAttemptId + 1 if stage else 0):
                    for task in _seq(store.taskList(stage_id, attempt, 1 << 30)):
                        if task.status() == "SUCCESS":
                            counts[task.executorId()] = counts.get(task.executorId(), 0) + 1
    except Exception:
        return None
    return {executor: (hosts.get(executor, "?"), n) for executor, n in sorted(counts.items())}
