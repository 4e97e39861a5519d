r"""Novelty and serendipity of one user's top-k list.

p(i) = max(train users of i, 1) / train users, in the catalogue I or not: the floor gives an
item without train users (a catalogue item never interacted with, or an item outside I)
p = 1 / train users, so novelty does not depend on I (docs/evaluation.md#catalogue); Rel(u)
the user's relevant items; an item is expected for u when a primitive recommender (the
popularity list, or a content profile) would show it.

.. math::

    Novelty(u) = \frac{1}{|R_k(u)|} \sum_{i \in R_k(u)} -\log_2 p(i) \qquad
    Serendipity(u) = \frac{|\{i \in R_k(u) \cap Rel(u) : i \text{ not expected for } u\}|}{k}

Definitions: docs/evaluation.md, section "Beyond-accuracy metrics".
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, USER
from receval_spark.metrics.diversity import vector_sum
from receval_spark.metrics.lists import BeyondInputs

NOVELTY = "novelty"
SERENDIPITY = "serendipity"


def with_train_users(rows: DataFrame, catalogue: DataFrame, totals: DataFrame) -> DataFrame:
    """The list rows with ``n_users`` (train users of the item, from the item table
    ``catalogue``, in I or not; null for an item that is neither) and ``n_train_users``,
    what :func:`self_information` reads."""
    rows = rows.join(catalogue.select(ITEM, "n_users"), on=ITEM, how="left")
    return rows.crossJoin(F.broadcast(totals.select("n_train_users")))


def self_information() -> Column:
    """-log2 p(i), p(i) = max(n_users, 1) / n_train_users (:func:`with_train_users`): a list
    item's novelty, whose mean over the list is the novelty of Zhou et al., "Solving the
    apparent diversity-accuracy dilemma of recommender systems" (PNAS 2010); an item without
    train users counts as seen by one."""
    n_users = F.greatest(F.coalesce(F.col("n_users"), F.lit(0)), F.lit(1))
    p = n_users / F.col("n_train_users").cast("double")
    return -F.log2(p)


def content_expected(
    lists: DataFrame, history: DataFrame, units: DataFrame, *, threshold: float
) -> DataFrame:
    """(user_id, item_id): list items whose cosine to the user's train profile is >= threshold.

    The profile is the sum of the unit vectors of the user's train items (its direction is
    their mean); items or users without an embedding count as expected (not surprising). The
    content-based unexpectedness of Kaminskas and Bridge, "Diversity, serendipity, novelty,
    and coverage" (ACM TiiS, 2016), cut at a threshold.
    """
    profiles = (
        history.select(USER, ITEM)
        .distinct()
        .join(units, on=ITEM)
        .groupBy(USER)
        .agg(vector_sum(F.collect_list("unit")).alias("_profile"))
    )
    pairs = lists.select(USER, ITEM).distinct()
    dot = F.aggregate(
        F.zip_with("unit", "_profile", lambda a, b: a * b),
        F.lit(0.0),
        lambda acc, x: acc + x,
    )
    norm = F.sqrt(F.aggregate("_profile", F.lit(0.0), lambda acc, x: acc + x * x))
    scored = pairs.join(units, on=ITEM, how="left").join(profiles, on=USER, how="left")
    cosine = dot / norm
    return scored.filter(
        F.col("unit").isNull() | F.col("_profile").isNull() | (cosine >= F.lit(threshold))
    ).select(USER, ITEM)


def surprising_counts(
    rows: DataFrame, inputs: BeyondInputs, *, keys: Sequence[str], ks: Sequence[int]
) -> DataFrame:
    """(*keys, ``_surprising_<k>`` for k in ``ks``) from ranking ``rows`` (*keys, item_id,
    rank): per ranking, the relevant items at rank <= k that are not expected at k (their
    smallest rank in ``inputs.expected`` is above k, or they have none). Only rankings holding a
    relevant item get a row: the relevant rows are joined with their expected ranks, nothing
    else.

    Divided by k, the serendipity of Ge, Delgado-Battenfeld and Jannach, "Beyond accuracy:
    evaluating recommender systems by coverage and serendipity" (RecSys 2010): useful (relevant)
    and unexpected (absent from a primitive recommender's list).
    """
    user_keys = [USER, ITEM]
    hits = rows.join(inputs.truth.select(*user_keys), on=user_keys, how="left_semi")
    expected = inputs.expected.groupBy(*user_keys).agg(F.min(RANK).alias("_expected"))
    scored = hits.join(expected, on=user_keys, how="left")
    counts = [
        F.count(
            F.when((F.col(RANK) <= k) & F.coalesce(F.col("_expected") > k, F.lit(True)), True)
        ).alias(f"_surprising_{k}")
        for k in ks
    ]
    return scored.groupBy(*keys).agg(*counts)
