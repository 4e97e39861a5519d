r"""Night-over-night stability of each model's top-k lists
(docs/evaluation.md#stability-night-over-night-outputlists): tonight's lists against the
model's lists of the previous committed run date (the ``lists`` dataset), by Spark joins on
the two nights' lists; only per (model, segment, metric, k) aggregates reach the driver.

Per user present both nights (a non-empty list at k on each), with A tonight's list at k, B
the previous night's, and X_d = |A_{1:d} ∩ B_{1:d}| (positions are the stored ranks):

.. math::

    \mathrm{Jaccard@k} = \frac{|A \cap B|}{|A \cup B|}

    \mathrm{RBO@k} = \frac{1-p}{p}\Big(\sum_{d=1}^{l}\frac{X_d}{d}p^d
        + \sum_{d=s+1}^{l}\frac{X_s (d-s)}{s\,d}p^d\Big)
        + \Big(\frac{X_l - X_s}{l} + \frac{X_s}{s}\Big)p^l

the extrapolated rank-biased overlap of Webber, Moffat & Zobel (TOIS 2010, eq. 32), with
s ≤ l the depths of the shorter and the longer list (the largest rank ≤ k of each). For two
lists k long it is eq. 30, (X_k/k)·p^k + ((1-p)/p)·Σ_{d≤k} (X_d/d)·p^d: identical lists score
1, disjoint lists 0. A common item at ranks a and b adds 1 to every X_d with d ≥ max(a, b), so
the first sum is a sum over the common items of Σ_{d=max(a,b)}^{l} p^d/d: one join on the
common items, no per-depth rows.

Exposure churn@k (one value per model): ½ Σ_i |e_i - e'_i|, e_i = the share of tonight's list
slots at k holding item i (over every list of the night), e'_i the same last night; 0 for the
same exposure, 1 for disjoint recommended items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, SCORE, USER
from receval_spark.metrics.aggregate import exact_mean, exact_std, exact_sum, union_all
from receval_spark.metrics.lists import cut_offs

JACCARD, RBO, CHURN = "stability_jaccard", "stability_rbo", "exposure_churn"
STABILITY_METRICS = (JACCARD, RBO, CHURN)
IDLE = "idle"
KEYS = ["model", USER]


@dataclass(frozen=True)
class NightLists:
    """What tomorrow's stability step needs of tonight: ``lists`` (model, user_id, rank,
    item_id, score; ids as strings: the ``lists`` dataset without run_id), the evaluated users'
    ``segments`` (user_id as a string, segment), each evaluated user's ``last_seen`` train
    interaction time (user_id, last_seen; None: the split has no timestamps) and the split's
    ``cutoff`` (ISO-8601; None: a split without one): lazy, nothing computed here."""

    lists: DataFrame
    segments: DataFrame
    last_seen: DataFrame | None
    cutoff: str | None


def night_lists(
    ranked: DataFrame, segments: DataFrame, history: DataFrame | None, cutoff: str | None
) -> NightLists:
    """:class:`NightLists` of ``ranked`` (user_id, item_id, score, rank, model), the
    population's ``segments`` and train ``history`` (its timestamp column, when it has one
    and the split a ``cutoff``: without one no user is known to be idle)."""
    lists = ranked.select(
        "model",
        F.col(USER).cast("string").alias(USER),
        F.col(RANK).cast("int").alias(RANK),
        F.col(ITEM).cast("string").alias(ITEM),
        F.col(SCORE).cast("double").alias(SCORE),
    )
    last_seen = None
    if cutoff is not None and history is not None and "timestamp" in history.columns:
        last_seen = history.groupBy(F.col(USER).cast("string").alias(USER)).agg(
            F.max("timestamp").alias("last_seen")
        )
    users = segments.select(F.col(USER).cast("string").alias(USER), "segment")
    return NightLists(lists=lists, segments=users, last_seen=last_seen, cutoff=cutoff)


def _at_cut_offs(lists: DataFrame, ks: Sequence[int]) -> DataFrame:
    """(model, user_id, item_id, rank, k): each list entry once per cut-off k ≥ its rank."""
    return lists.select(*KEYS, ITEM, RANK, F.explode(cut_offs(ks)).alias("k"))


def _sizes(lists: DataFrame, ks: Sequence[int], side: str) -> DataFrame:
    """(model, user_id, k, n_<side>, depth_<side>): each list's size and depth at every k."""
    return (
        _at_cut_offs(lists, ks)
        .groupBy(*KEYS, "k")
        .agg(F.count(F.lit(1)).alias(f"n_{side}"), F.max(RANK).alias(f"depth_{side}"))
    )


