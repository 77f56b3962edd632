"""Build the compiled twin with extra compiler flags into build/<variant>/, beside the editable install.

    python fuzz/build_ext.py asan     # gcc (or $CC), AddressSanitizer + UndefinedBehaviorSanitizer
    python fuzz/build_ext.py fuzz     # clang, -fsanitize=fuzzer-no-link: libFuzzer (atheris) sees C coverage

Prints the directory to put first on PYTHONPATH: build/<variant>/pkg, which holds a copy of
src/fastframe with the special build of codec/_codec_c. The editable install in .venv (which other
people are testing against) is never touched. The .so is rebuilt only when the .pyx (or a .pxi), the
flags or the compiler change; the Python files are copied afresh on every call.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "fastframe"
CODEC = SRC / "codec"  # the .pyx, its .pxi files, and where the .so goes

# the same directives as setup.py (kept in step by hand: setup.py runs setup() on import)
DIRECTIVES = {"language_level": 3, "embedsignature": True, "cdivision": True}

COMMON = ["-g", "-fno-omit-frame-pointer", "-Wno-unused-function", "-Wno-unused-result"]
VARIANTS = {
    # -O1 keeps reports readable and the run fast; recovery off so any UB report fails the run
    "asan": ("gcc", ["-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]),
    # libFuzzer's coverage hooks only; they resolve to atheris's libFuzzer (see _link_atheris)
    "fuzz": ("clang", ["-O1", "-fsanitize=fuzzer-no-link"]),
}


def sanitizer_runtime(variant: str) -> str:
    """The shared ASan runtime to LD_PRELOAD (it must be the first library loaded)."""
    cc = os.environ.get("CC", VARIANTS[variant][0])
    name = "libasan.so" if "gcc" in cc or cc == "cc" else "libclang_rt.asan-x86_64.so"
    return subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True, check=True).stdout.strip()


def _link_atheris() -> list:
    """Link the fuzz build against atheris's own libFuzzer, so its coverage hooks resolve on import.

    The loader then maps that library once; when atheris imports the same file as its core, it is
    the same libFuzzer, which already counts the compiled twin's edges and comparisons.
    """
    import atheris

    core = next(Path(atheris.__file__).parent.glob("core_with_libfuzzer*.so"))
    return [f"-L{core.parent}", f"-l:{core.name}", f"-Wl,-rpath,{core.parent}"]


def build(variant: str) -> Path:
    cc, cflags = VARIANTS[variant]
    cc = os.environ.get("CC", cc)
    # e.g. FASTFRAME_BUILD_CFLAGS=-fno-sanitize=nonnull-attribute to look past a known report
    cflags = cflags + os.environ.get("FASTFRAME_BUILD_CFLAGS", "").split()
    if variant == "fuzz":
        cflags = cflags + _link_atheris()
    if shutil.which(cc) is None:
        sys.exit(f"build_ext: compiler {cc!r} not found (Debian: apt-get install {cc})")
    out = REPO / "build" / variant
    pkg = out / "pkg" / "fastframe"
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    target = pkg / "codec" / f"_codec_c{suffix}"
    pyx = CODEC / "_codec_c.pyx"
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    sources = b"".join(path.read_bytes() for path in [pyx, *sorted(CODEC.glob("*.pxi"))])  # the .pyx includes the .pxi
    key = hashlib.sha256(sources + repr((cc, version, cflags, DIRECTIVES, sys.version)).encode()).hexdigest()
    stamp = out / "stamp"

    # a fresh copy of the Python files (the .so and generated C excluded), keeping a current build
    kept = target.read_bytes() if target.exists() and stamp.exists() and stamp.read_text() == key else None
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(SRC, pkg, ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__"))
    if kept is not None:
        target.write_bytes(kept)
        return pkg.parent

    from Cython.Build import cythonize  # imported late: only a rebuild needs it

    c_file = out / "_codec_c.c"
    shutil.copy(pyx, out / "_codec_c.pyx")
    cythonize(
        [str(out / "_codec_c.pyx")], compiler_directives=DIRECTIVES, force=True, quiet=True, include_path=[str(CODEC)]
    )
    paths = sysconfig.get_paths()
    command = [
        cc, "-shared", "-fPIC", *COMMON, *cflags,
        f"-I{paths['include']}", f"-I{paths['platinclude']}", f"-I{CODEC}",
        str(c_file), "-o", str(target),
    ]  # fmt: skip
    print("build_ext:", " ".join(command), file=sys.stderr)
    subprocess.run(command, check=True)
    stamp.write_text(key)
    return pkg.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", choices=sorted(VARIANTS))
    parser.add_argument("--runtime", action="store_true", help="print the ASan runtime to preload instead")
    args = parser.parse_args()
    print(sanitizer_runtime(args.variant) if args.runtime else build(args.variant))


if __name__ == "__main__":
    main()
