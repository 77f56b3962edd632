"""Compare every installed STOMP codec on the same workloads, in one process and one run.

    python -m bench.compare                  # full sizes (a few minutes on 2 cores)
    python -m bench.compare --sizes tiny     # CI smoke size
    python -m bench.compare --only c,py,stomp.py --markdown out.md --chart out.png

What is measured (see ``--help`` for the flags):

- decode / encode of each workload (``bench.workloads``) by each codec
  (``bench.codecs``): CPU time (``time.process_time``) of one call over a
  whole-frame prefix of the workload, median of ``--repeat`` repetitions, GC
  enabled (``gc.collect()`` between repetitions, untimed). The prefix is the
  whole workload unless one repetition would take more than ``--budget``
  seconds, estimated from growing calibration runs; then the table says how
  many frames were used. frames/s counts frames, MB/s counts the bytes of the
  STOMP stream (10^6 bytes), for every row including msgpack's.
- every result is checked against fastframe's reference decoding (decoders)
  or decoded back by it (encoders); a wrong result is shown as ``wrong: ...``
  and not counted.
- incremental feeding in 1-byte and 100-byte pieces, with a wall-clock cap
  per codec and row; a capped run is shown as an upper bound (``≤``). And in
  64 KiB pieces (what a socket read delivers) over the whole small, medium
  and large workloads, each repetition timing one ``decode()`` of the same
  bytes too: the pieces' rate as a percentage of the whole buffer's.
- linearity: ns per byte over the first and the last quarter of a 1 MiB
  body fed 1 byte at a time, for both twins.
- floors: a copy of the same bytes, a NUL scan over them, and msgpack's C
  unpacker/packer building the same Python objects.
- client calls: on the ``client`` workload's frames, the calls a client makes
  per message (``encode(command, dict, body)``, ``Encoder().encode(command,
  pairs, body)``, ``Frame(command, dict, body)``) beside msgpack's
  ``Packer().pack((command, dict, body))`` on the same objects; CPU time of a
  loop over the frames, median of ``--repeat`` repetitions.
- targets (from the issue), each with its measured ratio and PASS/MISS.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from bench.codecs import CODEC_KEYS, Codec, Unavailable, all_codecs, diagnose, diagnose_semantic
from bench.workloads import DEFAULT_SEED, WORKLOAD_NAMES, Workload, build_workloads

OPS = ("decode", "encode", "feed", "linearity", "client")
GROUPS = {
    "fastframe": ("c", "py"),
    "peers": ("stomp.py", "stompest", "coilmq", "aiostomp"),
    "floors": ("msgpack", "copy", "scan"),
}
BASELINE = "stomp.py"

# client calls: (label, how to prepare each frame's arguments, the call); prepared untimed
CLIENT_CALLS = (
    ("encode(command, dict, body)", "dict", lambda mod: mod.encode),
    ("Encoder().encode(command, pairs, body)", "pairs", lambda mod: mod.Encoder().encode),
    ("Frame(command, dict, body)", "dict", lambda mod: mod.Frame),
)
MSGPACK_CALL = "Packer().pack((command, dict, body))"

# incremental rows: (label, workload, piece size, byte budget for full sizes, for tiny sizes);
# WHOLE: the whole workload
WHOLE = sys.maxsize
SOCKET_PIECE = 64 * 1024  # what a socket read delivers
FEED_ROWS = (
    ("1 B pieces, small", "small", 1, 64 * 1024, 16 * 1024),
    ("100 B pieces, small", "small", 100, 1024 * 1024, 64 * 1024),
    ("100 B pieces, mixed", "mixed", 100, 1024 * 1024, 32 * 1024),
    ("100 B pieces, large", "large", 100, 2 * 1024 * 1024, 256 * 1024),
    ("64 KiB pieces, small", "small", SOCKET_PIECE, WHOLE, WHOLE),
    ("64 KiB pieces, medium", "medium", SOCKET_PIECE, WHOLE, WHOLE),
    ("64 KiB pieces, large", "large", SOCKET_PIECE, WHOLE, WHOLE),
)
#: decoding fed in socket-sized pieces against one feed of the whole buffer (issue 9): the goal, as a fraction
PIECES_GOAL = 0.9


@dataclass
class Result:
    """One measurement (or why there is none)."""

    codec: str
    workload: str
    op: str
    status: str  # ok, wrong, error, floor
    detail: str = ""
    seconds: float = 0.0  # median CPU seconds of one repetition
    frames: int = 0
    nbytes: int = 0
    total_frames: int = 0
    reps: int = 0
    capped: bool = False
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def counted(self) -> bool:
        return self.status in ("ok", "floor") and self.seconds > 0

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.counted else 0.0

    @property
    def mbps(self) -> float:
        return self.nbytes / self.seconds / 1e6 if self.counted else 0.0


@dataclass
class Report:
    args: argparse.Namespace
    workloads: Dict[str, Workload]
    codecs: List[Codec]
    unavailable: Dict[str, str]
    results: List[Result] = field(default_factory=list)
    linearity: List[Dict[str, Any]] = field(default_factory=list)
    elapsed: float = 0.0
    load: float = field(default_factory=lambda: os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0)

    def find(self, codec: str, workload: str, op: str) -> Optional[Result]:
        for result in self.results:
            if (result.codec, result.workload, result.op) == (codec, workload, op):
                return result
        return None


# --------------------------------------------------------------------------- measuring


def _error_text(error: BaseException) -> str:
    reason = getattr(error, "reason", None) or str(error) or ""
    text = f"{type(error).__name__}: {reason}" if reason else type(error).__name__
    return text if len(text) <= 90 else text[:87] + "..."


def _msgpack_pack() -> Optional[Callable[[List[Any]], List[bytes]]]:
    """msgpack's packing of (command, dict, body) tuples, the client calls' paired floor; None without msgpack."""
    try:
        import msgpack
    except ImportError:
        return None
    pack = msgpack.Packer(use_bin_type=True).pack
    return lambda items: [pack((command, headers, body)) for command, headers, body in items]


def _cpu(function: Any, argument: Any) -> Tuple[float, Any]:
    gc.collect()
    clock = time.process_time
    start = clock()
    result = function(argument)
    return clock() - start, result


class Runner:
    def __init__(self, args: argparse.Namespace, log: Any) -> None:
        self.args = args
        self.log = log
        from fastframe.codec import _codec_py

        self.reference = _codec_py

    # -- checks -----------------------------------------------------------------
    def check_decode(self, codec: Codec, frames: Sequence[Any], result: Any) -> Optional[str]:
        return diagnose(frames, codec.normalize(result))

    def check_encode(self, codec: Codec, frames: Sequence[Any], outputs: List[bytes]) -> Optional[str]:
        if codec.key == "msgpack":
            return diagnose_semantic(frames, codec.decode_packed(outputs))  # type: ignore[attr-defined]
        try:
            decoded = self.reference.decode(b"".join(outputs))
        except Exception as error:  # any decode error: the encoder wrote something invalid
            return f"output does not decode ({_error_text(error)})"
        problem = diagnose_semantic(frames, [(f.command, f.headers, None, f.body) for f in decoded])
        if problem is None and codec.key == "c":
            # the twins must be identical, down to the bytes
            want = [self.reference.encode(self.reference.Frame(*frame)) for frame in frames]
            if want != outputs:
                index = next(i for i, (a, b) in enumerate(zip(want, outputs)) if a != b)
                return f"frame {index}: bytes differ from the Python twin ({outputs[index][:40]!r}...)"
        return problem

    # -- decode / encode ----------------------------------------------------------
    def measure(self, codec: Codec, workload: Workload, op: str) -> Result:
        args = self.args
        prepare = codec.prepare_decode if op == "decode" else None
        run = codec.decode if op == "decode" else codec.encode

        def prepared_for(n: int) -> Tuple[Sequence[Any], bytes, Any]:
            frames, data = workload.prefix(n)
            if op == "decode":
                return frames, data, prepare(frames, data)  # type: ignore[misc]
            return frames, data, codec.prepare_encode(frames)

        total = len(workload)
        result = Result(codec.key, workload.name, op, "ok", total_frames=total)
        try:
            # calibration: grow the prefix until one call takes long enough to time
            n = len(workload.slice_bytes(64 * 1024)[0])
            while True:
                frames, data, prepared = prepared_for(n)
                seconds, output = _cpu(run, prepared)
                del output
                if n >= total or seconds >= min(0.02, args.budget / 4):
                    break
                n = min(total, n * 8)
            wanted = total if seconds <= 0 else min(total, max(1, int(args.budget * n / seconds)))
            if wanted > total // 2:  # close enough: the whole workload (at most twice the budget)
                wanted = total
            if wanted != n:
                n = wanted
                frames, data, prepared = prepared_for(n)
            times = []
            for rep in range(args.repeat):
                seconds, output = _cpu(run, prepared)
                if rep == 0 and codec.checks:
                    check = self.check_decode if op == "decode" else self.check_encode
                    problem = check(codec, frames, output)
                    if problem is not None:
                        result.status, result.detail = "wrong", problem
                        return result
                del output
                times.append(seconds)
                if sum(times) > 3 * args.budget * args.repeat and rep + 1 < args.repeat:
                    result.extra["cut_short"] = True  # far off the estimate: a slow path
                    break
        except Exception as error:  # a peer failing on valid input is a result, not a crash
            result.status, result.detail = "error", _error_text(error)
            return result
        result.status = "ok" if codec.checks else "floor"
        result.seconds = statistics.median(times)
        result.reps = len(times)
        result.frames = n
        # MB/s always counts the STOMP stream, also for msgpack (its own encoding differs)
        result.nbytes = len(workload.prefix(n)[1])
        return result

    # -- client calls ------------------------------------------------------------------
    def measure_client(self, codec: Codec, workload: Workload) -> List[Result]:
        """Each client call of ``codec`` on every frame of ``workload`` (its own objects per call)."""
        if codec.key == "msgpack":
            pack = codec.msgpack.Packer().pack  # type: ignore[attr-defined]
            calls: List[Tuple[str, str, Any]] = [(MSGPACK_CALL, "dict", lambda c, h, b: pack((c, h, b)))]
        elif codec.kind == "fastframe":
            calls = [(label, shape, make(codec.mod)) for label, shape, make in CLIENT_CALLS]  # type: ignore[attr-defined]
        else:
            return []
        results = []
        for label, shape, call in calls:
            wrap = dict if shape == "dict" else list
            prepared = [(command, wrap(headers), body) for command, headers, body in workload.frames]

            def loop(items: List[Any], call: Any = call) -> List[Any]:
                return [call(command, headers, body) for command, headers, body in items]

            checked = codec.kind == "fastframe"  # msgpack's bytes are its own
            result = Result(codec.key, label, "client", "ok" if checked else "floor", total_frames=len(prepared))
            # beside each repetition, msgpack packs the same objects, in turn first (a paired measure, as
            # for the pieces: the machine's state drifts alike for both); the ratio is the median of the
            # repetitions' own
            packed = _msgpack_pack() if checked else None
            pack_objects = [(command, dict(headers), body) for command, headers, body in workload.frames]
            times, ratios = [], []
            for rep in range(self.args.repeat):
                if packed is not None and rep % 2:
                    pack_seconds, _ = _cpu(packed, pack_objects)
                seconds, output = _cpu(loop, prepared)
                if packed is not None and not rep % 2:
                    pack_seconds, _ = _cpu(packed, pack_objects)
                if rep == 0 and checked:
                    made = [bytes(item) if isinstance(item, bytes) else self.reference.encode(item) for item in output]
                    if made != [self.reference.encode(*frame) for frame in workload.frames]:
                        result.status, result.detail = "wrong", "not the reference's bytes"
                        break
                del output
                times.append(seconds)
                if packed is not None:
                    ratios.append(pack_seconds / seconds)
            if times and result.status != "wrong":
                result.seconds = statistics.median(times)
                result.reps = len(times)
                result.frames = len(prepared)
                result.nbytes = len(workload.data)
                if ratios:
                    result.extra["x_msgpack"] = statistics.median(ratios)
            results.append(result)
        return results

    # -- incremental feeding --------------------------------------------------------
    def measure_feed(self, codec: Codec, workload: Workload, label: str, size: int, budget_bytes: int) -> Result:
        frames, data = workload.slice_bytes(budget_bytes)
        pieces = [data[i : i + size] for i in range(0, len(data), size)]
        result = Result(codec.key, label, "feed", "ok", total_frames=len(frames))
        cap = self.args.feed_cap
        spent = 0.0
        times: List[float] = []
        # fastframe's socket-sized pieces are compared with one decode() of the same bytes: each
        # repetition times both, one right after the other (in turn first), so the machine's state
        # drifts alike for the two: a paired measure, its share the median of the repetitions' own;
        # short rows repeat until they add up to a few budgets of CPU time
        paired = size == SOCKET_PIECE and codec.kind == "fastframe"
        whole_times: List[float] = []
        prepared = codec.prepare_decode(frames, data) if paired else None
        rep = 0
        while rep < self.args.repeat or (
            paired and sum(times) + sum(whole_times) < 4 * self.args.budget and rep < 20 * self.args.repeat
        ):
            rep += 1
            if paired and rep % 2:
                problem = self._time_whole(codec, prepared, whole_times)
                if problem is not None:
                    result.status, result.detail = "error", problem
                    return result
            gc.collect()
            deadline = time.perf_counter() + (cap - spent)
            start = time.process_time()
            wall = time.perf_counter()
            try:
                done, output, finished = codec.feed(pieces, deadline)
            except Exception as error:
                result.status, result.detail = "error", _error_text(error)
                return result
            seconds = time.process_time() - start
            spent += time.perf_counter() - wall
            if rep == 1:
                problem = diagnose(frames, codec.normalize(output), complete=finished)
                if problem is not None:
                    result.status, result.detail = "wrong", problem
                    return result
            del output
            if not finished:
                # a lower bound on the time, so an upper bound on the rate
                result.capped = True
                result.seconds = seconds
                result.nbytes = sum(len(piece) for piece in pieces[:done])
                result.frames = sum(1 for end in workload.ends[: len(frames)] if end <= result.nbytes)
                result.reps = rep
                result.detail = f"capped at {cap:g} s after {result.nbytes / len(data):.0%} of the bytes"
                return result
            times.append(seconds)
            if paired and not rep % 2:
                problem = self._time_whole(codec, prepared, whole_times)
                if problem is not None:
                    result.status, result.detail = "error", problem
                    return result
            if spent > cap / 2:
                break
        if whole_times:
            result.extra["whole_seconds"] = statistics.median(whole_times)
            result.extra["share"] = statistics.median(whole / fed for whole, fed in zip(whole_times, times))
        result.seconds = statistics.median(times)
        result.reps = len(times)
        result.frames = len(frames)
        result.nbytes = len(data)
        return result

    @staticmethod
    def _time_whole(codec: Codec, prepared: Any, whole_times: List[float]) -> Optional[str]:
        """Time one decode() of the whole buffer (beside a feed in pieces); the error text if it fails."""
        try:
            seconds, output = _cpu(codec.decode, prepared)
        except Exception as error:
            return f"whole-buffer decode: {_error_text(error)}"
        del output
        whole_times.append(seconds)
        return None

    # -- linearity --------------------------------------------------------------------
    def linearity(self, codec: Codec, body_size: int) -> List[Dict[str, Any]]:
        mod = codec.mod  # type: ignore[attr-defined]
        rows = []
        body_bin = bytes(range(256)) * (body_size // 256)
        body_text = (b"0123456789abcdef" * (body_size // 16 + 1))[:body_size]
        variants = (
            ("binary, content-length", mod.encode("MESSAGE", {"destination": "/queue/big"}, body_bin)),
            (
                "text, ends at NUL",
                mod.encode("MESSAGE", {"destination": "/queue/big"}, body_text, content_length=False),
            ),
        )
        for label, data in variants:
            pieces = [data[i : i + 1] for i in range(len(data))]
            quarter = len(pieces) // 4
            decoder = mod.Decoder()
            feed = decoder.feed
            clock = time.process_time_ns
            out: List[Any] = []
            gc.collect()
            start = clock()
            for piece in pieces[:quarter]:
                out += feed(piece)
            first = clock() - start
            for piece in pieces[quarter : len(pieces) - quarter]:
                out += feed(piece)
            start = clock()
            for piece in pieces[len(pieces) - quarter :]:
                out += feed(piece)
            last = clock() - start
            decoder.close()
            ok = len(out) == 1 and out[0].body == (body_bin if "binary" in label else body_text)
            rows.append(
                {
                    "codec": codec.key,
                    "label": codec.label,
                    "variant": label,
                    "bytes": len(data),
                    "first": first / quarter,
                    "last": last / quarter,
                    "ok": ok,
                }
            )
            self.log(f"  linearity {codec.key} {label}: {first / quarter:.0f} / {last / quarter:.0f} ns/B")
        return rows


def _selected(only: Optional[str]) -> Tuple[str, ...]:
    if not only:
        return CODEC_KEYS
    keys: List[str] = []
    for item in only.split(","):
        item = item.strip()
        if not item:
            continue
        group = GROUPS.get(item, (item,))
        for key in group:
            if key not in CODEC_KEYS:
                raise SystemExit(f"--only: unknown codec {key!r} (choose from {', '.join(CODEC_KEYS + tuple(GROUPS))})")
            if key not in keys:
                keys.append(key)
    return tuple(keys)


def run(args: argparse.Namespace, log: Any = None) -> Report:
    """Measure everything the arguments ask for and return the report."""
    if log is None:

        def log(message: str) -> None:
            if not args.quiet:
                print(message, file=sys.stderr, flush=True)

    began = time.perf_counter()
    keys = _selected(args.only)
    codecs, unavailable = [], {}
    for codec in all_codecs():
        if codec.key not in keys:
            continue
        try:
            codec.load()
        except Unavailable as reason:
            unavailable[codec.key] = f"{codec.label}: {reason}"
            continue
        codecs.append(codec)
    log(f"building workloads ({args.sizes})...")
    names = tuple(args.workloads.split(",")) if args.workloads else WORKLOAD_NAMES
    workloads = build_workloads(args.sizes, names=names, seed=args.seed)
    report = Report(args, workloads, codecs, unavailable)
    ops = set(args.ops.split(","))
    runner = Runner(args, log)
    # Hide the workloads (millions of tracked tuples) from the collector: a full collection
    # is due when the objects promoted since the last one exceed a quarter of those that
    # survived it, so a big long-lived heap would make collections rarer than in a program
    # that just decodes a stream. Frozen objects count for nothing.
    gc.collect()
    gc.freeze()
    gc.collect()
    if not args.gc:
        gc.disable()
    try:
        for op in ("decode", "encode"):
            if op not in ops:
                continue
            for workload in workloads.values():
                for codec in codecs:
                    if not (codec.can_decode if op == "decode" else codec.can_encode):
                        continue
                    result = runner.measure(codec, workload, op)
                    report.results.append(result)
                    log(f"  {op} {workload.name:8} {codec.key:9} {_cell_fps(result):>12} {_cell_detail(result)}")
        if "client" in ops and "client" in workloads:
            for codec in codecs:
                for result in runner.measure_client(codec, workloads["client"]):
                    report.results.append(result)
                    log(f"  client {result.workload:40} {codec.key:9} {_cell_fps(result):>12} {_cell_detail(result)}")
        if "feed" in ops:
            for label, name, size, full_bytes, tiny_bytes in FEED_ROWS:
                if name not in workloads:
                    continue
                budget_bytes = tiny_bytes if args.sizes == "tiny" else full_bytes
                for codec in codecs:
                    if not codec.can_feed:
                        continue
                    result = runner.measure_feed(codec, workloads[name], label, size, budget_bytes)
                    report.results.append(result)
                    log(f"  feed {label:22} {codec.key:9} {_cell_mbps(result):>10} {_cell_detail(result)}")
        if "linearity" in ops:
            body_size = 64 * 1024 if args.sizes == "tiny" else 1024 * 1024
            for codec in codecs:
                if codec.kind == "fastframe":
                    report.linearity += runner.linearity(codec, body_size)
    finally:
        gc.enable()
        gc.unfreeze()
    report.elapsed = time.perf_counter() - began
    return report


# --------------------------------------------------------------------------- rendering


def _si(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e4:
        return f"{value / 1e3:.0f}k"
    if value >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


def _cell_fps(result: Result) -> str:
    if not result.counted:
        return "—"
    return ("≤ " if result.capped else "") + _si(result.fps)


def _cell_mbps(result: Result) -> str:
    if not result.counted:
        return "—"
    mbps = result.mbps
    text = f"{mbps:,.0f}" if mbps >= 100 else f"{mbps:.1f}" if mbps >= 1 else f"{mbps:.2f}"
    return ("≤ " if result.capped else "") + text


def _cell_detail(result: Result) -> str:
    if result.status == "wrong":
        return f"wrong: {result.detail}"
    if result.status == "error":
        return f"error: {result.detail}"
    mark = "ok" if result.status == "ok" else "floor"
    notes = []
    if result.capped:
        notes.append(result.detail)
    elif result.frames < result.total_frames:
        notes.append(f"first {result.frames:,} of {result.total_frames:,} frames")
    if result.extra.get("cut_short"):
        notes.append(f"{result.reps} run{'s' if result.reps > 1 else ''}: slower than estimated")
    return mark + (f" ({'; '.join(notes)})" if notes else "")


def _ratio(result: Result, base: Optional[Result], key: str = "fps") -> str:
    if base is None or not result.counted or not base.counted or result.capped:
        return "—"
    mine, theirs = getattr(result, key), getattr(base, key)
    if base.capped:
        return f"≥ {mine / theirs:.1f}×"
    return f"{mine / theirs:.1f}×"


def _versions() -> str:
    parts = []
    for dist in ("fastframe", "stomp.py", "stompest", "coilmq", "aiostomp", "msgpack"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            if dist == "fastframe":
                import fastframe

                parts.append(f"fastframe {fastframe.__version__} (source tree)")
    return ", ".join(parts)


def render(report: Report) -> str:
    args = report.args
    lines: List[str] = []
    add = lines.append
    labels = {codec.key: codec.label for codec in all_codecs()}
    add("# fastframe benchmark")
    add("")
    add(
        f"Python {platform.python_version()} ({platform.python_implementation()}), {platform.system()} "
        f"{platform.machine()}, {os.cpu_count()} CPUs (load average {report.load:.2f} at the start); {_versions()}."
    )
    add(
        f"Sizes `{args.sizes}`, seed {args.seed}. Times are CPU time (`time.process_time`) of one call, median of "
        f"up to {args.repeat} repetitions, GC {'enabled' if args.gc else 'DISABLED'} (`gc.collect()` between "
        "repetitions, untimed; the workloads are hidden from the collector with `gc.freeze()`). A repetition "
        f"covers the whole workload unless that would take over {args.budget:g} s; then a whole-frame prefix "
        "(the result column says so). MB/s = 10^6 bytes of the STOMP stream per second (also for msgpack, which "
        f"packs the same frames its own way). × {BASELINE} = frames/s ratio against {BASELINE} on the same "
        f"workload. The run took {report.elapsed:.0f} s."
    )
    if report.unavailable:
        add("")
        add("Not measured: " + "; ".join(report.unavailable[key] for key in report.unavailable) + ".")
    add("")
    add(
        "Workloads: "
        + "; ".join(
            f"**{w.name}** {len(w):,} frames, {len(w.data) / 1e6:.1f} MB ({w.description})"
            for w in report.workloads.values()
        )
        + "."
    )
    for op in ("decode", "encode"):
        rows = [r for r in report.results if r.op == op]
        if not rows:
            continue
        add("")
        add(f"## {op.capitalize()}")
        add("")
        add(f"| workload | codec | frames/s | MB/s | × {BASELINE} | result |")
        add("|---|---|---:|---:|---:|---|")
        for result in rows:
            base = report.find(BASELINE, result.workload, op)
            add(
                f"| {result.workload} | {labels[result.codec]} | {_cell_fps(result)} | {_cell_mbps(result)} | "
                f"{_ratio(result, base)} | {_cell_detail(result)} |"
            )
    feed_rows = [r for r in report.results if r.op == "feed"]
    if feed_rows:
        add("")
        add("## Incremental feeding")
        add("")
        slices = [
            f"{label}: {_slice_size(report, name, tiny if args.sizes == 'tiny' else full)}"
            for label, name, _, full, tiny in FEED_ROWS
            if name in report.workloads
        ]
        add(
            "The stream cut into pieces and fed one piece per call, on a whole-frame slice of the workload "
            f"({'; '.join(slices)}). Each codec gets at most {args.feed_cap:g} s (wall) per row; a capped run "
            "shows an upper bound on its rate (≤)."
        )
        add("")
        add(f"| pieces | codec | frames/s | MB/s | × {BASELINE} | result |")
        add("|---|---|---:|---:|---:|---|")
        for result in feed_rows:
            base = report.find(BASELINE, result.workload, "feed")
            add(
                f"| {result.workload} | {labels[result.codec]} | {_cell_fps(result)} | {_cell_mbps(result)} | "
                f"{_ratio(result, base)} | {_cell_detail(result)} |"
            )
    compared = [row for row in _pieces_against_whole(report) if _whole_mbps(row[2])]
    if compared:
        add("")
        add("## Pieces against the whole buffer")
        add("")
        add(
            f"Each workload fed in {SOCKET_PIECE // 1024} KiB pieces (one `feed()` per piece, as a socket delivers "
            "the stream; the rows above) beside one `decode()` of the same bytes, the two timed one right after "
            "the other in each repetition, in turn first (a paired measure: the machine's state drifts alike for "
            f"both), at least {args.repeat} repetitions and until they add up to {4 * args.budget:g} s of CPU time: "
            "the median MB/s of each, and the median of the repetitions' shares (pieces' rate / whole buffer's)."
        )
        add("")
        add(
            f"| workload | codec | whole buffer MB/s | {SOCKET_PIECE // 1024} KiB pieces MB/s | pieces / whole | runs |"
        )
        add("|---|---|---:|---:|---:|---:|")
        for name, key, pieces in compared:
            share = _share(pieces)
            whole = _whole_mbps(pieces)
            add(
                f"| {name} | {labels[key]} | {whole:,.0f} | {_cell_mbps(pieces)} | "
                f"{'—' if share is None else f'{share:.0%}'} | {pieces.reps} |"
            )
    client_rows = [r for r in report.results if r.op == "client"]
    if client_rows:
        base = report.find("msgpack", MSGPACK_CALL, "client")
        add("")
        add("## Client calls")
        add("")
        add(
            "What a client does per message, on the frames of the client workload (5 headers, 40-80 B bodies), "
            "beside msgpack packing the same objects. Calls per second, CPU time. × msgpack pack is paired: in "
            "each repetition msgpack packs the same objects right beside the call, in turn first, and the "
            "column is the median of the repetitions' own ratios."
        )
        add("")
        add("| call | codec | calls/s | × msgpack pack | result |")
        add("|---|---|---:|---:|---|")
        for result in client_rows:
            add(
                f"| `{result.workload}` | {labels[result.codec]} | {_cell_fps(result)} | {_x_msgpack(result, base)} | "
                f"{_cell_detail(result)} |"
            )
    if report.linearity:
        add("")
        add("## Linearity")
        add("")
        add(
            "One frame with a large body fed 1 byte per `feed()` call: CPU ns per byte over the first and the "
            "last quarter."
        )
        add("")
        add("| twin | body | bytes | first quarter ns/B | last quarter ns/B | last / first | result |")
        add("|---|---|---:|---:|---:|---:|---|")
        for row in report.linearity:
            add(
                f"| {row['label']} | {row['variant']} | {row['bytes']:,} | {row['first']:.0f} | {row['last']:.0f} | "
                f"{row['last'] / row['first']:.2f} | {'ok' if row['ok'] else 'wrong: frame not decoded'} |"
            )
    targets = evaluate_targets(report)
    if targets:
        add("")
        add("## Targets")
        add("")
        for target in targets:
            add(f"- {target}")
    add("")
    add("## How each codec is driven, and where it deviates from the spec")
    add("")
    for codec in report.codecs:
        add(f"- **{codec.label}**: {codec.how}.")
        for note in codec.notes:
            add(f"  - {note}")
    return "\n".join(lines) + "\n"


def _slice_size(report: Report, name: str, budget: int) -> str:
    frames, data = report.workloads[name].slice_bytes(budget)
    if budget == WHOLE:
        return f"the whole workload, {len(data) / 1e3:,.0f} kB"
    return f"{len(data) / 1e3:,.0f} kB"


def _pieces_against_whole(report: Report) -> List[Tuple[str, str, Result]]:
    """(workload, codec, 64 KiB feed) for each socket-sized feed row measured."""
    out = []
    for label, name, size, _, _ in FEED_ROWS:
        if size != SOCKET_PIECE:
            continue
        for codec in report.codecs:
            pieces = report.find(codec.key, label, "feed")
            if pieces is not None:
                out.append((name, codec.key, pieces))
    return out


def _whole_mbps(pieces: Result) -> float:
    """MB/s of the whole-buffer decode timed beside the pieces (0 when there was none)."""
    whole = pieces.extra.get("whole_seconds", 0.0)
    return pieces.nbytes / whole / 1e6 if whole > 0 and pieces.counted else 0.0


def _x_msgpack(result: Result, base: Optional[Result]) -> str:
    """The client call's paired ratio to msgpack's pack (or the ratio of separate medians, without one)."""
    if result.counted and "x_msgpack" in result.extra:
        return f"{result.extra['x_msgpack']:.1f}×"
    return _ratio(result, base)


def _share(pieces: Result) -> Optional[float]:
    """The pieces' rate as a fraction of the whole buffer's: the median of the repetitions' own shares
    (None when either is not a clean measurement)."""
    if not _whole_mbps(pieces) or pieces.capped:
        return None
    return float(pieces.extra["share"])


# --------------------------------------------------------------------------- targets


#: (text, codec, workload, op, baseline codec, goal, compared figure); from the issue
TARGETS: Tuple[Tuple[str, str, str, str, str, float, str], ...] = (
    ("C twin small decode ≥ 30× stomp.py", "c", "small", "decode", "stomp.py", 30, "fps"),
    ("C twin small decode ≥ 2× msgpack unpacker", "c", "small", "decode", "msgpack", 2, "fps"),
    ("C twin small encode ≥ 1.5× msgpack packer", "c", "small", "encode", "msgpack", 1.5, "fps"),
    ("C twin large decode ≥ 70% of memcpy (MB/s)", "c", "large", "decode", "copy", 0.7, "mbps"),
    ("C twin escape decode ≥ 30× stomp.py", "c", "escape", "decode", "stomp.py", 30, "fps"),
) + tuple(
    (f"Python twin {name} {op} ≥ {goal}× stomp.py", "py", name, op, "stomp.py", goal, "fps")
    for op, goal in (("decode", 3), ("encode", 2))
    for name in WORKLOAD_NAMES
)


#: (text, call, goal against msgpack's pack of the same objects) for the C twin's client calls (issue 9);
#: Frame's goal is 3x its 0.1.0 rate, which was 0.30x msgpack's pack
CLIENT_TARGETS: Tuple[Tuple[str, str, float], ...] = (
    ("C twin encode(command, dict, body) ≥ 1.5× msgpack pack", CLIENT_CALLS[0][0], 1.5),
    ("C twin Encoder().encode(command, pairs, body) ≥ 1.5× msgpack pack", CLIENT_CALLS[1][0], 1.5),
    ("C twin Frame(command, dict, body) ≥ 0.9× msgpack pack (3× 0.1.0)", CLIENT_CALLS[2][0], 0.9),
)


def evaluate_targets(report: Report) -> List[str]:
    """Each target of the issue, with the measured ratio and PASS/MISS (n/a when not measurable)."""
    labels = {codec.key: codec.label for codec in all_codecs()}
    out: List[str] = []
    base = report.find("msgpack", MSGPACK_CALL, "client")
    for text, call, goal in CLIENT_TARGETS:
        mine = report.find("c", call, "client")
        if mine is None:
            continue
        if not (mine.counted and base is not None and base.counted):
            out.append(f"{text}: n/a (C twin or msgpack not measured)")
            continue
        ratio = float(mine.extra.get("x_msgpack", mine.fps / base.fps))
        out.append(f"{text}: {ratio:.2f}× — {'PASS' if ratio >= goal else 'MISS'}")
    for name, key, pieces in _pieces_against_whole(report):
        if key != "c":
            continue
        text = (
            f"C twin {name} decode fed in {SOCKET_PIECE // 1024} KiB pieces ≥ {PIECES_GOAL:.0%} of whole-buffer decode"
        )
        share = _share(pieces)
        if share is None:
            out.append(f"{text}: n/a ({_cell_detail(pieces)})")
            continue
        out.append(f"{text}: {share:.0%} — {'PASS' if share >= PIECES_GOAL else 'MISS'}")
    if not {"decode", "encode"} & {r.op for r in report.results}:
        return out
    for text, key, name, op, base_key, goal, figure in TARGETS:
        if name not in report.workloads:
            continue
        mine, base = report.find(key, name, op), report.find(base_key, name, op)
        missing = []
        for result, who in ((mine, labels[key]), (base, labels[base_key])):
            if result is None:
                missing.append(f"{who} not measured")
            elif not result.counted:
                missing.append(f"{who} {_cell_detail(result)}")
        if missing:
            out.append(f"{text}: n/a ({'; '.join(missing)})")
            continue
        ratio = getattr(mine, figure) / getattr(base, figure)
        shown = f"{ratio:.0%}" if goal < 1 else f"{ratio:.1f}×"
        out.append(f"{text}: {shown} — {'PASS' if ratio >= goal else 'MISS'}")
    return out


# --------------------------------------------------------------------------- chart


def chart(report: Report, path: str) -> str:
    """A PNG bar chart of throughput relative to stomp.py (log scale), floors as dashed marks."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no chart"
    groups = []
    for op in ("decode", "encode"):
        for name in report.workloads:
            base = report.find(BASELINE, name, op)
            if base is not None and base.counted:
                groups.append((op, name, base))
    if not groups:
        return f"no chart: {BASELINE} has no counted result to compare with"
    bars = [c for c in report.codecs if c.kind != "floor"]
    floors = [c for c in report.codecs if c.kind == "floor"]
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(groups)), 5.5))
    width = 0.8 / max(1, len(bars))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = {"copy": ":", "scan": "-.", "msgpack": "--"}
    wrong_marks: List[float] = []
    for index, codec in enumerate(bars):
        xs, ys = [], []
        for g, (op, name, base) in enumerate(groups):
            result = report.find(codec.key, name, op)
            if result is not None and result.counted:
                xs.append(g - 0.4 + width * (index + 0.5))
                ys.append(result.mbps / base.mbps)
        ax.bar(xs, ys, width, label=codec.label, color=colors[index % len(colors)])
        for g, (op, name, _base) in enumerate(groups):
            result = report.find(codec.key, name, op)
            if result is not None and result.status in ("wrong", "error"):
                wrong_marks.append(g - 0.4 + width * (index + 0.5))
    for codec in floors:
        labelled = False
        for g, (op, name, base) in enumerate(groups):
            result = report.find(codec.key, name, op)
            if result is not None and result.counted:
                ax.hlines(
                    result.mbps / base.mbps,
                    g - 0.45,
                    g + 0.45,
                    colors="black",
                    linestyles=styles.get(codec.key, "--"),
                    linewidth=1.2,
                    label=None if labelled else codec.label,
                )
                labelled = True
    ax.set_yscale("log")
    if wrong_marks:
        low = ax.get_ylim()[0]
        ax.plot(wrong_marks, [low * 1.3] * len(wrong_marks), "rx", label="wrong or error (not counted)")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{name}\n{op}" for op, name, _ in groups])
    ax.set_ylabel(f"throughput relative to {BASELINE} (log)")
    missing = [
        f"{name} {op}"
        for op in ("decode", "encode")
        for name in report.workloads
        if (op, name) not in {(o, n) for o, n, _ in groups}
    ]
    title = f"fastframe vs peers ({report.args.sizes} sizes, CPU time, GC on)"
    if missing:
        title += f"\nnot shown ({BASELINE} wrong or not measured): {', '.join(missing)}"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"chart written to {path}"


