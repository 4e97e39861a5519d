r"""Compatibility profiles: precision, recall, NDCG and MAP as Spark MLlib and Microsoft
Recommenders report them, so a number from either tool can be reproduced on our top-k lists.

Both peers run Spark MLlib's ``RankingMetrics`` (``pyspark.ml.evaluation.RankingEvaluator``
wraps it too) on one (pred, lab) pair per user: pred = the user's list in rank order (length L),
lab = the set of the user's relevant items, binary. With hit_i = [pred_i \in lab] (0-based i):

.. math::

    P@k = \frac{1}{k} \sum_{i < \min(L, k)} hit_i
    \qquad R@k = \frac{1}{|lab|} \sum_{i < \min(L, k)} hit_i

    AP@k = \frac{1}{\min(|lab|, k)} \sum_{i < \min(L, k)} hit_i \cdot
    \frac{\sum_{j \le i} hit_j}{i + 1}

    NDCG@k = \frac{\sum_{i < \min(n, L)} hit_i / \ln(i + 2)}
    {\sum_{i < \min(n, |lab|)} 1 / \ln(i + 2)} \qquad n = \min(\max(L, |lab|), k)

(``meanAveragePrecisionAt``, ``ndcgAt``; without relevance values MLlib's NDCG is binary.)

Profiles, differing only in the users averaged over:

- ``spark_mllib``: every user of ``truth``; a user without a list has pred = [] and scores 0
  (the ``RankingEvaluator`` input one builds by left-joining our lists to the truth). Given
  ``users`` (``evaluation.users: listed_or_relevant``), every one of them: MLlib averages over
  every query, and a query with an empty label set scores 0 on all four metrics (MLlib warns
  "Empty ground truth set" and returns 0), so a user with a list but no relevant item counts 0.
- ``recommenders`` (``SparkRankingEvaluation`` 1.2.1, ``relevancy_method="top_k"``): pred is
  cut at k, and users come from an *inner* join of users with at least one prediction and users
  of ``rating_true``: users without recommendations (who would score 0) are dropped, which can
  only raise the means.
  Recommenders counts every row of ``rating_true`` as relevant, so it must be given Rel(u).

Against our definitions (``metrics/accuracy.py``): P@k (divides by k even for a shorter list),
R@k and AP@k (denominator min(|Rel(u)|, k), unlike MLlib's ``meanAveragePrecision`` without k,
which divides by |lab|) are the same. NDCG differs only in the gains: binary here, 2^g - 1 of the
grade in ours; the natural log cancels in the ratio, and n changes nothing (min(n, L) =
min(L, k), min(n, |lab|) = min(|lab|, k)), so binary NDCG@k equals ours at grade 1.
Ties: Recommenders orders its predictions by ``row_number`` over the score alone (ties break
arbitrarily); here ``ranked`` carries our deterministic order (score desc, item id asc).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, USER
from receval_spark.registry import family

COMPAT_DEFINITIONS = ("spark_mllib", "recommenders")
COMPAT_METRICS = tuple(m.name for m in family("accuracy") if m.peer_defined)


def _hits(pred: Column, lab: Column, k: Column) -> Column:
    """[pred_i in lab] for i < min(L, k)."""
    return F.transform(F.slice(pred, 1, k), lambda item: F.array_contains(lab, item))


def _average_precision(hits: Column, lab_size: Column, k: Column) -> Column:
    """MLlib's averagePrecision: sum over hits of (hits so far) / (i + 1), over min(|lab|, k)."""
    start = F.struct(F.lit(0).alias("cnt"), F.lit(0.0).alias("sum"))

    def step(acc: Column, hit: Column) -> Column:
        seen = acc["cnt"]
        return F.when(
            hit.getField("hit"),
            F.struct(
                (seen + 1).alias("cnt"),
                (acc["sum"] + (seen + 1) / (hit.getField("i") + 1)).alias("sum"),
            ),
        ).otherwise(acc)

    indexed = F.transform(hits, lambda hit, i: F.struct(hit.alias("hit"), i.alias("i")))
    total = F.aggregate(indexed, start, step)["sum"]
    return F.when(lab_size > 0, total / F.least(lab_size, k)).otherwise(0.0)  # empty lab: 0


