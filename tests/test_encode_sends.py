"""``Encoder.encode_sends``: the compiled twin and the Python twin on the same runs of SENDs.

Each case is a list of send() argument tuples, ``(destination, body, headers, content_type,
transaction)``, mostly everyday ones, with others between: headers or a transaction set, a str or
bytearray body, a content type that is not a str, a destination the encoder refuses (a NUL, a lone
surrogate, a line break in 1.0), another shape. Both twins must stop at the same index with the
same bytes, and a model written with ``Encoder.encode`` one frame at a time says what those are, so
both twins agreeing on a mistake fails too. Encoders of every version, with and without
``content-length`` and with CRLF line ends.

``FASTFRAME_DIFF_EXAMPLES`` sets the number of examples per test (default 300 here).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import compiled_twin
from fastframe import EncodeError
from fastframe.codec import _codec_py as P

C = compiled_twin()
EXAMPLES = int(os.environ.get("FASTFRAME_DIFF_EXAMPLES", "300"))
DIFF = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TEXT = st.text(alphabet=st.sampled_from(list("ab/:é\n\\\0") + ["\udc80", "😀"]), max_size=5)
EVERYDAY = st.tuples(
    st.sampled_from(["/queue/a", "/topic/b", "/queue/é", ""]) | TEXT,
    st.binary(max_size=8),
    st.none(),
    st.sampled_from([None, None, "text/plain", "application/json"]) | TEXT,
    st.none(),
)
OTHER = st.sampled_from(
    [
        ("/queue/a", b"x", {"k": "v"}, None, None),  # headers
        ("/queue/a", b"x", None, None, "tx-1"),  # a transaction
        ("/queue/a", "text", None, None, None),  # a str body
        ("/queue/a", bytearray(b"x"), None, None, None),
        ("/queue/a", b"x", None, 5, None),  # a content type that is not a str
        (b"/queue/a", b"x", None, None, None),
        ("/queue/a", b"x", None, None),  # another shape
        ["/queue/a", b"x", None, None, None],
        "SEND",
    ]
)
ENCODER = st.fixed_dictionaries(
    {
        "version": st.sampled_from(["1.0", "1.1", "1.2"]),
        "content_length": st.sampled_from([None, True, False]),
        "eol": st.sampled_from(["\n", "\r\n"]),
    }
)


def model(options: Dict[str, Any], sends: List[Any], start: int) -> Tuple[bytes, int]:
    """What encode_sends does (its docstring), with Encoder.encode, one frame at a time."""
    encoder = P.Encoder(**options)
    chunks, i = [], max(start, 0)
    while i < len(sends):
        item = sends[i]
        if type(item) is not tuple or len(item) != 5:
            break
        destination, body, headers, content_type, transaction = item
        if headers is not None or transaction is not None or type(destination) is not str or type(body) is not bytes:
            break
        if content_type is not None and type(content_type) is not str:
            break
        pairs = [("destination", destination)] + ([] if content_type is None else [("content-type", content_type)])
        try:
            chunks.append(encoder.encode("SEND", pairs, body))
        except EncodeError:
            break
        i += 1
    return b"".join(chunks), i


@DIFF
@given(
    options=ENCODER,
    sends=st.lists(st.one_of(EVERYDAY, EVERYDAY, EVERYDAY, OTHER), max_size=12),
    seed=st.integers(-3, 20),
)
def test_twins_encode_runs_of_sends_identically(options: Dict[str, Any], sends: List[Any], seed: int) -> None:
    compiled, python = C.Encoder(**options), P.Encoder(**options)
    start = seed % (len(sends) + 2) if seed >= 0 else seed  # negative, within, at and past the end
    while True:  # from each item it stopped at on, as the connection does after the general path
        expected = model(options, sends, start)
        assert compiled.encode_sends(sends, start) == python.encode_sends(sends, start) == expected
        stop = expected[1]
        if stop >= len(sends):
            break
        start = stop + 1


@pytest.mark.parametrize("module", [C, P], ids=["c", "py"])
def test_a_run_is_the_frames_one_after_another(module: Any) -> None:
    sends = [("/queue/a", b"one", None, None, None), ("/queue/b", b"", None, "text/plain", None)]
    data, stop = module.Encoder("1.2").encode_sends(sends)
    assert stop == 2
    assert data == (
        b"SEND\ndestination:/queue/a\ncontent-length:3\n\none\0"
        b"SEND\ndestination:/queue/b\ncontent-type:text/plain\n\n\0"
    )
    assert module.Encoder("1.2").encode_sends([]) == (b"", 0)


@pytest.mark.parametrize("module", [C, P], ids=["c", "py"])
def test_it_stops_at_a_refused_frame_without_raising(module: Any) -> None:
    sends = [
        ("/queue/a", b"1", None, None, None),
        ("/queue/\0", b"2", None, None, None),
        ("/q", b"3", None, None, None),
    ]
    encoder = module.Encoder("1.2")
    assert encoder.encode_sends(sends) == (b"SEND\ndestination:/queue/a\ncontent-length:1\n\n1\0", 1)
    with pytest.raises(EncodeError):  # what the general path then reports for it
        encoder.encode("SEND", [("destination", "/queue/\0")], b"2")
    assert encoder.encode_sends(sends, 2) == (b"SEND\ndestination:/q\ncontent-length:1\n\n3\0", 3)
