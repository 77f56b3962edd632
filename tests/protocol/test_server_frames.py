"""ServerConnection: the handshake and the frames' shapes are its own, the session's state is the broker's."""

from __future__ import annotations

import random
from typing import Any, List

import pytest

import fastframe
from fastframe.protocol import (
    Ack,
    ClientConnection,
    Commit,
    ConnectRequest,
    Disconnect,
    FrameEvent,
    LocalProtocolError,
    RemoteProtocolError,
    Send,
    ServerConnection,
    State,
    Subscribe,
)

CONNECT = b"CONNECT\naccept-version:1.0,1.1\nhost:/\nheart-beat:0,500\n\n\0"


def connected(**options: Any) -> ServerConnection:
    server = ServerConnection(heartbeat=(1000, 0), **options)
    (request,) = server.receive_data(CONNECT)
    assert isinstance(request, ConnectRequest)
    server.accept()
    assert server.version == "1.1" and server.heartbeat == (1000, 0)  # (send, receive) ms
    return server


def test_client_frames_become_events_unchecked_and_nothing_is_tracked():
    server = connected()
    wire = b"".join(
        fastframe.encode(command, headers, version="1.1")
        for command, headers in [
            ("SUBSCRIBE", [("id", "s"), ("destination", "/queue/a"), ("ack", "sideways")]),
            ("SUBSCRIBE", [("id", "s"), ("destination", "/queue/a")]),  # the same id again
            ("ACK", [("message-id", "never-sent"), ("subscription", "s")]),
            ("COMMIT", [("transaction", "never-begun")]),
            ("SEND", [("destination", "/queue/a"), ("receipt", "r"), ("transaction", "t")]),
            ("SEND", [("receipt", "r")]),  # no destination, the same receipt: the broker's business
            ("CONNECT", []),
            ("FLY", [("x", "a\\b")]),
        ]
    )
    events = server.receive_data(wire)
    assert [type(e) for e in events] == [Subscribe, Subscribe, Ack, Commit, Send, Send, FrameEvent, FrameEvent]
    assert (events[0].id, events[0].ack) == ("s", "sideways")
    assert (events[2].id, events[2].subscription, events[3].transaction) == ("never-sent", "s", "never-begun")
    assert (events[4].destination, events[4].transaction, events[5].destination) == ("/queue/a", "t", "")
    assert events[7].frame.get("x") == "a\\b"  # the negotiated escaping still applies
    assert not hasattr(server, "subscriptions") and not hasattr(server, "unacked")  # the broker's
    assert server.pending_receipts == {} and server.state is State.CONNECTED
    assert server.receipt("r") == b"RECEIPT\nreceipt-id:r\n\n\0"  # any id: the broker saw the frame
    assert server.receipt("r") == b"RECEIPT\nreceipt-id:r\n\n\0"


def test_the_handshake_is_still_owned():
    server = ServerConnection()
    with pytest.raises(RemoteProtocolError, match="before CONNECT") as caught:
        server.receive_data(b"SEND\ndestination:/queue/a\n\n\0")
    assert caught.value.frame.command == "SEND" and caught.value.offset is None
    # an ERROR still goes out after the violation (as RabbitMQ shapes it), and the connection is over
    data = server.error("Illegal command", body=b"log in first\n", headers=[("content-type", "text/plain")])
    assert fastframe.decode(data)[0].headers == (
        ("message", "Illegal command"), ("content-type", "text/plain"), ("content-length", "13"),
    )  # fmt: skip
    assert server.state is State.CLOSED
    with pytest.raises(RemoteProtocolError):
        server.receive_data(b"\n")


def test_disconnect_receipt_closes_and_later_frames_are_refused_with_the_frames_before():
    server = connected()
    frames = server.receive_frames(b"SEND\ndestination:/queue/a\n\nx\0DISCONNECT\nreceipt:bye\n\n\0", 1.0)
    assert [f.command for f in frames] == ["SEND", "DISCONNECT"]
    assert server.state is State.DISCONNECTING and server.pending_receipts == {"bye": "DISCONNECT"}
    server.receipt("bye")
    assert server.state is State.CLOSED
    server = connected()
    with pytest.raises(RemoteProtocolError, match="in state disconnecting") as caught:
        server.receive_frames(b"SEND\ndestination:/q\n\n\0DISCONNECT\nreceipt:bye\n\n\0SEND\ndestination:/q\n\n\0")
    assert [type(e) for e in caught.value.events] == [Send, Disconnect]


