"""Stream queues emulated as RabbitMQ 3.10.8 serves them over STOMP, without I/O (the error texts are
RabbitMQ's, copied from its answers to raw frames); a few through the asyncio client at the end, and
the scenario of ``test_streams_live.py`` runs against both this broker and RabbitMQ."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from test_core import Client, error_of  # (rootdir-relative, as the other broker tests import their helpers)

import fastframe
from fastframe.broker import BrokerCore

DECLARE = {"x-queue-type": "stream", "durable": "true", "auto-delete": "false"}


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def consumer(core: BrokerCore, offset: str = "first", prefetch: int = 100, ack: str = "client", **extra: str) -> Client:
    client = Client(core)
    headers = {"id": "s", "destination": "/amq/queue/log", "ack": ack, "prefetch-count": str(prefetch)}
    client.do("SUBSCRIBE", {**headers, "x-stream-offset": offset, "receipt": "r", **extra})
    frames = client.frames
    assert frames and frames[0].command == "RECEIPT", frames  # the RECEIPT first, then the messages
    frames.pop(0)
    return client


def declared(core: BrokerCore, **arguments: str) -> Client:
    client = Client(core)
    headers = {"id": "d", "destination": "/queue/log", "ack": "client", "prefetch-count": "1"}
    client.do("SUBSCRIBE", {**headers, **DECLARE, **arguments})
    client.do("UNSUBSCRIBE", {"id": "d"})  # (a producer: it declared the stream, it reads nothing)
    assert client.take() == [] and not client.closed
    return client


def publish(client: Client, *bodies: bytes, **headers: str) -> None:
    """Each body in a chunk of its own (a read of one SEND)."""
    for body in bodies:
        client.do("SEND", {"destination": "/amq/queue/log", **headers}, body)


def publish_chunk(core: BrokerCore, client: Client, *bodies: bytes) -> None:
    """The bodies in one chunk: the SENDs of one read."""
    frames = [fastframe.Frame("SEND", {"destination": "/amq/queue/log"}, body) for body in bodies]
    core.receive_many(client.session, frames)


def offsets(messages: List[Any]) -> List[int]:
    return [int(m.get("x-stream-offset")) for m in messages]


def bodies(messages: List[Any]) -> List[bytes]:
    return [m.body for m in messages]


def test_a_stream_keeps_every_message_with_its_offset_for_every_consumer() -> None:
    core = BrokerCore()
    producer = declared(core)
    reader = consumer(core, "next")
    producer.do("SEND", {"destination": "/amq/queue/log", "x-custom": "v0", "receipt": "s0"}, b"m0")
    assert [f.command for f in producer.take()] == ["RECEIPT"]
    (message,) = reader.messages()
    # RabbitMQ's shape: /queue/NAME however subscribed, the SEND's receipt copied, the offset last
    assert message.headers[:2] == (("subscription", "s"), ("destination", "/queue/log"))
    assert message.headers[4:] == (
        ("ack", message.get("message-id")),
        ("receipt", "s0"),
        ("x-custom", "v0"),
        ("x-stream-offset", "0"),
        ("content-length", "2"),
    )
    publish(producer, b"m1", b"m2")
    first, second = consumer(core), consumer(core)
    assert offsets(first.messages()) == offsets(second.messages()) == [0, 1, 2]
    publish(producer, b"m3")
    assert bodies(first.messages()) == bodies(second.messages()) == [b"m3"]
    assert core.streams.stats()["stream_messages"] == 4 and core.stats()["queued"] == 0


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("first", [0, 1, 2, 3, 4]),
        ("last", [2, 3, 4]),  # the last chunk's first message
        ("next", []),
        ("offset=3", [3, 4]),
        ("offset=0", [0, 1, 2, 3, 4]),
        ("offset=99", []),
        ("timestamp=0", [0, 1, 2, 3, 4]),
        ("timestamp=1700000010", [2, 3, 4]),
        ("timestamp=1800000000", []),
        ("bogus", []),  # RabbitMQ takes an unknown word as next
    ],
)
def test_x_stream_offset_on_subscribe(spec: str, expected: List[int]) -> None:
    clock = Clock()
    core = BrokerCore(clock=clock)
    producer = declared(core)
    publish(producer, b"m0", b"m1")
    clock.now += 10
    publish_chunk(core, producer, b"m2", b"m3", b"m4")
    assert offsets(consumer(core, spec).messages()) == expected


def test_a_subscription_from_next_gets_what_comes_after() -> None:
    core = BrokerCore()
    producer = declared(core)
    publish(producer, b"old")
    reader = consumer(core, "next")
    assert reader.messages() == []
    publish(producer, b"new")
    assert bodies(reader.messages()) == [b"new"]


def test_an_offset_that_is_no_number_is_rabbitmqs_processing_error() -> None:
    core = BrokerCore()
    declared(core)
    client = Client(core)
    headers = {"id": "s", "destination": "/amq/queue/log", "ack": "client", "prefetch-count": "5"}
    client.do("SUBSCRIBE", {**headers, "x-stream-offset": "offset=x"})
    error = error_of(client)
    assert (error.get("message"), error.body) == ("Processing error", b"Processing error")


@pytest.mark.parametrize("ack", ["client", "client-individual"])
def test_prefetch_count_is_the_credit_and_acks_give_it_back(ack: str) -> None:
    core = BrokerCore()
    producer = declared(core)
    publish(producer, *[b"m%d" % i for i in range(10)])
    reader = consumer(core, "first", prefetch=3, ack=ack)
    got = reader.messages()
    assert offsets(got) == [0, 1, 2]
    reader.do("ACK", {"id": got[1].get("ack")})  # client: 0 and 1; client-individual: 1 only
    more = reader.messages()
    assert offsets(more) == ([3, 4] if ack == "client" else [3])
    assert len(reader.session.pending) == 3


def test_a_chunk_begun_is_delivered_whole_as_rabbitmq_does() -> None:
    core = BrokerCore()
    producer = declared(core)
    publish_chunk(core, producer, b"a", b"b", b"c", b"d")
    publish(producer, b"e")
    reader = consumer(core, "first", prefetch=2)
    chunk = reader.messages()
    assert offsets(chunk) == [0, 1, 2, 3]  # credit 2, but the chunk of 4 goes whole
    reader.do("ACK", {"id": chunk[1].get("ack")})
    assert reader.messages() == []  # two unacknowledged of a credit of 2: nothing more
    reader.do("ACK", {"id": chunk[3].get("ack")})
    assert offsets(reader.messages()) == [4]


def test_what_rabbitmq_refuses() -> None:
    core = BrokerCore()
    producer = declared(core)
    base = {"id": "s", "destination": "/amq/queue/log", "x-stream-offset": "first"}
    cases: List[Dict[str, Any]] = [
        # ack:auto without prefetch-count: the prefetch is named first (measured)
        {"headers": {**base, "ack": "auto"}, "message": "precondition_failed",
         "body": "PRECONDITION_FAILED - consumer prefetch count is not set for 'queue 'log' in vhost '/''"},
        {"headers": {**base, "ack": "client"}, "message": "precondition_failed",
         "body": "PRECONDITION_FAILED - consumer prefetch count is not set for 'queue 'log' in vhost '/''"},
        {"headers": {**base, "ack": "auto", "prefetch-count": "3"}, "message": "AMQP channel died",
         "body": "Reason: {shutdown,\n            {connection_closing,\n                {server_initiated_close,540,\n"
                 "                    \"automatic acknowledgement not supported by stream queues queue 'log' in "
                 "vhost '/'\"}}}"},
        {"headers": {"id": "s", "destination": "/amq/queue/nothing", "ack": "client", "prefetch-count": "1"},
         "message": "not_found", "body": "NOT_FOUND - no queue 'nothing' in vhost '/'"},
        # a SUBSCRIBE to /queue/NAME without the declaration declares a classic queue
        {"headers": {"id": "s", "destination": "/queue/log", "ack": "client", "prefetch-count": "1"},
         "message": "precondition_failed",
         "body": "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'log' in vhost '/': received "
                 "none but current is the value 'stream' of type 'longstr'"},
        {"headers": {"id": "s", "destination": "/queue/log", "ack": "client", "prefetch-count": "1", **DECLARE,
                     "x-max-length-bytes": "5"},
         "message": "precondition_failed",
         "body": "PRECONDITION_FAILED - inequivalent arg 'x-max-length-bytes' for queue 'log' in vhost '/': "
                 "received the value '5' of type 'long' but current is none"},
        {"headers": {"id": "s", "destination": "/queue/other", "ack": "client", "prefetch-count": "1",
                     "x-queue-type": "stream", "durable": "false"},
         "message": "precondition_failed",
         "body": "PRECONDITION_FAILED - invalid property 'auto-delete' for queue 'other' in vhost '/'"},
        {"headers": {"id": "s", "destination": "/queue/other", "ack": "client", "prefetch-count": "1",
                     "x-queue-type": "stream", "exclusive": "true"},
         "message": "precondition_failed",
         "body": "PRECONDITION_FAILED - invalid property 'exclusive-owner' for queue 'other' in vhost '/'"},
        {"headers": {"id": "s", "destination": "/queue/other", "ack": "client", "prefetch-count": "1", **DECLARE,
                     "x-max-length-bytes": "-5"},
         "message": "precondition_failed",
         "body": "PRECONDITION_FAILED - invalid arg 'x-max-length-bytes' for queue 'other' in vhost '/': "
                 "{value_negative,-5}"},
        {"headers": {"id": "s", "destination": "/queue/other", "ack": "client", "prefetch-count": "1", **DECLARE,
                     "x-max-length-bytes": "x"},
         "message": "Processing error", "body": "Processing error"},
    ]  # fmt: skip
    for case in cases:
        client = Client(core)
        client.do("SUBSCRIBE", case["headers"])
        error = error_of(client)
        assert (error.get("message"), error.body.decode()) == (case["message"], case["body"]), case
    assert "other" not in core.streams.logs and not producer.closed


def test_send_to_queue_name_of_a_stream_is_refused_except_where_it_was_declared() -> None:
    core = BrokerCore()
    producer = declared(core)
    producer.do("SEND", {"destination": "/queue/log"}, b"from the declaring connection")  # (RabbitMQ's cache)
    other = Client(core)
    other.do("SEND", {"destination": "/queue/log", "receipt": "x"}, b"q")
    error = error_of(other)
    assert error.get("message") == "precondition_failed"
    assert error.body == (
        b"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'log' in vhost '/': received none but "
        b"current is the value 'stream' of type 'longstr'"
    )
    assert bodies(consumer(core).messages()) == [b"from the declaring connection"]


def test_send_to_amq_queue_of_no_queue_is_dropped_with_its_receipt() -> None:
    core = BrokerCore()
    client = Client(core)
    client.do("SEND", {"destination": "/amq/queue/nothing", "receipt": "x"}, b"q")
    assert [f.command for f in client.take()] == ["RECEIPT"] and core.stats()["stored_bytes"] == 0


def test_amq_queue_of_a_classic_queue_is_that_queue() -> None:
    core = BrokerCore()
    reader = Client(core)
    reader.do("SUBSCRIBE", {"id": "q", "destination": "/queue/plain"})
    writer = Client(core)
    writer.do("SEND", {"destination": "/amq/queue/plain"}, b"x")
    assert bodies(reader.messages()) == [b"x"]


def test_a_nack_on_a_stream_ends_the_connection_as_rabbitmq() -> None:
    core = BrokerCore()
    producer = declared(core)
    publish(producer, b"m")
    reader = consumer(core)
    (message,) = reader.messages()
    reader.do("NACK", {"id": message.get("ack")})
    error = error_of(reader)
    assert error.get("message") == "AMQP channel died" and b"basic.nack and basic.reject not supported" in error.body


def test_declaring_again_with_the_same_arguments_reads_the_same_stream() -> None:
    core = BrokerCore()
    producer = declared(core, **{"x-max-length-bytes": "100000"})
    publish(producer, b"m")
    again = Client(core)
    again.do("SUBSCRIBE", {"id": "s", "destination": "/queue/log", "ack": "client", "prefetch-count": "9",
                           "x-stream-offset": "first", **DECLARE, "x-max-length-bytes": "100000"})  # fmt: skip
    assert bodies(again.messages()) == [b"m"]


def test_retention_by_bytes_drops_whole_segments_oldest_first() -> None:
    core = BrokerCore()
    size = 100
    # each message holds its body and its x-stream-offset header (about 20 bytes): 4 fit a 500-byte segment
    producer = declared(core, **{"x-max-length-bytes": "1000", "x-stream-max-segment-size-bytes": "500"})
    publish(producer, *[b"%03d" % i + b"." * (size - 3) for i in range(30)])
    log = core.streams.logs["log"]
    assert log.size <= 1000 + 500 and len(log.segments) >= 2
    assert log.first > 0 and log.first % 4 == 0  # whole segments of 4 went
    got = consumer(core).messages()
    assert offsets(got) == list(range(log.first, 30)) and got[0].body.startswith(b"%03d" % log.first)
    # re-subscribing from a removed offset starts at the first one kept
    assert offsets(consumer(core, "offset=1").messages())[0] == log.first
    assert core.stored_bytes == log.size


def test_retention_by_age_drops_segments_whose_newest_message_is_older() -> None:
    clock = Clock()
    core = BrokerCore(clock=clock)
    producer = declared(core, **{"x-max-age": "1h", "x-stream-max-segment-size-bytes": "200"})
    publish(producer, *[b"x" * 60 for _ in range(6)])  # three segments of two
    clock.now += 3601
    publish(producer, b"y" * 60)  # starts a segment: retention runs
    log = core.streams.logs["log"]
    assert log.first == 6 and bodies(consumer(core).messages()) == [b"y" * 60]


def test_a_consumer_behind_retention_goes_on_from_the_first_kept_offset() -> None:
    core = BrokerCore()
    producer = declared(core, **{"x-max-length-bytes": "300", "x-stream-max-segment-size-bytes": "150"})
    reader = consumer(core, prefetch=1)
    publish(producer, *[b"%02d" % i + b"." * 98 for i in range(12)])
    (first,) = reader.messages()
    assert offsets([first]) == [0]
    reader.do("ACK", {"id": first.get("ack")})
    (then,) = reader.messages()
    assert int(then.get("x-stream-offset")) == core.streams.logs["log"].first > 1


def test_streams_count_against_max_stored_bytes() -> None:
    core = BrokerCore(max_stored_bytes=1000)
    producer = declared(core)
    publish(producer, b"x" * 400, b"x" * 400)
    producer.do("SEND", {"destination": "/amq/queue/log"}, b"x" * 400)
    assert error_of(producer).get("message") == "Resource limit"
    assert core.streams.logs["log"].end == 2 and core.stored_bytes == core.streams.logs["log"].size


def test_a_stream_outlives_its_consumers_and_their_connections() -> None:
    core = BrokerCore()
    producer = declared(core)
    publish(producer, b"kept")
    reader = consumer(core)
    assert len(reader.messages()) == 1
    reader.do("UNSUBSCRIBE", {"id": "s"})
    producer.lost()
    reader.lost()
    assert core.streams.stats()["stream_consumers"] == 0 and core.stats()["unacked"] == 0
    assert bodies(consumer(core).messages()) == [b"kept"]
    # the declaring connection is gone: its name no longer lets a SEND to /queue/NAME through
    assert not core.streams.logs["log"].declarers


def test_stream_deliveries_in_every_version() -> None:
    core = BrokerCore()
    producer = declared(core)
    publish(producer, b"m")
    for version in ("1.0", "1.1"):
        client = Client(core, version=version)
        client.do("SUBSCRIBE", {"id": "s", "destination": "/amq/queue/log", "ack": "client", "prefetch-count": "1",
                                "x-stream-offset": "first"})  # fmt: skip
        (message,) = client.messages()
        assert message.get("x-stream-offset") == "0" and message.body == b"m"
        client.do("ACK", {"message-id": message.get("message-id"), "subscription": "s"})
        assert not client.closed


def test_a_transaction_appends_at_commit() -> None:
    core = BrokerCore()
    producer = declared(core)
    producer.do("BEGIN", {"transaction": "t"})
    producer.do("SEND", {"destination": "/amq/queue/log", "transaction": "t"}, b"held")
    assert core.streams.logs["log"].end == 0
    producer.do("COMMIT", {"transaction": "t"})
    assert bodies(consumer(core).messages()) == [b"held"]


# --------------------------------------------------------------------------- through the asyncio client


def test_through_the_asyncio_client() -> None:
    import asyncio

    from fastframe import aio

    async def main() -> None:
        async with aio.Broker(port=0) as broker:
            async with aio.connect("127.0.0.1", broker.port, timeout=5) as client:
                declaring = await client.subscribe(
                    "/queue/events", ack="client", headers={**DECLARE, "prefetch-count": "10"}, timeout=5
                )
                for i in range(5):
                    await client.send("/amq/queue/events", b"e%d" % i, receipt=True, timeout=5)
                got = [await declaring.get(timeout=5) for _ in range(5)]
                assert [m.get("x-stream-offset") for m in got] == ["0", "1", "2", "3", "4"]
                await got[-1].ack(receipt=True, timeout=5)
                again = await client.subscribe(
                    "/amq/queue/events",
                    ack="client-individual",
                    headers={"x-stream-offset": "offset=3", "prefetch-count": "10"},
                    timeout=5,
                )
                assert [(await again.get(timeout=5)).body for _ in range(2)] == [b"e3", b"e4"]
                with pytest.raises(aio.ServerError, match="precondition_failed"):
                    async with aio.connect("127.0.0.1", broker.port, timeout=5) as other:
                        await other.send("/queue/events", b"refused", receipt=True, timeout=5)

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("body", [b"", b"body", b"\0\n"])
def test_a_stream_messages_bytes_are_the_encoders_in_every_version(body: bytes) -> None:
    from fastframe.broker._encoding import message_tail

    core = BrokerCore()
    producer = declared(core)
    publish(producer, body)
    publish(producer, body, **{"x-h": "a:b"})
    for entry in core.streams.logs["log"].entries:
        message = entry.message
        for version in ("1.0", "1.1", "1.2"):
            assert message.tails[version] == message_tail(version, message.headers, body)
        assert message.body == b""  # (the tails hold it)
        if message.tails["1.0"] == message.tails["1.2"]:
            assert message.tails["1.0"] is message.tails["1.2"]  # one copy of the body when they are equal


def test_in_one_read_deliveries_go_out_with_the_reads_other_frames_in_order() -> None:
    core = BrokerCore()
    producer = declared(core)
    reader = consumer(core, "next")
    frames = [
        fastframe.Frame("SEND", {"destination": "/amq/queue/log"}, b"a"),  # (the read's flat path)
        fastframe.Frame("SEND", {"destination": "/amq/queue/log", "receipt": "r"}, b"b"),
        fastframe.Frame("SEND", {"destination": "/amq/queue/log"}, b"c"),
    ]
    core.receive_many(producer.session, frames)
    assert bodies(reader.messages()) == [b"a", b"b", b"c"] and core._read is None
    mine = Client(core)  # a consumer that also publishes: its MESSAGE before its SEND's RECEIPT
    mine.do("SUBSCRIBE", {"id": "m", "destination": "/amq/queue/log", "ack": "client", "prefetch-count": "9"})
    core.receive_many(mine.session, [fastframe.Frame("SEND", {"destination": "/amq/queue/log", "receipt": "x"}, b"d")])
    assert [f.command for f in mine.take()] == ["MESSAGE", "RECEIPT"]


def test_the_stream_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m bench.broker_streams`` (a smoke run: a few messages, the fastframe broker only)."""
    import sys

    from conftest import REPO

    if str(REPO) not in sys.path:  # bench/ is a package at the repository root, not an installed one
        sys.path.insert(0, str(REPO))
    from bench import broker_streams

    assert broker_streams.main(["--messages", "1000", "--only", "fastframe"]) == 0
    out = capsys.readouterr().out
    assert "| fastframe | live |" in out and "| fastframe | replay |" in out and "failed" not in out


def test_a_chunk_ends_where_a_segment_does() -> None:
    core = BrokerCore()
    producer = declared(core, **{"x-stream-max-segment-size-bytes": "150"})
    publish_chunk(core, producer, b"a" * 100, b"b" * 100, b"c" * 100)  # one read, three segments
    assert offsets(consumer(core, "last").messages()) == [2]


def test_the_server_guides_pytest_example() -> None:
    """The Streams section's example, run with a broker of :class:`fastframe.testing.TestBroker` (the
    ``stomp_broker`` fixture's)."""
    import re

    from conftest import REPO
    from fastframe.testing import TestBroker

    text = (REPO / "docs" / "guides" / "server.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S) if "stored_offset" in b]
    namespace: Dict[str, Any] = {}
    exec(compile(block, "server.md", "exec"), namespace)
    with TestBroker() as broker:
        namespace["test_a_reader_resumes_from_its_stored_offset"](broker)
