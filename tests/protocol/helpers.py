"""Both roles talking to each other through bytes."""

from __future__ import annotations

from typing import Any, List, Tuple

from fastframe.protocol import ClientConnection, ServerConnection


def feed_bytewise(conn: Any, data: bytes, now: Any = None) -> List[Any]:
    """Feed ``data`` one byte at a time; the events of every call, in order."""
    events: List[Any] = []
    for index in range(len(data)):
        events += conn.receive_data(data[index : index + 1], now)
    return events


def pair(
    version: str = "1.2",
    *,
    client_beat: Tuple[int, int] = (0, 0),
    server_beat: Tuple[int, int] = (0, 0),
    now: float = 0.0,
    **options: Any,
) -> Tuple[ClientConnection, ServerConnection]:
    """A client and a server that completed the handshake on ``version``."""
    client = ClientConnection(**options)
    server = ServerConnection(heartbeat=server_beat, **options)
    versions = {"1.0": ("1.0",), "1.1": ("1.0", "1.1"), "1.2": ("1.0", "1.1", "1.2")}[version]
    (request,) = server.receive_data(client.connect("localhost", heartbeat=client_beat, versions=versions), now)
    assert request.host == "localhost"
    (connected,) = client.receive_data(server.accept(now=now), now)
    assert connected.version == version == client.version == server.version
    return client, server


def relay(source_bytes: bytes, target: Any, now: Any = None) -> List[Any]:
    """Deliver bytes to ``target``, dropping heart-beat events (brokers end every frame with an EOL too)."""
    return [e for e in target.receive_data(source_bytes, now) if type(e).__name__ != "HeartbeatReceived"]
