"""What every benchmark shares: the measured Spark setup (see README.md)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession


def bench_session(master: str = "local[2]") -> SparkSession:
    """local[2], 8 shuffle partitions, AQE on, UI off, 6 GiB driver; workers use this Python."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(master)
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
        .getOrCreate()
    )


def counted(spark: Any, group: str, call: Callable[[], object]) -> tuple[float, int]:
    """(seconds, Spark jobs) of ``call`` under job group ``group`` (the status tracker's jobs
    of the group: a classic session)."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    started = time.monotonic()
    call()
    seconds = time.monotonic() - started
    context.setJobGroup("", "")
    return seconds, len(context.statusTracker().getJobIdsForGroup(group))
