"""get_session starts Spark with a Spark home whose Python processes import the installed PySpark (with
its bytecode cache), not Spark's source zips, which every process would compile again (see
fastframe.spark._cluster.home_without_source_zips)."""

from __future__ import annotations

import os
from typing import Any, Iterator

from fastframe.spark._cluster import home_without_source_zips
from fastframe.spark.standalone import spark_home


def test_the_home_links_all_of_sparks_but_the_zips() -> None:
    real = spark_home()
    home = home_without_source_zips(real)
    assert home is not None
    assert os.path.realpath(os.path.join(home, "jars")) == os.path.realpath(os.path.join(real, "jars"))
    assert os.path.isfile(os.path.join(home, "bin", "spark-class"))
    assert any(name.endswith(".zip") for name in os.listdir(os.path.join(real, "python", "lib")))
    assert not [name for name in os.listdir(os.path.join(home, "python", "lib")) if name.endswith(".zip")]
    assert home_without_source_zips(real) == home  # made once


def test_a_folder_that_is_not_a_spark_home_gets_none(tmp_path: Any) -> None:
    (tmp_path / "python" / "lib").mkdir(parents=True)
    assert home_without_source_zips(str(tmp_path)) is None


def test_the_sessions_python_workers_import_the_installed_pyspark(spark: Any) -> None:
    def _where_pyspark_is(batches: Iterator[Any]) -> Iterator[Any]:  # (a closure: pickled whole, for the worker)
        import pyspark

        for batch in batches:
            yield batch.__class__.from_pydict({"file": [pyspark.__file__] * batch.num_rows})

    assert os.environ["SPARK_HOME"] == home_without_source_zips(spark_home())
    (row,) = spark.range(1).mapInArrow(_where_pyspark_is, "file string").collect()
    # a worker that imported the zip would name a file inside it
    assert ".zip" not in row.file and os.path.realpath(row.file).startswith(os.path.realpath(spark_home()))
