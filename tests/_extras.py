"""Tests that need an optional extra (spark, bench): a skip with the reason where the extra is not installed
(a wheel tested with the ``test`` extra only), a failure in the clone-based CI (``CI=true``), which installs
every extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Iterable

import pytest

from _shared import IN_CI


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` for a test, or skip naming ``extra`` (a failure with CI=true)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if IN_CI:
            pytest.fail(f"{module} is missing, but CI installs the {extra} extra: {exc}")
        pytest.skip(f"needs the {extra} extra: {exc}")


def missing(modules: Iterable[str], extra: str) -> str:
    """Why a folder's modules cannot be imported ("" when they can); raises with CI=true."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            if IN_CI:
                raise
            return f"needs the {extra} extra: {exc}"
    return ""


class _Placeholder(pytest.File):
    reason = ""

    def collect(self) -> Any:
        yield _Skipped.from_parent(self, name="needs-extra", reason=self.reason)


class _Skipped(pytest.Item):
    def __init__(self, *, reason: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason

    def runtest(self) -> None:
        pytest.skip(self.reason)


def placeholder(module_path: Any, parent: Any, reason: str) -> Any:
    """For ``pytest_pycollect_makemodule``: a module that would fail at import becomes one skipped test."""
    if not reason:
        return None
    node = _Placeholder.from_parent(parent, path=module_path)
    node.reason = reason
    return node
