"""ClientConnection.route_columns: a columnar subscription's MESSAGEs come as one fastframe.Columns per read.

What the inbox holds, row for row, is what an unrouted connection returns as MESSAGE events for
the same bytes; every other frame is still an event, in order. Each test runs with both twins
(the connection's ColumnDecoder, and the Frame and to_columns of its rare path, are the twin's).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import compiled_twin_built, load_twin
from fastframe.protocol import (
    ClientConnection,
    Inbox,
    LocalProtocolError,
    Message,
    Receipt,
    RemoteProtocolError,
    frames_of,
    message_columns,
)
from fastframe.protocol import _client as client_module
from fastframe.protocol import _columnar as columnar_module

from .helpers import TrackingServer, pair

TWINS = ["py", "c"] if compiled_twin_built() else ["py"]


@pytest.fixture(params=TWINS)
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The twin whose ColumnDecoder, Frame and to_columns the connection uses."""
    module = load_twin(request.param)
    monkeypatch.setattr(client_module, "ColumnDecoder", module.ColumnDecoder)
    monkeypatch.setattr(columnar_module, "Frame", module.Frame)
    monkeypatch.setattr(columnar_module, "to_columns", module.to_columns)
    return module


def subscribed(version: str = "1.2", mode: str = "auto", **options: Any) -> Tuple[ClientConnection, TrackingServer]:
    client, server = pair(version, **options)
    server.receive_data(client.subscribe("s", "/q/s", ack=mode))
    return client, server  # type: ignore[return-value]


def messages(server: TrackingServer, count: int, first: int = 0) -> bytes:
    k = "a:b" if server.version == "1.0" else "a:b\nc"  # (1.0 has no escapes)
    return b"".join(server.message("s", b"body-%d" % n, {"n": str(n), "k": k}) for n in range(first, first + count))


def rows(items: Any) -> List[Tuple[str, Tuple[Tuple[str, str], ...], bytes]]:
    """Every row of the Columns items, as (command, headers, body)."""
    return [(f.command, tuple(f.headers), bytes(f.body)) for columns in items for f in frames_of(columns)]


def as_rows(events: Any) -> List[Tuple[str, Tuple[Tuple[str, str], ...], bytes]]:
    return [(e.frame.command, tuple(e.frame.headers), bytes(e.frame.body)) for e in events if isinstance(e, Message)]


def columnar(version: str = "1.2", mode: str = "auto", **options: Any) -> Tuple[ClientConnection, Any, Inbox[Any]]:
    client, server = subscribed(version, mode, **options)
    inbox: Inbox[Any] = Inbox(100)
    client.route_columns("s", inbox)
    return client, server, inbox


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_a_read_of_messages_is_one_columns_item_with_their_rows(twin: ModuleType, version: str) -> None:
    client, server, inbox = columnar(version)
    data = messages(server, 5)
    assert client.receive_data(data) == []
    (item,) = inbox.items
    assert type(item) is twin.Columns and item.rows == 5
    unrouted, _ = subscribed(version)
    assert rows(inbox.items) == as_rows(unrouted.receive_data(data))  # the same frames, row for row
    assert item.header(3, "n") == "3" and item.header(3, "k") == ("a:b" if version == "1.0" else "a:b\nc")
    assert list(client.take_filled()) == [inbox] and list(client.take_filled()) == []
    assert client.frames_received == 6  # (CONNECTED and the five)


def test_other_frames_are_events_in_order_between_runs_of_rows(twin: ModuleType) -> None:
    client, server, inbox = columnar()
    server.receive_data(client.send("/q/s", b"x", receipt="r-1"))
    data = messages(server, 3) + server.receipt("r-1") + b"\n" + messages(server, 2, first=3)
    events = client.receive_data(data)
    assert [type(event) for event in events] == [Receipt]  # (no heart-beat events: bytes keep it alive)
    assert [item.rows for item in inbox.items] == [3, 2]  # the runs either side of the RECEIPT
    assert [row[2] for row in rows(inbox.items)] == [b"body-%d" % n for n in range(5)]
    assert client.frames_received == 8  # (CONNECTED, five MESSAGEs, the RECEIPT and the heart-beat)


