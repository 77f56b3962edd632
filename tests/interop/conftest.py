"""Fixtures of the live interop tests (helpers in ``_live``): ``broker`` over RabbitMQ, ActiveMQ and fastframe's own, ``version``."""

from __future__ import annotations

from ._live import broker, own_broker, version

__all__ = ["broker", "own_broker", "version"]
