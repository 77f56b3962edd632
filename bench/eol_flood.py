"""Hostile streams at full size, both twins: time per byte, and the most bytes a decoder held.

    python -m bench.eol_flood                  # every case, full sizes (a few minutes)
    python -m bench.eol_flood --scale 0.1      # a tenth of the sizes
    python -m bench.eol_flood --only eol-64k --twins py

Cases:
  eol-64k, eol-7, eol-1   heart-beat EOLs (LF and CRLF) between two frames, fed in 64 KiB,
                          7-byte and 1-byte pieces (100 MB, 100 MB, 10 MB)
  headers-1g              1 GiB of header bytes: frames of about 1 MiB of 1 KB header lines, each
                          under a 1 MiB frame limit, fed in 64 KiB pieces; the buffer must stay under 2 MiB
  endless-head-1g         a head that never ends, 1 GiB offered against a 1 MiB frame limit: stops at the limit
  trickle-4g              content-length 4 GiB (allowed by raised limits) and a 100 MB trickle in
                          1 KiB pieces: held memory follows the bytes received

Each line reports seconds, ns per byte offered, the most ``buffered`` seen, and
tracemalloc's peak when ``--trace`` is given (tracing slows the Python twin down).
Figures come from one run, on a shared machine: compare twins and cases within a run.
"""

from __future__ import annotations

import argparse
import importlib
import time
import tracemalloc
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from fastframe import DecodeError

MiB = 1 << 20
MB = 10**6


def _eols(total: int, piece: int) -> Iterator[bytes]:
    frame = b"MESSAGE\ndestination:/q\ncontent-length:2\n\nhi\0"
    unit = b"\n\r\n\n\n"
    block = unit * max(1, (max(piece, 64 * 1024)) // len(unit))
    yield frame
    sent = 0
    while sent < total:
        data = block[: min(len(block), total - sent)]
        for start in range(0, len(data), piece):
            yield data[start : start + piece]
        sent += len(data)
    yield frame


def _headers(total: int, piece: int) -> Iterator[bytes]:
    line = b"x-h:" + b"v" * 995 + b"\n"  # 1000 bytes
    frame = b"SEND\n" + line * 1000 + b"\n\0"  # about 1 MB: under the 1 MiB frame limit
    split = [frame[start : start + piece] for start in range(0, len(frame), piece)]
    for _ in range(max(1, total // len(frame))):
        yield from split


def _endless_head(total: int, piece: int) -> Iterator[bytes]:
    yield b"SEND\n"
    block = b"a:b\n" * (piece // 4)
    for _ in range(total // len(block)):
        yield block


def _trickle(total: int, piece: int) -> Iterator[bytes]:
    yield b"SEND\ncontent-length:4294967296\n\n"
    block = b"x" * piece
    for _ in range(total // piece):
        yield block


CASES: Dict[str, Tuple[Callable[[int, int], Iterator[bytes]], int, int, Dict[str, Any]]] = {
    "eol-64k": (_eols, 100 * MB, 64 * 1024, {}),
    "eol-7": (_eols, 100 * MB, 7, {}),
    "eol-1": (_eols, 10 * MB, 1, {}),
    "headers-1g": (_headers, 1 << 30, 64 * 1024, {"max_frame_size": MiB, "max_header_count": 2000}),
    "endless-head-1g": (_endless_head, 1 << 30, 64 * 1024, {"max_frame_size": MiB, "max_header_count": 2**62}),
    "trickle-4g": (_trickle, 100 * MB, 1024, {"max_body_size": 2**33, "max_frame_size": 2**34}),
}


def run_case(module: Any, name: str, scale: float, trace: bool) -> Dict[str, Any]:
    make, total, piece, options = CASES[name]
    decoder = module.Decoder(**options)
    stream = make(int(total * scale), piece)
    offered = frames = max_buffered = 0
    outcome = "ok"
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    try:
        for data in stream:
            offered += len(data)
            frames += len(decoder.feed(data))
            buffered = decoder.buffered
            if buffered > max_buffered:
                max_buffered = buffered
    except DecodeError as error:
        outcome = f"{type(error).__name__} ({getattr(error, 'limit', '')}) at {error.offset}"
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if trace else 0
    if trace:
        tracemalloc.stop()
    return {
        "case": name,
        "twin": module.IMPLEMENTATION,
        "offered": offered,
        "seconds": seconds,
        "ns_per_byte": seconds / max(offered, 1) * 1e9,
        "frames": frames,
        "heartbeats": decoder.heartbeats,
        "max_buffered": max_buffered,
        "peak": peak,
        "outcome": outcome,
    }


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=sorted(CASES), help="a case (repeatable)")
    parser.add_argument("--twins", default="c,py", help="c, py or c,py")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size (default 1)")
    parser.add_argument("--trace", action="store_true", help="also report tracemalloc's peak")
    args = parser.parse_args(argv)
    modules = {"c": "fastframe.codec._codec_c", "py": "fastframe.codec._codec_py"}
    print(
        "| case | twin | offered | s | ns/byte | frames | heart-beats | max buffered | peak traced | outcome |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    for name in args.only or list(CASES):
        for twin in args.twins.split(","):
            module = importlib.import_module(modules[twin])
            r = run_case(module, name, args.scale, args.trace)
            print(
                f"| {r['case']} | {r['twin']} | {r['offered']:,} | {r['seconds']:.2f} | {r['ns_per_byte']:.1f} "
                f"| {r['frames']:,} | {r['heartbeats']:,} | {r['max_buffered']:,} "
                f"| {r['peak']:,} | {r['outcome']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
