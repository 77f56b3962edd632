"""The broker's routing core, without I/O: frames in through receive(), frames out through handles."""

from __future__ import annotations

from typing import Any, List

import pytest

import fastframe
from fastframe.broker import BrokerCore, Session
from fastframe.protocol import spec


class Client:
    """A fake transport: records what the core sends and whether it closed."""

    def __init__(self, core: BrokerCore, version: str = "1.2", ack_connect: bool = True) -> None:
        self.core = core
        self.frames: List[Any] = []
        self.closed = False
        # the connection's negotiation, as fastframe.protocol.ServerConnection does it (the core reads it)
        self.common_version: Any = None
        self.version: Any = None
        self.session: Session = core.open(self)
        if ack_connect:
            self.do("CONNECT", {"accept-version": version, "host": "/"})
            assert self.take()[0].command == "CONNECTED"

    # the handle's calls, recorded as the frames a transport would shape from them
    def accept(self, version: str, headers: Any) -> None:
        self.version = version
        self.record(fastframe.Frame("CONNECTED", [("version", version), *headers]))

    def receipt(self, receipt_id: str) -> None:
        self.record(fastframe.Frame("RECEIPT", [("receipt-id", receipt_id)]))

    def error(self, message: str, *, body: bytes, headers: Any) -> None:
        self.record(fastframe.Frame("ERROR", [("message", message), *headers], body))

    def record(self, frame: Any) -> None:
        self.frames.append(frame)

    def write(self, data: bytes) -> None:
        self.frames += fastframe.decode(data, self.session.version or "1.2")

    def close(self) -> None:
        self.closed = True

    def do(self, command: str, headers: Any = (), body: bytes = b"") -> None:
        frame = fastframe.Frame(command, headers, body)
        if command in ("CONNECT", "STOMP") and self.version is None:
            self.common_version = spec.negotiate_version(frame.get("accept-version"), fastframe.VERSIONS)
        self.core.receive(self.session, frame)

    def take(self) -> List[Any]:
        frames, self.frames = self.frames, []
        return frames

    def messages(self) -> List[Any]:
        return [f for f in self.take() if f.command == "MESSAGE"]

    def lost(self) -> None:
        self.core.close(self.session)


def error_of(client: Client) -> Any:
    frames = client.take()
    assert [f.command for f in frames] == ["ERROR"] and client.closed
    return frames[0]


def test_connect_negotiates_and_names_the_session() -> None:
    core = BrokerCore(server="test/1")
    client = Client(core, ack_connect=False)
    client.do("CONNECT", {"accept-version": "1.0,1.1", "host": "/"})
    (connected,) = client.take()
    assert connected.get("version") == "1.1" and connected.get("server") == "test/1"
    assert client.session.version == "1.1" and not client.closed
    old = Client(core, ack_connect=False)
    old.do("CONNECT")
    assert old.take()[0].get("version") == "1.0"


def test_the_core_answers_in_the_version_its_connection_negotiated() -> None:
    # the connection owns the version: the core neither negotiates it again nor keeps a copy
    class Older(Client):
        def do(self, command: str, headers: Any = (), body: bytes = b"") -> None:
            if command == "CONNECT":
                self.common_version = "1.1"  # as a server offering 1.0 and 1.1 only would negotiate
                self.core.receive(self.session, fastframe.Frame(command, headers, body))
            else:
                super().do(command, headers, body)

    client = Older(BrokerCore(), ack_connect=False)
    client.do("CONNECT", {"accept-version": "1.1,1.2", "host": "/"})
    assert client.take()[0].get("version") == "1.1" and client.session.version == "1.1"
    client.version = "1.0"  # what the connection says is what the session reads
    assert client.session.version == "1.0"
    client.do("SUBSCRIBE", {"id": "s", "destination": "/queue/a", "ack": "client"})
    client.do("SEND", {"destination": "/queue/a"}, b"x")
    (message,) = client.messages()
    assert message.get("ack") is None  # 1.0 names the message-id in ACK: no ack header


