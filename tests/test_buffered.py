"""Reading without a copy: ``get_buffer()`` / ``buffer_updated(nbytes)`` (asyncio.BufferedProtocol).

The pair gives exactly what ``feed()`` of the same bytes gives (frames, heart-beats, errors,
offsets, counters), in both twins; the buffer lent stays valid memory whatever the caller does
with it; misuse gets the same error from both twins.
"""

from __future__ import annotations

import asyncio
import gc
from types import ModuleType
from typing import Any, Dict, List, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import compiled_twin
from fastframe import DecodeError
from fastframe.archive import generate_stream
from fastframe.codec import _codec_py as P
from fastframe.codec._constants import MAX_RECEIVE_BUFFER_SIZE, RECEIVE_BUFFER_SIZE
from fastframe.codec._errors import BAD_NBYTES, NOT_AN_INT, NOTHING_LENT, REENTRANT_CALL
from test_differential import DIFF, decoder_options, outcome, streams

C = compiled_twin()  # a skip for the whole module when absent by design


def buffered_outcome(module: Any, data: bytes, cuts: Sequence[int], options: Dict[str, Any]) -> Any:
    """``outcome()`` of test_differential, the pieces written into get_buffer() instead of fed."""

    class Fed:
        def __init__(self, decoder: Any) -> None:
            self.decoder = decoder

        def feed(self, piece: bytes) -> Any:
            out: List[Any] = []
            while True:  # a piece larger than the buffer lent goes in several reads, as from a socket
                view = self.decoder.get_buffer(len(piece) or -1)
                size = min(len(view), len(piece))
                view[:size] = piece[:size]
                out += self.decoder.buffer_updated(size)
                piece = piece[size:]
                if not piece:
                    return out

        def __getattr__(self, name: str) -> Any:
            return getattr(self.decoder, name)

    class Module:
        @staticmethod
        def Decoder(**kwargs: Any) -> Any:  # noqa: N802 - stands in for the class
            return Fed(module.Decoder(**kwargs))

    return outcome(Module, data, cuts, options)


@DIFF
@given(data=streams(), options=decoder_options(), cut_seed=st.lists(st.integers(0, 10_000), max_size=6))
def test_buffer_updated_gives_what_feed_gives(data: bytes, options: Dict[str, Any], cut_seed: List[int]) -> None:
    cuts = sorted({seed % (len(data) + 1) for seed in cut_seed})
    expected = outcome(C, data, cuts, options)
    assert outcome(P, data, cuts, options) == expected
    assert buffered_outcome(C, data, cuts, options) == expected
    assert buffered_outcome(P, data, cuts, options) == expected


@pytest.mark.parametrize("piece", [1, 1000, 100_000])
def test_a_long_stream_through_the_buffer(codec: ModuleType, piece: int) -> None:
    data = generate_stream(300, seed=3)
    expected = codec.decode(data)
    decoder = codec.Decoder()
    frames: List[Any] = []
    for start in range(0, len(data), piece):
        chunk = data[start : start + piece]
        view = decoder.get_buffer(len(chunk))
        assert len(view) >= len(chunk) and not view.readonly
        view[: len(chunk)] = chunk
        frames += decoder.buffer_updated(len(chunk))
    decoder.close()
    assert frames == expected and [f.offset for f in frames] == [f.offset for f in expected]
    assert decoder.bytes_fed == len(data)


def test_column_decoder_buffer_updated_returns_the_rows(codec: ModuleType) -> None:
    decoder = codec.ColumnDecoder()
    data = b"SEND\nx:1\n\nhi\0RECEIPT\nreceipt-id:2\n\n\0"
    view = decoder.get_buffer(-1)
    view[: len(data)] = data
    assert decoder.buffer_updated(len(data)) == 2
    assert decoder.take().command_data == b"SENDRECEIPT"


@pytest.mark.parametrize(
    "sizehint, size",
    [(-1, RECEIVE_BUFFER_SIZE), (0, RECEIVE_BUFFER_SIZE), (1, 1), (10**12, MAX_RECEIVE_BUFFER_SIZE)],
)
def test_buffer_sizes(codec: ModuleType, sizehint: int, size: int) -> None:
    assert len(codec.Decoder().get_buffer(sizehint)) == size


