"""What a connection keeps and says after something went wrong: given-up receipts, a peer's bad
bytes (the offset its error names), and a server answering what came before a violation."""

from __future__ import annotations

import random

import pytest

import fastframe
from fastframe.protocol import (
    ClientConnection,
    LocalProtocolError,
    Receipt,
    RemoteProtocolError,
    Send,
    ServerConnection,
    State,
    _client,
    _core,
    _server,
)

from .helpers import pair, relay


@pytest.fixture
def twin_decoder(codec, monkeypatch):
    """The connection layer decoding with each twin (the offsets come from the decoder)."""
    monkeypatch.setattr(_core, "Decoder", codec.Decoder)
    for module in (_core, _client, _server):
        monkeypatch.setattr(module, "Heartbeat", codec.Heartbeat)
    return codec


def test_a_forgotten_receipt_leaves_the_pending_set_and_its_late_receipt_is_no_violation():
    client, server = pair()
    relay(client.send("/q", b"x", receipt="r-1"), server)
    assert client.pending_receipts == {"r-1": "SEND"}
    client.forget_receipt("r-1")
    assert client.pending_receipts == {}
    (late,) = relay(server.receipt("r-1"), client)
    assert isinstance(late, Receipt) and (late.receipt_id, late.for_command) == ("r-1", "SEND")
    assert client.state is State.CONNECTED
    with pytest.raises(RemoteProtocolError, match="unknown receipt id 'r-1'"):
        client.receive_data(b"RECEIPT\nreceipt-id:r-1\n\n\0")  # once only


def test_forgotten_receipts_are_bounded():
    client, _ = pair()
    for n in range(3000):
        client.send("/q", b"", receipt=f"r{n}")
        client.forget_receipt(f"r{n}")
    assert client.pending_receipts == {}
    (late,) = client.receive_data(b"RECEIPT\nreceipt-id:r2999\n\n\0")
    assert late.receipt_id == "r2999"  # a recent one is remembered
    with pytest.raises(RemoteProtocolError, match="unknown receipt id 'r0'"):
        client.receive_data(b"RECEIPT\nreceipt-id:r0\n\n\0")  # the oldest ones are not: memory stays bounded


def test_forgetting_an_unknown_receipt_is_harmless():
    client, _ = pair()
    client.forget_receipt("never-asked")
    assert client.pending_receipts == {}


@pytest.mark.parametrize("role", ["client", "server"])
@pytest.mark.parametrize("feed", ["whole", "bytewise", "buffer"])
def test_an_undecodable_byte_is_named_by_one_offset_in_the_whole_stream(twin_decoder, role, feed):
    client, server = pair()
    good = {
        "client": b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:s\n\n\0",
        "server": b"SEND\ndestination:/q\n\n\0",
    }
    if role == "client":
        client.subscribe("s", "/q")
    conn = client if role == "client" else server
    start = conn.frames_end  # where the stream after the handshake begins (CONNECT or CONNECTED before)
    bad = b"NACKX\nnocolon\n\n\0"
    data = good[role] + bad
    with pytest.raises(RemoteProtocolError) as info:
        if feed == "whole":
            conn.receive_data(data)
        elif feed == "bytewise":
            for index in range(len(data)):
                conn.receive_data(data[index : index + 1])
        else:
            for index in range(0, len(data), 7):
                piece = data[index : index + 7]
                conn.get_buffer(len(piece))[: len(piece)] = piece
                conn.buffer_updated(len(piece))
    error = info.value
    assert error.offset is not None and error.offset > start
    assert f"at offset {error.offset} " in error.message
    assert isinstance(error.__cause__, fastframe.DecodeError)
    assert error.offset == start + error.__cause__.offset
    with pytest.raises(RemoteProtocolError) as again:
        conn.receive_data(b"x")
    assert again.value.offset == error.offset and again.value.message == error.message


def test_the_offset_counts_the_handshake_as_the_issue_reports_it():
    client = ClientConnection()
    client.connect("h")
    handshake = b"CONNECTED\nversion:1.2\n\n\0"
    with pytest.raises(RemoteProtocolError) as info:
        client.receive_data(handshake + b"MESSAGE\nnocolon\n\n\0")
    assert info.value.offset == len(handshake) + len(b"MESSAGE\n")
    assert f"at offset {info.value.offset} " in info.value.message


def test_a_cut_inside_a_frame_names_the_stream_offset_too():
    client, server = pair()
    relay(client.send("/q", b"x"), server)
    with pytest.raises(RemoteProtocolError) as info:
        server.receive_data(b"SEND\ndestin")
        server.receive_eof()
    assert f"at offset {info.value.offset} " in info.value.message


@pytest.mark.parametrize("fast", [True, False])
def test_a_server_answers_the_frames_before_a_violation_then_tells_why(fast):
    client = ClientConnection()
    server = ServerConnection()
    server.receive_data(client.connect("h"))
    client.receive_data(server.accept())
    wire = client.send("/q", b"one", receipt="r1") + client.send("/q", b"two", receipt="r2") + b"BAD\0\n"
    with pytest.raises(RemoteProtocolError) as info:
        if fast:
            server.receive_frames(wire)
        else:
            server.receive_data(wire)
    sends = [e for e in info.value.events if isinstance(e, Send)]
    assert [s.frame.body for s in sends] == [b"one", b"two"]
    # the frames before the bad bytes are answered, in order, then the ERROR, then nothing
    answers = server.receipt("r1") + server.receipt("r2")
    answers += server.error("malformed", body=info.value.message)
    assert [f.command for f in fastframe.decode(answers)] == ["RECEIPT", "RECEIPT", "ERROR"]
    with pytest.raises(LocalProtocolError, match="cannot send RECEIPT after ERROR"):
        server.receipt("r3")
    with pytest.raises(LocalProtocolError):
        server.frame(fastframe.Frame("MESSAGE", [("destination", "/q"), ("message-id", "m"), ("subscription", "s")]))
    with pytest.raises(RemoteProtocolError):
        server.receive_data(b"SEND\n\n\0")


def test_random_cuts_of_a_mutated_stream_agree_on_the_error_and_its_offset(twin_decoder):
    # the same mutated stream fed whole and in random pieces: the same events, the same error and
    # offset (the excerpt holds only the bytes received so far, so it is not compared)
    rng = random.Random(19)
    client, server = pair()
    stream = b"".join(client.send(f"/q/{n}", bytes([n]) * n, {"k": f"v{n}"}) for n in range(20))
    for _ in range(200):
        data = bytearray(stream)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.choice(b"\0\n:\\\rAZ\xff")
        outcomes = []
        for pieces in (1, rng.randint(2, 30)):
            _, conn = pair()
            cuts = sorted(rng.sample(range(1, len(data)), pieces - 1)) if pieces > 1 else []
            events, error = [], None
            try:
                for a, b in zip([0, *cuts], [*cuts, len(data)]):
                    events += [e.frame for e in conn.receive_data(bytes(data[a:b])) if hasattr(e, "frame")]
            except RemoteProtocolError as exc:
                events += [e.frame for e in exc.events if hasattr(e, "frame")]
                cause = exc.__cause__
                reason = cause.reason if isinstance(cause, fastframe.DecodeError) else exc.message
                error = (reason, exc.offset)
                assert exc.offset is None or f"at offset {exc.offset} " in exc.message
            outcomes.append((events, error))
        assert outcomes[0] == outcomes[1]
