"""Fixtures shared by the whole suite.

``codec`` runs a test against both twins: ``c`` imports the compiled module
directly (a missing build is a failure, not a skip) and ``py`` the reference.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest

TWINS = ("c", "py")
TWIN_MODULES = {"c": "fastframe._codec_c", "py": "fastframe._codec_py"}

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FASTFRAME_SHARED", REPO.parent / "shared"))
CORPUS = SHARED / "corpus" / "brokers"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def load_twin(name: str) -> ModuleType:
    return importlib.import_module(TWIN_MODULES[name])


@pytest.fixture(params=TWINS, scope="session")
def codec(request: pytest.FixtureRequest) -> ModuleType:
    """The codec module under test: ``fastframe._codec_c`` or ``fastframe._codec_py``."""
    return load_twin(request.param)


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """../shared/corpus/brokers; skipped locally when absent, a failure in CI."""
    if not CORPUS.is_dir():
        if IN_CI:
            pytest.fail(f"broker corpus not found at {CORPUS} (CI must run with ../shared beside the clone)")
        pytest.skip(f"broker corpus not found at {CORPUS}: clone the repo beside ../shared to run these")
    return CORPUS
