"""What the streaming source and sink take from PySpark, on 4.0, 4.1 and 4.2+.

PySpark 4.2 added admission control for Python streaming sources
(``pyspark.sql.streaming.datasource``: ``ReadLimit`` and its kinds,
``latestOffset(start, limit)``, ``getDefaultReadLimit``, ``reportLatestOffset``,
``SupportsTriggerAvailableNow``). On 4.0 and 4.1 Spark calls ``latestOffset()``
without arguments and knows none of these, so this module gives stand-ins with
the same names: the readers are written once, for the newer API, and
:data:`ADMISSION_CONTROL` says whether Spark will pass limits. PySpark 4.0 also
lacks ``DataSourceStreamArrowWriter``: the sink then receives rows
(:data:`STREAM_ARROW_WRITER` is None).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pyspark

try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxBytes,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    #: Spark passes a read limit to ``latestOffset`` (PySpark 4.2+).
    ADMISSION_CONTROL = True
except ImportError:  # PySpark 4.0 and 4.1
    ADMISSION_CONTROL = False

    class ReadLimit:  # type: ignore[no-redef]
        """Stand-in: how much a batch may take (Spark never passes one before 4.2)."""

    @dataclass
    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    @dataclass
    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        max_rows: int

    @dataclass
    class ReadMaxBytes(ReadLimit):  # type: ignore[no-redef]
        max_bytes: int

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: before 4.2 Spark wraps a Python source for availableNow itself (one batch to the end
        it finds when the query starts)."""

        def prepareForTriggerAvailableNow(self) -> None:
            pass


try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _ArrowWriter

    STREAM_ARROW_WRITER: Optional[Any] = _ArrowWriter
except ImportError:  # PySpark 4.0: stream writers receive rows
    STREAM_ARROW_WRITER = None

#: The PySpark that runs, as the error messages name it.
PYSPARK_VERSION: str = pyspark.__version__

__all__ = [
    "ADMISSION_CONTROL",
    "PYSPARK_VERSION",
    "STREAM_ARROW_WRITER",
    "ReadAllAvailable",
    "ReadLimit",
    "ReadMaxBytes",
    "ReadMaxRows",
    "SupportsTriggerAvailableNow",
]
