"""The blocking client's own behaviour: waits with deadlines, threads, callbacks, shutdown, reconnect, TLS.

Servers run in threads of their own (``_servers``); every wait is bounded.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from typing import Any, Iterator, List

import pytest

import fastframe.sync
from fastframe import aio
from fastframe.protocol import LocalProtocolError

from ._servers import BrokerProcess, BrokerThread, FakeServerThread


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(users={"guest": "guest"}) as running:
        yield running


def connect(port: int, **options: Any) -> fastframe.sync.Client:
    return fastframe.sync.connect("127.0.0.1", port, login="guest", passcode="guest", timeout=10, **options)


def test_connect_send_receive_and_disconnect(broker: BrokerThread) -> None:
    with connect(broker.port) as client:
        assert client.is_connected and client.version == "1.2"
        assert client.server is not None and client.server.version == "1.2"
        with client.subscribe("/queue/a", ack="client-individual") as sub:
            client.send("/queue/a", b"one\0two", {"x-k": "a:b"}, content_type="application/octet-stream")
            message = sub.get(timeout=5)
            assert (message.body, message.get("x-k")) == (b"one\0two", "a:b")
            assert message.destination == "/queue/a" and message.subscription == sub.id
            message.ack(receipt=True)
    assert not client.is_connected
    assert client.wait_closed(timeout=1) is None  # disconnected cleanly
    with pytest.raises(aio.ConnectionClosedError):
        client.send("/queue/a", b"after")


def test_get_times_out_so_a_loop_can_wake_up(broker: BrokerThread) -> None:
    with connect(broker.port) as client:
        sub = client.subscribe("/queue/quiet")
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            sub.get(timeout=0.2)
        assert 0.15 < time.monotonic() - started < 2.0
        client.send("/queue/quiet", b"late")
        assert sub.get(timeout=5).body == b"late"


def test_iteration_ends_after_the_queued_messages_on_unsubscribe(broker: BrokerThread) -> None:
    with connect(broker.port) as client:
        sub = client.subscribe("/queue/it")
        for n in range(5):
            client.send("/queue/it", b"%d" % n)
        client.send("/queue/other", b"-", receipt=True)  # the broker has routed the five
        deadline = time.monotonic() + 5
        while len(sub) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        sub.unsubscribe()
        assert [m.body for m in sub] == [b"0", b"1", b"2", b"3", b"4"]


def test_eight_threads_send_on_one_connection_while_another_consumes(broker: BrokerThread) -> None:
    threads, each = 8, 500
    with connect(broker.port) as producer, connect(broker.port) as consumer:
        sub = consumer.subscribe("/queue/threads", max_queue=50)
        got: List[Any] = []
        errors: List[BaseException] = []

        def consume() -> None:
            try:
                for _ in range(threads * each):
                    message = sub.get(timeout=20)
                    got.append((message.get("x-thread"), message.get("x-n"), message.body))
            except BaseException as exc:  # reported below
                errors.append(exc)

        def send(t: int) -> None:
            try:
                for n in range(each):
                    body = (b"%d:%d:" % (t, n)) * (1 + (n % 50))  # frames of many sizes, so a torn one shows
                    producer.send("/queue/threads", body, {"x-thread": str(t), "x-n": str(n)})
            except BaseException as exc:
                errors.append(exc)

        reader = threading.Thread(target=consume)
        reader.start()
        senders = [threading.Thread(target=send, args=(t,)) for t in range(threads)]
        for thread in senders:
            thread.start()
        for thread in senders:
            thread.join(30)
        reader.join(30)
        assert not errors, errors
        assert len(got) == threads * each
        for t in range(threads):  # each thread's frames whole, and in its own order
            mine = [(n, body) for th, n, body in got if th == str(t)]
            assert [int(n) for n, _ in mine] == list(range(each))
            assert all(body == (b"%d:%s:" % (t, n.encode())) * (1 + (int(n) % 50)) for n, body in mine)


def test_consumer_threads_sharing_a_subscription_get_each_message_once(broker: BrokerThread) -> None:
    # queued messages are taken without the lock, waits with it; a small queue makes the I/O thread
    # wait for room often, so a consumer that empties it must wake it
    count, readers = 3000, 4
    with connect(broker.port) as producer, connect(broker.port) as consumer:
        sub = consumer.subscribe("/queue/shared", max_queue=8)
        got: List[List[bytes]] = [[] for _ in range(readers)]
        errors: List[BaseException] = []

        def consume(mine: List[bytes]) -> None:
            try:
                while True:
                    mine.append(sub.get(timeout=5).body)
            except TimeoutError:
                pass  # nothing more came
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=consume, args=(mine,)) for mine in got]
        for thread in threads:
            thread.start()
        for n in range(count):
            producer.send("/queue/shared", b"%d" % n)
        for thread in threads:
            thread.join(30)
        assert not errors, errors
        bodies = [body for mine in got for body in mine]
        assert sorted(bodies, key=int) == [b"%d" % n for n in range(count)]  # each once, none lost
        for mine in got:  # each thread sees the order the broker delivered in
            assert [int(body) for body in mine] == sorted(int(body) for body in mine)


def test_a_send_the_connection_refuses_is_raised_by_the_next_call(broker: BrokerThread) -> None:
    with connect(broker.port, versions=("1.0",)) as client:
        sub = client.subscribe("/queue/refused")
        client.send("/queue/refused", b"before")
        client.send("/queue/refused", b"bad", {"x-k": "a\nb"})  # STOMP 1.0 cannot carry a line break in a value
        client.send("/queue/refused", b"after")  # queued with the others: it still goes out
        client.flush(timeout=5)  # all three handed to the connection
        with pytest.raises(LocalProtocolError, match="STOMP 1.0"):
            client.flush(timeout=5)  # the call after the failure raises it
        client.flush(timeout=5)  # once
        assert [sub.get(timeout=5).body for _ in range(2)] == [b"before", b"after"]


def test_hooks_see_every_frame_sent(broker: BrokerThread) -> None:
    frames: List[Any] = []
    wires: List[bytes] = []
    hook = lambda direction, frame: frames.append(frame) if direction == "out" else None  # noqa: E731
    wire = lambda direction, data: wires.append(data) if direction == "out" else None  # noqa: E731
    with connect(broker.port, frame_hook=hook, wire_hook=wire) as client:
        sub = client.subscribe("/queue/hooked")
        for n in range(200):
            client.send("/queue/hooked", b"%d" % n)
        assert sub.get(timeout=5).body == b"0"
        client.flush(timeout=5)
    sends = [frame.body for frame in frames if frame is not None and frame.command == "SEND"]
    assert sends == [b"%d" % n for n in range(200)]
    assert sum(data.startswith(b"SEND\n") for data in wires) == 200  # one write per frame for the hook


def test_disconnect_with_a_full_queue_nobody_reads_is_prompt(broker: BrokerThread) -> None:
    client = connect(broker.port)
    sub = client.subscribe("/queue/unread", max_queue=20)
    for n in range(100):
        client.send("/queue/unread", b"%d" % n)
    client.flush(timeout=5)
    deadline = time.monotonic() + 5
    while len(sub) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)  # the queue is full: the I/O thread waits for room
    started = time.monotonic()
    assert client.disconnect(timeout=5) is True
    assert time.monotonic() - started < 2.0
    bodies = [message.body for message in sub]  # what arrived stays readable, then iteration stops
    assert 20 <= len(bodies) <= 100 and bodies == [b"%d" % n for n in range(len(bodies))]


def test_closing_wakes_a_thread_blocked_in_a_receive(broker: BrokerThread) -> None:
    client = connect(broker.port)
    sub = client.subscribe("/queue/blocked")
    caught: List[BaseException] = []

    def wait() -> None:
        try:
            sub.get()  # no timeout: only the end of the connection wakes it
        except BaseException as exc:
            caught.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.1)
    started = time.monotonic()
    client.close()
    waiter.join(5)
    assert not waiter.is_alive() and time.monotonic() - started < 3
    assert len(caught) == 1 and isinstance(caught[0], aio.ConnectionClosedError), caught


def test_the_broker_going_away_wakes_every_waiter_with_the_cause(broker: BrokerThread) -> None:
    client = connect(broker.port)
    subs = [client.subscribe(f"/queue/w{n}") for n in range(3)]
    caught: List[BaseException] = []
    lock = threading.Lock()

    def wait(sub: fastframe.sync.Subscription) -> None:
        try:
            sub.get(timeout=10)
        except BaseException as exc:
            with lock:
                caught.append(exc)

    waiters = [threading.Thread(target=wait, args=(sub,)) for sub in subs]
    for thread in waiters:
        thread.start()
    time.sleep(0.1)
    broker.stop()
    for thread in waiters:
        thread.join(5)
    assert len(caught) == 3 and all(isinstance(exc, aio.ConnectionClosedError) for exc in caught), caught
    assert isinstance(client.wait_closed(timeout=5), aio.ConnectionClosedError)
    with pytest.raises(aio.ConnectionClosedError):
        client.send("/queue/w0", b"x", receipt=True)
    client.close()


def test_callbacks_run_in_a_worker_thread_in_order(broker: BrokerThread, caplog: pytest.LogCaptureFixture) -> None:
    got: List[bytes] = []
    threads = set()
    ended: List[BaseException] = []
    done = threading.Event()

    def on_message(message: fastframe.sync.Message) -> None:
        threads.add(threading.current_thread().name)
        if message.body == b"boom":
            raise ValueError("a listener bug")  # logged; the next message follows
        got.append(message.body)
        message.ack()
        if len(got) == 20:
            done.set()

    with caplog.at_level(logging.ERROR, logger="fastframe.sync"):
        client = connect(broker.port)
        client.subscribe("/queue/cb", ack="client-individual", on_message=on_message, on_error=ended.append)
        client.send("/queue/cb", b"boom")
        for n in range(20):
            client.send("/queue/cb", b"%d" % n)
        assert done.wait(5)
        broker.stop()  # the connection ends: on_error hears why
        deadline = time.monotonic() + 5
        while not ended and time.monotonic() < deadline:
            time.sleep(0.01)
        client.close()
    assert got == [b"%d" % n for n in range(20)]
    assert threads and threading.current_thread().name not in threads
    assert len(ended) == 1 and isinstance(ended[0], aio.ConnectionClosedError)
    assert any("a listener bug" in (r.exc_text or "") for r in caplog.records)


def test_transactions_commit_and_abort(broker: BrokerThread) -> None:
    with connect(broker.port) as client:
        sub = client.subscribe("/queue/tx")
        with client.transaction() as tx:
            tx.send("/queue/tx", b"t1")
            tx.send("/queue/tx", b"t2")
            with pytest.raises(TimeoutError):
                sub.get(timeout=0.3)  # nothing before COMMIT
        assert [sub.get(timeout=5).body for _ in range(2)] == [b"t1", b"t2"]
        with pytest.raises(KeyError):
            with client.transaction() as tx:
                tx.send("/queue/tx", b"aborted")
                raise KeyError("roll back")
        client.send("/queue/tx", b"after", receipt=True)
        assert sub.get(timeout=5).body == b"after"


def test_broker_killed_mid_run_reconnects_and_resubscribes() -> None:
    policy = aio.Reconnect(attempts=200, initial_delay=0.05, max_delay=0.2)
    with (
        BrokerProcess() as broker,
        connect(broker.port, reconnect=policy) as client,
        connect(broker.port, reconnect=policy) as producer,
    ):
        sub = client.subscribe("/queue/restart")
        held = client.subscribe("/queue/held", ack="client-individual")
        for n in range(100):
            producer.send("/queue/restart", b"before %d" % n)
        producer.send("/queue/held", b"unacknowledged")
        assert [sub.get(timeout=5).body for _ in range(100)] == [b"before %d" % n for n in range(100)]
        old_message = held.get(timeout=5)
        broker.kill()
        deadline = time.monotonic() + 5
        while client.is_connected and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not client.is_connected
        broker.start()  # the same port, a fresh broker (memory only: it knows no subscription)
        deadline = time.monotonic() + 20
        while not (client.connections == 2 and client.is_connected and producer.is_connected):
            assert time.monotonic() < deadline, "no reconnect within 20 s"
            time.sleep(0.02)
        producer.send("/queue/other", b"-", receipt=True)
        client.send("/queue/other", b"-", receipt=True)  # the SUBSCRIBE re-sent before it is through
        for n in range(100):
            producer.send("/queue/restart", b"after %d" % n)
        assert [sub.get(timeout=5).body for _ in range(100)] == [b"after %d" % n for n in range(100)]
        assert client.connections == 2
        with pytest.raises(aio.StaleMessageError):
            old_message.ack()  # of the first connection: a broker would redeliver it instead


def test_a_blocking_call_from_a_hook_is_refused(broker: BrokerThread) -> None:
    holder: List[fastframe.sync.Client] = []
    refused: List[BaseException] = []

    def hook(direction: str, frame: Any) -> None:
        if holder and frame is not None and frame.command == "MESSAGE":
            try:
                holder[0].flush(timeout=1)  # the I/O thread waiting for itself would deadlock
            except RuntimeError as exc:
                refused.append(exc)

    with connect(broker.port, frame_hook=hook) as client:
        holder.append(client)
        sub = client.subscribe("/queue/hook")
        client.send("/queue/hook", b"x")
        assert sub.get(timeout=5).body == b"x"
    assert refused and "I/O thread" in str(refused[0])


def test_tls_through_the_callers_context(certificate: Any) -> None:
    key, cert = certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(cert), str(key))
    with FakeServerThread(ssl_context=server_ctx) as server:
        with fastframe.sync.connect("127.0.0.1", server.port, ssl=ssl.create_default_context(cafile=str(cert))) as c:
            sub = c.subscribe("/q")
            c.send("/q", b"secret\0bytes", receipt=True)
            assert sub.get(timeout=5).body == b"secret\0bytes"
        with pytest.raises(aio.ConnectionClosedError) as info:
            fastframe.sync.connect("127.0.0.1", server.port, ssl=ssl.create_default_context(), connect_timeout=5)
        assert isinstance(info.value.__cause__, ssl.SSLError)


def test_get_batch_takes_what_is_queued_in_order_without_waiting(broker: BrokerThread) -> None:
    with connect(broker.port) as client:
        sub = client.subscribe("/queue/batch", ack="client-individual")
        assert sub.get_batch(10) == []  # nothing queued: no wait
        for n in range(50):
            client.send("/queue/batch", b"%d" % n)
        client.flush(timeout=5)
        got = [sub.get(timeout=5)]
        deadline = time.monotonic() + 5
        while len(got) < 50 and time.monotonic() < deadline:
            batch = sub.get_batch(7)
            assert len(batch) <= 7
            got += batch or [sub.get(timeout=5)]
        assert [m.body for m in got] == [b"%d" % n for n in range(50)]
        got[-1].ack(receipt=True)  # routed messages are in the connection's ledger: acknowledged by id
        assert sub.get_batch(10) == []


def test_a_columnar_subscription_gives_each_reads_messages_as_columns(broker: BrokerThread) -> None:
    from fastframe.protocol import frames_of

    with connect(broker.port) as client, connect(broker.port) as producer:
        sub = client.subscribe("/queue/cols", ack="client", columns=True)
        assert sub.columns
        for n in range(500):
            producer.send("/queue/cols", b"%d" % n)
        got: List[Any] = []
        while sum(columns.rows for columns in got) < 500:
            got.append(sub.get(timeout=5))
        assert [bytes(frame.body) for columns in got for frame in frames_of(columns)] == [b"%d" % n for n in range(500)]
        last = got[-1]
        client.ack(last.header(last.rows - 1, "ack"), subscription=sub.id, receipt=True)
        with pytest.raises(LocalProtocolError, match="must stay the connection's only one"):
            client.subscribe("/queue/other")
    with connect(broker.port, frame_hook=lambda direction, frame: None) as hooked:
        with pytest.raises(ValueError, match="frame_hook"):
            hooked.subscribe("/queue/cols", columns=True)
    with connect(broker.port) as again:  # acknowledged through the last row: nothing comes again
        with pytest.raises(TimeoutError):
            again.subscribe("/queue/cols", ack="client").get(timeout=0.3)
