"""Kept so that ``from fastframe.spark.archive import generate_archive`` (the path of earlier releases) works.

Sample archives need no Spark: the generator lives in :mod:`fastframe.archive`; this is a re-export only.
"""

from __future__ import annotations

from ..archive import generate_archive

__all__ = ["generate_archive"]
