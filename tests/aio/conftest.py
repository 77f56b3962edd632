"""Run coroutine tests with asyncio.run, each bounded (pytest-asyncio is not used)."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import pytest


@pytest.fixture
def run() -> Callable[[Awaitable[Any]], Any]:
    """``run(coro)``: the coroutine's result, within 30 s."""

    def runner(coro: Awaitable[Any], timeout: float = 30.0) -> Any:
        async def bounded() -> Any:
            return await asyncio.wait_for(coro, timeout)

        return asyncio.run(bounded())

    return runner