def _depth_sum(low: Column, high: Column, term: Callable[[Column], Column]) -> Column:
    """Σ_{d=low}^{high} term(d) (0 when low > high); ``term`` maps a depth column to a value."""
    total = F.aggregate(
        F.sequence(low, high),
        F.lit(0.0),
        lambda acc, d: acc + term(d.cast("double")),
    )
    return F.when(low <= high, total).otherwise(F.lit(0.0))


def list_agreement(
    tonight: DataFrame, previous: DataFrame, *, ks: Sequence[int], persistence: float
) -> DataFrame:
    """(model, user_id, k, stability_jaccard, stability_rbo, common, listed): per model and
    user with a list at k on both sides, the Jaccard similarity and RBO_ext (module docstring)
    of the two lists, |A ∩ B| and |A|. Both in the ``lists`` dataset's columns (model,
    user_id, rank, item_id); ``previous`` may be any reference list under the same keys (the
    agreement metrics: another model's lists tonight, receval_spark.metrics.agreement)."""
    p = F.lit(persistence)
    pairs = _sizes(tonight, ks, "a").join(_sizes(previous, ks, "b"), on=[*KEYS, "k"])
    pairs = pairs.withColumns(
        {"_s": F.least("depth_a", "depth_b"), "_l": F.greatest("depth_a", "depth_b")}
    )
    common = (
        tonight.select(*KEYS, ITEM, F.col(RANK).alias("_a"))
        .join(previous.select(*KEYS, ITEM, F.col(RANK).alias("_b")), on=[*KEYS, ITEM])
        .select(*KEYS, F.greatest("_a", "_b").alias("_m"))
    )
    tails = (
        common.join(pairs.select(*KEYS, "k", "_l", "_s"), on=KEYS)
        .filter(F.col("_m") <= F.col("k"))
        .groupBy(*KEYS, "k")
        .agg(
            F.count(F.lit(1)).alias("_x_l"),
            F.count(F.when(F.col("_m") <= F.col("_s"), True)).alias("_x_s"),
            exact_sum(_depth_sum(F.col("_m"), F.col("_l"), lambda d: F.pow(p, d) / d)).alias("_t1"),
        )
    )
    joined = pairs.join(tails, on=[*KEYS, "k"], how="left").fillna(
        0, subset=["_x_l", "_x_s", "_t1"]
    )
    short, depth, x_s, x_l = F.col("_s"), F.col("_l"), F.col("_x_s"), F.col("_x_l")
    t2 = x_s * _depth_sum(short + 1, depth, lambda d: (1 / short - 1 / d) * F.pow(p, d))
    tail = ((x_l - x_s) / depth + x_s / short) * F.pow(p, depth)
    rbo = (1 - p) / p * (F.col("_t1") + t2) + tail
    union = F.col("n_a") + F.col("n_b") - x_l
    return joined.select(
        *KEYS,
        F.col("k").cast("int").alias("k"),
        (x_l / union).alias(JACCARD),
        F.least(F.greatest(rbo, F.lit(0.0)), F.lit(1.0)).alias(RBO),
        x_l.alias("common"),
        F.col("n_a").alias("listed"),
    )


