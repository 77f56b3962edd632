"""Live round trips through RabbitMQ and ActiveMQ for STOMP 1.0, 1.1 and 1.2.

Every test opens its own sessions on fresh queues (``unique``), so tests do not see each other's
messages, and compares what arrives with what was sent, byte for byte.
"""

from __future__ import annotations

import asyncio
from typing import Any, List, Optional, Tuple

import pytest

from fastframe import protocol
from fastframe.protocol import spec

from ._live import Broker, open_session, run, unique

pytestmark = pytest.mark.interop

NON_ASCII = "é☃𝄞"


# -- handshake and heart-beats ----------------------------------------------------------------------------
def test_handshake_negotiates_the_one_version_offered(broker: Broker, version: str) -> None:
    async def main() -> Tuple[str, Any]:
        async with open_session(broker, version) as session:
            connected = session.connected.result()
            return session.version, connected

    negotiated, connected = run(main())
    assert negotiated == version
    assert isinstance(connected, protocol.Connected)
    assert connected.version == version
    # 1.0 brokers may leave the version header out; 1.1 and 1.2 must name it
    assert connected.frame.get("version", "1.0") == version
    assert connected.heartbeat == (0, 0)  # we offered 0,0: no heart-beats either way


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_heartbeats_flow_both_ways_for_three_intervals(broker: Broker, version: str) -> None:
    offered = (500, 500)

    async def main() -> Tuple[Any, Tuple[int, int], int, int, bool]:
        async with open_session(broker, version, heartbeat=offered) as session:
            connected = session.connected.result()
            send_ms, receive_ms = session.heartbeat
            # idle for three of the longer intervals plus ActiveMQ's late first beat (about 2 intervals)
            await asyncio.sleep(5 * max(send_ms, receive_ms) / 1000)
            # the broker closes a connection whose heart-beats stop: a receipt proves it still listens
            destination = unique("hb", broker, version)
            await session.send(destination, b"still here", receipt=True)
            return connected, session.heartbeat, session.heartbeats_received, session.heartbeats_sent, \
                session.client.is_connected  # fmt: skip

    connected, negotiated, received, sent, still_connected = run(main(), timeout=30)
    server = spec.parse_heartbeat(connected.frame.get("heart-beat"))
    assert negotiated == spec.negotiate_heartbeat(offered, server)
    assert negotiated[0] > 0 and negotiated[1] > 0, f"{broker.name} refused heart-beats: {server}"
    assert received >= 3, f"only {received} heart-beats from {broker.name} in five intervals"
    assert sent >= 3, f"only {sent} heart-beats sent in five intervals"
    assert still_connected


# -- bodies and headers, byte for byte ------------------------------------------------------------------------
BODIES = [
    ("text", "Grüße, ☃ — line one\nline two\r\n".encode()),
    ("binary-with-nuls", bytes(range(256)) * 2 + b"\0\0SEND\ndestination:/fake\n\n\0\n"),
    ("single-nul", b"\0"),
    ("empty", b""),
]


def test_bodies_round_trip_byte_for_byte(broker: Broker, version: str) -> None:
    destination = unique("bodies", broker, version)

    async def main() -> List[bytes]:
        async with open_session(broker, version) as session:
            sub = await session.subscribe(destination)
            for _, body in BODIES:
                await session.send(destination, body)
            return [(await session.next_message(sub)).body for _ in BODIES]

    received = run(main())
    for (name, sent), got in zip(BODIES, received):
        assert got == sent, name


def special_headers(broker: Broker, version: str) -> List[Tuple[str, str]]:
    """Header names and values with ':', LF, CR, '\\' and non-ASCII UTF-8, as far as the broker carries them.

    Each special character is followed by ``z`` (a backslash before ``c``, ``n`` or ``r`` would be an
    escape to ActiveMQ, which unescapes 1.0 input); no value starts or ends with a space (brokers trim 1.0
    values).
    """
    name_chars = "".join(sorted(broker.name_chars[version]))
    value_chars = "".join(sorted(broker.value_chars[version]))
    return [
        ("x-name" + "".join(f"{c}z" for c in name_chars) + NON_ASCII, "plain"),
        ("x-value", "v" + "".join(f"{c}z" for c in value_chars) + NON_ASCII),
        ("x-" + NON_ASCII, NON_ASCII + ":" + NON_ASCII),
        ("x-empty", ""),
    ]


def test_special_headers_round_trip(broker: Broker, version: str) -> None:
    destination = unique("headers", broker, version)
    headers = special_headers(broker, version)

    async def main() -> Any:
        async with open_session(broker, version) as session:
            sub = await session.subscribe(destination)
            await session.send(destination, b"h", headers)
            return (await session.next_message(sub)).frame

    frame = run(main())
    for name, value in headers:
        assert frame.get(name) == value, (name, frame.headers)


