"""Decoding: whole and in pieces, under random options and limits, with one twin ($FASTFRAME_FUZZ_TWIN).

Checks: only DecodeError escapes; however the stream is cut, the same events (or the same error
class, offset, code, limit and events before it); offsets rise inside the stream; after an error
the decoder stays failed until reset(); every decoded frame that the encoder accepts encodes and
decodes back to itself.
"""

from __future__ import annotations

from typing import Any, Iterator, Tuple

from _common import check_events, cut_points, decoder_options, decoding_seeds, outcome, split, twin

from fastframe import EncodeError

MAX_LEN = 4096


def test_one_input(data: bytes) -> None:
    control, stream = split(data)
    options = decoder_options(control)
    module = twin()
    whole = outcome(module, stream, [], options)
    pieces = outcome(module, stream, cut_points(control, len(stream)), options)
    if whole[0] == "ok":
        assert pieces == whole, (whole, pieces)
        assert whole[3] == len(stream) and whole[4] == 0
        events = whole[1]
    else:
        # a piece's error message may show fewer bytes around the offset: compare the rest
        assert pieces[:7] == whole[:7], (whole, pieces)
        assert 0 <= whole[2] <= len(stream)
        events = whole[5]
    check_events(events, len(stream))
    for event in events:
        if event[0] == "frame":
            round_trip(module, event)


def round_trip(module: Any, event: Tuple[Any, ...]) -> None:
    frame = module.Frame(event[1], event[2], event[3])
    try:
        wire = frame.encode("1.2", content_length=False)
    except EncodeError:
        return  # e.g. a bare CR kept in a CONNECT header, which is never escaped
    assert module.decode(wire) == [frame], (frame, wire)


def seeds() -> Iterator[Tuple[str, bytes]]:
    return decoding_seeds()
