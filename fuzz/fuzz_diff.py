"""Differential decoding: both twins, the same pieces and options, the very same outcome.

The same frames and heart-beats with their offsets, the same counters, or the same error class,
offset, code, limit, message and frames before it.
"""

from __future__ import annotations

from typing import Iterator, Tuple

from _common import C, P, cut_points, decoder_options, decoding_seeds, outcome, split

MAX_LEN = 2048


def test_one_input(data: bytes) -> None:
    control, stream = split(data)
    options = decoder_options(control)
    cuts = cut_points(control, len(stream))
    compiled = outcome(C, stream, cuts, options)
    python = outcome(P, stream, cuts, options)
    assert compiled == python, (compiled, python)


def seeds() -> Iterator[Tuple[str, bytes]]:
    return decoding_seeds()
