"""The asyncio client against a fake STOMP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import functools

import pytest

import fastframe
from fastframe import aio
from fastframe.protocol import Abort, Ack, Begin, Commit, Send
from fastframe.protocol import Message as MessageEvent

from .fake_server import FakeServer


def test_connect_subscribe_send_receive_ack_disconnect(run):
    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, login="u", passcode="p") as client:
                assert client.version == "1.2" and client.is_connected
                sub = await client.subscribe("/queue/a", ack="client-individual")
                body = b"\0binary\0body\0" * 3
                await client.send("/queue/a", body, {"x-key": "a:b\nc"}, receipt=True)
                message = await sub.get(timeout=5)
                assert message.body == body and message.get("x-key") == "a:b\nc"
                assert message.destination == "/queue/a" and message.frame.command == "MESSAGE"
                await message.ack(receipt=True)
            peer = server.peers[0]
            assert [type(e).__name__ for e in peer.frames][:4] == ["ConnectRequest", "Subscribe", "Send", "Ack"]
            assert peer.frames[0].login == "u" and peer.frames[-1].command == "DISCONNECT"
            assert not client.is_connected

    run(main())


def test_async_for_ends_cleanly_on_unsubscribe(run):
    async def main():
        async with FakeServer() as server, aio.connect("127.0.0.1", server.port) as client:
            async with await client.subscribe("/t") as sub:
                for n in range(3):
                    await client.send("/t", str(n))
                got = []
                async for message in sub:
                    got.append(message.text())
                    if len(got) == 3:
                        await sub.unsubscribe()
            assert got == ["0", "1", "2"]

    run(main())


def test_receipt_wait_has_a_deadline(run):
    async def main():
        async with FakeServer(answer_receipts=False) as server:
            client = await aio.connect("127.0.0.1", server.port)
            with pytest.raises(asyncio.TimeoutError):
                await client.send("/q", b"x", receipt=True, timeout=0.2)
            assert client.is_connected  # a late receipt is not a broken connection
            await client.close()

    run(main())


def test_every_waiter_fails_at_once_when_the_connection_drops(run):
    async def main():
        async with FakeServer(answer_receipts=False) as server:
            client = await aio.connect("127.0.0.1", server.port, timeout=60)
            sub = await client.subscribe("/q", receipt=False)
            waits = [asyncio.ensure_future(client.send("/other", str(n), receipt=True)) for n in range(3)]
            reader = asyncio.ensure_future(sub.get())
            await server.wait_for(lambda: len(server.peers[0].frames) >= 5)
            server.peers[0].writer.transport.abort()
            done, pending = await asyncio.wait([*waits, reader], timeout=10)
            assert not pending  # long before the 60 s receipt timeout
            for task in done:
                assert isinstance(task.exception(), aio.ConnectionClosedError)
            with pytest.raises(aio.ConnectionClosedError):
                await client.send("/q")
            await client.close()

    run(main())


def test_server_error_frame_fails_waiters_with_the_frame(run):
    async def main():
        async with FakeServer(answer_receipts=False) as server:
            client = await aio.connect("127.0.0.1", server.port)
            waiter = asyncio.ensure_future(client.send("/q", receipt=True))
            await server.wait_for(lambda: len(server.peers[0].frames) >= 2)
            server.peers[0].write(server.peers[0].conn.error("Broken thing", receipt_id=None))
            with pytest.raises(aio.ServerError) as info:
                await waiter
            assert info.value.message == "Broken thing" and info.value.frame.command == "ERROR"
            await client.close()

    run(main())


def test_rejected_connect_raises_server_error(run):
    async def main():
        async with FakeServer(reject="Bad CONNECT") as server:
            with pytest.raises(aio.ServerError, match="Bad CONNECT"):
                await aio.connect("127.0.0.1", server.port)

    run(main())


def test_connect_succeeds_only_when_connected_arrives(run):
    async def main():
        async with FakeServer(silent_handshake=True) as server:
            with pytest.raises(aio.ConnectionClosedError, match="could not connect") as info:
                await aio.connect("127.0.0.1", server.port, connect_timeout=0.2)
            assert isinstance(info.value.__cause__, asyncio.TimeoutError)

    run(main())


def test_peer_closing_mid_frame_delivers_complete_frames_then_a_clear_error(run):
    async def main():
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port)
            sub = await client.subscribe("/q")
            peer = server.connected[0]
            peer.deliver(sub.id, b"one")
            peer.deliver(sub.id, b"two")
            peer.write(b"MESSAGE\ndestination:/q\nmessage-id:x\nsubscription:" + sub.id.encode() + b"\n\nhal")
            await peer.writer.drain()
            peer.writer.close()
            assert (await sub.get()).body == b"one" and (await sub.get()).body == b"two"
            with pytest.raises(aio.ConnectionClosedError) as info:
                await sub.get()
            assert "inside a frame" in str(info.value)
            await client.close()

    run(main())


def test_transactions_commit_on_exit_and_abort_on_error(run):
    async def main():
        async with FakeServer() as server, aio.connect("127.0.0.1", server.port) as client:
            async with client.transaction() as tx:
                await tx.send("/q", b"in tx")
            with pytest.raises(RuntimeError):
                async with client.transaction():
                    raise RuntimeError("boom")
            await client.send("/q", receipt=True)
            kinds = [type(e) for e in server.peers[0].frames[1:]]
            assert kinds == [Begin, Send, Commit, Begin, Abort, Send]
            assert server.peers[0].frames[2].transaction == server.peers[0].frames[1].transaction

    run(main())


def test_frame_and_wire_hooks_see_everything_binary_safe(run):
    async def main():
        seen, wire = [], {"in": bytearray(), "out": bytearray()}
        async with FakeServer() as server:
            async with aio.connect(
                "127.0.0.1",
                server.port,
                frame_hook=lambda d, f: seen.append((d, None if f is None else f.command, f and f.body)),
                wire_hook=lambda d, data: wire[d].extend(data),
            ) as client:
                sub = await client.subscribe("/q")
                await client.send("/q", b"a\0b", receipt=True)
                await sub.get(timeout=5)
        commands = [(d, c) for d, c, _ in seen if c]
        assert commands[:3] == [("out", "CONNECT"), ("in", "CONNECTED"), ("out", "SUBSCRIBE")]
        assert ("in", "MESSAGE", b"a\0b") in seen and ("out", "SEND", b"a\0b") in seen
        assert commands[-2:] == [("out", "DISCONNECT"), ("in", "RECEIPT")]
        assert [f.command for f in fastframe.decode(bytes(wire["out"]))] == [c for d, c in commands if d == "out"]

    run(main())


def test_stale_ack_after_reconnect_is_refused(run):
    async def main():
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port, reconnect=aio.Reconnect(initial_delay=0.01))
            sub = await client.subscribe("/q", ack="client", id="keep")
            server.connected[0].deliver("keep", b"m1")
            first = await sub.get(timeout=5)
            server.connected[0].writer.transport.abort()
            await server.wait_for(lambda: len(server.connected) == 2 and server.connected[1].subscriptions())
            assert client.connections == 2
            with pytest.raises(aio.StaleMessageError):
                await first.ack()
            assert not any(isinstance(e, Ack) for e in server.connected[1].frames)
            await client.disconnect()

    run(main())


def test_disconnect_has_a_deadline_and_closes_anyway(run):
    async def main():
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port)
            server.read_delay = 30  # the server stops reading: no RECEIPT will come
            with pytest.raises(asyncio.TimeoutError):
                await client.disconnect(timeout=0.3)
            assert not client.is_connected
            with pytest.raises(aio.ConnectionClosedError):
                await client.send("/q")

    run(main())


def test_decoder_limits_apply_to_what_the_server_sends(run):
    async def main():
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port, max_body_size=100)
            sub = await client.subscribe("/q")
            server.connected[0].deliver(sub.id, b"small")
            server.connected[0].deliver(sub.id, b"x" * 101)
            assert (await sub.get(timeout=5)).body == b"small"
            with pytest.raises(aio.ConnectionClosedError) as info:
                await sub.get(timeout=5)
            assert isinstance(info.value.__cause__.__cause__, fastframe.LimitExceededError)
            await client.close()

    run(main())


def test_nack_and_text_bodies(run):
    async def main():
        async with FakeServer() as server, aio.connect("127.0.0.1", server.port, versions=["1.1"]) as client:
            assert client.version == "1.1"
            sub = await client.subscribe("/q", ack="client")
            await client.send("/q", "café")
            message = await sub.get(timeout=5)
            assert message.text() == "café" and message.get("content-type") == "text/plain;charset=utf-8"
            await message.nack(receipt=True)
            (nack,) = [e for e in server.peers[0].frames if e.command == "NACK"]
            assert nack.frame.get("subscription") == sub.id  # the 1.1 form

    run(main())


def test_message_fields_and_its_protocol_event(run):
    async def main():
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port) as client:
                sub = await client.subscribe("/q", ack="client-individual", id="s1")
                server.connected[0].deliver("s1", b"m\0", {"x-a": "1:2"})
                message = await sub.get(timeout=5)
                assert (message.body, message.destination, message.get("x-a")) == (b"m\0", "/q", "1:2")
                assert message.frame.command == "MESSAGE" and ("x-a", "1:2") in message.headers
                event = message.event  # the sans-I/O event: the message is one (a subclass), not two objects
                assert isinstance(event, MessageEvent) and event is message
                fields = (event.frame, event.subscription, event.message_id, event.ack_id, event.destination)
                assert fields == (message.frame, "s1", message.message_id, event.ack_id, "/q")
                assert event.ack_id in client.session.conn.unacked
                await message.ack(receipt=True)
                assert client.session.conn.unacked == {}

    run(main())


SEND_SHAPES = [
    ({}, b"bytes"),
    ({}, "text ☃"),
    ({"content_type": "application/json"}, b"{}"),
    ({"content_length": False}, b"no length"),
    ({"content_length": False, "content_type": "text/x"}, "text"),
    ({"headers": {"x-a": "1", "x-b": "é"}}, b"h"),
    ({"transaction": "tx-1"}, b"in tx"),
]


@pytest.mark.parametrize(("options", "body"), SEND_SHAPES)
def test_send_and_send_nowait_write_the_same_bytes(run, options, body):
    # send() writes the everyday SEND inline, as send_nowait() does: the same frame byte for byte
    async def main() -> None:
        wire = []
        async with FakeServer() as server:
            hook = lambda direction, data: direction == "out" and data.startswith(b"SEND") and wire.append(data)  # noqa: E731
            async with aio.connect("127.0.0.1", server.port, wire_hook=hook) as client:
                if "transaction" in options:
                    await client.begin("tx-1")
                await client.send("/queue/a", body, **options)
                assert client.send_nowait("/queue/a", body, **options)
                await client.send("/queue/a", body, receipt=True, **options)  # the general path
        assert len(wire) == 3
        assert wire[0] == wire[1]
        # with a receipt, the general path: the same frame plus its receipt header
        lines = wire[2].split(b"\n")
        assert sum(line.startswith(b"receipt:") for line in lines) == 1
        assert b"\n".join(line for line in lines if not line.startswith(b"receipt:")) == wire[0]

    run(main())


def _sends(server: FakeServer) -> list:
    return [(e.destination, e.frame.get("x"), e.frame.body) for e in server.connected[0].frames if isinstance(e, Send)]


def test_queued_sends_keep_their_order_with_every_other_frame(run):
    # The everyday SEND to a destination the connection already accepted is queued and encoded with
    # the loop iteration's others in one call; anything written meanwhile must not overtake it.
    async def main() -> None:
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port) as client:
                session = client.session
                await client.send("/queue/a", b"0")  # the first to /queue/a: written, remembered
                await client.send("/queue/a", b"1")
                assert session.queued_sends  # queued (the path under test)
                await client.send("/queue/a", b"2", headers={"x": "h"})  # another shape: written now
                assert not session.queued_sends
                assert client.send_nowait("/queue/a", b"3")
                await client.send("/queue/b", b"4")  # a new destination: written (and remembered)
                await client.send("/queue/b", "5")  # a str body: written as text
                for n in range(6, 2000):
                    await client.send("/queue/a" if n % 2 else "/queue/b", b"%d" % n)
                await client.send("/queue/a", b"last", receipt=True)  # the general path, after them all
            sent = _sends(server)
        assert [body for _, _, body in sent] == [b"%d" % n for n in range(2000)] + [b"last"]
        assert sent[2][1] == "h" and sent[5][1] is None
        assert [d for d, _, _ in sent[:6]] == ["/queue/a"] * 4 + ["/queue/b"] * 2

    run(main())


def test_a_send_the_encoder_refuses_raises_at_its_call_every_time(run):
    # a destination is queued only after the connection accepted it: a refusal is never deferred
    async def main() -> None:
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port) as client:
                for _ in range(2):
                    with pytest.raises(fastframe.FrameError):
                        await client.send("/queue/\ud800", b"x")
                    with pytest.raises(fastframe.FrameError):
                        client.send_nowait("/queue/\ud800", b"x")
                await client.send("/queue/a", b"a")
                await client.send("/queue/a", b"b")
                await client.send("/queue/a", b"c", receipt=True)
            assert [body for _, _, body in _sends(server)] == [b"a", b"b", b"c"]

    run(main())


def test_queued_sends_go_before_disconnect_and_none_after_the_end(run):
    async def main() -> None:
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port)
            await client.send("/queue/a", b"0")
            for n in range(1, 50):
                await client.send("/queue/a", b"%d" % n)
            assert await client.disconnect()  # DISCONNECT, built after the queued SENDs were encoded
            with pytest.raises(aio.ConnectionClosedError):
                await client.send("/queue/a", b"after")
            assert [body for _, _, body in _sends(server)] == [b"%d" % n for n in range(50)]

    run(main())


class _OwnInit(aio.Message):
    __slots__ = ("seen",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = True


@pytest.mark.parametrize("message_class", [None, _OwnInit])
def test_each_message_is_bound_to_its_client_and_session_however_it_is_built(run, message_class):
    # the client's own message class is built by a SlotMaker (in C with the compiled codec), a class
    # with an __init__ of its own by calling it: the same fields either way
    from fastframe.aio._subscription import message_maker

    async def main() -> None:
        async with FakeServer() as server:
            kwargs = {} if message_class is None else {"message_class": functools.partial(message_class, client=None)}
            async with aio.connect("127.0.0.1", server.port, **kwargs) as client:
                make = client.session.conn.message_class
                compiled = fastframe.IMPLEMENTATION == "c"
                assert isinstance(make, fastframe.codec.SlotMaker) is (compiled and message_class is None)
                sub = await client.subscribe("/queue/a", ack="client")
                server.connected[0].deliver(sub.id, b"m")
                message = await sub.get(timeout=5)
                assert type(message) is (message_class or aio.Message)
                assert (message.body, message.subscription, message.destination) == (b"m", sub.id, "/queue/a")
                assert message.session is client.session and message.ack_id == message.message_id
                if message_class is None:
                    assert message._client is client
                    await message.ack()
                else:
                    assert message.seen
        assert message_maker(functools.partial(aio.Message, client=1), None).__class__ is (
            fastframe.codec.SlotMaker if fastframe.IMPLEMENTATION == "c" else functools.partial
        )

    run(main())
