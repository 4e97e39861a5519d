"""Top-k ranking: deterministic order, seen-item filtering, one window for every k
(docs/evaluation.md#top-k)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, SCORE, USER
from receval_spark.expressions import seeded_hash


def filter_seen_items(candidates: DataFrame, seen: DataFrame) -> DataFrame:
    """Drop each user's candidates that the user interacted with in ``seen`` (user_id, item_id)."""
    return candidates.join(seen.select(USER, ITEM).distinct(), on=[USER, ITEM], how="left_anti")


def top_k(
    candidates: DataFrame, *, k: int, by: Sequence[str] = (), positions: bool = False
) -> DataFrame:
    """R_k(u): (*by, user_id, item_id, score, rank) with rank 1..k per user (per ``by`` and
    user: e.g. every model's lists in one pass).

    Order: score descending, ties by item id ascending, so the result is the same for any
    partitioning or input order; the rank is the place in that order, so gaps in the scores or
    in an external model's ranks close (ranks 1, 3, 7 become 1, 2, 3). Users with fewer than k
    candidates keep all of them. Every smaller cut-off k' is the rows with rank <= k'.

    ``positions``: the candidates carry a ``rank`` column, the given list position of an
    external model with ``rank_semantics: positions`` (null for the other models, ranked by the
    order): such a rank is kept as given, so an empty slot stays empty and R_k(u) holds the
    items at positions <= k (docs/evaluation.md#ranks-of-an-external-model).
    """
    order = Window.partitionBy(*by, USER).orderBy(F.col(SCORE).desc(), F.col(ITEM).asc())
    place = F.row_number().over(order)
    rank = F.coalesce(F.col(RANK).cast("int"), place) if positions else place
    return candidates.select(*by, USER, ITEM, SCORE, rank.alias(RANK)).filter(F.col(RANK) <= k)


def rank_candidates(
    candidates: DataFrame,
    *,
    k: int,
    seen: DataFrame | None,
    by: Sequence[str] = (),
    positions: bool = False,
) -> DataFrame:
    """Remove seen items (when ``seen`` is given) before the cut, then keep the top k (per
    ``by`` and user; ``positions``: as :func:`top_k`, a filtered item leaves its slot empty)."""
    if seen is not None:
        candidates = filter_seen_items(candidates, seen)
    return top_k(candidates, k=k, by=by, positions=positions)


def sampled_top_k(scores: DataFrame, *, k: int, seed: int, by: Sequence[str] = ()) -> DataFrame:
    """R_k(u) of a sampled protocol (docs/evaluation.md#sampled-protocol-sampled_n): (*by,
    user_id, item_id, score, rank), rank 1..k per user (per ``by`` and user, as
    :func:`top_k`).

    A user whose every score is null (the model cannot score the user) gets no list, so scores
    0 on every metric, as under ``full``. Order: score descending (an unscored item last), equal
    scores by a seeded hash of (seed, user, item), never by item id, so an item's id cannot lift
    it above the items it ties with; item id only breaks a 64-bit hash collision.
    """
    scored = Window.partitionBy(*by, USER)
    order = Window.partitionBy(*by, USER).orderBy(
        F.col(SCORE).desc_nulls_last(), seeded_hash(seed, USER, ITEM), F.col(ITEM).asc()
    )
    return (
        scores.withColumn("_scored", F.count(SCORE).over(scored))
        .filter(F.col("_scored") > 0)
        .select(*by, USER, ITEM, SCORE, F.row_number().over(order).alias(RANK))
        .filter(F.col(RANK) <= k)
    )
