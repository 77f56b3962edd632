"""fastframe.testing and its pytest plugin: a fresh broker per test, the log, and each fault seen by both
clients as the server guide's "Testing your application" says."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time

import pytest

import fastframe.sync
from fastframe import aio
from fastframe.testing import TestBroker

FAST_RECONNECT = aio.Reconnect(attempts=20, initial_delay=0.05, max_delay=0.2)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_the_fixture_in_a_project_of_its_own(tmp_path):
    (tmp_path / "test_app.py").write_text(
        textwrap.dedent(
            """
            import sys
            import fastframe.sync

            def test_unused_fixture_costs_nothing():
                assert "fastframe.testing" not in sys.modules and "fastframe.server" not in sys.modules

            def test_fresh_broker(stomp_broker):
                with fastframe.sync.connect(stomp_broker.host, stomp_broker.port, login="app") as client:
                    client.send("/queue/orders", b"order-1", receipt=True)
                (entry,) = stomp_broker.sent("/queue/orders")
                assert entry.body == b"order-1" and entry.login == "app"
                assert stomp_broker.url == f"stomp://127.0.0.1:{stomp_broker.port}"

            def test_each_test_gets_its_own(stomp_broker):
                assert stomp_broker.sent() == [] and stomp_broker.core.stats()["queued"] == 0

            def test_factory(stomp_broker_factory):
                guarded = stomp_broker_factory(users={"guest": "secret"})
                other = stomp_broker_factory()
                assert guarded.port != other.port and guarded.core.users == {"guest": "secret"}
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "test_app.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


def test_the_log_of_sent_and_received_frames():
    with TestBroker() as broker:
        with fastframe.sync.connect(broker.host, broker.port, login="reader") as reader:
            with reader.subscribe("/queue/a") as sub:
                with fastframe.sync.connect(broker.host, broker.port, login="writer", headers={"client-id": "w1"}) as w:
                    w.send("/queue/a", b"one", {"x-n": "1"})
                    w.send("/queue/a", b"two", receipt=True)
                assert [sub.get(timeout=5).body for _ in range(2)] == [b"one", b"two"]
        sent = broker.sent("/queue/a")
        assert [(e.body, e.login, e.client_id) for e in sent] == [(b"one", "writer", "w1"), (b"two", "writer", "w1")]
        assert sent[0].frame.get("x-n") == "1"
        assert [e.body for e in broker.received("reader")] == [b"one", b"two"]
        assert broker.received("writer") == []  # (a RECEIPT is not a delivery)
        broker.clear_log()
        assert broker.sent() == [] == broker.received()


@pytest.mark.parametrize("kind", ["aio", "sync"])
def test_drop_connections_reconnects_and_resubscribes(kind):
    with TestBroker() as broker:
        if kind == "sync":
            with fastframe.sync.connect(broker.host, broker.port, reconnect=FAST_RECONNECT) as client:
                with client.subscribe("/queue/a") as sub:
                    assert broker.drop_connections() == 1
                    broker.wait_for(lambda: client.connections == 2 and broker.connections == 1)
                    broker.wait_for(lambda: broker.core.stats()["subscriptions"] == 1)
                    client.send("/queue/a", b"after", receipt=True)
                    assert sub.get(timeout=5).body == b"after"
            return

        async def main():
            async with aio.connect(broker.host, broker.port, reconnect=FAST_RECONNECT) as client:
                async with await client.subscribe("/queue/a") as sub:
                    await asyncio.to_thread(broker.drop_connections)
                    await asyncio.to_thread(broker.wait_for, lambda: client.connections == 2)
                    await asyncio.to_thread(broker.wait_for, lambda: broker.core.stats()["subscriptions"] == 1)
                    await client.send("/queue/a", b"after", receipt=True)
                    assert (await sub.get(timeout=5)).body == b"after"

        run(main())


def test_drop_connections_by_login_and_client_id():
    with TestBroker() as broker:
        clients = [
            fastframe.sync.connect(broker.host, broker.port, login=login, headers={"client-id": cid})
            for login, cid in (("a", "a1"), ("a", "a2"), ("b", "b1"))
        ]
        try:
            assert broker.drop_connections(client_id="a2") == 1
            assert broker.drop_connections(login="b") == 1
            broker.wait_for(lambda: broker.connections == 1)
            assert clients[0].is_connected
            assert isinstance(clients[1].wait_closed(5), aio.ConnectionClosedError)
        finally:
            for client in clients:
                client.close()


