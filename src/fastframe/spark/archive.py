"""Kept so that ``from fastframe.spark.archive import generate_archive`` (the path of earlier releases) works.

Sample archives need no Spark: the generator lives in :mod:`fastframe.sample_archive`; this is a re-export only.
"""

from __future__ import annotations

from ..sample_archive import generate_archive

__all__ = ["generate_archive"]
