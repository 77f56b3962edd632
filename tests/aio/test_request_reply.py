"""Issue 29 in the asyncio client: request/reply, on_unrouted, CONNECT headers, SEND without
content-length, ACK/NACK by a kept id; against the in-memory broker and the fake server."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, List

import pytest

from fastframe import aio
from fastframe.aio import Broker
from fastframe.protocol import ConnectRequest, LocalProtocolError, Send, Subscribe

from .fake_server import FakeServer

TEMP_QUEUE_PREFIX = "/queue/fastframe.temp."  # where the in-memory broker keeps temporary queues


async def responder(port: int, destination: str, *, delays: Any = None, **options: Any) -> Any:
    """A client answering each request on ``destination`` with ``reply:<body>`` (after ``delays[body]`` s)."""
    client = await aio.connect("127.0.0.1", port, timeout=5, **options)
    sub = await client.subscribe(destination)

    async def answer(message: aio.Message) -> None:
        await asyncio.sleep((delays or {}).get(message.body, 0))
        reply_to = message.get("reply-to")
        assert reply_to is not None
        await client.send(reply_to, b"reply:" + message.body, {"correlation-id": message.get("correlation-id") or ""})

    async def serve() -> None:
        async for message in sub:
            asyncio.get_running_loop().create_task(answer(message))

    return client, asyncio.get_running_loop().create_task(serve())


def test_eight_concurrent_requests_on_one_connection_each_get_their_own_reply(run):
    async def main() -> None:
        async with Broker() as broker:
            delays = {str(n).encode(): (8 - n) * 0.02 for n in range(8)}  # answered in reverse order
            server_side, serving = await responder(broker.port, "/queue/rpc", delays=delays)
            async with aio.connect("127.0.0.1", broker.port, timeout=5) as client:
                assert client.reply_to.startswith("/temp-queue/fastframe-")
                replies = await asyncio.gather(*(client.request("/queue/rpc", str(n), timeout=5) for n in range(8)))
                assert [r.body for r in replies] == [b"reply:%d" % n for n in range(8)]
                # the broker's temporary queue: a subscription the client never made (RabbitMQ's shape)
                assert {r.subscription for r in replies} == {client.reply_to}
                assert all(r.destination.startswith(TEMP_QUEUE_PREFIX) for r in replies)
                assert client._requests == {}
            serving.cancel()
            await server_side.disconnect()
        assert not [d for d in broker.core.queues if d.startswith(TEMP_QUEUE_PREFIX)]  # ended with its session

    run(main())


def test_a_late_reply_is_dropped_to_on_unrouted_not_given_to_the_next_request(run):
    async def main() -> None:
        unrouted: List[aio.Message] = []
        async with Broker() as broker:
            server_side, serving = await responder(broker.port, "/queue/rpc", delays={b"slow": 0.5})
            async with aio.connect("127.0.0.1", broker.port, timeout=5, on_unrouted=unrouted.append) as client:
                with pytest.raises(asyncio.TimeoutError):
                    await client.request("/queue/rpc", b"slow", timeout=0.1)
                fast = await client.request("/queue/rpc", b"fast", timeout=5)
                assert fast.body == b"reply:fast"
                await asyncio.sleep(0.6)  # the late reply arrives
                assert [m.body for m in unrouted] == [b"reply:slow"]
                again = await client.request("/queue/rpc", b"next", timeout=5)
                assert again.body == b"reply:next" and client.is_connected
            serving.cancel()
            await server_side.disconnect()

    run(main())


def test_replies_to_a_private_queue_subscribed_once_per_connection(run):
    async def main() -> None:
        async with FakeServer() as server:  # a broker without temp queues (and not RabbitMQ)
            policy = aio.Reconnect(initial_delay=0.01, max_delay=0.05)
            async with aio.connect(
                "127.0.0.1", server.port, timeout=5, reply_to="/queue/my-replies", reconnect=policy
            ) as client:
                server_side, serving = await responder(server.port, "/queue/rpc")
                for n in range(3):
                    assert (await client.request("/queue/rpc", b"%d" % n)).body == b"reply:%d" % n
                peer = server.connected[0]
                assert [s.destination for s in peer.subscriptions()] == ["/queue/my-replies"]
                sends = [e for e in peer.frames if isinstance(e, Send)]
                assert {e.frame.get("reply-to") for e in sends} == {"/queue/my-replies"}
                assert len({e.frame.get("correlation-id") for e in sends}) == 3
                peer.writer.transport.abort()  # a new connection subscribes again, once
                await server.wait_for(lambda: client.connections == 2 and client.is_connected)
                assert (await client.request("/queue/rpc", b"after")).body == b"reply:after"
                assert (await client.request("/queue/rpc", b"again")).body == b"reply:again"
                reconnected = server.connected[-1]  # (the responder connected before the drop)
                assert [s.destination for s in reconnected.subscriptions()] == ["/queue/my-replies"]
                serving.cancel()
                await server_side.disconnect()

    run(main())


def test_a_temp_queue_is_subscribed_on_a_server_that_needs_it(run):
    async def main() -> None:
        async with FakeServer() as server:  # says server:fake/1: like ActiveMQ, replies need a SUBSCRIBE
            async with aio.connect("127.0.0.1", server.port, timeout=5) as client:
                server_side, serving = await responder(server.port, "/queue/rpc")
                assert (await client.request("/queue/rpc", b"x")).body == b"reply:x"
                (sub,) = server.connected[0].subscriptions()
                assert sub.destination == client.reply_to and sub.destination.startswith("/temp-queue/")
                serving.cancel()
                await server_side.disconnect()

    run(main())


def test_request_uses_a_given_correlation_id_and_refuses_reply_to(run):
    async def main() -> None:
        async with Broker() as broker:
            server_side, serving = await responder(broker.port, "/queue/rpc")
            async with aio.connect("127.0.0.1", broker.port, timeout=5) as client:
                reply = await client.request("/queue/rpc", b"x", {"correlation-id": "mine-1", "x-a": "1"})
                assert reply.get("correlation-id") == "mine-1"
                with pytest.raises(LocalProtocolError, match="request\\(\\) sets reply-to itself"):
                    await client.request("/queue/rpc", b"x", {"reply-to": "/queue/elsewhere"})
                waiting = asyncio.get_running_loop().create_task(
                    client.request("/queue/nobody", b"x", {"correlation-id": "dup"}, timeout=5)
                )
                await asyncio.sleep(0.05)
                with pytest.raises(LocalProtocolError, match="correlation-id 'dup' is waiting already"):
                    await client.request("/queue/nobody", b"y", {"correlation-id": "dup"})
                waiting.cancel()
            serving.cancel()
            await server_side.disconnect()

    run(main())


def test_a_request_fails_at_once_when_its_connection_ends(run):
    async def main() -> None:
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port, timeout=5)
            waiting = asyncio.get_running_loop().create_task(client.request("/queue/nobody", b"x", timeout=10))
            await server.wait_for(lambda: any(isinstance(e, Send) for e in server.connected[0].frames))
            server.connected[0].writer.transport.abort()
            with pytest.raises(aio.ConnectionClosedError, match="before the reply"):
                await asyncio.wait_for(waiting, 2)
            await client.close()

    run(main())


def test_a_message_for_a_subscription_never_made_goes_to_on_unrouted_and_the_connection_stays(run, caplog):
    async def main() -> None:
        seen: List[aio.Message] = []

        def hook(message: aio.Message) -> None:
            seen.append(message)
            raise RuntimeError("a hook's own mistake")

        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, timeout=5, on_unrouted=hook) as client:
                peer = server.connected[0]
                peer.write(peer.conn.message("/temp-queue/x", b"stray", destination="/queue/t", message_id="m-1"))
                await server.wait_for(lambda: len(seen) == 1)
                assert seen[0].body == b"stray" and seen[0].subscription == "/temp-queue/x"
                sub = await client.subscribe("/q")
                await client.send("/q", b"still here", receipt=True)
                assert (await sub.get(timeout=5)).body == b"still here"
        assert "on_unrouted raised" in caplog.text

    with caplog.at_level(logging.ERROR, logger="fastframe.aio"):
        run(main())


def test_the_default_on_unrouted_logs_and_drops_and_ended_subscriptions_stay_quiet(run, caplog):
    async def main() -> None:
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, timeout=5) as client:
                peer = server.connected[0]
                sub = await client.subscribe("/q")
                await sub.unsubscribe()
                peer.write(peer.conn.message(sub.id, b"in flight", destination="/q", message_id="m-1"))
                peer.write(peer.conn.message("nobody", b"stray", destination="/q", message_id="m-2"))
                await client.send("/q", b"", receipt=True)  # both were read before its RECEIPT
                assert client.is_connected

    with caplog.at_level(logging.WARNING, logger="fastframe.aio"):
        run(main())
    (record,) = [r for r in caplog.records if r.name == "fastframe.aio"]
    assert "subscription 'nobody'" in record.getMessage() and record.levelno == logging.WARNING


def test_connect_headers_go_on_every_connect_and_reserved_ones_are_refused(run):
    async def main() -> None:
        async with FakeServer() as server:
            policy = aio.Reconnect(initial_delay=0.01, max_delay=0.05)
            headers = {"client-id": "app-1", "x-vendor": "v"}
            async with aio.connect("127.0.0.1", server.port, headers=headers, reconnect=policy) as client:
                server.connected[0].writer.transport.abort()
                await server.wait_for(lambda: client.connections == 2 and client.is_connected)
            connects = [e for p in server.connected for e in p.frames if isinstance(e, ConnectRequest)]
            assert len(connects) == 2
            assert all((e.frame.get("client-id"), e.frame.get("x-vendor")) == ("app-1", "v") for e in connects)
            with pytest.raises(LocalProtocolError, match="'login' is written by connect"):
                await aio.connect("127.0.0.1", server.port, headers={"login": "x"})

    run(main())


def test_send_without_content_length(run):
    async def main() -> None:
        wire: List[bytes] = []
        async with FakeServer() as server:
            hook = lambda direction, data: direction == "out" and wire.append(bytes(data))  # noqa: E731
            async with aio.connect("127.0.0.1", server.port, wire_hook=hook) as client:
                await client.send("/q", "text", content_length=False)
                await client.send("/q", b"bytes", content_length=False, receipt=True)
                await client.send("/q", b"counted")
                with pytest.raises(LocalProtocolError, match="NUL with content_length=False"):
                    await client.send("/q", b"a\0b", content_length=False)
                with pytest.raises(LocalProtocolError, match="NUL with content_length=False"):
                    await client.send("/q", b"a\0b", content_length=False, receipt=True)
                await client.send("/q", b"", receipt=True)
            sends = [e for e in server.connected[0].frames if isinstance(e, Send)]
            assert [e.frame.body for e in sends][:3] == [b"text", b"bytes", b"counted"]
        sent = [w for w in wire if w.startswith(b"SEND")]
        assert [b"content-length" in w for w in sent][:3] == [False, False, True]

    run(main())


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ack_and_nack_by_a_kept_id(run, version):
    async def main() -> None:
        async with Broker() as broker:
            async with aio.connect("127.0.0.1", broker.port, versions=(version,), timeout=5) as client:
                sub = await client.subscribe("/queue/ids", ack="client-individual")
                for n in range(3):
                    await client.send("/queue/ids", b"%d" % n)
                first, second, third = [await sub.get(timeout=5) for _ in range(3)]
                await client.ack(first.ack_id, receipt=True)
                await client.ack(second.message_id, subscription=sub.id, receipt=True)
                await client.nack(third.message_id, receipt=True)
                again = await sub.get(timeout=5)
                assert again.body == b"2" and again.get("redelivered") == "true"
                await client.ack(again.message_id)
                await client.send("/queue/ids", b"", receipt=True)  # (the ACK before went out first)
                await sub.get(timeout=5)
                with pytest.raises(LocalProtocolError, match="not an unacknowledged message"):
                    await client.ack(first.ack_id)  # settled already
                assert broker.core.stats()["unacked"] == 1  # the empty message only

    run(main())


def test_subscribe_frames_of_the_fake_server_are_what_the_client_sent(run):
    """(A guard for the tests above: the fake server's Subscribe events are the client's SUBSCRIBEs.)"""

    async def main() -> None:
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port) as client:
                await client.subscribe("/q")
                assert [type(e) for e in server.connected[0].subscriptions()] == [Subscribe]

    run(main())
