"""Oracle: each user's relevant test items, best grade first (the sanity model,
docs/statistics.md#sanity-checks-in-runschecks)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import GRADE, ITEM, SCORE, USER


def oracle_candidates(truth: DataFrame) -> DataFrame:
    """(user_id, item_id, score = grade): the ideal ranking of Rel(u)."""
    return truth.select(USER, ITEM, F.col(GRADE).cast("double").alias(SCORE))


def oracle_scores(truth: DataFrame, pairs: DataFrame) -> DataFrame:
    """(user_id, item_id, score) for ``pairs``: the grade of relevant items, 0 for others."""
    return (
        pairs.select(USER, ITEM)
        .join(oracle_candidates(truth), on=[USER, ITEM], how="left")
        .select(USER, ITEM, F.coalesce(F.col(SCORE), F.lit(0.0)).alias(SCORE))
    )
