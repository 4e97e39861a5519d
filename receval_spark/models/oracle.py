"""Oracle: each user's relevant test items, best grade first (the sanity model, DESIGN §5)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.schema import GRADE, ITEM, SCORE, USER


def oracle_candidates(truth: DataFrame) -> DataFrame:
    """(user_id, item_id, score = grade): the ideal ranking of Rel(u)."""
    return truth.select(USER, ITEM, F.col(GRADE).cast("double").alias(SCORE))
