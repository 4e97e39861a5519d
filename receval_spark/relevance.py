"""Relevance: which held-out interactions count, with which grade (DESIGN §3)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from receval_spark.config import RelevanceConfig
from receval_spark.schema import GRADE, ITEM, RATING, USER


def relevance_grade(
    *, kind: str, threshold: float | None = None, grades: Mapping[float, float] | None = None
) -> Column:
    """The grade of one test interaction.

    implicit: 1; threshold: 1 if rating >= threshold else 0; graded: the rating, or
    ``grades[rating]`` when a mapping is given (unmapped ratings 0). Grades <= 0 are not relevant.
    """
    rating = F.col(RATING)
    if kind == "implicit":
        return F.lit(1.0)
    if kind == "threshold":
        return F.when(rating >= F.lit(threshold), 1.0).otherwise(0.0)
    if not grades:
        return rating
    mapped = F.lit(0.0)
    for value, grade in sorted(grades.items()):
        mapped = F.when(rating == F.lit(float(value)), F.lit(float(grade))).otherwise(mapped)
    return mapped


def relevant_items(test: DataFrame, config: RelevanceConfig) -> DataFrame:
    """Rel(u) with grades: (user_id, item_id, grade > 0), duplicates collapsed to the max grade."""
    grade = relevance_grade(kind=config.kind, threshold=config.threshold, grades=config.grades)
    return (
        test.select(USER, ITEM, grade.alias(GRADE))
        .groupBy(USER, ITEM)
        .agg(F.max(GRADE).alias(GRADE))
        .filter(F.col(GRADE) > 0)
    )


def user_segments(users: DataFrame, history: DataFrame, *, segments: list[str]) -> DataFrame:
    """(user_id, segment): every evaluated user is in ``all``; ``warm`` users have train
    interactions, ``cold`` users have none (each only when configured)."""
    labelled = users.select(USER).join(
        history.select(USER).distinct().withColumn("_warm", F.lit(True)), on=USER, how="left"
    )
    warm = F.coalesce(F.col("_warm"), F.lit(False))
    names = [F.lit("all")]
    if "warm" in segments:
        names.append(F.when(warm, F.lit("warm")))
    if "cold" in segments:
        names.append(F.when(~warm, F.lit("cold")))
    return labelled.select(USER, F.explode(F.array(*names)).alias("segment")).filter(
        F.col("segment").isNotNull()
    )
