"""Decode and encode a corpus with the compiled twin: the workload of the valgrind and sanitizer runs.

    python fuzz/corpus_workout.py              # sample streams and the small broker recordings
    python fuzz/corpus_workout.py --large      # and rabbitmq/messages-10k.stomp (24.5 MB)

Each stream is decoded whole, in pieces of prime sizes and by the column decoder with takes in
between; every frame is encoded again (Frame.encode and encode, LF and CRLF) and decoded back;
to_columns runs over the frames; the kept fuzz corpora and regression inputs are decoded too.
Asserts that the pieces and the columns agree with the whole decode, so a wrong result fails the
run as well as a memory error does. Prints what it did.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, column_rows, describe, find_shared, streams  # noqa: E402

from fastframe import DecodeError, EncodeError  # noqa: E402
from fastframe.codec import _codec_c as C  # noqa: E402


def decode_stream(data: bytes, options: dict, pieces: int) -> List[object]:
    decoder = C.Decoder(**options)
    out: List[object] = []
    at = 0
    while at < len(data):
        out += decoder.feed(memoryview(data)[at : at + pieces])
        at += pieces
    decoder.close()
    return out


PIECES = [1, 7, 61, 4093]


def workout(name: str, data: bytes, counts: dict) -> None:
    options = {"escapes": "1.2", "allow_missing_colon": True, "keep_undefined_escapes": True}
    try:
        whole = C.decode(data, **options)
    except DecodeError as error:  # a broken stream (an err-* recording): the frames before it count
        counts["errors"] += 1
        whole = list(error.frames)
        data = data[: error.offset]
        try:
            C.decode(data, **options)
        except DecodeError:
            return
    for pieces in PIECES:
        if pieces == 1 and len(data) > 200_000:
            continue  # byte by byte over the large stream takes minutes under valgrind
        assert decode_stream(data, options, pieces) == whole, (name, pieces)
    columns = C.ColumnDecoder(**options)
    rows: List[tuple] = []
    for at in range(0, len(data), 997):
        columns.feed(data[at : at + 997])
        rows += column_rows(columns.take(max_rows=50, max_bytes=100_000))
    columns.close()
    while columns.rows:
        rows += column_rows(columns.take())
    assert rows == [event[1:] for event in describe(whole)], name
    assert column_rows(C.to_columns(whole))[0][:3] == rows[0][:3] if rows else True
    for frame in whole:
        for eol in ("\n", "\r\n"):
            try:
                wire = frame.encode("1.2", eol=eol, content_length=False)
            except EncodeError:
                counts["not encodable"] += 1
                continue
            assert C.encode(frame, version="1.2", eol=eol, content_length=False) == wire
            again = C.decode(wire)
            assert again == [frame] or frame.command in ("CONNECT", "CONNECTED", "STOMP"), (frame, again)
        counts["frames"] += 1
    counts["streams"] += 1
    counts["bytes"] += len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="include rabbitmq/messages-10k.stomp")
    parser.add_argument("--quick", action="store_true", help="no byte-by-byte feeding (for the smoke runs)")
    args = parser.parse_args()
    if args.quick:
        PIECES.remove(1)
    counts = {"streams": 0, "frames": 0, "bytes": 0, "errors": 0, "not encodable": 0}
    for name, data in streams():
        workout(name, data, counts)
    kept = [REPO / "build" / "fuzz" / "corpus", REPO / "fuzz" / "regressions"]
    for path in sorted(p for folder in kept if folder.is_dir() for p in folder.rglob("*") if p.is_file()):
        if path.suffix != ".py":
            workout(path.name, path.read_bytes()[8:], counts)  # past the harnesses' control bytes
    if args.large:
        large = find_shared() / "corpus" / "brokers" / "rabbitmq" / "messages-10k.stomp"
        workout(large.name, large.read_bytes(), counts)
    print("corpus workout:", ", ".join(f"{key} {value}" for key, value in counts.items()))


if __name__ == "__main__":
    main()
