"""Helpers shared by the built-in models."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, USER
from receval_spark.ordering import offsets_before

# hash buckets of :func:`dense_ids`: a fixed number, so the numbering is a function of the id set
# alone (not of the partitioning or of spark.sql.shuffle.partitions)
ID_BUCKETS = 256
MAX_INT = 2**31 - 1


def ranks_needed(users: DataFrame, *, k: int, seen: DataFrame | None) -> DataFrame:
    """(user_id, _needed): k plus the number of distinct items the user has seen (0 if none)."""
    if seen is None:
        return users.select(USER, F.lit(k).alias("_needed"))
    seen_counts = seen.groupBy(USER).agg(F.countDistinct(ITEM).alias("_n_seen"))
    return users.join(seen_counts, on=USER, how="left").select(
        USER,
        (F.lit(k) + F.coalesce(F.col("_n_seen"), F.lit(0))).cast("int").alias("_needed"),
    )


def dense_ids(ids: DataFrame, column: str, *, name: str) -> DataFrame:
    """(column, name int): the distinct values of ``column`` numbered 0..n-1, one number per
    value (collision-free, no value merged with another), all in Spark.

    A value's bucket is xxhash64(value) mod 256; its number is the number of values in the
    buckets before its own plus its position (by value) within its bucket. Each bucket is
    numbered by its own ``row_number`` window (no single-partition window over the ids), the
    bucket sizes are a 256-row table, and the result depends only on the set of values. More
    than 2^31 - 1 values is an error (Spark ML ALS takes 32-bit ids).
    """
    distinct = (
        ids.select(column)
        .distinct()
        .withColumn("_bucket", F.pmod(F.xxhash64(column), F.lit(ID_BUCKETS)))
    )
    sizes = distinct.groupBy("_bucket").agg(F.count(F.lit(1)).alias("_amount"))
    offsets = offsets_before(sizes, key="_bucket")
    within = Window.partitionBy("_bucket").orderBy(column)
    number = F.col("_offset") + F.row_number().over(within) - 1
    return distinct.join(F.broadcast(offsets), on="_bucket").select(
        column,
        F.when(number <= MAX_INT, number.cast("int"))
        .otherwise(F.raise_error(F.lit(f"more than {MAX_INT} distinct {column} values")))
        .alias(name),
    )