@pytest.mark.parametrize("kind", ["aio", "sync"])
def test_error_and_close(kind):
    with TestBroker() as broker:
        if kind == "sync":
            with fastframe.sync.connect(broker.host, broker.port, reconnect=FAST_RECONNECT) as client:
                broker.error_and_close("connection_forced")  # one of Reconnect.going_away's words
                broker.wait_for(lambda: client.connections == 2)
            with fastframe.sync.connect(broker.host, broker.port) as client:
                broker.error_and_close("you did something")
                error = client.wait_closed(5)
                assert isinstance(error, aio.ConnectionClosedError) and "you did something" in str(error)
            return

        async def main():
            async with aio.connect(broker.host, broker.port, reconnect=FAST_RECONNECT) as client:
                await asyncio.to_thread(broker.error_and_close, "connection_forced")
                await asyncio.to_thread(broker.wait_for, lambda: client.connections == 2)
            client = await aio.connect(broker.host, broker.port)
            await asyncio.to_thread(broker.error_and_close, "you did something")
            error = await asyncio.wait_for(client.wait_closed(), 5)
            assert isinstance(error, aio.ServerError) and error.message == "you did something"

        run(main())


@pytest.mark.parametrize("kind", ["aio", "sync"])
def test_refuse_next_connect(kind):
    with TestBroker() as broker:
        broker.refuse_next_connect("broker starting up")
        if kind == "sync":
            with pytest.raises(aio.ServerError, match="broker starting up"):
                fastframe.sync.connect(broker.host, broker.port)
            with fastframe.sync.connect(broker.host, broker.port) as client:  # the next one is let in
                assert client.is_connected
            # Reconnect retries an ERROR that says the server is going away, and no other
            broker.refuse_next_connect("connection_forced", count=2)
            with fastframe.sync.connect(broker.host, broker.port, reconnect=FAST_RECONNECT) as client:
                assert client.connections == 1
            broker.refuse_next_connect("busy")
            with pytest.raises(aio.ServerError, match="busy"):
                fastframe.sync.connect(broker.host, broker.port, reconnect=FAST_RECONNECT)
            return

        async def main():
            with pytest.raises(aio.ServerError, match="broker starting up"):
                await aio.connect(broker.host, broker.port)
            async with aio.connect(broker.host, broker.port) as client:
                assert client.is_connected

        run(main())


@pytest.mark.parametrize("kind", ["aio", "sync"])
def test_stop_heartbeats_is_a_silent_server(kind):
    with TestBroker(heartbeat=(100, 0)) as broker:
        broker.stop_heartbeats()
        if kind == "sync":
            with fastframe.sync.connect(broker.host, broker.port, heartbeat=(0, 100)) as client:
                assert isinstance(client.wait_closed(10), aio.HeartbeatTimeout)
            broker.resume_heartbeats()
            with fastframe.sync.connect(broker.host, broker.port, heartbeat=(0, 100)) as client:
                time.sleep(0.6)  # three intervals with the grace: alive
                assert client.is_connected
            return

        async def main():
            client = await aio.connect(broker.host, broker.port, heartbeat=(0, 100))
            assert isinstance(await asyncio.wait_for(client.wait_closed(), 10), aio.HeartbeatTimeout)

        run(main())


@pytest.mark.parametrize("kind", ["aio", "sync"])
def test_delay_receipts(kind):
    with TestBroker() as broker:
        broker.delay_receipts(1.0)
        if kind == "sync":
            with fastframe.sync.connect(broker.host, broker.port) as client:
                with pytest.raises(TimeoutError):
                    client.send("/queue/a", b"x", receipt=True, timeout=0.2)
                broker.delay_receipts(0)
                client.send("/queue/a", b"y", receipt=True, timeout=5)
                assert client.is_connected  # the late receipt of the first wait did no harm
            return

        async def main():
            async with aio.connect(broker.host, broker.port) as client:
                with pytest.raises(asyncio.TimeoutError):
                    await client.send("/queue/a", b"x", receipt=True, timeout=0.2)
                await asyncio.to_thread(broker.delay_receipts, 0)
                await asyncio.sleep(1.0)  # the late RECEIPT arrives: ignored
                await client.send("/queue/a", b"y", receipt=True, timeout=5)

        run(main())
