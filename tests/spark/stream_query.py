"""A streaming query in a process of its own, for tests that kill it: stomp source -> checkpointed Parquet.

    python stream_query.py OPTIONS_JSON OUT CHECKPOINT [--hold-first-batch]

Runs until the source has nothing more (processAllAvailable), then stops and prints ``done``.
With ``--hold-first-batch`` the sink is a foreachBatch that never finishes batch 0 (it prints ``holding``
and sleeps): the query stays planned and uncommitted until the test kills it.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from fastframe.spark.session import get_session


def main() -> None:
    options, out, checkpoint = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    hold = "--hold-first-batch" in sys.argv[4:]
    spark = get_session("local[2]", app_name="fastframe-stream-query", conf={"spark.sql.shuffle.partitions": "2"})
    reader = spark.readStream.format("stomp")
    for name, value in options.items():
        reader = reader.option(name, value)
    writer = reader.load().writeStream.option("checkpointLocation", checkpoint)
    if hold:

        def sink(batch: Any, batch_id: int) -> None:
            if batch_id == 0:
                print("holding", flush=True)
                time.sleep(600)  # the test kills the process long before
            batch.write.mode("append").parquet(out)

        query = writer.foreachBatch(sink).start()
    else:
        query = writer.format("parquet").start(out)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
        spark.stop()
    print("done", flush=True)


if __name__ == "__main__":
    main()
