"""What a task does to the Python worker process Spark runs it in: the cyclic garbage collector.

A reused Spark worker (``spark.python.worker.reuse``, the default) runs a full
``gc.collect()`` after every task. With pyarrow, pandas (which pyarrow imported
then: the rows are now made without it) and pyspark loaded, that walked some
80,000 long-lived objects: 40 ms of CPU per task measured here, a third of a
stream task's worker CPU in py-spy samples. The first task a worker runs
therefore collects once and then freezes what is alive (``gc.freeze``, made for
this: long-lived objects set aside from every later collection), so the
collection after each task looks at that task's objects only. What is frozen is
still freed by its reference count; only a reference cycle among objects alive
at that moment (the first task's own, at most) would never be collected.
"""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from typing import Iterator

_frozen_in = 0  # the process that froze (a fork of a frozen worker has its own collector state)


def freeze_worker_heap() -> None:
    """Collect once, then set aside every object alive now from later collections (once per process)."""
    global _frozen_in
    if _frozen_in == os.getpid():
        return
    _frozen_in = os.getpid()
    gc.collect()
    gc.freeze()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a block, then as before.

    A task's read makes a few objects per message (the message, its headers, the rows), all freed by
    their reference counts; while thousands of them are alive the collector runs again and again and
    walks them all: it took 40% of a task's CPU (11-12 µs per message read and made into Arrow, 6.5-7
    with it paused). A block's cycles, if any, are collected once it is on again.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
