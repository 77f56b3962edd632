"""get_buffer()/buffer_updated() on a connection: the events receive_data() gives for the same bytes."""

from __future__ import annotations

import random
from typing import Any, List, Sequence, Tuple

import pytest

from fastframe.protocol import (
    ClientConnection,
    ConnectRequest,
    HeartbeatReceived,
    Message,
    RemoteProtocolError,
    ServerConnection,
    State,
)

from .helpers import pair

VERSIONS = {"1.0": ("1.0",), "1.1": ("1.0", "1.1"), "1.2": ("1.0", "1.1", "1.2")}


def pieces(data: bytes, cuts: Sequence[int]) -> List[bytes]:
    edges = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:])]


def write_into(conn: Any, piece: bytes, now: Any) -> List[Any]:
    """One read as asyncio.BufferedProtocol makes it (a piece larger than the buffer takes several)."""
    events: List[Any] = []
    while True:
        buf = conn.get_buffer(len(piece) or -1)
        n = min(len(buf), len(piece))
        buf[:n] = piece[:n]
        events += conn.buffer_updated(n, now)
        piece = piece[n:]
        if not piece:
            return events


def run(conn: Any, chunks: List[bytes], buffered: bool, now: Any = 1.0) -> Tuple[List[Any], Any]:
    """Events of every chunk in order, and the error; a server accepts the CONNECT as soon as it comes."""
    events: List[Any] = []
    try:
        for chunk in chunks:
            got = write_into(conn, chunk, now) if buffered else conn.receive_data(chunk, now)
            events += got
            if any(isinstance(e, ConnectRequest) for e in got):
                conn.accept()
                events += write_into(conn, b"", now) if buffered else conn.receive_data(b"", now)

    except RemoteProtocolError as exc:
        return events + exc.events, (exc.message, exc.frame)
    return events, None


def server_stream(version: str) -> bytes:
    client, server = pair(version)
    server.receive_data(client.subscribe("s:1", "/queue/a\\b", ack="client"))
    wire = b""
    for index in range(5):
        wire += server.message("s:1", b"body\0%d" % index, {"x-h": "a:b\\c"}) + b"\n"
    wire += b"\n\r\n" + server.message("s:1", b"x" * 70_000)  # larger than one 64 KiB buffer
    return wire


def client_stream(version: str) -> bytes:
    client, _ = pair(version)  # frames encoded as after the handshake, behind a CONNECT choosing it
    wire = ClientConnection().connect("h", versions=VERSIONS[version])
    wire += client.subscribe("s:1", "/queue/a", ack="client", receipt="r:1") + b"\n"
    wire += client.send("/queue/a", b"x\0" * 40_000, {"k-1": "v:\\w"}, receipt="r:2")
    wire += client.begin("t") + client.send("/queue/a", "text", transaction="t") + client.commit("t")
    return wire + client.disconnect(receipt="bye")


def fresh_client(version: str) -> ClientConnection:
    client = ClientConnection()
    client.connect("h", versions=VERSIONS[version], heartbeat=(0, 1000))
    # the subscription the MESSAGEs are for (sent in the same read as CONNECTED, so set up ahead)
    client.subscriptions["s:1"] = ("/queue/a\\b", "client")
    return client


def connected_bytes(version: str) -> bytes:
    server = ServerConnection(heartbeat=(1000, 0))
    server.receive_data(ClientConnection().connect("h", versions=(version,), heartbeat=(0, 1000)))
    return server.accept(headers={"session": "s:1"})


def subscribed_client(version: str) -> ClientConnection:
    client = fresh_client(version)
    client.receive_data(connected_bytes(version), 0.0)
    return client


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_client_events_are_those_of_receive_data_split_anywhere(version):
    wire = connected_bytes(version) + server_stream(version)
    rng = random.Random(version)
    splits = [[], [len(connected_bytes(version))], [1], [len(wire) - 1]]
    splits += [rng.sample(range(1, len(wire)), rng.randint(1, 40)) for _ in range(30)]
    expected, error = run(fresh_client(version), [wire], buffered=False)
    assert error is None and sum(isinstance(e, Message) for e in expected) == 6
    for cuts in splits:
        chunks = pieces(wire, cuts)
        assert run(fresh_client(version), chunks, buffered=True) == (expected, None), cuts


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_server_events_are_those_of_receive_data_split_anywhere(version):
    # CONNECT with frames pipelined behind it: held until accept(), then decoded in the version chosen
    wire = client_stream(version)
    expected, error = run(ServerConnection(), [wire], buffered=False)
    assert error is None and [type(e).__name__ for e in expected][:2] == ["ConnectRequest", "Subscribe"]
    rng = random.Random(version)
    splits = [[], [wire.index(b"\0") + 1], [wire.index(b"\0")]]
    splits += [rng.sample(range(1, len(wire)), rng.randint(1, 40)) for _ in range(30)]
    for cuts in splits:
        assert run(ServerConnection(), pieces(wire, cuts), buffered=True) == (expected, None), cuts