def test_receive_frames_are_the_frames_of_receive_data_split_anywhere():
    client = ClientConnection()
    wire = client.connect("h", versions=("1.0", "1.1"), heartbeat=(0, 500))
    tail = b"SUBSCRIBE\nid:s\ndestination:/queue/a\\cb\nack:client\nreceipt:r1\n\n\0\n\n"
    tail += b"SEND\ndestination:/queue/a\ncontent-length:5\n\na\0b\\c\0\r\nBEGIN\ntransaction:t\n\n\0"
    tail += b"COMMIT\ntransaction:t\n\n\0UNSUBSCRIBE\nid:s\n\n\0"
    wire += tail * 3 + b"DISCONNECT\nreceipt:bye\n\n\0"

    def run(split: List[int], frames_api: bool) -> List[Any]:
        server = ServerConnection()
        out: List[Any] = []
        edges = [0, *sorted(split), len(wire)]
        for a, b in zip(edges, edges[1:]):
            piece = wire[a:b]
            if frames_api:
                got = server.receive_frames(piece, 1.0)
            else:
                got = [e.frame for e in server.receive_data(piece, 1.0) if isinstance(e, FrameEvent)]
            out += got
            if server.state is State.CONNECTING:
                server.accept()
                if frames_api:
                    out += server.receive_frames(b"")
                else:
                    out += [e.frame for e in server.receive_data(b"") if isinstance(e, FrameEvent)]
        return out

    expected = run([], False)
    assert [f.command for f in expected][:3] == ["CONNECT", "SUBSCRIBE", "SEND"]
    assert expected[1].get("destination") == "/queue/a:b" and expected[2].body == b"a\0b\\c"
    rng = random.Random(7)
    for split in [[], [len(CONNECT)], [1, 2, 3], *[rng.sample(range(1, len(wire)), 12) for _ in range(20)]]:
        assert run(split, True) == expected, split


def test_an_undecodable_byte_is_placed_in_the_whole_stream():
    server = connected()
    bad = b"SEND\ndestination:/queue/a\nx:tab\\there\n\n\0"
    with pytest.raises(RemoteProtocolError) as caught:
        server.receive_frames(b"SEND\ndestination:/q\n\n\0" + bad)
    whole = CONNECT + b"SEND\ndestination:/q\n\n\0" + bad
    with pytest.raises(fastframe.DecodeError) as direct:
        fastframe.Decoder("1.1").feed(whole)
    assert caught.value.offset == direct.value.offset == whole.index(b"\\t")
    assert [e.command for e in caught.value.events] == ["SEND"]


def test_frame_encodes_in_the_negotiated_version_and_validates():
    server = ServerConnection()
    with pytest.raises(LocalProtocolError, match="state idle"):
        server.frame(fastframe.Frame("MESSAGE", [("destination", "/q")]))
    server = connected()
    message = fastframe.Frame("MESSAGE", [("destination", "/q"), ("message-id", "1"), ("subscription", "a:b")])
    assert b"subscription:a\\cb\n" in server.frame(message)  # 1.1 escapes
    with pytest.raises(LocalProtocolError):
        server.frame(fastframe.Frame("MESSAGE", [("destination", "/q")]))  # no message-id


def test_buffered_and_frames_end_follow_the_stream():
    server = ServerConnection()
    server.receive_data(CONNECT + b"SEND\ndest")  # held until accept()
    assert server.frames_end == len(CONNECT) and server.buffered == len(b"SEND\ndest")
    server.accept()
    assert server.receive_frames(b"ination:/q\n\n\0\nSE") != []
    assert server.buffered == 2 and server.frames_end == len(CONNECT) + len(b"SEND\ndestination:/q\n\n\0\n")