def _ndcg(pred: Column, lab: Column, k: Column) -> Column:
    """MLlib's binary ndcgAt: the loop over i < n = min(max(L, |lab|), k), natural log."""
    length, lab_size = F.size(pred), F.size(lab)
    n = F.least(F.greatest(length, lab_size), k)
    start = F.struct(F.lit(0.0).alias("dcg"), F.lit(0.0).alias("max_dcg"))

    def step(acc: Column, i: Column) -> Column:
        gain = F.lit(1.0) / F.ln(i + 2)
        hit = (i < length) & F.coalesce(F.array_contains(lab, F.get(pred, i)), F.lit(False))
        return F.struct(
            (acc["dcg"] + F.when(hit, gain).otherwise(0.0)).alias("dcg"),
            (acc["max_dcg"] + F.when(i < lab_size, gain).otherwise(0.0)).alias("max_dcg"),
        )

    # an empty lab scores 0 (MLlib); otherwise n >= 1 and the sequence is 0..n-1
    sums = F.aggregate(F.sequence(F.lit(0), F.greatest(n, F.lit(1)) - 1), start, step)
    return F.when(lab_size > 0, sums["dcg"] / sums["max_dcg"]).otherwise(0.0)


def compatible_per_user(
    ranked: DataFrame,
    truth: DataFrame,
    *,
    ks: Sequence[int],
    definitions: str,
    lists: DataFrame | None = None,
    users: DataFrame | None = None,
) -> DataFrame:
    """(user_id, *list keys, k, precision, recall, ndcg, map) under a peer's ``definitions``:
    ``spark_mllib`` or ``recommenders`` (formulas and user sets in the module docstring).

    Inputs as ``per_user_accuracy``: ``ranked`` (user_id, item_id, rank 1..max(ks), *list keys),
    ``truth`` (user_id, item_id, grade > 0; grades are ignored, relevance is binary), ``lists``
    one row per list-key combination. ``spark_mllib`` scores every truth user for every list
    (0 without a list), and with ``users`` (user_id) every one of them, a user without a row
    in ``truth`` scoring 0 (MLlib's empty label set; ``users`` must hold the truth users);
    ``recommenders`` keeps a (user, list) only when the list is not empty, and has no
    ``users`` (its inner join keeps only users with a relevant item).
    """
    if definitions not in COMPAT_DEFINITIONS:
        raise ValueError(
            f"definitions must be one of {', '.join(COMPAT_DEFINITIONS)}; got {definitions!r}"
        )
    if not ks or any(int(k) < 1 for k in ks):
        raise ValueError(f"ks must be positive cut-offs (MLlib requires k > 0); got {list(ks)}")
    if users is not None and definitions == "recommenders":
        raise ValueError("recommenders averages only users with a relevant item; no users")
    list_keys = [] if lists is None else lists.columns
    queries = _queries(ranked, truth, ks=ks, definitions=definitions, lists=lists, users=users)
    k = F.col("k")
    pred = F.col("_pred")
    if definitions == "recommenders":
        pred = F.slice(pred, 1, k)  # its top-k items only
    lab = F.col("_lab")
    hits = _hits(pred, lab, k)
    n_hits = F.size(F.filter(hits, lambda hit: hit)).cast("double")
    return queries.select(
        USER,
        *list_keys,
        k,
        (n_hits / k).alias("precision"),
        F.when(F.size(lab) > 0, n_hits / F.size(lab)).otherwise(0.0).alias("recall"),
        _ndcg(pred, lab, k).alias("ndcg"),
        _average_precision(hits, F.size(lab), k).alias("map"),
    )


def _queries(
    ranked: DataFrame,
    truth: DataFrame,
    *,
    ks: Sequence[int],
    definitions: str,
    lists: DataFrame | None,
    users: DataFrame | None,
) -> DataFrame:
    """(user_id, *list keys, k, _pred, _lab): the peer's (pred, lab) queries at every k, pred
    in rank order ([] without a list), lab the set of relevant items ([] for a user of
    ``users`` without one); the users as :func:`compatible_per_user` says."""
    list_keys = [] if lists is None else lists.columns
    labels = truth.groupBy(USER).agg(F.array_distinct(F.collect_list(ITEM)).alias("_lab"))
    if users is not None:  # an empty label set for the users without a relevant item
        labels = users.select(USER).join(labels, on=USER, how="left")
    predictions = ranked.groupBy(USER, *list_keys).agg(
        F.sort_array(F.collect_list(F.struct(RANK, ITEM)))[ITEM].alias("_pred")
    )
    if lists is not None:
        labels = labels.crossJoin(F.broadcast(lists))
    how = "left" if definitions == "spark_mllib" else "inner"
    pairs = labels.join(predictions, on=[USER, *list_keys], how=how)
    k_values = F.array(*[F.lit(int(k)) for k in ks])
    return pairs.select(
        USER,
        *list_keys,
        F.explode(k_values).alias("k"),
        F.coalesce(F.col("_pred"), F.array()).alias("_pred"),  # pred = [] without a list
        F.coalesce(F.col("_lab"), F.array()).alias("_lab"),  # lab = [] without a relevant item
    )