def test_repeated_headers_first_wins(broker: Broker, version: str) -> None:
    destination = unique("repeat", broker, version)
    headers = [("x-rep", "first"), ("x-rep", "second"), ("x-rep", "third"), ("x-other", "1")]

    async def main() -> Any:
        async with open_session(broker, version) as session:
            sub = await session.subscribe(destination)
            await session.send(destination, b"r", headers)
            return (await session.next_message(sub)).frame

    frame = run(main())
    # both brokers forward only the first; whatever they forward, the first occurrence must win
    assert frame.get("x-rep") == "first"
    assert frame.header_map()["x-rep"] == "first"
    assert frame.get("x-other") == "1"


# -- receipts and transactions ---------------------------------------------------------------------------------
def test_receipts_for_every_command_that_takes_one(broker: Broker, version: str) -> None:
    destination = unique("receipts", broker, version)

    async def main() -> List[Tuple[str, str]]:
        async with open_session(broker, version) as session:
            # frames built on the client's connection, to choose the receipt ids (the API numbers them)
            live = session.client.session
            conn = live.conn
            got = []
            for build in (
                lambda r: conn.subscribe("s-1", destination, receipt=r),
                lambda r: conn.send(destination, b"x", receipt=r),
                lambda r: conn.begin("t-1", receipt=r),
                lambda r: conn.commit("t-1", receipt=r),
                lambda r: conn.unsubscribe("s-1", receipt=r),
            ):
                receipt_id = conn.new_id("rcpt:\n")  # ':' and LF in the id travel escaped (1.1, 1.2)
                if "\n" not in broker.value_chars[version]:
                    receipt_id = conn.new_id("rcpt-")  # no escapes on 1.0 (ActiveMQ, fastframe): plain ids
                waiter = live.expect_receipt(receipt_id)
                live.write(build(receipt_id))
                event = await asyncio.wait_for(waiter, 10)
                got.append((event.receipt_id, event.for_command))
            return got

    got = run(main())
    assert [command for _, command in got] == ["SUBSCRIBE", "SEND", "BEGIN", "COMMIT", "UNSUBSCRIBE"]


def test_transactions_commit_and_abort(broker: Broker, version: str) -> None:
    destination = unique("tx", broker, version)

    class Rollback(Exception):
        pass

    async def main() -> Tuple[bool, List[bytes], bytes, bool]:
        async with open_session(broker, version) as session:
            sub = await session.subscribe(destination)
            async with session.client.transaction() as tx:  # COMMIT (with a receipt) on exit
                await tx.send(destination, b"tx-1")
                await tx.send(destination, b"tx-2")
                held = await session.no_message(sub, wait=0.5)  # nothing before COMMIT
            committed = [(await session.next_message(sub)).body for _ in range(2)]
            with pytest.raises(Rollback):
                async with session.client.transaction() as tx:  # ABORT when the block raises
                    await tx.send(destination, b"aborted")
                    raise Rollback
            await session.send(destination, b"after", receipt=True)
            after = (await session.next_message(sub)).body
            return held, committed, after, await session.no_message(sub, wait=0.5)

    held, committed, after, quiet = run(main())
    assert held
    assert committed == [b"tx-1", b"tx-2"]
    assert after == b"after"  # the aborted SEND never arrives
    assert quiet


# -- acknowledgement ---------------------------------------------------------------------------------------------
async def _fill(broker: Broker, version: str, destination: str, bodies: List[bytes]) -> None:
    async with open_session(broker, version) as producer:
        for body in bodies:
            await producer.send(destination, body, receipt=True)


async def _receive_all(broker: Broker, version: str, destination: str, quiet: float = 1.5) -> List[Any]:
    """Every message a fresh auto-ack subscription receives until ``quiet`` seconds pass without one."""
    got = []
    async with open_session(broker, version) as session:
        sub = await session.subscribe(destination)
        while True:
            try:
                got.append(await session.next_message(sub, timeout=quiet))
            except asyncio.TimeoutError:
                return got


