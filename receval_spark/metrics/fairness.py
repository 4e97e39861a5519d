r"""Exposure of item groups under position attention (docs/evaluation.md#exposure-by-item-group).

Items fall into groups (the item segment table's segments, else items=head / items=tail); an
item in several groups splits its weight w_{ig} equally among them. A list slot at rank i gets
attention a_i = 1 / log2(i + 1) (the discount of NDCG). With t the target distribution over the
groups (default: the groups' shares of the catalogue items, each item weighted as above):

.. math::

    E_g = \frac{\sum_u \sum_{i \le k} a_i w_{i g}}{\sum_u \sum_{i \le k} a_i} \qquad
    \mathrm{exposure\_gap@k} = \tfrac12 \sum_g |E_g - t_g|

the expected exposure of Diaz et al. (CIKM 2020) over the run's lists, one value per (model,
segment, k), and per user, with e_u the same distribution over u's list alone,

.. math::

    \mathrm{awrf@k}(u) = 1 - \sqrt{\mathrm{JSD}_2(e_u \,\|\, t)}

the attention-weighted rank fairness of Sapiezynski et al. (WWW 2019) in the form of the TREC
Fair Ranking track (1 minus the base-2 Jensen-Shannon distance): 1 when the list's attention is
spread over the groups exactly as the target, 0 when list and target share no group. Both
need only the groups a list holds: with J(e, t) = ½ e log2(2e / (e + t)) + ½ t log2(2t / (e + t))
and a group absent from the list contributing t/2,
JSD = ½ + Σ_{g in the list} (J(e_g, t_g) - t_g / 2), and the gap
½ (1 + Σ_{g in the lists} (|E_g - t_g| - t_g)): no row per (list, group) the list lacks.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, RANK, USER
from receval_spark.metrics.aggregate import exact_sum, exact_window_sum
from receval_spark.metrics.lists import catalogue_members, cut_offs

AWRF, EXPOSURE_GAP = "awrf", "exposure_gap"
HEAD, TAIL = "items=head", "items=tail"


def item_groups(
    *,
    segments: DataFrame | None = None,
    head: DataFrame | None = None,
) -> DataFrame:
    """(item_id, group, weight): the item segment table ``segments`` (item_id, segment), each
    item's weight split equally over its segments; or, without one, items=head for the
    ``head`` items (item_id) and nothing for the others, which are items=tail
    (:func:`with_groups`)."""
    if segments is not None:
        pairs = segments.select(ITEM, F.col("segment").alias("group")).distinct()
        counts = pairs.groupBy(ITEM).agg(F.count(F.lit(1)).alias("_n"))
        return pairs.join(counts, on=ITEM).select(
            ITEM, "group", (F.lit(1.0) / F.col("_n")).alias("weight")
        )
    assert head is not None  # without an item segment table the groups are head and tail
    return head.select(ITEM, F.lit(HEAD).alias("group"), F.lit(1.0).alias("weight"))


def with_groups(rows: DataFrame, groups: DataFrame, *, default: str) -> DataFrame:
    """``rows`` (with item_id) once per group of the item, with its ``weight``; an item of no
    group is in ``default`` (items=tail, or the segment table's unassigned) with weight 1."""
    joined = rows.join(F.broadcast(groups), on=ITEM, how="left")  # item-sized
    return joined.select(
        *rows.columns,
        F.coalesce(F.col("group"), F.lit(default)).alias("group"),
        F.coalesce(F.col("weight"), F.lit(1.0)).alias("weight"),
    )


def catalogue_targets(catalogue: DataFrame, groups: DataFrame, *, default: str) -> DataFrame:
    """(group, target): each group's share of the catalogue items I (weighted as the items'
    groups), the default target distribution t."""
    members = with_groups(catalogue_members(catalogue).select(ITEM), groups, default=default)
    shares = members.groupBy("group").agg(exact_sum("weight").alias("_w"))
    total = members.agg(exact_sum("weight").alias("_total"))
    return shares.crossJoin(total).select("group", (F.col("_w") / F.col("_total")).alias("target"))


def attention() -> Column:
    """a_i = 1 / log2(i + 1) of the row's rank i."""
    return F.lit(1.0) / F.log2(F.col(RANK).cast("double") + F.lit(1.0))


def group_attention(
    ranked: DataFrame,
    groups: DataFrame,
    *,
    keys: Sequence[str],
    ks: Sequence[int],
    default: str,
) -> DataFrame:
    """(*keys, k, group, attention): Σ a_i w_ig over each list's (``keys``) slots of rank <= k,
    for the groups the list holds; partitioned by user (the slots' one shuffle), so that awrf's
    window and aggregation, a join with user segments and the users' influence on the gap add
    no shuffle of their own."""
    lists = ranked.select(*keys, ITEM, RANK).repartition(USER)
    slots = lists.select(*keys, ITEM, RANK, F.explode(cut_offs(ks)).alias("k"))
    weighted = with_groups(slots, groups, default=default)
    return weighted.groupBy(*keys, "k", "group").agg(
        exact_sum(attention() * F.col("weight")).alias("attention")
    )


def _jensen_term(e: Column, t: Column) -> Column:
    """J(e, t) - t/2 of the module docstring (0·log 0 = 0; e > 0 here)."""
    m = e + t
    own = F.lit(0.5) * e * F.log2(F.lit(2.0) * e / m)
    target = F.when(t > 0, F.lit(0.5) * t * F.log2(F.lit(2.0) * t / m)).otherwise(F.lit(0.0))
    return own + target - t / 2


def awrf(attended: DataFrame, targets: DataFrame, *, keys: Sequence[str]) -> DataFrame:
    """(*keys, k, awrf) per list from :func:`group_attention` rows (keys end with user_id)."""
    keys = list(keys)
    share = F.col("attention") / exact_window_sum("attention", Window.partitionBy(*keys, "k"))
    rows = attended.select(*keys, "k", "group", share.alias("_e")).join(
        F.broadcast(targets), on="group", how="left"
    )
    t = F.coalesce(F.col("target"), F.lit(0.0))
    divergence = rows.groupBy(*keys, "k").agg(
        (F.lit(0.5) + exact_sum(_jensen_term(F.col("_e"), t))).alias("_jsd")
    )
    distance = F.sqrt(F.greatest(F.col("_jsd"), F.lit(0.0)))
    return divergence.select(*keys, "k", F.least(F.lit(1.0) - distance, F.lit(1.0)).alias(AWRF))


def exposure_gap(attended: DataFrame, targets: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, k, exposure_gap, n_users, std) from :func:`group_attention` rows (with user_id)
    summed over the users of each (*by, k) group of lists; ``std`` is the deviation of the
    users' linearised contributions (:func:`_influence`), so that std / sqrt(n_users) is the
    delta-method standard error of the gap."""
    by = [*by, "k"]
    sums = attended.groupBy(*by, "group").agg(exact_sum("attention").alias("_a_g"))
    whole = Window.partitionBy(*by)
    shares = sums.select(
        *by, "group", (F.col("_a_g") / exact_window_sum("_a_g", whole)).alias("_e")
    ).join(F.broadcast(targets), on="group", how="left")
    t = F.coalesce(F.col("target"), F.lit(0.0))
    side = F.signum(F.col("_e") - t)
    # a row per (list group, item group), read by the gaps and by every user's influence
    groups = persist(shares.select(*by, "group", "_e", t.alias("_t"), side.alias("_side")))
    gaps = groups.groupBy(*by).agg(
        (
            F.lit(0.5) * (F.lit(1.0) + exact_sum(F.abs(F.col("_e") - F.col("_t")) - F.col("_t")))
        ).alias(EXPOSURE_GAP),
        exact_sum(F.col("_side") * F.col("_e")).alias("_s"),
    )
    return _influence(attended, groups, gaps, by=by)


def _deviation(squares: Column, n: Column) -> Column:
    """sqrt(squares / (n - 1)) of n values with mean 0; null for a single value."""
    return F.when(n > 1, F.sqrt(squares / (n - 1)))


def _influence(
    attended: DataFrame, groups: DataFrame, gaps: DataFrame, *, by: Sequence[str]
) -> DataFrame:
    """The gaps with n_users and the deviation of z_u = U / (2A) · (Σ_g s_g a_ug - a_u S), the
    influence of user u on the gap: s_g = sign(E_g - t_g), a_ug u's attention on g, a_u = Σ_g
    a_ug, A = Σ_u a_u, S = Σ_g s_g E_g, U users (mean 0 over the users). U / (2A) is the same
    for every user of a group of lists, so one aggregation gives U, A and Σ_u (z_u 2A / U)²."""
    user = [*by, USER]
    per_user = (
        attended.join(F.broadcast(groups.select(*by, "group", "_side")), on=[*by, "group"])
        .groupBy(*user)
        .agg(
            exact_sum(F.col("_side") * F.col("attention")).alias("_signed"),
            exact_sum("attention").alias("_a_u"),
        )
        .join(F.broadcast(gaps.select(*by, "_s")), on=list(by))  # a row per group of lists
    )
    unscaled = F.col("_signed") - F.col("_a_u") * F.col("_s")
    totals = per_user.groupBy(*by).agg(
        F.count(F.lit(1)).alias("n_users"),
        exact_sum("_a_u").alias("_a"),
        exact_sum(unscaled * unscaled).alias("_dd"),
    )
    scale = F.col("n_users") / (F.lit(2.0) * F.col("_a"))
    spread = totals.select(
        *by, "n_users", (scale * _deviation(F.col("_dd"), F.col("n_users"))).alias("std")
    )
    return gaps.join(F.broadcast(spread), on=list(by)).select(*by, EXPOSURE_GAP, "n_users", "std")
