"""The Python side of the cluster tests, run as its own driver: ``python cluster_job.py MASTER ARCHIVE OUT``.

One application on the cluster, several jobs; prints one JSON line with what
the test checks. The ``stomp`` source is never registered here: PySpark finds
it through the ``pyspark_stomp`` module.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, Dict, Iterator


def kill_my_executor_once(batches: Iterator[Any]) -> Iterator[Any]:
    """Pass the batches through; the first attempt of partition 0 first kills the executor JVM running it."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is not None and context.partitionId() == 0 and context.attemptNumber() == 0:
        pid = os.getppid()
        while pid > 1:  # this Python worker <- PySpark's daemon <- the executor's JVM
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"CoarseGrainedExecutorBackend" in f.read():
                    os.kill(pid, signal.SIGKILL)
                    time.sleep(60)  # the task dies with its executor
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
    yield from batches


def main() -> None:
    from fastframe.spark._cluster import tasks_per_executor
    from fastframe.spark.session import get_session

    master, archive, out = sys.argv[1:4]
    spark = get_session(
        master,
        app_name="fastframe cluster tests",
        register_source=False,
        conf={"spark.task.maxFailures": "2", "spark.sql.shuffle.partitions": "2"},
    )
    sc = spark.sparkContext
    result: Dict[str, Any] = {"app_id": sc.applicationId}
    deadline = time.monotonic() + 120
    while sc._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
        time.sleep(0.5)  # both executors, so that both take tasks

    def read(**options: Any) -> Any:
        reader = spark.read.format("stomp").option("recursiveFileLookup", True).option("minPartitions", 4)
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load(archive)

    sc.setJobGroup("read", "read")
    frames = read()
    frames.write.mode("overwrite").parquet(f"{out}/read")
    result["read_tasks"] = tasks_per_executor(spark, "read")

    sc.setJobGroup("write", "write")
    frames.where("command IS NOT NULL").repartition(2).write.format("stomp").mode("overwrite").save(f"{out}/stomp")
    result["write_tasks"] = tasks_per_executor(spark, "write")
    sc.setJobGroup("back", "back")
    spark.read.format("stomp").load(f"{out}/stomp").write.mode("overwrite").parquet(f"{out}/back")

    sc.setJobGroup("failfast", "failfast")
    try:
        read(mode="FAILFAST").write.format("noop").mode("overwrite").save()
        result["failfast"] = None
    except Exception as exc:
        result["failfast"] = str(exc)[:6000]

    sc.setJobGroup("kill", "kill")
    frames = read()
    result["kill_rows"] = frames.mapInArrow(kill_my_executor_once, frames.schema).count()
    tracker = sc.statusTracker()
    failed = 0
    for job_id in tracker.getJobIdsForGroup("kill"):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else ():
            stage = tracker.getStageInfo(stage_id)
            failed += stage.numFailedTasks if stage else 0
    result["kill_failed_tasks"] = failed
    result["kill_tasks"] = tasks_per_executor(spark, "kill")
    spark.stop()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
