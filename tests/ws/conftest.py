"""STOMP over WebSocket: the clients against scripted WebSocket servers, RabbitMQ Web-STOMP, the broker's
``--ws-port`` and stomp.js. Without the ``ws`` extra each module is one skipped test (a failure with CI=true)."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import pytest

from _extras import missing, placeholder

MISSING_EXTRA = missing(("websockets",), "ws")


def pytest_pycollect_makemodule(module_path: Any, parent: Any) -> Any:
    return placeholder(module_path, parent, MISSING_EXTRA)


@pytest.fixture
def run() -> Callable[[Awaitable[Any]], Any]:
    """``run(coro)``: the coroutine's result, within 30 s."""

    def runner(coro: Awaitable[Any], timeout: float = 30.0) -> Any:
        async def bounded() -> Any:
            return await asyncio.wait_for(coro, timeout)

        return asyncio.run(bounded())

    return runner