def test_errors_have_rabbitmq_shape_and_close() -> None:
    core = BrokerCore()
    client = Client(core, ack_connect=False)
    client.do("CONNECT", {"accept-version": "3.0"})
    err = error_of(client)
    assert err.headers == (
        ("message", "Version mismatch"),
        ("content-type", "text/plain"),
        ("version", "1.0,1.1,1.2"),
        ("content-length", "35"),
    )
    assert err.body == b"Supported versions are 1.0,1.1,1.2\n"
    early = Client(core, ack_connect=False)
    early.do("SEND", {"destination": "/queue/a"}, b"x")
    assert error_of(early).get("message") == "Illegal command"
    assert core.stats()["sessions"] == 0


@pytest.mark.parametrize(
    "command, headers, message",
    [
        ("SEND", {}, "Missing destination"),
        ("SEND", {"destination": "/nonsense/foo"}, "Unknown destination"),
        ("SUBSCRIBE", {"id": "1", "destination": "/exchange/x"}, "Unknown destination"),
        ("ACK", {"id": "no-such-ack-id"}, "Invalid header"),
        ("ACK", {}, "Invalid header"),
        ("FOO", {}, "Bad command"),
        ("COMMIT", {"transaction": "nope"}, "Bad transaction"),
        ("SEND", {"destination": "/queue/a", "transaction": "nope"}, "Bad transaction"),
        ("UNSUBSCRIBE", {"id": "nope"}, "Invalid header"),
        ("CONNECT", {"accept-version": "1.2"}, "Illegal command"),
    ],
)
def test_mistakes_are_errors(command: str, headers: Any, message: str) -> None:
    client = Client(BrokerCore())
    client.do(command, dict(headers, receipt="r-1"))
    err = error_of(client)
    assert err.get("message") == message and err.get("receipt-id") is None
    assert int(err.get("content-length")) == len(err.body)


def test_login_checked_when_users_given() -> None:
    core = BrokerCore(users={"guest": "guest"})
    bad = Client(core, ack_connect=False)
    bad.do("CONNECT", {"accept-version": "1.2", "login": "nobody", "passcode": "x"})
    assert error_of(bad).body == b"Access refused for user 'nobody'\n"
    good = Client(core, ack_connect=False)
    good.do("CONNECT", {"accept-version": "1.2", "login": "guest", "passcode": "guest"})
    assert good.take()[0].command == "CONNECTED"


def test_queue_round_robin_and_topic_fanout() -> None:
    core = BrokerCore()
    a, b, producer = Client(core), Client(core), Client(core)
    for c in (a, b):
        c.do("SUBSCRIBE", {"id": "q", "destination": "/queue/work"})
        c.do("SUBSCRIBE", {"id": "t", "destination": "/topic/news"})
    for i in range(4):
        producer.do("SEND", {"destination": "/queue/work", "x-i": str(i)}, b"job")
    producer.do("SEND", {"destination": "/topic/news"}, b"all")
    got_a, got_b = a.messages(), b.messages()
    assert [m.get("x-i") for m in got_a if m.get("subscription") == "q"] == ["0", "2"]
    assert [m.get("x-i") for m in got_b if m.get("subscription") == "q"] == ["1", "3"]
    assert [m.body for m in got_a + got_b if m.get("subscription") == "t"] == [b"all", b"all"]
    message = got_a[0]
    assert message.headers[:4] == (
        ("subscription", "q"),
        ("destination", "/queue/work"),
        ("message-id", message.get("message-id")),
        ("redelivered", "false"),
    )


def test_queue_keeps_messages_until_a_subscriber_comes() -> None:
    core = BrokerCore()
    producer = Client(core)
    producer.do("SEND", {"destination": "/queue/later", "receipt": "r"}, b"kept")
    producer.do("SEND", {"destination": "/topic/nobody"}, b"dropped")
    assert [f.get("receipt-id") for f in producer.take()] == ["r"]
    assert core.stats()["queued"] == 1 and core.stats()["stored_bytes"] == 4
    consumer = Client(core)
    consumer.do("SUBSCRIBE", {"id": "1", "destination": "/queue/later"})
    assert [m.body for m in consumer.messages()] == [b"kept"]
    assert core.stats()["stored_bytes"] == 0


