"""The column decoder against the plain decoder, and against the other twin's column decoder.

The stream is fed in pieces; between pieces rows are taken with random row and byte budgets.
The rows must be the plain decoder's frames (offsets included), the error the plain decoder's
(class, offset, code, limit, message), and both twins' Columns identical byte for byte.
"""

from __future__ import annotations

import random
from typing import Any, Dict, Iterator, List, Sequence, Tuple

from _common import C, P, column_rows, cut_points, decoder_options, decoding_seeds, outcome, split, twin

from fastframe import DecodeError

MAX_LEN = 2048


def column_outcome(
    module: Any, data: bytes, cuts: Sequence[int], options: Dict[str, Any], rng: random.Random
) -> Tuple[Any, ...]:
    decoder = module.ColumnDecoder(**options)
    batches: List[Any] = []
    counts: List[Any] = []

    def take() -> None:
        max_rows = rng.choice([None, 1, 2, 3, 50])
        max_bytes = rng.choice([None, 1, 16, 200, 5000])
        before = decoder.rows
        columns = decoder.take(max_rows, max_bytes)
        assert columns.rows == before - decoder.rows
        assert columns.rows <= max(1, max_rows or before) or before == 0
        batches.append(columns)

    try:
        start = 0
        for cut in [*cuts, len(data)]:
            counts.append((decoder.feed(data[start:cut]), decoder.rows, decoder.pending_bytes))
            if rng.random() < 0.5:
                take()
            start = cut
        decoder.close()
        result: Tuple[Any, ...] = ("ok", decoder.heartbeats, decoder.bytes_fed, decoder.buffered)
    except DecodeError as error:
        assert error.frames == []  # the rows stay in the decoder
        result = ("error", type(error), error.offset, error.code, getattr(error, "limit", None), str(error))
    guard = 0
    while decoder.rows:
        take()
        guard += 1
        assert guard < 100_000, "take() makes no progress"
    assert decoder.pending_bytes == 0
    return result + (counts, batches)


def test_one_input(data: bytes) -> None:
    control, stream = split(data)
    options = decoder_options(control)
    options.pop("heartbeat_events", None)
    options.pop("keep_invalid_utf8", None)  # a ColumnDecoder refuses it
    cuts = cut_points(control, len(stream))
    module = twin()
    columns = column_outcome(module, stream, cuts, options, random.Random(control[7]))
    plain = outcome(module, stream, cuts, options)
    rows = [row for batch in columns[-1] for row in column_rows(batch)]
    events = plain[1] if plain[0] == "ok" else plain[5]
    assert rows == [event[1:] for event in events if event[0] == "frame"]
    if plain[0] == "ok":
        assert columns[:4] == ("ok", plain[2], plain[3], plain[4])
    else:
        assert columns[:6] == ("error", *plain[1:5], plain[7]), (columns[:6], plain)
    other = P if module is C else C
    assert column_outcome(other, stream, cuts, options, random.Random(control[7])) == columns


def seeds() -> Iterator[Tuple[str, bytes]]:
    return decoding_seeds()
