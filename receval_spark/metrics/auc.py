r"""AUC per user over the catalogue (docs/evaluation.md#auc-per-user), at every k in one pass.

The model ranks R_k(u) first, in its order, and every other item after them, tied. The
positives are Rel(u); the negatives N_u are the catalogue items outside Rel(u) and (under the
seen filter) outside u's train items, which can never be listed. AUC is the share of
(positive, negative) pairs the ranking orders correctly, a tie counting ½:

.. math::

    \mathrm{AUC@k}(u) = \frac{\sum_{j \le h} (|N_u| - n_j)
        + \tfrac12 (|Rel(u)| - h)(|N_u| - m)}{|Rel(u)| \cdot |N_u|}

with h the hits in R_k(u), n_j the listed negatives above the j-th hit and m the listed
negatives. A listed item that is neither relevant nor in the catalogue is in no pair. A user
without any listed item scores ½ (the chance level: an unranked catalogue), not 0; a user with
no negative has no value. Its mean over users is the GAUC of Elliot and RecBole
(RecBole weights users by |Rel(u)|; both rank the whole catalogue, i.e. k = |I|).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, USER
from receval_spark.metrics.lists import cut_offs

AUC = "auc"


def pair_counts(truth: DataFrame, catalogue: DataFrame, seen: DataFrame | None) -> DataFrame:
    """(user_id, _p, _n): |Rel(u)| and |N_u| per user of ``truth`` (user_id, item_id);
    ``catalogue``: (item_id) of I (item-sized: broadcast); ``seen``: (user_id, item_id) pairs
    filtered, or None."""
    members = catalogue.select(ITEM).distinct()
    flags = F.broadcast(members.withColumn("_in", F.lit(1)))
    size = members.agg(F.count(F.lit(1)).alias("_size"))
    counts = (
        truth.select(USER, ITEM)
        .distinct()
        .join(flags, on=ITEM, how="left")
        .groupBy(USER)
        .agg(F.count(F.lit(1)).alias("_p"), F.count("_in").alias("_p_in"))
    )
    excluded = F.col("_p_in")
    if seen is not None:
        seen_in = seen.select(USER, ITEM).join(flags, on=ITEM, how="left_semi")
        counts = counts.join(
            seen_in.groupBy(USER).agg(F.count(F.lit(1)).alias("_s_in")), on=USER, how="left"
        )
        excluded = excluded + F.coalesce(F.col("_s_in"), F.lit(0))
    return counts.crossJoin(F.broadcast(size)).select(
        USER, "_p", (F.col("_size") - excluded).alias("_n")
    )


def auc_per_user(
    ranked: DataFrame,
    truth: DataFrame,
    *,
    catalogue: DataFrame,
    seen: DataFrame | None,
    ks: Sequence[int],
    lists: DataFrame,
) -> DataFrame:
    """(user_id, *list keys, k, auc) for every user of ``truth`` and every list-key
    combination of ``lists`` (e.g. one row per model), from ``ranked`` (user_id, item_id,
    rank, *list keys)."""
    keys = [USER, *lists.columns]
    flagged = (
        ranked.select(*keys, ITEM, RANK)
        .join(truth.select(USER, ITEM, F.lit(True).alias("_rel")), on=[USER, ITEM], how="left")
        .join(
            F.broadcast(catalogue.select(ITEM, F.lit(True).alias("_in")).distinct()),
            on=ITEM,
            how="left",
        )
    )
    relevant = F.col("_rel").isNotNull()
    negative = (~relevant & F.col("_in").isNotNull()).cast("int")
    before = Window.partitionBy(*keys).orderBy(RANK).rowsBetween(Window.unboundedPreceding, -1)
    rows = flagged.select(
        *keys,
        RANK,
        relevant.alias("_is_rel"),
        negative.alias("_neg"),
        F.coalesce(F.sum(negative).over(before), F.lit(0)).alias("_above"),
    )
    stats = (
        rows.select("*", F.explode(cut_offs(ks)).alias("k"))
        .groupBy(*keys, "k")
        .agg(
            F.count(F.when(F.col("_is_rel"), True)).alias("_h"),
            F.coalesce(F.sum(F.when(F.col("_is_rel"), F.col("_above"))), F.lit(0)).alias("_a"),
            F.sum("_neg").alias("_m"),
        )
    )
    at_k = F.explode(F.array(*[F.lit(int(k)) for k in ks])).alias("k")
    everyone = pair_counts(truth, catalogue, seen).crossJoin(F.broadcast(lists)).select("*", at_k)
    joined = everyone.join(stats, on=[*keys, "k"], how="left").fillna(0, ["_h", "_a", "_m"])
    p, n = F.col("_p").cast("double"), F.col("_n").cast("double")
    h, above, listed = (F.col(c).cast("double") for c in ("_h", "_a", "_m"))
    correct = h * n - above + F.lit(0.5) * (p - h) * (n - listed)
    return joined.select(
        *keys, F.col("k").cast("int").alias("k"), F.when(n > 0, correct / (p * n)).alias(AUC)
    )
