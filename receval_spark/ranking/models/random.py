"""Seeded random baseline: uniform draws from the train catalogue, per user, without replacement."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, SCORE, USER
from receval_spark.expressions import seeded_hash
from receval_spark.ordering import global_row_number
from receval_spark.ranking.models.common import ranks_needed

_OVERSAMPLE = 2
_EXTRA_DRAWS = 10


def random_candidates(
    history: DataFrame, users: DataFrame, *, k: int, seen: DataFrame | None, seed: int
) -> DataFrame:
    """Random items for each user; the same output for any partitioning or input order.

    Draw j (j = 1..2·(k + |seen(u)|) + 10) of user u is catalogue item number
    hash(seed, u, j) mod |I|, items numbered by id. Repeated items keep their first draw and
    score = -j, so the ranking is the draw order: a uniform sample without replacement,
    without scoring users x items. With a catalogue barely larger than k + |seen(u)| a user
    may get fewer than k items.
    """
    catalogue = history.select(ITEM).distinct()
    numbered = global_row_number(catalogue, [F.col(ITEM).asc()], name="_number").select(
        ITEM, (F.col("_number") - 1).alias("_index")
    )
    size = catalogue.agg(F.count(F.lit(1)).alias("_n_items"))
    draws = (
        ranks_needed(users, k=k, seen=seen)
        .select(
            USER,
            F.explode(F.sequence(F.lit(1), F.col("_needed") * _OVERSAMPLE + _EXTRA_DRAWS)).alias(
                "_draw"
            ),
        )
        .crossJoin(F.broadcast(size))
        .select(
            USER,
            "_draw",
            F.pmod(seeded_hash(seed, USER, "_draw"), F.col("_n_items")).alias("_index"),
        )
    )
    return (
        draws.join(numbered, on="_index")
        .groupBy(USER, ITEM)
        .agg((-F.min("_draw")).cast("double").alias(SCORE))
    )


def random_scores(pairs: DataFrame, *, seed: int) -> DataFrame:
    """(user_id, item_id, score) for ``pairs``: a seeded hash of (user, item), so each user's
    items come in a uniformly random order, the same for any partitioning."""
    return pairs.select(USER, ITEM, seeded_hash(seed, USER, ITEM).cast("double").alias(SCORE))
