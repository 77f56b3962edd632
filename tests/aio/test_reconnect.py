"""Reconnect: backoff over servers, success only on CONNECTED, subscriptions re-established."""

from __future__ import annotations

import asyncio
import random
import signal
import socket

import pytest

from fastframe import aio
from fastframe.protocol import Subscribe

from .fake_server import FakeServer


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_backoff_delays_grow_with_jitter_up_to_the_cap():
    policy = aio.Reconnect(attempts=6, initial_delay=0.1, max_delay=0.5, factor=2.0, jitter=0.5)
    delays = list(policy.delays(random.Random(1)))
    assert len(delays) == 6 and delays[0] == 0.0
    caps = [0.1, 0.2, 0.4, 0.5, 0.5]
    assert all(cap * 0.5 <= d <= cap for d, cap in zip(delays[1:], caps))
    assert list(aio.Reconnect(attempts=1).delays(random.Random(1))) == [0.0]


def test_reconnect_resubscribes_and_keeps_the_iterator(run):
    async def main():
        async with FakeServer() as server:
            policy = aio.Reconnect(initial_delay=0.01, max_delay=0.05)
            async with aio.connect("127.0.0.1", server.port, reconnect=policy) as client:
                sub = await client.subscribe("/q", ack="client-individual", headers={"x-sel": "1"})
                await client.send("/q", b"before", receipt=True)
                assert (await sub.get(timeout=5)).body == b"before"
                server.connected[0].writer.transport.abort()  # the server drops us
                await server.wait_for(lambda: len(server.connected) == 2 and server.connected[1].subscriptions())
                (again,) = server.connected[1].subscriptions()
                assert isinstance(again, Subscribe)
                assert (again.id, again.destination, again.ack) == (sub.id, "/q", "client-individual")
                assert again.frame.get("x-sel") == "1"
                await client.send("/q", b"after", receipt=True)
                message = await sub.get(timeout=5)
                assert message.body == b"after"
                await message.ack(receipt=True)
                assert client.connections == 2

    run(main())


def test_failover_to_the_next_server(run):
    async def main():
        async with FakeServer() as server:
            client = await aio.connect(
                "127.0.0.1", _dead_port(), servers=[("127.0.0.1", server.port)],
                reconnect=aio.Reconnect(attempts=3, initial_delay=0.01),
            )  # fmt: skip
            assert client.is_connected and len(server.connected) == 1
            await client.disconnect()

    run(main())


def test_gives_up_after_the_attempts_and_fails_readers(run):
    async def main():
        async with FakeServer() as server:
            policy = aio.Reconnect(attempts=2, initial_delay=0.01)
            client = await aio.connect("127.0.0.1", server.port, reconnect=policy)
            sub = await client.subscribe("/q")
            server.reject = "go away"  # later CONNECTs are refused
            server.connected[0].writer.transport.abort()
            with pytest.raises(aio.ConnectionClosedError):
                await sub.get(timeout=10)
            assert await client.wait_closed() is not None
            await client.close()

    run(main())


def test_no_reconnect_without_a_policy(run):
    async def main():
        async with FakeServer() as server:
            client = await aio.connect("127.0.0.1", server.port)
            sub = await client.subscribe("/q")
            server.connected[0].writer.transport.abort()
            with pytest.raises(aio.ConnectionClosedError):
                await sub.get(timeout=10)
            assert len(server.peers) == 1
            await client.close()

    run(main())


# what RabbitMQ 3.10.8 wrote when `rabbitmqctl close_all_connections "closed by fastframe's test"` closed a
# STOMP connection (a private node; AMQP's 320 is CONNECTION_FORCED)
RABBITMQ_FORCED = (
    "AMQP channel died",
    "Reason: {shutdown,\n            {connection_closing,\n                {server_initiated_close,320,\n"
    '                    <<"closed by fastframe\'s test">>}}}',
)


@pytest.mark.parametrize(
    ("message", "body", "going_away"),
    [
        (*RABBITMQ_FORCED, ()),
        ("connection_forced", "broker forced connection closure with reason 'shutdown'", ()),
        ("Server is stopping", "", ("server is stopping",)),  # another broker's words, named by the user
    ],
)
def test_an_error_saying_the_server_goes_away_reconnects(run, message, body, going_away):
    async def main():
        async with FakeServer() as server:
            policy = aio.Reconnect(initial_delay=0.01, max_delay=0.05)
            if going_away:
                policy = aio.Reconnect(initial_delay=0.01, max_delay=0.05, going_away=going_away)
            async with aio.connect("127.0.0.1", server.port, reconnect=policy) as client:
                sub = await client.subscribe("/q")
                peer = server.connected[0]
                peer.write(peer.conn.error(message, body=body))
                peer.writer.close()
                await server.wait_for(lambda: len(server.connected) == 2 and server.connected[1].subscriptions())
                await client.send("/q", b"after", receipt=True)
                assert (await sub.get(timeout=5)).body == b"after"  # the same iterator, re-subscribed
                assert client.connections == 2

    run(main())


def test_any_other_error_ends_the_client_even_with_a_policy(run):
    async def main():
        async with FakeServer() as server:
            policy = aio.Reconnect(initial_delay=0.01, max_delay=0.05)
            client = await aio.connect("127.0.0.1", server.port, reconnect=policy)
            sub = await client.subscribe("/q")
            peer = server.connected[0]
            # would be refused again (RabbitMQ's words for a channel error: its code is not 320)
            body = 'Reason: {shutdown,{server_initiated_close,403,<<"ACCESS_REFUSED - no access">>}}'
            peer.write(peer.conn.error("Access refused", body=body))
            peer.writer.close()
            with pytest.raises(aio.ServerError, match="Access refused"):
                await sub.get(timeout=5)
            assert isinstance(await client.wait_closed(), aio.ServerError)
            assert len(server.peers) == 1  # no second attempt
            await client.close()

    run(main())


def test_a_connect_refused_while_the_server_goes_away_is_retried(run):
    async def main():
        async with FakeServer() as server:
            policy = aio.Reconnect(attempts=3, initial_delay=0.01, max_delay=0.05)
            client = await aio.connect("127.0.0.1", server.port, reconnect=policy)
            server.reject = "connection_forced"  # still shutting down: CONNECT is answered with ERROR
            server.connected[0].writer.transport.abort()
            cause = await asyncio.wait_for(client.wait_closed(), 10)
            assert isinstance(cause, aio.ConnectionClosedError) and "could not connect" in str(cause)
            assert isinstance(cause.__cause__, aio.ServerError)  # three attempts, each refused
            assert len(server.peers) == 4
            await client.close()

    run(main())


def test_a_send_during_a_reconnect_waits_for_it(run):
    # a busy wait would never yield to the loop: an alarm turns that regression into a failure, not a hang
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("the send spun")))
    signal.alarm(30)

    async def main():
        async with FakeServer() as server:
            policy = aio.Reconnect(initial_delay=0.2, max_delay=0.2, jitter=0.0)
            async with aio.connect("127.0.0.1", server.port, reconnect=policy) as client:
                client.session.abort(ConnectionResetError("dropped"))  # its callbacks have not run yet
                await client.send("/q", b"after", receipt=True, timeout=10)  # waits, then goes through
                assert client.connections == 2
                assert [e.frame.body for e in server.connected[1].frames if e.command == "SEND"] == [b"after"]

    try:
        run(main())
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
