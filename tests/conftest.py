"""Fixtures shared by the whole suite.

``codec`` runs a test against both twins: ``c`` imports the compiled module
directly (a missing build is a failure, not a skip) and ``py`` the reference.
"""

from __future__ import annotations

import importlib
import os
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

TWINS = ("c", "py")
TWIN_MODULES = {"c": "fastframe._codec_c", "py": "fastframe._codec_py"}

REPO = Path(__file__).resolve().parents[1]


def _find_shared() -> Path:
    """The project's read-only reference folder: $FASTFRAME_SHARED, ../shared, or beside the clone's origin.

    A clone made elsewhere (``git clone /work/main /tmp/x``) still finds the
    corpus beside the repository it was cloned from.
    """
    if "FASTFRAME_SHARED" in os.environ:
        return Path(os.environ["FASTFRAME_SHARED"])
    beside = REPO.parent / "shared"
    if beside.is_dir():
        return beside
    try:
        origin = subprocess.run(
            ["git", "-C", str(REPO), "config", "--get", "remote.origin.url"],
            capture_output=True, text=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        origin = ""
    if origin and Path(origin).is_dir() and (Path(origin).resolve().parent / "shared").is_dir():
        return Path(origin).resolve().parent / "shared"
    return beside


SHARED = _find_shared()
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
            pytest.fail(
                f"broker corpus not found at {CORPUS} (CI needs ../shared beside the clone or its origin, "
                "or FASTFRAME_SHARED)"
            )
        pytest.skip(f"broker corpus not found at {CORPUS}: clone the repo beside ../shared to run these")
    return CORPUS
