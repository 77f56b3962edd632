"""Seeded sample archives: :func:`generate_archive`, kept here under its first name.

The generator lives in :mod:`fastframe.archive` with the other archive helpers; this module
re-exports it (``fastframe sample-archive DIR`` runs it).
"""

from __future__ import annotations

from .archive import generate_archive

__all__ = ["generate_archive"]
