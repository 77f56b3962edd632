"""Heart-beat timing as pure arithmetic: intervals in, a monotonic ``now`` in, deadlines out.

No clock is read here: the caller passes ``now`` (seconds, e.g. ``time.monotonic()``), so the
timing is tested without sleeping and any transport can drive it.
"""

from __future__ import annotations

from typing import Optional

__all__ = ["HeartbeatTimer", "DEFAULT_GRACE"]

#: Silence is declared after this many receive intervals (RabbitMQ and ActiveMQ wait about two).
DEFAULT_GRACE = 2.0


class HeartbeatTimer:
    """When our next heart-beat is due, and whether the peer has been silent too long.

    ``send_ms`` and ``receive_ms`` are the negotiated intervals (0: none in that direction).
    Any byte sent resets the send timer; any byte received proves the peer alive. The peer is
    silent when nothing arrived for ``grace * receive_ms``; until its first data after ``now`` (the
    handshake) it gets ``startup`` intervals more, as ActiveMQ sends its first beat only after about
    two intervals.
    """

    __slots__ = ("send_interval", "receive_interval", "grace", "startup", "started", "last_sent", "last_received")

    def __init__(
        self, send_ms: int, receive_ms: int, *, grace: float = DEFAULT_GRACE, startup: float = 1.0, now: float = 0.0
    ) -> None:
        if send_ms < 0 or receive_ms < 0:
            raise ValueError("heart-beat intervals must not be negative")
        if grace < 1.0:
            raise ValueError(f"heart-beat grace must be at least 1.0 interval, not {grace!r}")
        if startup < 0:
            raise ValueError(f"heart-beat startup allowance must not be negative, not {startup!r}")
        self.send_interval = send_ms / 1000.0
        self.receive_interval = receive_ms / 1000.0
        self.grace = grace
        self.startup = startup
        self.started = now
        self.last_sent = now
        self.last_received = now

    def sent(self, now: float) -> None:
        """Record that bytes (a frame or a heart-beat) went out at ``now``."""
        self.last_sent = max(self.last_sent, now)

    def received(self, now: float) -> None:
        """Record that bytes arrived at ``now``."""
        self.last_received = max(self.last_received, now)

    def send_deadline(self) -> Optional[float]:
        """When our next heart-beat is due, or ``None`` when we send none."""
        return self.last_sent + self.send_interval if self.send_interval else None

    def receive_deadline(self) -> Optional[float]:
        """When the peer counts as silent if nothing arrives first, or ``None`` when it sends none."""
        if not self.receive_interval:
            return None
        patience = self.grace + (self.startup if self.last_received == self.started else 0.0)
        return self.last_received + self.receive_interval * patience

    def send_due(self, now: float) -> bool:
        """Whether a heart-beat should be sent at ``now``."""
        deadline = self.send_deadline()
        return deadline is not None and now >= deadline

    def peer_silent(self, now: float) -> bool:
        """Whether the peer missed its heart-beats (silent past the grace) at ``now``."""
        deadline = self.receive_deadline()
        return deadline is not None and now > deadline

    def next_deadline(self) -> Optional[float]:
        """The earliest of the two deadlines: when a transport should check again."""
        deadlines = [d for d in (self.send_deadline(), self.receive_deadline()) if d is not None]
        return min(deadlines) if deadlines else None