@given(data=st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_reads_cut_anywhere_give_the_rows_and_events_of_an_unrouted_connection(twin: ModuleType, data: Any) -> None:
    client, server, inbox = columnar("1.2", "client")
    plain, plain_server = subscribed("1.2", "client")
    stream = b""
    for n in range(data.draw(st.integers(1, 12), label="frames")):
        kind = data.draw(st.sampled_from(["message", "message", "message", "receipt", "beat"]))
        if kind == "message":
            stream += server.message("s", b"\0body-%d" % n, {"n": str(n)}, message_id=f"m-{n}", ack_id=f"a-{n}")
        elif kind == "receipt":
            rid = f"r-{n}"
            server.receive_data(client.send("/q/s", b"", receipt=rid))
            plain_server.receive_data(plain.send("/q/s", b"", receipt=rid))
            stream += server.receipt(rid)
        else:
            stream += b"\n"
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6), label="cuts"))
    events = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)]):
        events += client.receive_data(stream[start:end])
    expected = [e for e in plain.receive_data(stream) if type(e).__name__ != "HeartbeatReceived"]
    assert rows(inbox.items) == as_rows(expected)
    assert [e.receipt_id for e in events] == [e.receipt_id for e in expected if isinstance(e, Receipt)]
    assert client.unacked == {}  # no ledger of the rows (see the ACK tests)


def test_route_columns_refuses_what_it_cannot_keep(twin: ModuleType) -> None:
    client, server = pair()
    with pytest.raises(LocalProtocolError, match="no subscription with id 's' to route"):
        client.route_columns("s", Inbox(1))
    server.receive_data(client.subscribe("s", "/q/s") + client.subscribe("t", "/q/t"))
    with pytest.raises(LocalProtocolError, match="not the connection's only subscription"):
        client.route_columns("s", Inbox(1))
    client, server = subscribed(mode="client-individual")
    with pytest.raises(LocalProtocolError, match="ack mode is client-individual"):
        client.route_columns("s", Inbox(1))
    client, server = subscribed(strict=True)
    with pytest.raises(LocalProtocolError, match="the connection is strict"):
        client.route_columns("s", Inbox(1))
    client, server = subscribed()
    client.receive_data(messages(server, 1)[:10])  # a frame under way: its bytes are in the Decoder
    with pytest.raises(LocalProtocolError, match="bytes of a frame are under way"):
        client.route_columns("s", Inbox(1))
    client, server, inbox = columnar()
    with pytest.raises(LocalProtocolError, match="routed as columns: it must stay the connection's only one"):
        client.subscribe("t", "/q/t")


@pytest.mark.parametrize(
    "version, wire", [("1.2", b"ACK\nid:a-7\n\n\0"), ("1.1", b"ACK\nmessage-id:a-7\nsubscription:s\n\n\0")]
)
def test_a_row_is_acknowledged_by_the_id_given(twin: ModuleType, version: str, wire: bytes) -> None:
    client, server, inbox = columnar(version, "client")
    assert client.ack("a-7") == wire
    assert client.ack("a-7", subscription="s") == wire
    with pytest.raises(LocalProtocolError, match="not an unacknowledged message of subscription 't'"):
        client.ack("a-7", subscription="t")
    plain, _ = subscribed(version, "client")  # a connection that keeps the ledger still checks
    with pytest.raises(LocalProtocolError, match="not an unacknowledged message"):
        plain.ack("a-7")


def test_unrouted_the_rows_are_message_events_again(twin: ModuleType) -> None:
    client, server, inbox = columnar(mode="client")
    client.receive_data(messages(server, 2))
    client.unroute("s")
    events = client.receive_data(messages(server, 2, first=2))
    assert [event.body for event in events] == [b"body-2", b"body-3"] and len(inbox.items) == 1
    assert sorted(client.unacked) == [event.ack_id for event in events]  # the ledger again
    server.receive_data(client.unsubscribe("s"))
    client.subscribe("t", "/q/t")  # no longer columnar: a second subscription is allowed
    assert message_columns(events).rows == 2