def test_stored_bytes_bounded() -> None:
    core = BrokerCore(max_stored_bytes=10)
    producer = Client(core)
    producer.do("SEND", {"destination": "/queue/q"}, b"123456")
    producer.do("SEND", {"destination": "/queue/q"}, b"123456")
    assert error_of(producer).get("message") == "Resource limit"
    assert core.stats()["stored_bytes"] == 6


def test_client_individual_nack_redelivers() -> None:
    core = BrokerCore()
    consumer, producer = Client(core), Client(core)
    consumer.do("SUBSCRIBE", {"id": "s1", "destination": "/queue/q", "ack": "client-individual"})
    producer.do("SEND", {"destination": "/queue/q"}, b"ack-1")
    producer.do("SEND", {"destination": "/queue/q"}, b"ack-2")
    first, second = consumer.messages()
    assert first.get("ack") == first.get("message-id")
    consumer.do("ACK", {"id": first.get("ack")})
    consumer.do("NACK", {"id": second.get("ack"), "receipt": "r-nack"})
    frames = consumer.take()
    assert [f.command for f in frames] == ["RECEIPT", "MESSAGE"]  # the receipt first, as RabbitMQ sends
    again = frames[1]
    assert again.body == b"ack-2" and again.get("redelivered") == "true"
    consumer.do("ACK", {"id": again.get("ack")})
    assert core.stats()["unacked"] == 0 and core.stats()["queued"] == 0


def test_client_mode_ack_is_cumulative() -> None:
    core = BrokerCore()
    consumer, producer = Client(core), Client(core)
    consumer.do("SUBSCRIBE", {"id": "s", "destination": "/queue/q", "ack": "client"})
    for i in range(3):
        producer.do("SEND", {"destination": "/queue/q"}, str(i).encode())
    messages = consumer.messages()
    consumer.do("ACK", {"id": messages[1].get("ack")})
    assert core.stats()["unacked"] == 1
    consumer.lost()  # the last one goes back to the queue
    assert core.stats() == dict(core.stats(), unacked=0, queued=1, subscriptions=0)
    other = Client(core)
    other.do("SUBSCRIBE", {"id": "s", "destination": "/queue/q"})
    (redelivered,) = other.messages()
    assert redelivered.body == b"2" and redelivered.get("redelivered") == "true"


def test_ack_by_message_id_in_1_1_and_1_0() -> None:
    core = BrokerCore()
    for version in ("1.0", "1.1"):
        consumer, producer = Client(core, version), Client(core, version)
        consumer.do("SUBSCRIBE", {"id": "s", "destination": "/queue/" + version, "ack": "client"})
        producer.do("SEND", {"destination": "/queue/" + version}, b"x")
        (message,) = consumer.messages()
        assert message.get("ack") is None
        consumer.do("ACK", {"message-id": message.get("message-id"), "subscription": "s"})
        assert not consumer.closed and core.stats()["unacked"] == 0


def test_1_0_subscription_without_id() -> None:
    core = BrokerCore()
    consumer, producer = Client(core, "1.0"), Client(core, "1.0")
    consumer.do("SUBSCRIBE", {"destination": "/queue/old"})
    producer.do("SEND", {"destination": "/queue/old"}, b"x")
    (message,) = consumer.messages()
    assert message.get("subscription") is None
    consumer.do("UNSUBSCRIBE", {"destination": "/queue/old"})
    assert core.stats()["subscriptions"] == 0 and not consumer.closed
    consumer.do("NACK", {"message-id": "1"})  # 1.0 has no NACK
    assert error_of(consumer).get("message") == "Bad command"


def test_transactions_commit_abort_and_loss() -> None:
    core = BrokerCore()
    consumer, producer = Client(core), Client(core)
    consumer.do("SUBSCRIBE", {"id": "s", "destination": "/queue/q", "ack": "client-individual"})
    producer.do("BEGIN", {"transaction": "t1"})
    producer.do("SEND", {"destination": "/queue/q", "transaction": "t1", "receipt": "r"}, b"in-tx")
    assert consumer.messages() == [] and [f.command for f in producer.take()] == ["RECEIPT"]
    producer.do("COMMIT", {"transaction": "t1"})
    (message,) = consumer.messages()
    assert message.body == b"in-tx" and message.get("transaction") is None and message.get("receipt") is None
    consumer.do("BEGIN", {"transaction": "t2"})
    consumer.do("ACK", {"id": message.get("ack"), "transaction": "t2"})
    consumer.do("ABORT", {"transaction": "t2"})
    assert core.stats()["unacked"] == 1
    producer.do("BEGIN", {"transaction": "t3"})
    producer.do("SEND", {"destination": "/queue/q", "transaction": "t3"}, b"never")
    assert core.stats()["transactions"] == 1
    producer.lost()
    consumer.lost()
    assert core.stats()["transactions"] == 0 and core.stats()["queued"] == 1  # only the unacked one
    producer.do("BEGIN", {"transaction": "t1"})  # frames after close are ignored
    assert producer.take() == []


