"""Custom metrics of the tests, imported by path (``custom_metrics:revenue_hit``) as a user's
own module would be (tests/ is on the path)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def revenue_hit(lists: DataFrame) -> Column:
    """Price-weighted precision: the price of the relevant list items / the price of the list."""
    relevant_price = F.sum(F.when(F.col("relevant"), F.col("price")).otherwise(F.lit(0.0)))
    return relevant_price / F.sum("price")


def mean_margin(lists: DataFrame) -> Column:
    """Mean margin of the list items (a column of the model's own rows; 0 where it has none)."""
    return F.avg(F.coalesce(F.col("margin"), F.lit(0.0)))


def provider_share(lists: DataFrame) -> DataFrame:
    """Share of a user's list slots from provider p0 (a provider-group exposure share)."""
    return lists.groupBy("model", "user_id", "k").agg(
        F.avg((F.col("provider") == "p0").cast("double")).alias("value")
    )


def mean_rank(lists: DataFrame) -> Column:
    """The mean rank of the list (≥ 1): outside bounds [0, 1] on purpose."""
    return F.avg("rank")


def misspelled(lists: DataFrame) -> Column:
    """Reads a column the table does not have."""
    return F.avg("prices")


def two_arguments(lists: DataFrame, other: DataFrame) -> Column:
    """Takes two tables: not a metric."""
    return F.avg("rank")


def provider_exposure(exposure: DataFrame) -> Column:
    """Share of all list slots of a group that show provider p0's items (a group metric)."""
    return F.sum(F.when(F.col("provider") == "p0", F.col("f")).otherwise(0.0)) / F.sum("f")
