"""Fixtures of the live interop tests (helpers in ``_live``): ``broker`` over RabbitMQ and ActiveMQ, ``version``."""

from __future__ import annotations

from ._live import broker, version

__all__ = ["broker", "version"]
