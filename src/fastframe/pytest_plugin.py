"""pytest fixtures for applications that speak STOMP, registered by installing fastframe (entry point
group ``pytest11``): ``stomp_broker``, a fresh :class:`fastframe.testing.TestBroker` per test, and
``stomp_broker_factory(**options)`` for brokers with options (users, limits, ``ws_port=0``, several
at once). The broker code loads only when a test asks for one of them.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, List

import pytest

__all__ = ["stomp_broker", "stomp_broker_factory"]


@pytest.fixture
def stomp_broker_factory() -> Iterator[Callable[..., Any]]:
    """Make test brokers with options, ``stomp_broker_factory(users={"guest": "guest"})``; each is
    started at once and closed after the test."""
    from .testing import TestBroker

    brokers: List[TestBroker] = []

    def make(**options: Any) -> TestBroker:
        broker = TestBroker(**options).start()
        brokers.append(broker)
        return broker

    yield make
    for broker in brokers:
        broker.close()


@pytest.fixture
def stomp_broker(stomp_broker_factory: Callable[..., Any]) -> Any:
    """A fresh in-memory STOMP broker on 127.0.0.1 for this test (:class:`fastframe.testing.TestBroker`):
    ``.host``, ``.port``, ``.url``, the log (``.sent()``, ``.received()``) and faults on demand."""
    return stomp_broker_factory()