def test_ack_client_mode_is_cumulative(broker: Broker, version: str) -> None:
    destination = unique("ack-client", broker, version)

    async def main() -> List[bytes]:
        await _fill(broker, version, destination, [b"m1", b"m2", b"m3"])
        async with open_session(broker, version) as session:
            sub = await session.subscribe(destination, ack="client")
            messages = [await session.next_message(sub) for _ in range(3)]
            assert [m.body for m in messages] == [b"m1", b"m2", b"m3"]
            await session.ack(messages[1])  # acknowledges m1 and m2; m3 stays unacknowledged
        # the session closed with m3 unacknowledged: the broker redelivers it, and only it
        return [m.body for m in await _receive_all(broker, version, destination)]

    assert run(main()) == [b"m3"]


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ack_and_nack_client_individual(broker: Broker, version: str) -> None:
    destination = unique("ack-individual", broker, version)

    async def main() -> Tuple[List[Any], List[bytes]]:
        await _fill(broker, version, destination, [b"m1", b"m2", b"m3"])
        redelivered = []
        async with open_session(broker, version) as session:
            sub = await session.subscribe(destination, ack="client-individual")
            messages = [await session.next_message(sub) for _ in range(3)]
            assert [m.body for m in messages] == [b"m1", b"m2", b"m3"]
            await session.ack(messages[1])  # only m2
            await session.ack(messages[0], nack=True)  # m1 refused
            if broker.nack_redelivers:
                again = await session.next_message(sub)
                redelivered.append(again)
                await session.ack(again)
        return redelivered, [m.body for m in await _receive_all(broker, version, destination)]

    redelivered, left = run(main())
    if broker.nack_redelivers:
        assert [m.body for m in redelivered] == [b"m1"]
        assert redelivered[0].frame.get("redelivered") == "true"
    # m2 was acknowledged, m1 acknowledged after its redelivery (or dropped by the broker): only m3 is left
    assert left == [b"m3"]


def test_ack_with_receipt_while_the_queue_is_full(broker: Broker) -> None:
    version = "1.2"
    destination = unique("ack-full", broker, version)

    # a full queue pauses reading; the ACK's RECEIPT must still get through (fixed in fastframe.aio)
    async def main() -> bytes:
        await _fill(broker, version, destination, [b"m%d" % i for i in range(8)])
        async with open_session(broker, version) as session:
            sub = await session.subscribe(destination, ack="client-individual", max_queue=4)
            message = await session.next_message(sub)
            await message.ack(receipt=True, timeout=5.0)  # the broker has sent all 8: 3 wait in the queue
            return bytes(message.body)

    assert run(main()) == b"m0"


# -- ERROR frames ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw, what",
    [
        (b"SEND\n\nno destination\0", "a SEND without destination"),
        (b"SEND\nreceipt:err-1\n\nno destination\0", "a SEND without destination, with a receipt"),
    ],
)
def test_provoked_error_is_a_typed_error(broker: Broker, version: str, raw: bytes, what: str) -> None:
    import fastframe.aio

    async def main() -> Tuple[Optional[BaseException], List[Any]]:
        frames: List[Any] = []
        hook = lambda direction, frame: frames.append(frame) if direction == "in" and frame is not None else None  # noqa: E731
        async with open_session(broker, version, frame_hook=hook) as session:
            session.client.session.write(raw)  # bypasses the client's own checks on purpose
            cause = await asyncio.wait_for(session.client.wait_closed(), 20)
            with pytest.raises(fastframe.aio.ConnectionClosedError):
                await session.send("/queue/after-error", b"x")
            return cause, frames

    cause, frames = run(main())
    assert isinstance(cause, fastframe.aio.ConnectionClosedError), what
    error = cause if isinstance(cause, fastframe.aio.ServerError) else cause.__cause__
    assert isinstance(error, fastframe.aio.ServerError), (what, cause)
    assert error.frame.command == "ERROR"
    assert error.message, f"{broker.name} sent an ERROR without a message header for {what}"
    assert error.frame.get("receipt-id") in (None, "err-1")
    assert frames[-1] is error.frame  # the frame hook saw the same ERROR frame


# -- volume --------------------------------------------------------------------------------------------------------
def _volume_body(i: int) -> bytes:
    kind = i % 4
    if kind == 0:
        return b""
    if kind == 1:
        return (f"text {i} ☃ " * (i % 40)).encode()
    if kind == 2:
        return bytes((i * 7 + j) % 256 for j in range(i % 1500))  # binary, NULs included
    return b"\0" * (i % 50) + b"tail"


def test_ten_thousand_messages_every_body_verified(broker: Broker) -> None:
    count, version = 10_000, "1.2"
    destination = unique("volume", broker, version)

    async def main() -> List[Tuple[str, bytes]]:
        async with open_session(broker, version) as consumer, open_session(broker, version) as producer:
            sub = await consumer.subscribe(destination)
            for i in range(count):
                await producer.send(destination, _volume_body(i), {"x-seq": str(i)}, receipt=(i == count - 1))
            got = []
            for _ in range(count):
                message = await consumer.next_message(sub, timeout=30)
                got.append((message.frame.get("x-seq"), message.body))
            return got

    got = run(main(), timeout=180)
    assert [seq for seq, _ in got] == [str(i) for i in range(count)]  # one queue, one producer: in order
    bad = [seq for seq, body in got if body != _volume_body(int(seq))]
    assert not bad, f"{len(bad)} bodies differ, first x-seq {bad[:5]}"
