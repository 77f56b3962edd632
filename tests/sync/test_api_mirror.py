"""The blocking API is the asyncio API: same methods, same parameters (names, kinds, defaults), except
the differences listed here on purpose. A parameter added to one client and not the other fails."""

from __future__ import annotations

import inspect
from typing import Any, List, Tuple

import fastframe.aio as aio
import fastframe.sync as sync

# (class pairs) what only one side has, and why
ONLY_AIO = {
    aio.Client: {"send_nowait", "start_request", "subscribe_into", "session"},  # loop-side plumbing
    aio.Subscription: {"get_nowait", "get_batch"},  # for code that cannot await; a thread waits with get()
}
ONLY_SYNC = {
    aio.Client: {"async_client", "loop", "flush", "server"},  # the thread boundary's own calls
    aio.Subscription: {"held", "start_worker", "join_worker", "end", "worker"},  # threads
}
EXTRA_PARAMETERS = {  # method: parameters only the blocking one takes
    "subscribe": ["on_message", "on_error"],  # a worker thread per subscription
    "wait_closed": ["timeout"],  # (asyncio: asyncio.wait_for around it)
}


def parameters(func: Any) -> List[Tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(func).parameters.values()]


def public(cls: type) -> set:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_the_clients_have_the_same_methods_and_parameters() -> None:
    pairs = [
        (aio.Client, sync.Client),
        (aio.Subscription, sync.Subscription),
        (aio.Transaction, sync.Transaction),
        (aio.Message, sync.Message),
    ]
    for async_cls, sync_cls in pairs:
        only_aio = public(async_cls) - public(sync_cls)
        only_sync = public(sync_cls) - public(async_cls)
        assert only_aio == ONLY_AIO.get(async_cls, set()), (async_cls, only_aio)
        # (instance attributes of the asyncio side, e.g. Client.connections, are not on its class)
        assert only_sync - {"connections", "version", "is_connected", "timeout"} <= ONLY_SYNC.get(async_cls, set()), (
            sync_cls,
            only_sync,
        )
        for name in sorted(public(async_cls) & public(sync_cls)):
            a, s = getattr(async_cls, name), getattr(sync_cls, name)
            if not inspect.isfunction(a) or not inspect.isfunction(s):
                continue
            want = parameters(a)
            got = [
                p for p in parameters(s) if p[0] not in EXTRA_PARAMETERS.get(name, ()) or async_cls is not aio.Client
            ]
            assert got == want, f"{sync_cls.__name__}.{name}: {got} != {want}"


def test_connect_takes_the_same_options() -> None:
    a, s = inspect.signature(aio.connect).parameters, inspect.signature(sync.connect).parameters
    assert set(a) - set(s) == {"message_class"}  # the blocking client sets its own
    assert set(s) - set(a) == {"outbox"}
    defaults = {name for name in a if name in s and a[name].default != s[name].default}
    assert defaults == {"max_queue", "coalesce_reads"}  # documented in fastframe.sync.connect
    assert [name for name in a if name in s] == [name for name in s if name in a]  # the same order
