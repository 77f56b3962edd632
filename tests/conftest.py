"""Fixtures shared by the whole suite.

``codec`` runs a test against both twins: ``c`` imports the compiled module
directly and ``py`` the reference. A missing compiled twin is a failure, unless
pure Python was asked for (``FASTFRAME_NO_EXTENSIONS=1``, set at build time for a
pure-Python install and kept for its test run, or an interpreter other than
CPython) outside CI: then every test of it skips with the reason. In CI
(``CI=true``) it is always required.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from _shared import IN_CI, REPO, find_shared  # noqa: F401  (REPO: the test modules import it from here)

TWINS = ("c", "py")
TWIN_MODULES = {"c": "fastframe.codec._codec_c", "py": "fastframe.codec._codec_py"}


SHARED = find_shared()
CORPUS = SHARED / "corpus" / "brokers"


def pure_python_asked() -> bool:
    """The environment asks for the pure-Python twin (as ``setup.py`` and ``fastframe`` read it)."""
    return os.environ.get("FASTFRAME_NO_EXTENSIONS", "") not in ("", "0") or sys.implementation.name != "cpython"


def compiled_twin_built() -> bool:
    """True when the compiled twin imports; False when it is absent by design; a failure when it is expected."""
    try:
        importlib.import_module(TWIN_MODULES["c"])
    except ImportError as error:
        if pure_python_asked() and not IN_CI:
            return False
        pytest.fail(
            f"the compiled twin is missing ({error}): build it, or ask for pure Python with "
            "FASTFRAME_NO_EXTENSIONS=1 (not in CI)",
            pytrace=False,
        )
    return True


def compiled_twin() -> ModuleType:
    """``fastframe.codec._codec_c``; a skip (at module level too) when it is absent by design, else a failure."""
    if not compiled_twin_built():
        pytest.skip(
            "compiled twin not built: pure Python asked for (FASTFRAME_NO_EXTENSIONS=1)", allow_module_level=True
        )
    return importlib.import_module(TWIN_MODULES["c"])


def load_twin(name: str) -> ModuleType:
    return compiled_twin() if name == "c" else importlib.import_module(TWIN_MODULES[name])


@pytest.fixture(params=TWINS, scope="session")
def codec(request: pytest.FixtureRequest) -> ModuleType:
    """The codec module under test: ``fastframe.codec._codec_c`` or ``fastframe.codec._codec_py``."""
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


@pytest.fixture
def certificate(tmp_path: Path) -> tuple:
    """A self-signed key and certificate for 127.0.0.1 and localhost (paths), made by the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        if IN_CI:
            pytest.fail("the openssl command is required in CI")
        pytest.skip("the openssl command is not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return key, cert
