"""get_session with a local master writes checkpoints through Hadoop's FileSystem API (no fork of the
driver's JVM per file: see fastframe.spark.session); a conf that names the class wins."""

from __future__ import annotations

from typing import Any

from fastframe.spark.session import CHECKPOINT_MANAGER_KEY, file_system_checkpoint_manager


def test_the_jars_hold_the_file_system_checkpoint_manager() -> None:
    name = file_system_checkpoint_manager()
    assert name is not None and name.endswith(".FileSystemBasedCheckpointFileManager")


def test_a_local_session_checkpoints_through_the_file_system_api(spark: Any) -> None:
    assert spark.conf.get(CHECKPOINT_MANAGER_KEY) == file_system_checkpoint_manager()