def test_byte_by_byte_around_the_handshake():
    wire = connected_bytes("1.1") + server_stream("1.1")[:300]
    expected = run(fresh_client("1.1"), [wire], buffered=False)
    assert run(fresh_client("1.1"), pieces(wire, range(1, len(wire))), buffered=True) == expected


@pytest.mark.parametrize("bad", [b"MESSAGE\ncontent-length:x\n\n\0", b"MESSAGE\nbad\\qescape:1\n\n\0", b"NOPE\n\n\0"])
def test_a_peer_violation_raises_the_same_error_with_the_events_before_it(bad):
    good = connected_bytes("1.2") + server_stream("1.2")[:500]
    cut = good.rfind(b"\0") + 1  # whole frames, then the bad one
    wire = good[:cut] + b"\n" + bad + b"MESSAGE\n\n\0"
    expected, error = run(fresh_client("1.2"), [wire], buffered=False)
    assert error is not None and any(isinstance(e, HeartbeatReceived) for e in expected)
    for cuts in ([], [cut + 3], [cut, cut + 1, cut + 5]):
        client = fresh_client("1.2")
        assert run(client, pieces(wire, cuts), buffered=True) == (expected, error)
        assert client.state is State.CLOSED
        with pytest.raises(RemoteProtocolError):  # broken for good, whichever way bytes come
            write_into(client, b"\n", 2.0)


def test_liveness_counts_buffered_bytes():
    client = subscribed_client("1.2")
    assert client.heartbeat == (0, 1000)
    assert client.peer_silent(3.5)  # connected at 0: more than 2 x 1000 ms (+ 1000 before the first)
    assert write_into(client, b"\n", 3.5) == [HeartbeatReceived()]
    assert not client.peer_silent(4.0)


def test_misuse_of_the_pair():
    client = subscribed_client("1.2")
    with pytest.raises(RuntimeError):
        client.buffer_updated(1)  # nothing lent
    buf = client.get_buffer(10)
    assert len(buf) >= 10
    with pytest.raises(ValueError):
        client.buffer_updated(len(buf) + 1)
    handshaking = fresh_client("1.2")
    buf = handshaking.get_buffer(-1)
    with pytest.raises(ValueError):
        handshaking.buffer_updated(len(buf) + 1)
    client.get_buffer()
    assert client.buffer_updated(0) == []
    with pytest.raises(RuntimeError):
        client.buffer_updated(0)  # each buffer lent is filled once


def test_frames_received_counts_the_frames_and_heart_beats_of_each_read():
    client, server = pair()
    sub = client.subscribe("s", "/q")
    server.receive_data(sub)
    stream = server.message("s", b"one") + b"\n" + server.message("s", b"two") + b"\n\n"
    before = client.frames_received
    events = client.receive_data(stream[:5])  # no frame complete yet
    assert events == [] and client.frames_received == before
    client.receive_data(stream[5:])
    assert client.frames_received == before + 5  # two MESSAGEs, three EOLs
    buffer = client.get_buffer(-1)
    data = server.message("s", b"three")
    buffer[: len(data)] = data
    client.buffer_updated(len(data))
    assert client.frames_received == before + 6


def test_frames_received_counts_the_frames_before_an_undecodable_byte():
    client, server = pair()
    server.receive_data(client.subscribe("s", "/q"))
    before = client.frames_received
    with pytest.raises(RemoteProtocolError):
        client.receive_data(server.message("s", b"ok") + b"\n" + b"MESSAGE\nx:\\q\n\n\0")  # \q: no escape
    assert client.frames_received == before + 2  # the MESSAGE and its EOL
