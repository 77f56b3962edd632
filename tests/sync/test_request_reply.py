"""Issue 29 in the blocking client: request/reply from many threads, a late reply dropped,
on_unrouted, CONNECT headers, SEND without content-length, ACK/NACK by a kept id."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any, Dict, Iterator, List

import pytest

import fastframe.sync
from fastframe.protocol import ConnectRequest, LocalProtocolError, Send

from ._servers import BrokerThread, FakeServerThread


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    with BrokerThread() as running:
        yield running


def connect(port: int, **options: Any) -> fastframe.sync.Client:
    return fastframe.sync.connect("127.0.0.1", port, timeout=10, **options)


class Responder:
    """A blocking client answering each request on ``destination`` with ``reply:<body>``, after
    ``delays[body]`` seconds (each answer in a thread of its own, so replies may overtake)."""

    def __init__(self, port: int, destination: str, delays: Dict[bytes, float]) -> None:
        self.client = connect(port)
        self.delays = delays
        self.sub = self.client.subscribe(destination, on_message=self.answer)

    def answer(self, message: fastframe.sync.Message) -> None:
        def later() -> None:
            time.sleep(self.delays.get(message.body, 0))
            correlation = message.get("correlation-id") or ""
            self.client.send(message.get("reply-to") or "", b"reply:" + message.body, {"correlation-id": correlation})

        threading.Thread(target=later, daemon=True).start()

    def close(self) -> None:
        self.client.disconnect()


def test_eight_threads_request_on_one_connection_each_get_their_own_reply(broker: BrokerThread) -> None:
    responder = Responder(broker.port, "/queue/rpc", {b"%d" % n: (8 - n) * 0.02 for n in range(8)})
    try:
        with connect(broker.port) as client, concurrent.futures.ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda n: client.request("/queue/rpc", b"%d" % n, timeout=5), range(8)))
            assert [r.body for r in replies] == [b"reply:%d" % n for n in range(8)]
            assert (
                isinstance(replies[0], fastframe.sync.Message)
                and replies[0].subscription == client.async_client.reply_to
            )
    finally:
        responder.close()


def test_a_late_reply_goes_to_on_unrouted_not_to_the_next_request(broker: BrokerThread) -> None:
    unrouted: List[fastframe.sync.Message] = []
    responder = Responder(broker.port, "/queue/rpc", {b"slow": 0.5})
    try:
        with connect(broker.port, on_unrouted=unrouted.append) as client:
            with pytest.raises(TimeoutError):
                client.request("/queue/rpc", b"slow", timeout=0.1)
            assert client.request("/queue/rpc", b"fast", timeout=5).body == b"reply:fast"
            deadline = time.monotonic() + 5
            while not unrouted and time.monotonic() < deadline:
                time.sleep(0.01)
            assert [m.body for m in unrouted] == [b"reply:slow"]
            assert isinstance(unrouted[0], fastframe.sync.Message)
            assert client.request("/queue/rpc", b"next", timeout=5).body == b"reply:next"
    finally:
        responder.close()


def test_connect_headers_and_send_without_content_length() -> None:
    with FakeServerThread() as server:
        with connect(server.port, headers={"client-id": "app-1"}) as client:
            client.send("/q", "text", content_length=False)
            client.send("/q", b"receipted", content_length=False, receipt=True)
            with pytest.raises(LocalProtocolError, match="NUL with content_length=False"):
                client.send("/q", b"a\0b", content_length=False)
            client.send("/q", b"counted", receipt=True)
            frames = server.call(lambda: list(server.server.connected[0].frames))
        (request,) = [e for e in frames if isinstance(e, ConnectRequest)]
        assert request.frame.get("client-id") == "app-1"
        sends = [e.frame for e in frames if isinstance(e, Send)]
        assert [(f.body, f.get("content-length")) for f in sends] == [
            (b"text", None), (b"receipted", None), (b"counted", "7"),
        ]  # fmt: skip
        assert sends[0].get("content-type") == "text/plain;charset=utf-8"


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ack_and_nack_by_a_kept_id(broker: BrokerThread, version: str) -> None:
    with connect(broker.port, versions=(version,)) as client:
        sub = client.subscribe("/queue/ids", ack="client-individual")
        for n in range(3):
            client.send("/queue/ids", b"%d" % n)
        first, second, third = [sub.get(timeout=5) for _ in range(3)]
        client.ack(first.ack_id or "")
        client.ack(second.message_id or "", subscription=sub.id, receipt=True)
        client.nack(third.message_id or "", receipt=True)
        again = sub.get(timeout=5)
        assert again.body == b"2" and again.get("redelivered") == "true"
        client.ack(again.message_id or "", receipt=True)
        with pytest.raises(LocalProtocolError, match="not an unacknowledged message"):
            client.ack(first.ack_id or "", receipt=True)
        assert broker.background.call(lambda: broker.broker.core.stats()["unacked"]) == 0


def test_a_waiting_request_holds_up_no_other_call(broker: BrokerThread) -> None:
    responder = Responder(broker.port, "/queue/rpc", {b"slow": 3.0})
    try:
        with connect(broker.port) as client:
            sub = client.subscribe("/queue/other")
            waiting = threading.Thread(target=client.request, args=("/queue/rpc", b"slow"), kwargs={"timeout": 10})
            waiting.start()
            time.sleep(0.1)  # the request waits for its reply now
            started = time.monotonic()
            client.send("/queue/other", b"meanwhile", receipt=True)
            assert sub.get(timeout=5).body == b"meanwhile"
            assert client.request("/queue/rpc", b"quick", timeout=5).body == b"reply:quick"
            assert time.monotonic() - started < 2.0  # not behind the slow request's reply (3 s away)
            waiting.join(10)
            assert not waiting.is_alive()
    finally:
        responder.close()
