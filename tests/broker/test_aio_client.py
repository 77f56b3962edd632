"""fastframe's own asyncio client against the broker, on each version: the interop round trips."""

from __future__ import annotations

import asyncio
from typing import Any, Dict

import pytest

import fastframe.aio
from fastframe.aio import Broker

BINARY = bytes(range(256)) * 2
# values each version can carry (1.0 has no escapes, 1.1 no CR); the broker keeps them all
VALUES: Dict[str, Dict[str, str]] = {
    "1.0": {"x-colon": "12:30", "x-back": "C:\\tmp"},
    "1.1": {"x-colon": "12:30", "x-back": "C:\\tmp", "x-lf": "a\nb"},
    "1.2": {"x-colon": "12:30", "x-back": "C:\\tmp", "x-lf": "a\nb", "x-cr": "a\rb"},
}


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_round_trips(version: str) -> None:
    async def test() -> None:
        async with Broker(users={"guest": "guest"}) as broker:
            options: Any = {"login": "guest", "passcode": "guest", "versions": (version,), "timeout": 5}
            async with fastframe.aio.connect("127.0.0.1", broker.port, **options) as client:
                ack = "client" if version == "1.0" else "client-individual"
                sub = await client.subscribe("/queue/aio", ack=ack)
                await client.send("/queue/aio", "text ☃", headers=VALUES[version], receipt=True)
                await client.send("/queue/aio", BINARY, receipt=True)
                text = await sub.get(timeout=5)
                assert text.body == "text ☃".encode() and {k: text.get(k) for k in VALUES[version]} == VALUES[version]
                await text.ack(receipt=True)
                binary = await sub.get(timeout=5)
                assert binary.body == BINARY
                if version == "1.0":  # no NACK in 1.0: ack it
                    await binary.ack(receipt=True)
                else:
                    await binary.nack(receipt=True)
                    again = await sub.get(timeout=5)
                    assert again.body == BINARY and again.get("redelivered") == "true"
                    await again.ack(receipt=True)
                async with client.transaction() as tx:
                    await tx.send("/queue/aio", b"in tx")
                    await tx.send("/topic/none", b"nobody listens")
                committed = await sub.get(timeout=5)
                assert committed.body == b"in tx"
                await committed.ack(receipt=True)
                assert broker.core.stats()["unacked"] == 0
            await asyncio.sleep(0)
        assert broker.core.stats()["sessions"] == 0

    asyncio.run(asyncio.wait_for(test(), 30))


def test_bad_login_is_a_server_error() -> None:
    async def test() -> None:
        async with Broker(users={"guest": "guest"}) as broker:
            with pytest.raises(fastframe.aio.ServerError) as caught:
                async with fastframe.aio.connect("127.0.0.1", broker.port, login="nobody", passcode="x", timeout=5):
                    pass
            assert "Bad CONNECT" in str(caught.value)

    asyncio.run(asyncio.wait_for(test(), 30))