def test_topic_nack_redelivers_to_same_subscription() -> None:
    core = BrokerCore()
    a, b, producer = Client(core), Client(core), Client(core)
    a.do("SUBSCRIBE", {"id": "t", "destination": "/topic/x", "ack": "client-individual"})
    b.do("SUBSCRIBE", {"id": "t", "destination": "/topic/x"})
    producer.do("SEND", {"destination": "/topic/x"}, b"m")
    (first,) = a.messages()
    assert len(b.messages()) == 1
    a.do("NACK", {"id": first.get("ack")})
    (again,) = a.messages()
    assert again.get("redelivered") == "true" and b.messages() == []


def test_disconnect_receipt_then_close_and_repeated_headers() -> None:
    core = BrokerCore()
    consumer, producer = Client(core), Client(core)
    consumer.do("SUBSCRIBE", {"id": "s", "destination": "/queue/q"})
    producer.do("SEND", [("destination", "/queue/q"), ("x", "1"), ("x", "2"), ("destination", "/queue/other")], b"")
    (message,) = consumer.messages()
    assert message.get_all("x") == ["1"] and message.get_all("destination") == ["/queue/q"]
    producer.do("DISCONNECT", {"receipt": "bye"})
    assert [f.get("receipt-id") for f in producer.take()] == ["bye"] and producer.closed
    assert core.stats()["sessions"] == 1


PLAIN = [("x-plain", "v"), ("x-colon", "12:30"), ("caf\u00e9", "\u2603")]
SPECIAL = [("x-esc", "a:b\nc\\d\re"), ("x-lf", "a\nb"), ("x-plain", "v")]


@pytest.mark.parametrize(
    "headers", [[], PLAIN, SPECIAL, [("x", "1"), ("x", "2")]], ids=["none", "plain", "special", "repeat"]
)
@pytest.mark.parametrize("body", [b"", b"x", b"a\0b"])
@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_message_bytes_equal_the_encoders(version: str, body: bytes, headers: List[Any]) -> None:
    """MESSAGE deliveries are written from cached pieces: byte for byte what the encoder makes."""
    core = BrokerCore()
    consumer, producer = Client(core, version), Client(core, "1.2")
    raw: List[bytes] = []
    consumer.write = raw.append  # type: ignore[method-assign]
    consumer.do("SUBSCRIBE", {"id": "s:1", "destination": "/queue/a\\b", "ack": "client"})
    producer.do("SEND", [("destination", "/queue/a\\b"), *headers], body)
    (data,) = raw
    expected_headers = [("subscription", "s:1"), ("destination", "/queue/a\\b"), ("message-id", "1"),
                        ("redelivered", "false")]  # fmt: skip
    if version == "1.2":
        expected_headers.append(("ack", "1"))
    frame = fastframe.Frame("MESSAGE", expected_headers + headers[:1] + headers[2:], body) if headers[:2] == [
        ("x", "1"), ("x", "2")] else fastframe.Frame("MESSAGE", expected_headers + headers, body)  # fmt: skip
    try:
        assert data == frame.encode(version)
    except fastframe.EncodeError:  # 1.0/1.1 cannot carry these values: the 1.2 escapes, as RabbitMQ
        assert data == fastframe.encode(frame, version=version, escapes="1.2")