def test_the_buffer_is_reused_and_grows(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    small = decoder.get_buffer(10)
    assert len(decoder.get_buffer(5)) == 10  # the same one, larger than asked
    small[:3] = b"SEN"
    large = decoder.get_buffer(1000)
    assert len(large) == 1000
    small[:3] = b"xxx"  # a view of the old buffer: still valid memory, no longer the decoder's
    large[:11] = b"SEND\n\nab\0\n\n"
    assert [f.body for f in decoder.buffer_updated(11)] == [b"ab"]
    assert decoder.heartbeats == 2


def test_the_buffer_stays_valid_memory_after_reset_and_gc(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    view = decoder.get_buffer(100)
    decoder.reset()
    del decoder
    gc.collect()
    view[:4] = b"SEND"  # the bytearray lives as long as the view
    assert bytes(view[:4]) == b"SEND"
    with pytest.raises(BufferError):
        view.obj.extend(b"x")  # type: ignore[union-attr]  # and cannot be resized under it


MISUSE = [
    ("buffer_updated(5) first", lambda d: d.buffer_updated(5), RuntimeError, NOTHING_LENT),
    ("twice", lambda d: (d.get_buffer(10), d.buffer_updated(0), d.buffer_updated(0)), RuntimeError, NOTHING_LENT),
    ("too many", lambda d: (d.get_buffer(10), d.buffer_updated(11)), ValueError, BAD_NBYTES.format(10, 11)),
    ("negative", lambda d: (d.get_buffer(10), d.buffer_updated(-1)), ValueError, BAD_NBYTES.format(10, -1)),
    ("str nbytes", lambda d: (d.get_buffer(10), d.buffer_updated("3")), TypeError, NOT_AN_INT.format("nbytes", "str")),
    ("float hint", lambda d: d.get_buffer(1.5), TypeError, NOT_AN_INT.format("sizehint", "float")),
    ("after reset", lambda d: (d.get_buffer(10), d.reset(), d.buffer_updated(1)), RuntimeError, NOTHING_LENT),
]


@pytest.mark.parametrize("call, cls, message", [m[1:] for m in MISUSE], ids=[m[0] for m in MISUSE])
def test_misuse_gets_the_same_error_from_both_twins(call: Any, cls: type, message: str) -> None:
    for module in (C, P):
        decoder = module.Decoder()
        with pytest.raises(cls) as caught:
            call(decoder)
        assert str(caught.value) == message
        assert decoder.feed(b"SEND\n\n\0")[0].command == "SEND"  # not stuck busy


def test_errors_are_those_of_feed(codec: ModuleType) -> None:
    data = b"SEND\n\n\0SEND\nx:\\t\n\n\0"
    with pytest.raises(DecodeError) as fed:
        codec.Decoder().feed(data)
    decoder = codec.Decoder()
    view = decoder.get_buffer(-1)
    view[: len(data)] = data
    with pytest.raises(DecodeError) as lent:
        decoder.buffer_updated(len(data))
    assert (type(lent.value), str(lent.value), lent.value.frames) == (
        type(fed.value),
        str(fed.value),
        fed.value.frames,
    )
    with pytest.raises(DecodeError):  # sticky, as after feed()
        decoder.get_buffer(-1), decoder.buffer_updated(0)


def test_reentry_into_buffer_updated_is_refused(codec: ModuleType) -> None:
    decoder = codec.Decoder()
    refused: List[str] = []
    threshold = gc.get_threshold()

    def callback(phase: str, info: Any) -> None:
        if phase == "start":
            try:
                decoder.get_buffer(-1)  # harmless when the decoder is idle: the same buffer again
            except RuntimeError as error:
                refused.append(str(error))
                try:
                    decoder.buffer_updated(0)  # busy: refused too
                except RuntimeError as again:
                    refused.append(str(again))

    view = decoder.get_buffer(-1)
    data = b"SEND\nx:\xff\n\n\0"
    view[: len(data)] = data
    gc.callbacks.append(callback)
    gc.set_threshold(1)
    try:
        with pytest.raises(DecodeError):
            decoder.buffer_updated(len(data))
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(callback)
    assert REENTRANT_CALL.format("Decoder", "get_buffer") in refused
    assert REENTRANT_CALL.format("Decoder", "buffer_updated") in refused


def test_an_asyncio_buffered_protocol(codec: ModuleType) -> None:
    """The pair as asyncio drives it: a real socket pair, the transport writing into the buffer lent."""
    data = generate_stream(200, seed=5)

    class Receiver(asyncio.BufferedProtocol):
        def __init__(self, done: asyncio.Future[List[Any]]) -> None:
            self.decoder = codec.Decoder()
            self.frames: List[Any] = []
            self.done = done

        def get_buffer(self, sizehint: int) -> memoryview:
            return self.decoder.get_buffer(sizehint)  # type: ignore[no-any-return]

        def buffer_updated(self, nbytes: int) -> None:
            self.frames += self.decoder.buffer_updated(nbytes)

        def eof_received(self) -> None:
            self.decoder.close()
            self.done.set_result(self.frames)

    async def main() -> List[Any]:
        import socket

        loop = asyncio.get_running_loop()
        left, right = socket.socketpair()
        right.setblocking(False)  # the loop's sock_sendall needs it
        done: asyncio.Future[List[Any]] = loop.create_future()
        transport, _ = await loop.create_connection(lambda: Receiver(done), sock=left)
        try:
            for start in range(0, len(data), 5000):
                await loop.sock_sendall(right, data[start : start + 5000])
            right.shutdown(socket.SHUT_WR)
            return await asyncio.wait_for(done, 30)
        finally:
            transport.close()
            right.close()

    assert asyncio.run(main()) == codec.decode(data)
