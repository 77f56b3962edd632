"""Where the project's read-only reference folder (../shared) is: used by the suite and by fuzz/.

No pytest here, so the fuzz harnesses can import it too.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the clone-based CI run: every extra and service is installed, so a missing one is a failure, not a skip
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def find_shared() -> Path:
    """$FASTFRAME_SHARED, ../shared, or beside the clone's origin.

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