def exposure_churn(tonight: DataFrame, previous: DataFrame, *, ks: Sequence[int]) -> DataFrame:
    """(model, k, value, n_users): ½ Σ_i |e_i - e'_i| between the two nights' exposure shares
    at k, for the models with lists on both nights; n_users: tonight's lists at k."""

    def shares(lists: DataFrame, side: str) -> tuple[DataFrame, DataFrame]:
        slots = _at_cut_offs(lists, ks)
        counts = slots.groupBy("model", "k", ITEM).agg(F.count(F.lit(1)).alias("_f"))
        totals = slots.groupBy("model", "k").agg(
            F.count(F.lit(1)).alias("_total"), F.countDistinct(USER).alias(f"_n_{side}")
        )
        share = counts.join(totals, on=["model", "k"]).select(
            "model", "k", ITEM, (F.col("_f") / F.col("_total")).alias(f"_e_{side}")
        )
        return share, totals.select("model", "k", f"_n_{side}")

    (a, users_a), (b, users_b) = shares(tonight, "a"), shares(previous, "b")
    both = users_a.join(users_b, on=["model", "k"])
    exposure = a.join(b, on=["model", "k", ITEM], how="full").fillna(0.0, ["_e_a", "_e_b"])
    churn = exposure.groupBy("model", "k").agg(
        (F.sum(F.abs(F.col("_e_a") - F.col("_e_b"))) / 2).alias("value")
    )
    return churn.join(both, on=["model", "k"]).select(
        "model",
        F.col("k").cast("int").alias("k"),
        F.least(F.col("value"), F.lit(1.0)).alias("value"),
        F.col("_n_a").alias("n_users"),
    )


def idle_users(night: NightLists, previous_cutoff: str | None) -> DataFrame | None:
    """(user_id, segment ``idle``): tonight's evaluated users without a train interaction at
    or after the previous night's cut-off (none between the two cut-offs; a user without any
    train interaction is idle). None without timestamps or a previous cut-off."""
    if night.last_seen is None or previous_cutoff is None:
        return None
    users = night.segments.filter(F.col("segment") == "all").select(USER)
    seen = users.join(night.last_seen, on=USER, how="left")
    active = F.col("last_seen") >= F.to_timestamp(F.lit(previous_cutoff))
    return seen.filter(F.col("last_seen").isNull() | ~active).select(
        USER, F.lit(IDLE).alias("segment")
    )


def stability_aggregates(
    night: NightLists,
    previous: DataFrame,
    *,
    previous_cutoff: str | None,
    ks: Sequence[int],
    persistence: float,
) -> DataFrame:
    """(model, segment, metric, k, value, n_users, std): Jaccard@k and RBO@k averaged over the
    users present both nights by segment (tonight's segments, and ``idle``: tonight's users
    without an interaction between the two cut-offs), and exposure churn@k (segment all, std
    null). Lazy: the caller collects these few rows."""
    per_user = list_agreement(night.lists, previous, ks=ks, persistence=persistence)
    idle = idle_users(night, previous_cutoff)
    segments = union_all([f for f in (night.segments, idle) if f is not None])
    assert segments is not None  # tonight's segments are always there
    long = per_user.join(segments, on=USER).select(
        "model",
        "segment",
        "k",
        F.explode(
            F.array(
                *[
                    F.struct(F.lit(m).alias("metric"), F.col(m).alias("value"))
                    for m in (JACCARD, RBO)
                ]
            )
        ).alias("_m"),
    )
    means = long.groupBy("model", "segment", "_m.metric", "k").agg(
        exact_mean("_m.value").alias("value"),
        F.count(F.lit(1)).alias("n_users"),
        exact_std("_m.value").alias("std"),
    )
    churn = exposure_churn(night.lists, previous, ks=ks).select(
        "model",
        F.lit("all").alias("segment"),
        F.lit(CHURN).alias("metric"),
        "k",
        "value",
        "n_users",
        F.lit(None).cast("double").alias("std"),
    )
    return means.select("model", "segment", "metric", "k", "value", "n_users", "std").unionByName(
        churn
    )
