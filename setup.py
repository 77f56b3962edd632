"""Build the compiled twin. Everything else about the package is in pyproject.toml.

``FASTFRAME_NO_EXTENSIONS=1`` at build time gives a pure-Python install;
otherwise a failed compile fails the build (no silent slow installs).
``FASTFRAME_CYTHON_TRACE=1`` builds with line tracing for coverage/profiling.
Release builds carry no debug symbols (``-g0``); ``FASTFRAME_DEBUG=1`` keeps them.
"""

import os
import platform

from setuptools import Extension, setup


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


ext_modules = []
if not _flag("FASTFRAME_NO_EXTENSIONS") and platform.python_implementation() == "CPython":
    from Cython.Build import cythonize

    trace = _flag("FASTFRAME_CYTHON_TRACE")
    directives = {
        "language_level": 3,
        "embedsignature": True,
        "cdivision": True,  # no division by zero is possible: divisors are constants
        # bounds and wraparound checks are off per function, where proven safe
        "linetrace": trace,
    }
    macros = [("CYTHON_TRACE_NOGIL", "1")] if trace else []
    extra = [] if os.name == "nt" else ["-O3", "-Wall", "-Wno-unused-function"]
    if os.name != "nt" and not (trace or _flag("FASTFRAME_DEBUG")):
        extra.append("-g0")  # after the interpreter's own -g: the wheel ships no debug info
    ext_modules = cythonize(
        [
            Extension(
                "fastframe.codec._codec_c",
                ["src/fastframe/codec/_codec_c.pyx"],
                define_macros=macros,
                extra_compile_args=extra,
            )
        ],
        compiler_directives=directives,
    )

setup(ext_modules=ext_modules)
