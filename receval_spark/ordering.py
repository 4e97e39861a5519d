"""Positions in one global order without moving every row into one task.

``Window.orderBy(...)`` with no ``partitionBy`` sorts the whole table in a single task (Spark
logs ``WindowExec: No Partition Defined``): fine for a table of fixed size, a bottleneck for
one that grows with items, users or sessions. Here the rows are range-partitioned on the
order (``repartitionByRange``: Spark samples the order's bounds, so the ranges are balanced
and a tie on the leading columns may still split across ranges, the full order being
unique), each range is sorted in its own task and numbered (or summed) there, and each
range's offset is the sum over the ranges before it — from a table with one row per range.

The ``order`` must be a total order (end with a unique column, e.g. the id), so the
positions are a function of the rows, whatever their partitioning.

The ranges are assigned once and materialised (:func:`receval_spark.cache.persist`) before
both the rows and the per-range totals are taken from them: Spark samples the range bounds
from its input each time it executes a range exchange, and an input whose row order varies
between executions (an aggregate after a shuffle) gets other bounds the second time. When
the two uses share one exchange (AQE's stage reuse) that is harmless; without AQE the plan
held three separate exchanges, and 1,608 ml-100k items were numbered up to 1,623 (Spark
re-samples an input partition over three times the average size with a seed from the RDD's id,
new per execution; tests/test_ordering.py reproduces it). On a local master the materialised
rows are a checkpoint; on a cluster master a cache, whose RDD is built once: a lost block is
recomputed through that RDD's own shuffle dependency, whose range partitioner (and so its
bounds) is fixed, so a recomputed range holds the same rows.
"""

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.cache import persist

_RANGE = "_range"
_ROW_BITS = 33  # monotonically_increasing_id: partition id << 33 | row number in the partition


def global_row_number(df: DataFrame, order: Sequence[Column], *, name: str) -> DataFrame:
    """``df`` with ``name`` = the row's position 1..n in ``order`` (as ``row_number`` over
    ``Window.orderBy(*order)``). Each range is sorted in its task and its rows numbered in
    that order by ``monotonically_increasing_id`` (the partition in the upper bits, the row's
    place in the partition in the lower 33), so no second shuffle numbers them."""
    sorted_ranges = df.repartitionByRange(*order).sortWithinPartitions(*order)
    numbered = persist(
        sorted_ranges.withColumn("_id", F.monotonically_increasing_id()).select(
            *df.columns,
            F.shiftright("_id", _ROW_BITS).cast("int").alias(_RANGE),
            (F.col("_id").bitwiseAND((1 << _ROW_BITS) - 1) + 1).alias("_in_range"),
        )
    )
    totals = numbered.groupBy(_RANGE).agg(F.max("_in_range").cast("long").alias("_amount"))
    return _plus_offsets(numbered, totals, name=name)


def global_sum_before(
    df: DataFrame, order: Sequence[Column], *, value: str, name: str, total: str | None = None
) -> DataFrame:
    """``df`` with ``name`` = the sum of ``value`` over the rows strictly before the row in
    ``order`` (0 for the first row; ``value`` non-null and integral, so the sum is exact), and
    with ``total`` (when named) = the sum of ``value`` over all rows, from the same per-range
    sums. Ranges are numbered in order (Spark's range partitions, and the adjacent ones
    adaptive execution may coalesce, are numbered low to high); a window partitioned by
    range sums within each."""
    ranged = persist(df.repartitionByRange(*order).withColumn(_RANGE, F.spark_partition_id()))
    before = Window.partitionBy(_RANGE).orderBy(*order).rowsBetween(Window.unboundedPreceding, -1)
    summed = ranged.withColumn(
        "_in_range", F.coalesce(F.sum(value).over(before), F.lit(0)).cast("long")
    )
    totals = summed.groupBy(_RANGE).agg(F.sum(value).cast("long").alias("_amount"))
    return _plus_offsets(summed, totals, name=name, total=total)


def _plus_offsets(
    rows: DataFrame, totals: DataFrame, *, name: str, total: str | None = None
) -> DataFrame:
    """``rows`` (with _range and _in_range, the row's value within its range) with ``name`` =
    its range's offset (:func:`offsets_before` of ``totals``) + _in_range, and ``total`` (when
    named) = the sum of every range's amount."""
    offsets = offsets_before(totals, key=_RANGE)
    columns = [c for c in rows.columns if c not in (_RANGE, "_in_range")]
    kept = [F.col("_total").alias(total)] if total is not None else []
    return rows.join(F.broadcast(offsets), on=_RANGE).select(
        *columns, (F.col("_offset") + F.col("_in_range")).alias(name), *kept
    )


def offsets_before(totals: DataFrame, *, key: str) -> DataFrame:
    """(key, _offset, _total): for each row of a small table (key, _amount), the sum of
    ``_amount`` over the rows of lower ``key`` — a running sum over a handful of rows by a
    self-join, without a window (which would have no partition) — and over all rows."""
    earlier = totals.select(F.col(key).alias("_earlier"), "_amount")
    is_earlier = F.col("_earlier") < F.col(key)
    return (
        totals.select(key)
        .crossJoin(earlier)
        .groupBy(key)
        .agg(
            F.sum(F.when(is_earlier, F.col("_amount")).otherwise(F.lit(0)))
            .cast("long")
            .alias("_offset"),
            F.sum("_amount").cast("long").alias("_total"),
        )
    )
