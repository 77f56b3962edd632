"""Issue 32: the blocking client's threads never wait on each other. A call waiting for its receipt
holds no other thread's frame; every frame is written in call order as soon as it is called; a
receipt wait that times out never un-sends a frame already called, and one not yet written fails
clearly instead. Against a scripted server that never answers receipts."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any, List, Optional

import pytest

import fastframe.sync
from fastframe.protocol import Send

from ._servers import FakeServerThread


def bodies(server: FakeServerThread) -> List[bytes]:
    """(On the server's loop) the bodies of the SENDs it read, in order."""
    return [bytes(e.frame.body) for peer in server.server.peers for e in peer.frames if isinstance(e, Send)]


def sent_bodies(server: FakeServerThread) -> List[bytes]:
    return server.call(lambda: bodies(server))


def in_thread(target: Any) -> "tuple[threading.Thread, List[Optional[BaseException]]]":
    outcome: List[Optional[BaseException]] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # (kept for the test's thread to look at)
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_a_send_is_written_at_once_while_another_thread_waits_for_a_receipt_that_never_comes() -> None:
    with FakeServerThread(answer_receipts=False) as server:
        client = fastframe.sync.connect("127.0.0.1", server.port)
        try:
            waiting, outcome = in_thread(lambda: client.send("/q", b"A", receipt=True, timeout=3))
            server.wait_for(lambda: b"A" in bodies(server))
            started = time.monotonic()
            client.send("/q", b"B")  # another thread's plain SEND: not behind A's wait
            server.wait_for(lambda: len(bodies(server)) == 2, 2.0)
            assert time.monotonic() - started < 1.0
            assert sent_bodies(server) == [b"A", b"B"]  # in call order
            client.flush(timeout=1)  # so is a call that waits for the I/O thread
            waiting.join(5)
            assert not waiting.is_alive() and isinstance(outcome[0], TimeoutError)
            assert client.is_connected
        finally:
            client.close()


def test_receipt_sends_of_many_threads_all_reach_the_server_though_none_is_answered() -> None:
    with FakeServerThread(answer_receipts=False) as server:
        client = fastframe.sync.connect("127.0.0.1", server.port)
        try:
            started = time.monotonic()
            threads = [in_thread(lambda n=n: client.send("/q", b"%d" % n, receipt=True, timeout=0.5)) for n in range(6)]
            for thread, _ in threads:
                thread.join(5)
            assert time.monotonic() - started < 2.0  # the waits ran side by side, not one after another
            assert all(isinstance(outcome[0], TimeoutError) for _, outcome in threads)
            for _, outcome in threads:
                assert "the frame was sent" in str(outcome[0])  # only its receipt did not come
            server.wait_for(lambda: len(bodies(server)) == 6, 2.0)
            assert sorted(sent_bodies(server)) == [b"%d" % n for n in range(6)]
        finally:
            client.close()


def test_frames_of_one_thread_stay_in_call_order_around_receipt_waits() -> None:
    with FakeServerThread(answer_receipts=False) as server:
        client = fastframe.sync.connect("127.0.0.1", server.port)
        try:
            waits = []
            for n in range(5):
                client.send("/q", b"plain %d" % n)
                waits.append(in_thread(lambda n=n: client.send("/q", b"receipt %d" % n, receipt=True, timeout=1)))
                time.sleep(0.01)  # (each thread's call is made before the next plain SEND)
            client.send("/q", b"last")
            server.wait_for(lambda: len(bodies(server)) == 11, 2.0)
            expected = [body for n in range(5) for body in (b"plain %d" % n, b"receipt %d" % n)] + [b"last"]
            assert sent_bodies(server) == expected
            for thread, _ in waits:
                thread.join(5)
        finally:
            client.close()


def test_a_receipt_call_not_yet_written_when_its_wait_ends_fails_clearly_and_is_never_sent() -> None:
    # the I/O thread is held up (a wire hook that sleeps on one frame): the call waits in the
    # queue past its timeout, so it was never written: it says so, and it never goes later
    def slow_hook(direction: str, data: bytes) -> None:
        if direction == "out" and b"slow" in data:
            time.sleep(1.0)

    with FakeServerThread(answer_receipts=False) as server:
        client = fastframe.sync.connect("127.0.0.1", server.port, wire_hook=slow_hook)
        try:
            client.send("/q", b"slow")
            time.sleep(0.1)  # (the I/O thread sleeps in the hook now)
            with pytest.raises(TimeoutError, match="not sent"):
                client.send("/q", b"late", receipt=True, timeout=0.3)
            client.send("/q", b"after")
            server.wait_for(lambda: b"after" in bodies(server), 3.0)
            assert sent_bodies(server) == [b"slow", b"after"]  # "late" never went
        finally:
            client.close()


def test_a_commit_waiting_for_its_receipt_holds_no_other_frame() -> None:
    with FakeServerThread(answer_receipts=False) as server:
        client = fastframe.sync.connect("127.0.0.1", server.port)
        try:
            client.begin("tx-1")
            committing, outcome = in_thread(lambda: client.commit("tx-1", timeout=2))
            time.sleep(0.1)
            started = time.monotonic()
            client.send("/q", b"other")
            server.wait_for(lambda: b"other" in bodies(server), 1.0)
            assert time.monotonic() - started < 1.0
            committing.join(5)
            assert isinstance(outcome[0], TimeoutError)
        finally:
            client.close()


# ---------------------------------------------------------------------- a quiet exit and a quiet close

_PROGRAM = """
import gc, logging, sys, time
import fastframe.sync
logging.basicConfig(level=logging.WARNING)

def main(port, ending):
    client = fastframe.sync.connect("127.0.0.1", port, max_queue=4)
    sub = client.subscribe("/flood", max_queue=4)
    client.send("/flood", b"go")
    deadline = time.monotonic() + 5
    while len(sub) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)  # the server floods: the queues fill, reading pauses
    time.sleep(0.2)
    assert not client.async_client.session.is_reading()
    if ending == "close":
        for n in range(300):  # the server reads slowly: many of these still wait when close() comes
            client.send("/elsewhere", b"x" * 65536)
            if n % 50 == 0:
                client.begin("tx-%d" % n)
        client.close()
        print("closed", flush=True)
    else:
        print("returning", flush=True)  # from main, the client open, the subscription paused

main(int(sys.argv[1]), sys.argv[2])
gc.collect()  # (what a long program's collector does to what main left behind)
"""


@pytest.mark.parametrize("twin", ["c", "py"])
@pytest.mark.parametrize("ending", ["return", "close"])
def test_a_program_ends_quietly_with_a_paused_subscription(twin: str, ending: str, tmp_path: Any) -> None:
    # returning from main leaves the client's tasks pending (reading paused: no selector holds the
    # socket); close() makes the calls still queued fail: neither is news worth a line on stderr
    with FakeServerThread() as server:

        def flood_on_go() -> None:
            peer = server.server.connected[0]
            for _ in range(5000):
                peer.deliver(peer.subscriptions()[0].id, b"m" * 100)

        program = tmp_path / "program.py"
        program.write_text(_PROGRAM)
        env = dict(os.environ)
        if twin == "py":
            env["FASTFRAME_NO_EXTENSIONS"] = "1"
        else:
            env.pop("FASTFRAME_NO_EXTENSIONS", None)
        child = subprocess.Popen(
            [sys.executable, str(program), str(server.port), ending],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            server.wait_for(lambda: any(isinstance(e, Send) for p in server.server.peers for e in p.frames), 10)
            server.call(flood_on_go)
            server.server.read_delay = 2.0 if ending == "close" else 0.0
            out, err = child.communicate(timeout=20)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(5)
        assert child.returncode == 0, err.decode()
        assert out.decode().strip() == ("closed" if ending == "close" else "returning")
        assert err.decode() == ""  # no "Task was destroyed but it is pending!", no WARNING after close()


# ---------------------------------------------------------------------- bounds as documented


@pytest.mark.parametrize("during_a_receipt_wait", [False, True])
def test_a_subscription_holds_at_most_its_documented_bound_while_the_consumer_sleeps(
    during_a_receipt_wait: bool,
) -> None:
    # the defaults: max_queue 1,000 messages held (twice that while a receipt is awaited), plus the
    # rest of the socket read that reached the bound (at most 256 KiB)
    count, body = 5000, 2048
    with FakeServerThread(answer_receipts=not during_a_receipt_wait) as server:
        client = fastframe.sync.connect("127.0.0.1", server.port)
        try:
            sub = client.subscribe("/flood", receipt=False)
            server.wait_for(lambda: bool(server.server.connected and server.server.connected[0].open_subscriptions))
            waiting = None
            if during_a_receipt_wait:
                waiting, _ = in_thread(lambda: client.send("/elsewhere", b"r", receipt=True, timeout=3))
                server.wait_for(lambda: b"r" in bodies(server))

            def flood() -> None:
                peer = server.server.connected[0]
                for n in range(count):
                    peer.deliver(sub.id, b"%06d" % n + b"f" * (body - 6))

            server.call(flood)  # 10 MB: far more than the subscription and the socket buffers hold
            bound = 2000 if during_a_receipt_wait else 1000
            deadline, held, last = time.monotonic() + 5, -1, sub.held
            while held != last and time.monotonic() < deadline:  # the consumer sleeps until nothing more comes
                time.sleep(0.3)
                held, last = sub.held, held
            assert bound // 2 < held <= bound + 256 * 1024 // body, held
            assert not client.async_client.session.is_reading()
            got = [sub.get(timeout=10).body[:6] for _ in range(count)]
            assert got == [b"%06d" % n for n in range(count)]  # then all of them, in order
            if waiting is not None:
                waiting.join(5)
        finally:
            client.close()
