"""The recording proxy's cost: the same client straight to RabbitMQ and through ``fastframe record``, one run.

    python -m bench.capture_proxy                      # 50,000 x 200 B, then round trips; a markdown table
    python -m bench.capture_proxy --messages 20000 --markdown out/capture.md
    python -m bench.capture_proxy --baseline-src /tmp/old    # also an earlier revision's proxy, alternating

The client is ``bench.clients``' fastframe child (its own process: two connections, a producer and a
consumer, every body verified, then SEND-to-MESSAGE round trips one message at a time). The runs
alternate, direct then proxied, ``--rounds`` times. The proxy is ``fastframe record`` in a process of
its own, recording into a temporary folder; its CPU and RabbitMQ's (the ``beam.smp`` process) are read
from ``/proc`` around each run, so each is per message of the same load. Targets (issue 22): at most
10% fewer messages/s and at most 0.3 ms more median round trip through the proxy; the proxy's CPU per
message below RabbitMQ's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence

from bench.clients import broker_answers, measure

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: Optional[int]) -> float:
    """User + system CPU of a process so far (0 when unknown)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as stream:
            fields = stream.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rabbit_pid() -> Optional[int]:
    """RabbitMQ's Erlang VM (``beam.smp`` running rabbit), read from /proc (None when not found)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as stream:
                cmdline = stream.read()
        except OSError:
            continue
        if b"beam.smp" in cmdline and b"rabbit" in cmdline:
            return int(entry)
    return None


def start_proxy(upstream_port: int, out: str, src: Optional[str] = None) -> Any:
    """``fastframe record`` in a process of its own (from the source tree ``src`` when given)."""
    cmd = [sys.executable, "-m", "fastframe", "record", "--listen", "127.0.0.1:0"]
    cmd += ["--upstream", f"127.0.0.1:{upstream_port}", "--out", out, "--name", "bench"]
    env = None if src is None else dict(os.environ, PYTHONPATH=os.path.abspath(src))
    cwd = None if src is None else tempfile.gettempdir()  # (not the checkout: its fastframe would come first)
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    line = process.stdout.readline() if process.stdout else ""
    match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
    if match is None:
        process.kill()
        raise RuntimeError(f"fastframe record did not start: {line!r}")
    process.port = int(match.group(1))  # type: ignore[attr-defined]
    return process


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capture_proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=61613, help="RabbitMQ's STOMP port (default 61613)")
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--round-trips", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=1, help="direct/proxied pairs (default 1)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--baseline-src", metavar="DIR",
                        help="also run fastframe record from this source tree (e.g. an earlier revision: "
                        "git archive REV src | tar -x -C DIR, plus the built _codec_c*.so), alternating")  # fmt: skip
    args = parser.parse_args(argv)
    if not broker_answers("127.0.0.1", args.port):
        print(f"RabbitMQ does not answer on 127.0.0.1:{args.port} (.ci/brokers start rabbitmq)", file=sys.stderr)
        return 1
    out = tempfile.mkdtemp(prefix="fastframe-capture-bench-")
    proxy = start_proxy(args.port, out)
    proxies = {"through fastframe record": proxy}
    if args.baseline_src:
        proxies["through the baseline's fastframe record"] = start_proxy(
            args.port, os.path.join(out, "baseline"), os.path.join(args.baseline_src, "src")
        )
    rabbit = rabbit_pid()
    rows: List[Dict[str, Any]] = []
    try:
        for _ in range(args.rounds):
            for mode, port in [("direct", args.port)] + [(name, p.port) for name, p in proxies.items()]:
                run_args = argparse.Namespace(
                    host="127.0.0.1", port=port, messages=args.messages, size=args.size,
                    timeout=args.timeout, round_trips=args.round_trips,
                )  # fmt: skip
                pid = proxies[mode].pid if mode in proxies else None
                proxy0, rabbit0 = cpu_seconds(pid), cpu_seconds(rabbit)
                row = measure("fastframe", run_args)
                row.update(mode=mode, proxy_cpu=cpu_seconds(pid) - proxy0, rabbit_cpu=cpu_seconds(rabbit) - rabbit0)
                rows.append(row)
    finally:
        for running in proxies.values():
            running.send_signal(signal.SIGINT)
            running.communicate(timeout=60)
        recorded = sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(out) for f in names)
        shutil.rmtree(out, ignore_errors=True)
    lines = [
        f"{args.messages:,} messages of {args.size} B, fastframe's client (two connections) to RabbitMQ on "
        f"loopback, straight and through `fastframe record`; then {args.round_trips} round trips; one run. "
        f"The proxy recorded {recorded / 1e6:.1f} MB (messages, round trips, sidecars).",
        "",
        "| path | messages/s | client CPU µs/message | round trip median / p99 ms | proxy CPU µs/message "
        "| RabbitMQ CPU µs/message | result |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        if "wall_s" not in row:
            lines.append(f"| {row['mode']} | - | - | - | - | - | {row.get('error', '?')} |")
            continue
        n = max(row["ok"], 1)
        rtt = "{:.2f} / {:.2f}".format(*row["rtt1_ms"]) if "rtt1_ms" in row else "-"
        proxy_us = f"{row['proxy_cpu'] / n * 1e6:.1f}" if row["mode"] != "direct" else "-"
        rabbit_us = f"{row['rabbit_cpu'] / n * 1e6:.1f}" if rabbit else "-"
        result = "all bodies verified" if row["ok"] == row["messages"] else f"ok {row['ok']:,}"
        lines.append(
            f"| {row['mode']} | {row['ok'] / row['wall_s']:,.0f} | {row['cpu_s'] / n * 1e6:.1f} | {rtt} | "
            f"{proxy_us} | {rabbit_us} | {result} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as stream:
            stream.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
