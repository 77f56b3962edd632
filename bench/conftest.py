"""Fixtures of the pytest-benchmark suite (``pytest bench``).

``codec`` runs a benchmark on both twins, like tests/conftest.py: ``c``
imports the compiled module directly (a missing build fails) and ``py`` the
reference. ``FASTFRAME_BENCH_SIZES=tiny`` picks the CI-sized workloads
(default ``full``).
"""

from __future__ import annotations

import gc
import importlib
import os
from types import ModuleType
from typing import Dict, Iterator

import pytest

from bench.workloads import Workload, build_workloads

TWIN_MODULES = {"c": "fastframe.codec._codec_c", "py": "fastframe.codec._codec_py"}
SIZES = os.environ.get("FASTFRAME_BENCH_SIZES", "full")


@pytest.fixture(params=tuple(TWIN_MODULES), scope="session")
def codec(request: pytest.FixtureRequest) -> ModuleType:
    """The twin under test: ``fastframe.codec._codec_c`` or ``fastframe.codec._codec_py``."""
    return importlib.import_module(TWIN_MODULES[request.param])


@pytest.fixture(scope="session")
def workloads() -> Iterator[Dict[str, Workload]]:
    """Every workload at FASTFRAME_BENCH_SIZES, hidden from the cyclic GC.

    Benchmarks run with the GC on; freezing the workloads keeps their millions
    of tuples from making full collections rarer than in a program that only
    decodes a stream (see bench/compare.py).
    """
    built = build_workloads(SIZES)
    gc.collect()
    gc.freeze()
    gc.collect()
    yield built
    gc.unfreeze()
