"""``sample-archive`` and ``index``: archives of captures, with the codec and the standard library only.

    fastframe sample-archive DIR
        write a seeded sample archive (see fastframe.archive)
    fastframe index FILE...
        write index sidecars (proven frame boundaries, see fastframe.archive) so Spark can split big files

Neither needs Spark or the ``spark`` extra (an index of a remote file needs what reading it needs: pyarrow or
fsspec); both are listed beside ``convert`` because they prepare its input.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Dict

from ._args import add_decoder_arguments, int_at_least, size

_positive = int_at_least(1)


def add_commands(commands: Any) -> Dict[str, Callable[[argparse.Namespace], int]]:
    """Add ``sample-archive`` and ``index`` to an argparse subparsers object; return their handlers by name."""
    smp = commands.add_parser("sample-archive", help="write a seeded sample archive of STOMP captures")
    smp.add_argument("out", metavar="DIR", help="folder to create (must be empty or absent)")
    smp.add_argument("--connections", type=_positive, default=12, metavar="N", help="connections (default 12)")
    smp.add_argument("--frames", type=_positive, default=2000, metavar="N", help="broker frames each (default 2000)")
    smp.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    smp.add_argument("--no-malformed", action="store_true", help="leave out the two damaged files")

    idx = commands.add_parser("index", help="write .ffidx sidecars so Spark can split big files at proven frames")
    idx.add_argument("files", nargs="+", metavar="FILE", help="STOMP files (.stomp, .gz, .zst) to index")
    idx.add_argument("--interval", type=size, default=4 << 20, metavar="SIZE", help="checkpoint spacing (4m)")
    add_decoder_arguments(idx)
    return {"sample-archive": cmd_sample_archive, "index": cmd_index}


# each command imports its module when it runs, so that the other commands start no slower


def cmd_sample_archive(args: argparse.Namespace) -> int:
    from ..archive import generate_archive

    if os.path.isdir(args.out) and os.listdir(args.out):
        print(f"{args.out}: not empty; choose a new folder", file=sys.stderr)
        return 1
    manifest = generate_archive(
        args.out, connections=args.connections, frames=args.frames, seed=args.seed, malformed=not args.no_malformed
    )
    damaged = sum(1 for f in manifest["files"] if f["error"])
    print(
        f"wrote {len(manifest['files'])} files ({manifest['bytes']:,} bytes, {manifest['frames']:,} frames, "
        f"{damaged} damaged, seed {args.seed}) to {args.out}"
    )
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from ..archive import write_index

    status = 0
    for path in args.files:
        try:
            index = write_index(path, interval=args.interval, version=args.version, escapes=args.escapes,
                                strict=args.strict)  # fmt: skip
        except (OSError, ValueError) as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            status = 1
            continue
        note = "" if index["error_offset"] is None else f", malformed at offset {index['error_offset']}"
        print(f"{path}: {index['frames']:,} frames, {len(index['checkpoints'])} checkpoints{note}")
    return status