# --------------------------------------------------------------------------- main


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare", description="Compare installed STOMP codecs on the same workloads."
    )
    parser.add_argument("--sizes", choices=("tiny", "full"), default="full", help="workload sizes (tiny for CI)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions per measurement (median)")
    parser.add_argument(
        "--only", help=f"comma-separated codecs: {', '.join(CODEC_KEYS)}, or groups {', '.join(GROUPS)}"
    )
    parser.add_argument("--workloads", help=f"comma-separated workloads (default all: {', '.join(WORKLOAD_NAMES)})")
    parser.add_argument("--ops", default=",".join(OPS), help=f"comma-separated parts to run (default {','.join(OPS)})")
    parser.add_argument("--budget", type=float, default=0.25, help="max CPU seconds per repetition (prefix beyond)")
    parser.add_argument("--feed-cap", type=float, default=10.0, help="wall seconds per codec per incremental row")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="workload seed")
    parser.add_argument("--no-gc", dest="gc", action="store_false", help="measure with the cyclic GC disabled")
    parser.add_argument("--chart", metavar="PNG", help="write a bar chart (needs matplotlib)")
    parser.add_argument("--markdown", metavar="MD", help="also write the Markdown report to this file")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    unknown = set(args.ops.split(",")) - set(OPS)
    if unknown:
        parser.error(f"--ops: unknown {', '.join(sorted(unknown))}")
    if args.workloads and set(args.workloads.split(",")) - set(WORKLOAD_NAMES):
        parser.error(f"--workloads: choose from {', '.join(WORKLOAD_NAMES)}")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    report = run(args)
    text = render(report)
    sys.stdout.write(text)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as handle:
            handle.write(text)
    if args.chart:
        print(chart(report, args.chart), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
