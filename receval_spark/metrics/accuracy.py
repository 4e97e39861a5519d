r"""Ranking accuracy per user at every k in one pass, and their macro averages
(docs/evaluation.md, Accuracy metrics).

With R_k(u) the top-k list, rel_i = 1 if the item at rank i is in Rel(u), g_i its grade:

.. math::

    P@k = hits@k / k \qquad R@k = hits@k / |Rel(u)| \qquad HR@k = [hits@k \ge 1]

    MRR@k = 1 / \min\{i \le k : rel_i = 1\} \ (0 \text{ if none})

    AP@k = \frac{1}{\min(k, |Rel(u)|)} \sum_{i \le k} P@i \cdot rel_i

    NDCG@k = \frac{\sum_{i \le k} (2^{g_i} - 1) / \log_2(i + 1)}{IDCG@k}
    \qquad ARHR@k = \frac{1}{|Rel(u)|} \sum_{i \le k} rel_i / i

    F1@k = 2 P R / (P + R) \ (0 \text{ when both are } 0) \qquad
    F_\beta@k = (1 + \beta^2) P R / (\beta^2 P + R)

    RP@k = hits@\min(k, |Rel(u)|) / \min(k, |Rel(u)|) \qquad
    RBP@k = (1 - p) \sum_{i \le k} rel_i \, p^{i - 1}

RP@k is R-precision (Manning et al. 2008, §8.4) wherever |Rel(u)| <= k; RBP is Moffat & Zobel's
rank-biased precision (ACM TOIS 2008) with binary rel_i and persistence p, without its residual.
Only recommended *relevant* items carry signal, so the work is a join of the top-k lists with
Rel(u), a window over those hits, and one aggregation by (user, k); P@i at a hit of rank i is
(number of hits at rank <= i) / i. Users in Rel with no recommendation score 0 everywhere;
an evaluated user with an empty Rel(u) (``evaluation.users: listed_or_relevant``) scores 0 on
every metric too (:func:`empty_truth_scores`), as Spark MLlib scores an empty label set.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from receval_spark import config
from receval_spark.columns import GRADE, ITEM, RANK, USER
from receval_spark.metrics.aggregate import exact_sum
from receval_spark.metrics.auc import AUC

# the metrics of per_user_accuracy: every accuracy metric but the AUC, which also reads the
# catalogue (receval_spark.metrics.auc)
ACCURACY_METRICS = tuple(m for m in config.ACCURACY_METRICS if m != AUC)

DEFAULT_F_BETA = 2.0
DEFAULT_RBP_PERSISTENCE = 0.8


def _gain(grade: Column) -> Column:
    """Exponential gain 2^g - 1 (1 for binary relevance)."""
    return F.pow(F.lit(2.0), grade) - F.lit(1.0)


def _discount(position: Column) -> Column:
    return F.log2(position.cast("double") + F.lit(1.0))


def _explode_ks(df: DataFrame, position: str, ks: Sequence[int]) -> DataFrame:
    """One row per k >= position: the row counts towards every cut-off that includes it."""
    exploded = df.withColumn("k", F.explode(F.array(*[F.lit(int(k)) for k in ks])))
    return exploded.filter(F.col(position) <= F.col("k"))


def ideal_dcg(truth: DataFrame, *, ks: Sequence[int], keys: Sequence[str] = ()) -> DataFrame:
    """(user_id, *keys, k, n_relevant, idcg): |Rel(u)| and the DCG of u's sorted grades at k.

    ``keys`` are extra truth columns (e.g. an item segment) that scope Rel(u).
    """
    user = Window.partitionBy(USER, *keys)
    ideal = truth.select(
        USER,
        *keys,
        GRADE,
        F.row_number().over(user.orderBy(F.col(GRADE).desc(), F.col(ITEM).asc())).alias("_pos"),
        F.count(F.lit(1)).over(user).alias("n_relevant"),
    )
    return (
        _explode_ks(ideal, "_pos", ks)
        .groupBy(USER, *keys, "k")
        .agg(
            F.first("n_relevant").alias("n_relevant"),
            exact_sum(_gain(F.col(GRADE)) / _discount(F.col("_pos"))).alias("idcg"),
        )
    )


def hit_statistics(
    ranked: DataFrame,
    truth: DataFrame,
    *,
    ks: Sequence[int],
    list_keys: Sequence[str] = (),
    truth_keys: Sequence[str] = (),
    rbp_persistence: float = DEFAULT_RBP_PERSISTENCE,
) -> DataFrame:
    """(user_id, *list_keys, *truth_keys, k, hits, first_hit, precision_sum, dcg,
    reciprocal_sum, r_hits, rbp_sum) over the recommended relevant items at ranks <= k
    (r_hits: those at ranks <= |Rel(u)| too; rbp_sum: Σ p^(rank - 1))."""
    keys = [USER, *list_keys, *truth_keys]
    relevant = truth.select(
        USER,
        ITEM,
        GRADE,
        *truth_keys,
        F.count(F.lit(1)).over(Window.partitionBy(USER, *truth_keys)).alias("_n_relevant"),
    )
    hits = ranked.select(USER, ITEM, RANK, *list_keys).join(relevant, on=[USER, ITEM])
    by_rank = Window.partitionBy(*keys).orderBy(F.col(RANK))
    hits = hits.withColumn("_hits_so_far", F.row_number().over(by_rank))
    rank = F.col(RANK).cast("double")
    within_r = F.col(RANK) <= F.least(F.col("k"), F.col("_n_relevant"))
    return (
        _explode_ks(hits, RANK, ks)
        .groupBy(*keys, "k")
        .agg(
            F.count(F.lit(1)).alias("hits"),
            F.min(RANK).alias("first_hit"),
            exact_sum(F.col("_hits_so_far") / rank).alias("precision_sum"),
            exact_sum(_gain(F.col(GRADE)) / _discount(F.col(RANK))).alias("dcg"),
            exact_sum(F.lit(1.0) / rank).alias("reciprocal_sum"),
            F.count(F.when(within_r, F.lit(1))).alias("r_hits"),
            exact_sum(F.pow(F.lit(float(rbp_persistence)), rank - 1)).alias("rbp_sum"),
        )
    )


def per_user_accuracy(
    ranked: DataFrame,
    truth: DataFrame,
    *,
    ks: Sequence[int],
    lists: DataFrame | None = None,
    truth_keys: Sequence[str] = (),
    f_beta: float = DEFAULT_F_BETA,
    rbp_persistence: float = DEFAULT_RBP_PERSISTENCE,
) -> DataFrame:
    """(user_id, *list keys, *truth_keys, k, <ACCURACY_METRICS>) for every evaluated user and k.

    ``ranked``: (user_id, item_id, rank, *list keys) with rank 1..max(ks); ``truth``:
    (user_id, item_id, grade > 0, *truth_keys). Evaluated users are the users of ``truth``
    (per truth key); those without a hit score 0. ``lists`` holds every combination of the
    list keys (e.g. one row per model) so that a model without any recommendation for a user
    still scores 0 for that user; its columns are the list keys. Precision divides by k even
    where the list is shorter than k.
    """
    list_keys = [] if lists is None else lists.columns
    ideal = ideal_dcg(truth, ks=ks, keys=truth_keys)
    if lists is not None:
        ideal = ideal.crossJoin(F.broadcast(lists))
    stats = hit_statistics(
        ranked,
        truth,
        ks=ks,
        list_keys=list_keys,
        truth_keys=truth_keys,
        rbp_persistence=rbp_persistence,
    )
    joined = ideal.join(stats, on=[USER, *list_keys, *truth_keys, "k"], how="left")
    hits = F.coalesce(F.col("hits"), F.lit(0)).cast("double")
    k = F.col("k").cast("double")
    n_rel = F.col("n_relevant").cast("double")
    precision = hits / k
    recall = hits / n_rel
    beta2 = F.lit(float(f_beta) ** 2)
    return joined.select(
        USER,
        *list_keys,
        *truth_keys,
        F.col("k").cast("int").alias("k"),
        precision.alias("precision"),
        recall.alias("recall"),
        F.when(hits > 0, 1.0).otherwise(0.0).alias("hit_rate"),
        F.coalesce(F.lit(1.0) / F.col("first_hit"), F.lit(0.0)).alias("mrr"),
        (F.coalesce(F.col("precision_sum"), F.lit(0.0)) / F.least(k, n_rel)).alias("map"),
        (F.coalesce(F.col("dcg"), F.lit(0.0)) / F.col("idcg")).alias("ndcg"),
        (F.coalesce(F.col("reciprocal_sum"), F.lit(0.0)) / n_rel).alias("arhr"),
        F.when(hits > 0, 2 * precision * recall / (precision + recall)).otherwise(0.0).alias("f1"),
        F.when(hits > 0, (1 + beta2) * precision * recall / (beta2 * precision + recall))
        .otherwise(0.0)
        .alias("f_beta"),
        (F.coalesce(F.col("r_hits"), F.lit(0)).cast("double") / F.least(k, n_rel)).alias(
            "r_precision"
        ),
        (F.lit(1.0 - rbp_persistence) * F.coalesce(F.col("rbp_sum"), F.lit(0.0))).alias("rbp"),
    )


def empty_truth_scores(
    users: DataFrame,
    truth: DataFrame,
    *,
    ks: Sequence[int],
    lists: DataFrame | None = None,
) -> DataFrame:
    """(user_id, *list keys, k, <ACCURACY_METRICS>) of 0.0 for every user of ``users`` without
    a row in ``truth``: an evaluated user with an empty Rel(u) (``evaluation.users:
    listed_or_relevant``, docs/evaluation.md#relevance-and-evaluated-users) scores 0 on every
    accuracy metric whatever their list holds (recall, AP and NDCG would divide by 0; Spark
    MLlib's ``RankingMetrics`` returns 0 for an empty label set). ``lists``: one row per
    list-key combination, as for :func:`per_user_accuracy`, whose columns these rows match.
    """
    empty = users.select(USER).join(truth.select(USER), on=USER, how="left_anti")
    if lists is not None:
        empty = empty.crossJoin(F.broadcast(lists))
    list_keys = [] if lists is None else lists.columns
    k_values = F.array(*[F.lit(int(k)) for k in ks])
    return empty.select(
        USER,
        *list_keys,
        F.explode(k_values).alias("k"),  # int literals, as per_user_accuracy's k
        *[F.lit(0.0).alias(metric) for metric in ACCURACY_METRICS],  # auc: no value
    )
