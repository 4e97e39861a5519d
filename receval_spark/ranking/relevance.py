"""Relevance: which held-out interactions count, with which grade
(docs/evaluation.md#relevance-and-evaluated-users)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import GRADE, ITEM, RATING, USER
from receval_spark.config.ranking_data import RelevanceConfig
from receval_spark.ordering import global_sum_before


def relevance_grade(
    *,
    kind: str,
    threshold: float | None = None,
    grades: Mapping[float, float] | None = None,
) -> Column:
    """The grade of one test interaction; 0 means not relevant
    (docs/evaluation.md#relevance-and-evaluated-users).

    implicit: 1. threshold: 1 if rating >= threshold else 0. graded: rating - threshold + 1 if
    rating >= threshold else 0 (1-5 stars at threshold 4: 4★ -> 1, 4.5★ -> 1.5, 5★ -> 2), or,
    with a mapping, ``grades[rating]`` looked up exactly (a rating not listed gets 0; mapped
    grades are 0 or >= 1, see ``RelevanceConfig``). A null rating is never relevant.
    """
    rating = F.col(RATING)
    if kind == "implicit":
        return F.lit(1.0)
    if kind == "threshold":
        return F.when(rating >= F.lit(threshold), 1.0).otherwise(0.0)
    if grades:
        mapped = F.lit(0.0)
        for value, grade in sorted(grades.items()):
            mapped = F.when(rating == F.lit(float(value)), F.lit(float(grade))).otherwise(mapped)
        return mapped
    assert threshold is not None  # RelevanceConfig: graded relevance without grades has one
    cut = F.lit(float(threshold))
    return F.when(rating >= cut, rating - cut + F.lit(1.0)).otherwise(F.lit(0.0))


def relevant_items(test: DataFrame, config: RelevanceConfig) -> DataFrame:
    """Rel(u) with grades: (user_id, item_id, grade > 0), duplicates collapsed to the max grade."""
    grade = relevance_grade(kind=config.kind, threshold=config.threshold, grades=config.grades)
    return (
        test.select(USER, ITEM, grade.alias(GRADE))
        .groupBy(USER, ITEM)
        .agg(F.max(GRADE).alias(GRADE))
        .filter(F.col(GRADE) > 0)
    )


ACTIVITY_QUANTILES = (0.25, 0.5, 0.75)


def activity_counts(users: DataFrame, history: DataFrame) -> DataFrame:
    """(user_id, n_train): train interactions of every evaluated user (0 for cold users)."""
    counts = history.groupBy(USER).agg(F.count(F.lit(1)).alias("n_train"))
    return (
        users.select(USER)
        .join(counts, on=USER, how="left")
        .select(USER, F.coalesce(F.col("n_train"), F.lit(0)).alias("n_train"))
    )


def activity_thresholds(counts: DataFrame) -> DataFrame:
    """One row ``thresholds``: the 25/50/75% quantiles (linear interpolation, as numpy's
    default) of the train interaction counts of the warm evaluated users."""
    return counts.filter(F.col("n_train") > 0).agg(
        F.percentile(F.col("n_train"), list(ACTIVITY_QUANTILES)).alias("thresholds")
    )


def user_segments(
    users: DataFrame,
    history: DataFrame,
    *,
    segments: Sequence[str],
    thresholds: Sequence[float] | None = None,
) -> DataFrame:
    """(user_id, segment): every evaluated user is in ``all``; ``warm`` users have train
    interactions, ``cold`` users have none; ``activity=q1..q4`` buckets warm users by their
    train interaction count c against the quartiles t1 <= t2 <= t3 of c over warm evaluated
    users (``thresholds``, :func:`activity_thresholds` collected; None when no evaluated user
    is warm): q1 c <= t1, q2 t1 < c <= t2, q3 t2 < c <= t3, q4 c > t3 (users with equal counts
    share a bucket, so buckets can differ in size). Each segment only when configured."""
    counts = activity_counts(users, history)
    warm = F.col("n_train") > 0
    names = [F.lit("all")]
    if "warm" in segments:
        names.append(F.when(warm, F.lit("warm")))
    if "cold" in segments:
        names.append(F.when(~warm, F.lit("cold")))
    if "activity" in segments and thresholds is not None:  # None: no warm user to bucket
        t = [F.lit(float(q)) for q in thresholds]
        c = F.col("n_train")
        names.append(
            F.when(~warm, None)
            .when(c <= t[0], "activity=q1")
            .when(c <= t[1], "activity=q2")
            .when(c <= t[2], "activity=q3")
            .otherwise("activity=q4")
        )
    return counts.select(USER, F.explode(F.array(*names)).alias("segment")).filter(
        F.col("segment").isNotNull()
    )


# the catalogue column of with_popularity_segment, and its head label
POPULARITY_SEGMENT, POPULARITY_HEAD = "popularity_segment", "items=head"


def with_popularity_segment(catalogue: DataFrame, *, head_share: float) -> DataFrame:
    """``catalogue`` (item_id, n_interactions, ...) with :data:`POPULARITY_SEGMENT`:
    ``items=head`` for the most popular items (by train interactions, ties by item id) up to
    the first one at which they cover ``head_share`` of all train interactions, ``items=tail``
    for the rest. Items outside the catalogue (no train interaction) are tail by definition;
    callers treat a missing item as tail."""
    order = [F.col("n_interactions").desc(), F.col(ITEM).asc()]
    covered = global_sum_before(
        catalogue, order, value="n_interactions", name="_covered_before", total="_total"
    )
    is_head = F.col("_covered_before") < F.lit(head_share) * F.col("_total")
    return covered.select(
        *catalogue.columns,
        F.when(is_head, POPULARITY_HEAD).otherwise("items=tail").alias(POPULARITY_SEGMENT),
    )


def item_popularity_segments(catalogue: DataFrame, *, head_share: float) -> DataFrame:
    """(item_id, segment) of :func:`with_popularity_segment`."""
    labelled = with_popularity_segment(catalogue, head_share=head_share)
    return labelled.select(ITEM, F.col(POPULARITY_SEGMENT).alias("segment"))


def scoped_truth(truth: DataFrame, *labellings: tuple[DataFrame, str]) -> DataFrame:
    """Rel(u) with a ``scope`` column: every row under ``all``, and again under each of its
    item segments of every labelling (item_id, segment), an item without a row there under
    the labelling's default (``items=tail`` for popularity: items outside the catalogue are
    tail). Per scope, Rel(u) is restricted to that scope's items."""
    frames = [truth.withColumn("scope", F.lit("all"))]
    for labels, missing in labellings:
        frames.append(
            truth.join(labels, on=ITEM, how="left").select(
                *truth.columns, F.coalesce(F.col("segment"), F.lit(missing)).alias("scope")
            )
        )
    return reduce(DataFrame.unionByName, frames)
