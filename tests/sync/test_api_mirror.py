"""The blocking API is the asyncio API: same methods, same parameters (names, kinds, defaults), except
the differences tools/sync_signatures.py lists on purpose, and that tool writes the blocking signatures
and shared docstrings from the asyncio ones. A parameter added to one client and not the other fails."""

from __future__ import annotations

import importlib.util
import inspect
from types import ModuleType
from typing import Any, List, Tuple

import fastframe.aio as aio
import fastframe.sync as sync
from _shared import REPO


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sync_signatures", REPO / "tools" / "sync_signatures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generator = _generator()


def parameters(func: Any) -> List[Tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(func).parameters.values()]


def public(cls: type) -> set:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_the_blocking_signatures_are_the_generated_ones(capsys: Any) -> None:
    status = generator.main(["--check"])
    assert status == 0, f"run `make sync-signatures` (python tools/sync_signatures.py):\n{capsys.readouterr().out}"


def test_a_parameter_added_to_the_asyncio_method_is_written_into_the_blocking_one() -> None:
    package = generator.PACKAGE
    aio_source = (package / "aio" / "_client.py").read_text(encoding="utf-8")
    sync_source = generator.generate(
        (package / "sync" / "_client.py").read_text(encoding="utf-8"), aio_source, ("Client",)
    )
    aio_abort = "async def abort(self, tx: str, *, timeout: Optional[float] = None) -> None:"
    sync_abort = "    def abort(self, tx: str, *, timeout: Optional[float] = None) -> None:"
    assert aio_abort in aio_source and sync_abort in sync_source
    changed = aio_source.replace(aio_abort, aio_abort.replace("None) ->", "None, reason: str = 'done') ->"))
    written = generator.generate(sync_source, changed, ("Client",))
    new = "    def abort(self, tx: str, *, timeout: Optional[float] = None, reason: str = 'done') -> None:"
    assert written == sync_source.replace(sync_abort, new)  # the signature only: the body stays as written
    # and a blocking signature edited by hand is written back
    assert generator.generate(sync_source.replace(sync_abort, new), aio_source, ("Client",)) == sync_source


def test_the_clients_have_the_same_methods_and_parameters() -> None:
    pairs = [
        (aio.Client, sync.Client),
        (aio.Subscription, sync.Subscription),
        (aio.Transaction, sync.Transaction),
        (aio.Message, sync.Message),
    ]
    for async_cls, sync_cls in pairs:
        name = async_cls.__name__
        only_aio = public(async_cls) - public(sync_cls)
        only_sync = public(sync_cls) - public(async_cls)
        assert only_aio == generator.ONLY_AIO.get(name, set()), (async_cls, only_aio)
        # (instance attributes of the asyncio side, e.g. Client.connections, are not on its class)
        assert only_sync - {"connections", "version", "is_connected", "timeout"} <= generator.ONLY_SYNC.get(
            name, set()
        ), (sync_cls, only_sync)
        for method in sorted(public(async_cls) & public(sync_cls)):
            a, s = getattr(async_cls, method), getattr(sync_cls, method)
            if not inspect.isfunction(a) or not inspect.isfunction(s):
                continue
            extra = generator.EXTRA_PARAMETERS.get((name, method), ())
            want = parameters(a)
            got = [p for p in parameters(s) if p[0] not in extra]
            assert got == want, f"{sync_cls.__name__}.{method}: {got} != {want}"


def test_connect_takes_the_same_options() -> None:
    a, s = inspect.signature(aio.connect).parameters, inspect.signature(sync.connect).parameters
    assert set(a) - set(s) == generator.CONNECT_ONLY_AIO
    assert set(s) - set(a) == generator.CONNECT_ONLY_SYNC
    defaults = {name for name in a if name in s and a[name].default != s[name].default}
    assert defaults == generator.CONNECT_DEFAULTS
    assert [name for name in a if name in s] == [name for name in s if name in a]  # the same order
