"""Servers that misbehave on purpose, met by the blocking client: silence after heart-beats, a receipt
never answered, a close inside a frame, a flood while the consumer sleeps, ERROR for CONNECT.
Every end is a clear error within a bound, after what was complete; nothing hangs."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

import fastframe.sync
from fastframe import aio

from ._servers import FakeServerThread


def test_silence_after_heartbeats_is_a_heartbeat_timeout_within_the_grace() -> None:
    with FakeServerThread(heartbeat=(100, 0)) as server:
        # the server beats every 100 ms; the client wants one every 100 ms (grace 2: silent after 200 ms)
        client = fastframe.sync.connect("127.0.0.1", server.port, heartbeat=(0, 100))
        sub = client.subscribe("/hb")
        time.sleep(0.5)
        assert client.is_connected  # beats arrive: alive
        server.call(lambda: setattr(server.server.connected[0], "quiet", True))
        started = time.monotonic()
        with pytest.raises(aio.HeartbeatTimeout):
            sub.get(timeout=5)  # a thread blocked in a receive wakes with the cause
        assert time.monotonic() - started < 1.5  # 200 ms of grace, one interval late at most, and scheduling
        assert isinstance(client.wait_closed(timeout=1), aio.HeartbeatTimeout)
        client.close()


def test_a_user_thread_busy_in_pure_python_does_not_stop_heart_beats() -> None:
    with FakeServerThread(heartbeat=(0, 100)) as server:  # the server wants a beat every 100 ms
        with fastframe.sync.connect("127.0.0.1", server.port, heartbeat=(100, 0)) as client:
            peer = server.call(lambda: server.server.connected[0])
            deadline = time.monotonic() + 0.6
            while time.monotonic() < deadline:
                sum(range(1000))  # the caller's thread never waits: the I/O thread beats anyway
            assert server.call(lambda: peer.beats) >= 3
            assert client.is_connected


def test_a_receipt_never_answered_times_out_and_the_connection_stays() -> None:
    with FakeServerThread(answer_receipts=False) as server:
        with fastframe.sync.connect("127.0.0.1", server.port) as client:
            sub = client.subscribe("/r", receipt=False)
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                client.send("/r", b"x", receipt=True, timeout=0.3)
            assert 0.25 < time.monotonic() - started < 2.0
            assert client.is_connected
            assert sub.get(timeout=5).body == b"x"  # the frame went out; only its receipt is missing
            server.server.answer_disconnect = False  # (the DISCONNECT receipt is not coming either)
            assert client.disconnect(timeout=1) is False


def test_a_close_inside_a_frame_delivers_the_complete_messages_then_the_error() -> None:
    with FakeServerThread() as server:
        client = fastframe.sync.connect("127.0.0.1", server.port)
        sub = client.subscribe("/mid")
        peer = server.call(lambda: server.server.connected[0])

        def misbehave() -> None:
            for n in range(3):
                peer.deliver(sub.id, b"whole %d" % n)
            peer.write(b"MESSAGE\ndestination:/mid\nmessage-id:cut\nsubscription:" + sub.id.encode() + b"\n\nhal")
            peer.writer.close()

        server.call(misbehave)
        got = []
        with pytest.raises(aio.ConnectionClosedError):
            for message in sub:
                got.append(message.body)
        assert got == [b"whole 0", b"whole 1", b"whole 2"]  # the half frame never shows
        client.close()


def test_a_flood_while_the_consumer_sleeps_keeps_memory_bounded() -> None:
    count, bound = 3000, 20
    with FakeServerThread() as server:
        with fastframe.sync.connect("127.0.0.1", server.port, max_queue=bound) as client:
            sub = client.subscribe("/flood")
            peer = server.call(lambda: server.server.connected[0])
            body = b"f" * 2048

            def flood() -> None:
                for n in range(count):
                    peer.deliver(sub.id, body, [("x-n", str(n))])

            server.call(flood)  # 6 MB written at once by the server
            time.sleep(0.5)  # the consumer sleeps
            held = len(sub)
            assert held <= bound + 256 * 1024 // len(body) + 1, held  # the bound and the rest of one read, at most
            assert not client.async_client.session.is_reading()  # reading paused: the rest stays in the socket
            numbers = [int(sub.get(timeout=10).get("x-n") or -1) for _ in range(count)]
            assert numbers == list(range(count))  # then everything arrives, in order


def test_error_for_connect_is_a_clear_error() -> None:
    with FakeServerThread(reject="bad credentials") as server:
        started = time.monotonic()
        with pytest.raises(aio.ServerError) as info:
            fastframe.sync.connect("127.0.0.1", server.port, login="who", passcode="nope")
        assert info.value.message == "bad credentials"
        assert time.monotonic() - started < 5


def test_a_server_that_never_answers_connect_times_out() -> None:
    with FakeServerThread(silent_handshake=True) as server:
        started = time.monotonic()
        with pytest.raises((TimeoutError, aio.ConnectionClosedError)):
            fastframe.sync.connect("127.0.0.1", server.port, connect_timeout=0.3)
        assert time.monotonic() - started < 3


def test_an_error_frame_mid_stream_fails_every_waiter_at_once() -> None:
    with FakeServerThread() as server:
        client = fastframe.sync.connect("127.0.0.1", server.port)
        subs = [client.subscribe(f"/e{n}") for n in range(2)]
        caught: List[BaseException] = []

        def wait(sub: fastframe.sync.Subscription) -> None:
            try:
                sub.get(timeout=10)
            except BaseException as exc:
                caught.append(exc)

        waiters = [threading.Thread(target=wait, args=(sub,)) for sub in subs]
        for thread in waiters:
            thread.start()
        time.sleep(0.1)
        server.call(lambda: server.server.connected[0].write(b"ERROR\nmessage:queue deleted\n\nbye\0"))
        for thread in waiters:
            thread.join(5)
        assert len(caught) == 2 and all(isinstance(e, aio.ServerError) for e in caught), caught
        assert caught[0].message == "queue deleted"  # type: ignore[attr-defined]
        with pytest.raises(aio.ServerError):
            client.send("/e0", b"x")
        client.close()


def test_a_server_going_away_with_an_error_is_reconnected_to() -> None:
    # RabbitMQ shutting down says ERROR "connection_forced" before it closes: with a reconnect
    # policy that is a dropped connection, not a refusal (the asyncio client's rule: it is that client)
    with FakeServerThread() as server:
        policy = aio.Reconnect(initial_delay=0.01, max_delay=0.05)
        with fastframe.sync.connect("127.0.0.1", server.port, reconnect=policy, timeout=5) as client:
            sub = client.subscribe("/gone")

            def going_away() -> None:
                peer = server.server.connected[0]
                peer.write(peer.conn.error("connection_forced", body="broker forced connection closure"))
                peer.writer.close()

            server.call(going_away)
            server.wait_for(
                lambda: len(server.server.connected) == 2 and bool(server.server.connected[1].subscriptions())
            )
            client.send("/gone", b"after", receipt=True)
            assert sub.get(timeout=5).body == b"after"  # the same subscription, re-established
            assert client.connections == 2 and client.is_connected


def test_an_error_refusing_what_the_client_did_ends_it_despite_a_policy() -> None:
    with FakeServerThread() as server:
        policy = aio.Reconnect(initial_delay=0.01, max_delay=0.05)
        client = fastframe.sync.connect("127.0.0.1", server.port, reconnect=policy, timeout=5)
        sub = client.subscribe("/refused")
        server.call(lambda: server.server.connected[0].write(b"ERROR\nmessage:Access refused\n\n\0"))
        with pytest.raises(aio.ServerError, match="Access refused"):
            sub.get(timeout=5)
        assert isinstance(client.wait_closed(timeout=5), aio.ServerError)
        assert len(server.call(lambda: server.server.peers)) == 1  # no second attempt
        client.close()