def test_a_decode_error_keeps_the_rows_before_it_and_its_offset(twin: ModuleType) -> None:
    client, server, inbox = columnar(max_body_size=10)
    plain, _ = subscribed(max_body_size=10)
    server.receive_data(client.send("/q/s", b"x", receipt="r-1"))
    plain.send("/q/s", b"x", receipt="r-1")
    data = messages(server, 2) + server.receipt("r-1") + messages(server, 1, first=2)
    data += server.message("s", b"far too long for the limit") + messages(server, 1, first=3)
    with pytest.raises(RemoteProtocolError) as info:
        client.receive_data(data)
    with pytest.raises(RemoteProtocolError) as expected:
        plain.receive_data(data)
    assert info.value.offset == expected.value.offset and str(info.value) == str(expected.value)
    assert [row[2] for row in rows(inbox.items)] == [b"body-0", b"body-1", b"body-2"]
    assert [type(event) for event in info.value.events] == [Receipt]


def test_header_bytes_that_are_not_utf8_are_refused_whatever_keep_invalid_utf8_says(twin: ModuleType) -> None:
    client, server, inbox = columnar(keep_invalid_utf8=True)
    bad = b"MESSAGE\nmessage-id:1\nsubscription:s\ndestination:/q/s\nx:b\xffc\n\n\0"
    data = messages(server, 1) + bad
    with pytest.raises(RemoteProtocolError, match="UTF-8") as info:
        client.receive_data(data)
    plain, _ = subscribed()  # (what a connection that does not keep such bytes says of them)
    with pytest.raises(RemoteProtocolError) as expected:
        plain.receive_data(data)
    assert info.value.offset == expected.value.offset and str(info.value) == str(expected.value)
    assert [row[2] for row in rows(inbox.items)] == [b"body-0"]


@given(data=st.data())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_mutated_streams_fail_or_pass_as_an_unrouted_connection_does(twin: ModuleType, data: Any) -> None:
    """Random bytes flipped, dropped or inserted in a stream of MESSAGEs and RECEIPTs, fed in random
    pieces: the columnar connection raises where an unrouted one does (the same offset and reason),
    and before that queues the rows of the same MESSAGEs; a bad MESSAGE is an error, never a wrong row."""
    client, server, inbox = columnar("1.2", "client")
    plain, plain_server = subscribed("1.2", "client")
    stream = bytearray()
    for n in range(data.draw(st.integers(1, 6), label="frames")):
        if data.draw(st.booleans(), label="receipt"):
            rid = f"r-{n}"
            server.receive_data(client.send("/q/s", b"", receipt=rid))
            plain_server.receive_data(plain.send("/q/s", b"", receipt=rid))
            stream += server.receipt(rid)
        else:
            stream += server.message("s", b"body-%d" % n, {"n": str(n)}, message_id=f"m-{n}", ack_id=f"a-{n}")
    for _ in range(data.draw(st.integers(0, 3), label="mutations")):
        at = data.draw(st.integers(0, len(stream) - 1))
        kind = data.draw(st.sampled_from(["flip", "drop", "insert"]))
        byte = data.draw(st.sampled_from([0, 10, 13, 58, 92, 0xFF, 0xC3, 65]))
        if kind == "flip":
            stream[at] = byte
        elif kind == "drop":
            del stream[at]
        else:
            stream.insert(at, byte)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=4), label="cuts"))
    got_error = want_error = None
    events: List[Any] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)]):
        try:
            events += client.receive_data(bytes(stream[start:end]))
        except RemoteProtocolError as exc:
            got_error, events = exc, events + exc.events
            break
    expected = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)]):  # (the same pieces: an error's excerpt
        try:  # holds only the bytes received)
            expected += plain.receive_data(bytes(stream[start:end]))
        except RemoteProtocolError as exc:
            want_error, expected = exc, expected + exc.events
            break
    expected = [e for e in expected if type(e).__name__ != "HeartbeatReceived"]
    assert (got_error is None) == (want_error is None)
    if got_error is not None and want_error is not None:
        assert (got_error.offset, str(got_error)) == (want_error.offset, str(want_error))
    ours = [e for e in expected if isinstance(e, Message) and e.subscription == "s"]
    assert rows(inbox.items) == as_rows(ours)  # (a mutated subscription header: an event, as unrouted)
    others = [e for e in expected if not any(e is mine for mine in ours)]
    assert [(type(e), getattr(e, "frame", None)) for e in events] == [
        (type(e), getattr(e, "frame", None)) for e in others
    ]
