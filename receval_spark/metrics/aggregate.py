"""From wide per-user metric tables to long per-user rows and macro averages."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def union_all(frames: Sequence[DataFrame]) -> DataFrame | None:
    """The rows of all frames (matched by column name); None when there are none."""
    return reduce(lambda left, right: left.unionByName(right), frames) if frames else None


def to_long(per_user: DataFrame, *, metrics: Sequence[str], keys: Sequence[str]) -> DataFrame:
    """Unpivot metric columns: (*keys, metric, value) with one row per metric."""
    return per_user.unpivot(
        ids=list(keys),
        values=list(metrics),
        variableColumnName="metric",
        valueColumnName="value",
    )


def macro_average(per_user_long: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """Mean over users of each metric: (*by, value, n_users, std) with std the sample deviation.

    Each (group, user) must appear once, so the mean is a macro average over users.
    """
    return per_user_long.groupBy(*by).agg(
        F.avg("value").alias("value"),
        F.count(F.lit(1)).alias("n_users"),
        F.stddev_samp("value").alias("std"),
    )
