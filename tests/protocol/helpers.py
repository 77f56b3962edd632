"""Both roles talking to each other through bytes."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from fastframe.protocol import ClientConnection, ServerConnection, Subscribe, Unsubscribe


class TrackingServer(ServerConnection):
    """A server connection that remembers the client's subscriptions, so a test delivers by id.

    Keeping the session's state is a broker's job (:mod:`fastframe.broker`), not the protocol's:
    this is the few lines a test needs of it, no checking.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.subscriptions: Dict[str, Tuple[str, str]] = {}  # id -> (destination, ack mode)

    def receive_data(self, data: bytes, now: Optional[float] = None) -> List[Any]:
        events = super().receive_data(data, now)
        for event in events:
            if isinstance(event, Subscribe):
                self.subscriptions[event.id] = (event.destination, event.ack)
            elif isinstance(event, Unsubscribe):
                self.subscriptions.pop(event.id, None)
        return events

    def message(self, subscription: Any, body: Any = b"", headers: Any = None, **options: Any) -> bytes:
        """MESSAGE for an open subscription: its destination, and an ack id unless it is ``auto``."""
        destination, mode = self.subscriptions[subscription]
        options.setdefault("destination", destination)
        options.setdefault("message_id", self.new_id("m-"))
        if mode != "auto":
            options.setdefault("ack_id", options["message_id"])
        return super().message(subscription, body, headers, **options)


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
    server = TrackingServer(heartbeat=server_beat, **options)
    versions = {"1.0": ("1.0",), "1.1": ("1.0", "1.1"), "1.2": ("1.0", "1.1", "1.2")}[version]
    (request,) = server.receive_data(client.connect("localhost", heartbeat=client_beat, versions=versions), now)
    assert request.host == "localhost"
    (connected,) = client.receive_data(server.accept(now=now), now)
    assert connected.version == version == client.version == server.version
    return client, server


def relay(source_bytes: bytes, target: Any, now: Any = None) -> List[Any]:
    """Deliver bytes to ``target``, dropping heart-beat events (brokers end every frame with an EOL too)."""
    return [e for e in target.receive_data(source_bytes, now) if type(e).__name__ != "HeartbeatReceived"]
