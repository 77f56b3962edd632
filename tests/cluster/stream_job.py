"""A stream query on the cluster, run as its own driver: ``python stream_job.py MASTER OPTIONS_JSON OUT CHECKPOINT
KILL_MARKER``.

The ``stomp`` source into a checkpointed Parquet sink with ``availableNow``; between the two, a pass-through
``mapInArrow`` whose first task to find no ``KILL_MARKER`` file creates it and kills the executor JVM running it
(SIGKILL) in the middle of its batch: Spark runs the task again on an executor that is left. Prints
``batch N`` as each batch ends, then ``done``. The test kills this process too, once.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Iterator


def kill_executor_once(marker: str) -> Any:
    def kill(batches: Iterator[Any]) -> Iterator[Any]:
        import signal

        first = next(batches, None)
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            pass
        else:
            pid = os.getppid()
            while pid > 1:  # this Python worker <- PySpark's daemon <- the executor's JVM
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"CoarseGrainedExecutorBackend" in f.read():
                        os.kill(pid, signal.SIGKILL)
                        time.sleep(60)  # the task dies with its executor
                with open(f"/proc/{pid}/stat") as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
        if first is not None:
            yield first
        yield from batches

    return kill


def main() -> None:
    from fastframe.spark.session import get_session

    master, options, out, checkpoint, marker = sys.argv[1:6]
    spark = get_session(
        master,
        app_name="fastframe cluster stream",
        conf={"spark.task.maxFailures": "4", "spark.sql.shuffle.partitions": "2"},
    )
    deadline = time.monotonic() + 120
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
        time.sleep(0.5)  # both executors, so that a task killed on one runs again on the other
    reader = spark.readStream.format("stomp")
    for name, value in json.loads(options).items():
        reader = reader.option(name, value)
    frames = reader.load()
    passed = frames.mapInArrow(kill_executor_once(marker), frames.schema)
    writer = passed.writeStream.format("parquet").option("checkpointLocation", checkpoint)
    query = writer.trigger(availableNow=True).start(out)
    seen = -1
    while not query.awaitTermination(0.2):
        for progress in query.recentProgress:
            if progress["batchId"] > seen:
                seen = progress["batchId"]
                print(f"batch {seen}: {progress['numInputRows']}", flush=True)
    if query.exception() is not None:
        raise SystemExit(f"the query failed: {query.exception()}")
    spark.stop()
    print("done", flush=True)


if __name__ == "__main__":
    main()
