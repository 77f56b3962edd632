"""The asyncio client's receiving fast path (ClientConnection.route) against the in-memory broker.

A subscription's MESSAGEs go from the read straight into its inbox, not through the client's
``_route``; with a ``frame_hook`` every frame goes the general way so the hook sees it. Both ways
deliver the same messages in the same order. Run with FASTFRAME_NO_EXTENSIONS=1 too (the Python
twin's route_messages).
"""

from __future__ import annotations

import asyncio
from typing import Any, List

import pytest

from fastframe import aio
from fastframe.aio._client import Client

from .fake_server import FakeServer

COUNT = 500


@pytest.fixture
def general_path(monkeypatch: pytest.MonkeyPatch) -> List[Any]:
    """The messages that reached the client's general path (``Client._route``), in order."""
    seen: List[Any] = []
    original = Client._route

    def counting(self: Client, message: Any) -> None:
        seen.append(message)
        original(self, message)

    monkeypatch.setattr(Client, "_route", counting)
    return seen


@pytest.mark.parametrize("hooked", [False, True], ids=["routed", "frame_hook"])
def test_500_messages_arrive_in_order_routed_or_through_the_hook(run, general_path, hooked):
    hooked_frames: List[Any] = []
    hook = (lambda direction, frame: hooked_frames.append((direction, frame))) if hooked else None

    async def main() -> List[Any]:
        async with aio.Broker(port=0) as broker:
            async with aio.connect("127.0.0.1", broker.port, frame_hook=hook, timeout=10) as client:
                sub = await client.subscribe("/queue/fast", max_queue=64)  # (pauses reading on the way)
                assert (sub.id in client._session.conn._routes) is not hooked
                async with aio.connect("127.0.0.1", broker.port, timeout=10) as producer:
                    for n in range(COUNT):
                        await producer.send("/queue/fast", f"{n}", {"x-n": str(n)})
                    got = []
                    while len(got) < COUNT:
                        got.append(await sub.get(timeout=10))
                        got += sub.get_batch(100)  # (what the read queued with it)
                    return got

    got = run(main())
    assert [message.body for message in got] == [str(n).encode() for n in range(COUNT)]
    assert all(type(message) is aio.Message and message.subscription == got[0].subscription for message in got)
    assert [message.get("x-n") for message in got] == [str(n) for n in range(COUNT)]
    if hooked:
        assert general_path == got  # each message took the general path, the very objects delivered
        incoming = [frame for direction, frame in hooked_frames if direction == "in" and frame is not None]
        assert [frame.body for frame in incoming if frame.command == "MESSAGE"] == [m.body for m in got]
    else:
        assert general_path == []  # none did


def test_messages_after_unsubscribe_are_not_delivered(run, general_path):
    unrouted: List[Any] = []

    async def main() -> Any:
        async with aio.Broker(port=0) as broker:
            async with aio.connect("127.0.0.1", broker.port, timeout=10, on_unrouted=unrouted.append) as client:
                sub = await client.subscribe("/topic/t")
                witness = await client.subscribe("/topic/t")  # (proves the later messages were sent)
                for n in range(10):
                    await client.send("/topic/t", f"before-{n}")
                first = [await sub.get(timeout=5) for _ in range(3)]
                await sub.unsubscribe()
                assert sub.id not in client._session.conn._routes
                for n in range(10):
                    await client.send("/topic/t", f"after-{n}", receipt=n == 9)
                seen = [(await witness.get(timeout=5)).text() for _ in range(20)]
                rest = [message async for message in sub]  # what was queued before: then it ends
                return first + rest, seen

    got, seen = run(main())
    assert [message.text() for message in got] == [f"before-{n}" for n in range(10)]
    assert seen == [f"before-{n}" for n in range(10)] + [f"after-{n}" for n in range(10)]
    assert general_path == [] and unrouted == []


def test_messages_in_flight_after_unsubscribe_are_dropped(run, general_path):
    # the server writes MESSAGEs for the subscription after its UNSUBSCRIBE: no inbox takes them,
    # on_unrouted is not called (the client ended that subscription)
    unrouted: List[Any] = []

    async def main() -> List[Any]:
        async with FakeServer() as server:
            async with aio.connect("127.0.0.1", server.port, on_unrouted=unrouted.append) as client:
                sub = await client.subscribe("/q")
                peer = server.peers[0]
                peer.write(peer.conn.message(sub.id, b"routed", destination="/q"))
                assert (await sub.get(timeout=5)).body == b"routed"
                await sub.unsubscribe()
                peer.write(b"".join(peer.conn.message(sub.id, f"late-{n}", destination="/q") for n in range(3)))
                await client.send("/q", b"x", receipt=True)  # (its RECEIPT comes after the late messages)
                return [message async for message in sub]

    assert run(main()) == []
    assert unrouted == [] and [message.body for message in general_path] == [b"late-0", b"late-1", b"late-2"]


def test_a_routed_message_is_acknowledged_and_not_redelivered(run, general_path):
    async def main() -> Any:
        async with aio.Broker(port=0) as broker:
            async with aio.connect("127.0.0.1", broker.port, timeout=10) as client:
                sub = await client.subscribe("/queue/acks", ack="client-individual")
                for n in range(3):
                    await client.send("/queue/acks", f"m{n}")
                got = [await sub.get(timeout=5) for _ in range(3)]
                assert client._session.conn.unacked and len(client._session.conn.unacked) == 3
                await got[1].ack(receipt=True)
                assert len(client._session.conn.unacked) == 2
                assert broker.core.stats()["unacked"] == 2  # the broker has it acknowledged
            async with aio.connect("127.0.0.1", broker.port, timeout=10) as again:  # the others come back
                sub = await again.subscribe("/queue/acks", ack="client-individual")
                redelivered = [await sub.get(timeout=5) for _ in range(2)]
                with pytest.raises(asyncio.TimeoutError):
                    await sub.get(timeout=0.3)
                for message in redelivered:
                    await message.ack(receipt=True)
                return [message.text() for message in got], [message.text() for message in redelivered]

    got, redelivered = run(main())
    assert got == ["m0", "m1", "m2"] and sorted(redelivered) == ["m0", "m2"]
    assert general_path == []