class Recorder(Client):
    """A client that keeps the bytes written to it as they came (consecutive writes joined)."""

    def __init__(self, core: BrokerCore, version: str = "1.2") -> None:
        self.out: List[Any] = []
        self.writes = 0
        super().__init__(core, ack_connect=False)
        self.do("CONNECT", {"accept-version": version, "host": "/"})
        assert self.out.pop()[0] == "CONNECTED"

    def record(self, frame: Any) -> None:
        self.out.append((frame.command, frame.headers, frame.body))

    def write(self, data: bytes) -> None:
        self.writes += 1
        if self.out and isinstance(self.out[-1], bytes):
            self.out[-1] += data
        else:
            self.out.append(data)


def _batch(dest: str, *extra: Any, body: bytes = b"b") -> Any:
    headers = [("destination", dest), *extra]
    if body:
        headers.append(("content-length", str(len(body))))
    return fastframe.Frame("SEND", headers, body)


BATCH = [
    _batch("/queue/q"),
    _batch("/queue/q", body=b""),
    _batch("/queue/q", *SPECIAL),
    _batch("/queue/q", ("x", "1"), ("x", "2"), body=b"a\0b"),
    fastframe.Frame("SEND", [("content-length", "1"), ("destination", "/queue/q")], b"c"),
    _batch("/topic/t"),
    _batch("/topic/t", ("receipt", "r1")),
    _batch("/topic/t", *PLAIN),
    _batch("/queue/new"),
    _batch("/queue/new", ("x-stored", "1")),
    fastframe.Frame("BEGIN", {"transaction": "tx"}),
    _batch("/queue/q", ("transaction", "tx")),
    _batch("/topic/none"),
    fastframe.Frame("SUBSCRIBE", {"id": "late", "destination": "/queue/new"}),
    _batch("/queue/new"),
    fastframe.Frame("COMMIT", {"transaction": "tx", "receipt": "r2"}),
    _batch("/queue/q"),
    _batch("/queue/"),  # no such destination: ERROR, and the frames after it are not acted on
    _batch("/queue/q"),
]


@pytest.mark.parametrize("cut", [len(BATCH), 9, 1])
def test_receive_many_answers_as_receive_does(cut: int) -> None:
    """The frames of one read through receive_many(): the same bytes and frames, in the same order,
    as receive() frame by frame; MESSAGE bytes of a run of plain SENDs in one write per connection."""
    outputs = []
    for many in (False, True):
        core = BrokerCore()
        clients = [Recorder(core, version) for version in ("1.0", "1.2", "1.1", "1.2")]
        c10, c12, c11, producer = clients
        c10.do("SUBSCRIBE", {"destination": "/queue/q"})
        c12.do("SUBSCRIBE", {"id": "s:2", "destination": "/queue/q", "ack": "client"})
        c10.do("SUBSCRIBE", {"id": "t", "destination": "/topic/t"})
        c11.do("SUBSCRIBE", {"id": "t", "destination": "/topic/t", "ack": "client-individual"})
        producer.do("SUBSCRIBE", {"id": "mine", "destination": "/topic/t"})
        for client in clients:
            client.out.clear()
            client.writes = 0
        for start in range(0, len(BATCH), cut):
            frames = BATCH[start : start + cut]
            if many:
                core.receive_many(producer.session, frames)
            else:
                for frame in frames:
                    core.receive(producer.session, frame)
        outputs.append(([client.out for client in clients], [client.writes for client in clients]))
        assert producer.closed and producer.out[-1][0] == "ERROR"
        assert core.stats()["sessions"] == 3 and core.stats()["unacked"] == len(c12.session.pending) + len(
            c11.session.pending
        )
    (one_by_one, writes), (together, batched) = outputs
    assert together == one_by_one
    if cut == len(BATCH):
        assert batched[0] < writes[0] and batched[0] <= 6


@pytest.mark.parametrize("body", [b"", b"x\0y"])
@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_the_flat_loops_template_is_the_message_template(version: str, body: bytes) -> None:
    from fastframe.broker._encoding import DELIVERY, PLAIN_DELIVERY, PLAIN_EMPTY_DELIVERY, message_tail

    prefix = b"MESSAGE\ndestination:/queue/a\nmessage-id:"
    use_1_2, tail = message_tail(version, (), body)
    plain = PLAIN_DELIVERY % (prefix, 7, len(body), body) if body else PLAIN_EMPTY_DELIVERY % (prefix, 7)
    assert not use_1_2 and plain == DELIVERY % (prefix, 7, b"false", b"", tail)
