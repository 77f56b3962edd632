"""A streaming query in a process of its own, for tests that kill it: stomp source -> checkpointed Parquet.

    python stream_query.py OPTIONS_JSON OUT CHECKPOINT

Runs until the source has nothing more (processAllAvailable), then stops; prints each batch id as it ends.
"""

from __future__ import annotations

import json
import sys

from fastframe.spark.session import get_session


def main() -> None:
    options, out, checkpoint = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    spark = get_session("local[2]", app_name="fastframe-stream-query", conf={"spark.sql.shuffle.partitions": "2"})
    reader = spark.readStream.format("stomp")
    for name, value in options.items():
        reader = reader.option(name, value)
    query = reader.load().writeStream.format("parquet").option("checkpointLocation", checkpoint).start(out)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
        spark.stop()
    print("done", flush=True)


if __name__ == "__main__":
    main()
