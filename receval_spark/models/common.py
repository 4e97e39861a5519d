"""Helpers shared by the built-in models."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.schema import ITEM, USER


def ranks_needed(users: DataFrame, *, k: int, seen: DataFrame | None) -> DataFrame:
    """(user_id, _needed): k plus the number of distinct items the user has seen (0 if none)."""
    if seen is None:
        return users.select(USER, F.lit(k).alias("_needed"))
    seen_counts = seen.groupBy(USER).agg(F.countDistinct(ITEM).alias("_n_seen"))
    return users.join(seen_counts, on=USER, how="left").select(
        USER,
        (F.lit(k) + F.coalesce(F.col("_n_seen"), F.lit(0))).cast("int").alias("_needed"),
    )
