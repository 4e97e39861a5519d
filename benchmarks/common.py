"""What every benchmark shares: the measured Spark setup (see README.md)."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import SparkSession


def bench_session(master: str = "local[2]", conf: Mapping[str, str] | None = None) -> SparkSession:
    """local[2], 8 shuffle partitions, AQE on, UI off, 6 GiB driver, then ``conf``; workers
    use this Python."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


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


def alternate_rounds(
    spark: Any, sides: Mapping[str, Callable[[], object]], rounds: int
) -> dict[str, float]:
    """Run the ``sides`` one after the other, ``rounds`` times, each :func:`counted`; print each
    call and a table of the rounds; return each side's median over the warm rounds (all but
    the first)."""
    rows: dict[str, list[tuple[float, int]]] = {side: [] for side in sides}
    for round_ in range(rounds):
        for side, call in sides.items():
            result = counted(spark, f"{side}-{round_}", call)
            rows[side].append(result)
            print(f"{side} round {round_ + 1}: {result[0]:.2f} s, {result[1]} jobs", flush=True)
    print("| side | rounds (s) | Spark jobs | median of warm rounds (s) |")
    print("|---|---|---|---:|")
    medians = {}
    for side, results in rows.items():
        medians[side] = statistics.median(s for s, _ in results[1:])
        seconds = ", ".join(f"{s:.2f}" for s, _ in results)
        jobs = ", ".join(str(j) for _, j in results)
        print(f"| {side} | {seconds} | {jobs} | {medians[side]:.2f} |")
    return medians
