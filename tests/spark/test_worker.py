"""A task's hold on its Spark worker's collector: the heap frozen once per process, new garbage still collected.

Each case runs in a child interpreter: freezing is for the life of a process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_first_task_freezes_what_is_alive_and_the_next_ones_do_not_again() -> None:
    out = run(
        """
        import gc
        from fastframe.spark._worker import freeze_worker_heap
        import pyarrow
        assert gc.get_freeze_count() == 0
        freeze_worker_heap()
        first = gc.get_freeze_count()
        later = [[i] for i in range(1000)]  # a task's objects, alive when the next task starts
        freeze_worker_heap()
        print(first > 10_000, gc.get_freeze_count() == first)
        """
    )
    assert out == "True True"


def test_cycles_made_after_the_freeze_are_still_collected() -> None:
    out = run(
        """
        import gc, weakref
        from fastframe.spark._worker import freeze_worker_heap
        freeze_worker_heap()
        class Node: pass
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        print(gone() is None)
        """
    )
    assert out == "True"


def test_a_forked_worker_freezes_its_own_heap() -> None:
    out = run(
        """
        import gc, os
        from fastframe.spark._worker import freeze_worker_heap
        freeze_worker_heap()
        parent = gc.get_freeze_count()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            more = [[i] for i in range(1000)]
            freeze_worker_heap()
            os.write(write, str(gc.get_freeze_count() - parent).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        print(int(os.read(read, 100)) >= 1000)
        """
    )
    assert out == "True"
