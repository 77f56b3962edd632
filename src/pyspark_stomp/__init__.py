"""Registers fastframe's ``stomp`` data source with PySpark on its own.

PySpark 4.0+ imports every top-level module named ``pyspark_<name>`` it finds
in the workers' interpreter and registers its ``DefaultSource``; this module is
that hook, so ``spark.read.format("stomp")`` works without a register call.
It must import with PySpark alone: a failing import here would break the
lookup of every Python data source.
"""

from fastframe.spark._source import StompDataSource as DefaultSource

__all__ = ["DefaultSource"]
