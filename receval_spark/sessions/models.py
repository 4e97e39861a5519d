"""Session-based next-item baselines (docs/sessions.md), trained on the train sessions in Spark.

Every model turns prediction events (session_id, position, item_id = the prefix's last item,
target_id) into ranked lists (session_id, position, item_id, rank) with rank 1..k. Ties are
broken by item id ascending, so lists do not depend on partitioning.
"""

from __future__ import annotations

import math

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, POSITION, RANK, SCORE, SESSION
from receval_spark.expressions import cosine_order
from receval_spark.ordering import global_row_number

EVENT = [SESSION, POSITION]


def item_clicks(train: DataFrame) -> DataFrame:
    """(item_id, clicks, pop_rank): train clicks per item, ranked by clicks desc, item id asc."""
    clicks = train.groupBy(ITEM).agg(F.count(F.lit(1)).alias("clicks"))
    return global_row_number(clicks, [F.col("clicks").desc(), F.col(ITEM).asc()], name="pop_rank")


def rank_per_event(candidates: DataFrame, *order: Column, k: int) -> DataFrame:
    """(session_id, position, item_id, rank): the first k candidates of each event in
    ``order``, then item id ascending."""
    window = Window.partitionBy(*EVENT).orderBy(*order, F.col(ITEM).asc())
    return candidates.select(*EVENT, ITEM, F.row_number().over(window).alias(RANK)).filter(
        F.col(RANK) <= k
    )


def pop_lists(events: DataFrame, train: DataFrame, *, k: int) -> DataFrame:
    """POP: the k items with the most train clicks, for every event."""
    top = item_clicks(train).filter(F.col("pop_rank") <= k)
    return (
        events.select(*EVENT)
        .crossJoin(F.broadcast(top))
        .select(*EVENT, ITEM, F.col("pop_rank").alias(RANK))
    )


def s_pop_lists(events: DataFrame, test: DataFrame, train: DataFrame, *, k: int) -> DataFrame:
    """S-POP: the prefix's items by their clicks in the prefix (ties by train clicks), then
    POP's items not in the prefix.

    The prefix of event i is read from the session's item occurrence positions (one row per
    distinct item of the session, positions as an array), so an event costs its prefix's
    distinct items, never a copy of the prefix. Among the 2k most popular items at least k
    are outside a prefix of fewer than k items, so they suffice for the fill.
    """
    occurrences = test.groupBy(SESSION, ITEM).agg(
        F.array_sort(F.collect_list(POSITION)).alias("_positions"),
        F.min(POSITION).alias("_first"),
    )
    popularity = item_clicks(train)
    prefix = (
        events.select(*EVENT)
        .join(occurrences, on=SESSION)
        .filter(F.col("_first") <= F.col(POSITION))
        .select(
            *EVENT,
            ITEM,
            F.size(F.filter("_positions", lambda p: p <= F.col(POSITION))).alias("_count"),
        )
        .join(popularity.select(ITEM, "clicks"), on=ITEM, how="left")
        .select(*EVENT, ITEM, F.lit(1).alias("_in_prefix"), "_count", "clicks")
    )
    fill = (
        events.select(*EVENT)
        .crossJoin(F.broadcast(popularity.filter(F.col("pop_rank") <= 2 * k)))
        .join(prefix.select(*EVENT, ITEM), on=[*EVENT, ITEM], how="left_anti")
        .select(*EVENT, ITEM, F.lit(0).alias("_in_prefix"), F.lit(0).alias("_count"), "clicks")
    )
    return rank_per_event(
        prefix.unionByName(fill),
        F.col("_in_prefix").desc(),
        F.col("_count").desc(),
        F.coalesce(F.col("clicks"), F.lit(0)).desc(),
        k=k,
    )


def markov_lists(events: DataFrame, train: DataFrame, *, k: int) -> DataFrame:
    """First-order Markov: items by the count of train transitions (s_i -> s_{i+1}) from the
    prefix's last item; events whose last item has no observed successor get no list."""
    order = Window.partitionBy(SESSION).orderBy(POSITION)
    transitions = (
        train.select(ITEM, F.lead(ITEM).over(order).alias("_next"))
        .filter(F.col("_next").isNotNull())
        .groupBy(ITEM, "_next")
        .agg(F.count(F.lit(1)).alias(SCORE))
    )
    return _neighbour_lists(events, transitions, k=k)


def item_knn_lists(
    events: DataFrame, train: DataFrame, *, k: int, neighbours: int, shrinkage: float = 0.0
) -> DataFrame:
    """Item-KNN: the last item's ``neighbours`` nearest items by the shrunk cosine of binary
    session vectors, |S_i ∩ S_j| / (sqrt(|S_i| |S_j|) + shrinkage) over train sessions (S_i:
    the train sessions holding item i; shrinkage 0 is the cosine), top k of them.

    Shrinkage 0 compares the cosines exactly, as the rationals |S_i ∩ S_j|² / |S_j| of the last
    item's neighbours (:func:`cosine_order`, items in up to 10^9 sessions), so mathematically
    equal cosines (1/√1120 and 3/√10080) tie and go by item id. A shrunk cosine is irrational
    in general and is compared as its double."""
    occurrences = train.select(SESSION, ITEM).distinct()
    support = occurrences.groupBy(ITEM).agg(F.count(F.lit(1)).alias("_support"))
    pairs = (
        occurrences.join(occurrences.withColumnRenamed(ITEM, "_next"), on=SESSION)
        .filter(F.col(ITEM) != F.col("_next"))
        .groupBy(ITEM, "_next")
        .agg(F.count(F.lit(1)).alias("_both"))
    )
    similarity = pairs.join(support, on=ITEM).join(
        support.withColumnRenamed(ITEM, "_next").withColumnRenamed("_support", "_s2"),
        on="_next",
    )
    if shrinkage:
        shrunk = F.col("_both") / (F.sqrt(F.col("_support") * F.col("_s2")) + float(shrinkage))
        order = [shrunk.desc()]
    else:
        order = cosine_order("_both", "_s2")
    return _neighbour_lists(events, similarity, *order, k=min(k, neighbours))


def sr_lists(events: DataFrame, train: DataFrame, *, k: int, window: int) -> DataFrame:
    """SR, sequential rules (session-rec's ``SequentialRules``, weighting ``div``): every train
    click b at position p and every earlier click a of its session at position p - d,
    d = 1..min(window, p - 1), add 1/d to the rule a -> b (repeated items and a -> a rules
    included); an event's list: the items b by the summed weight of the rules from the
    prefix's last item, top k. Events whose last item starts no rule get no list.

    session-rec prunes each antecedent to its 20 strongest rules; that changes no list of 20
    or fewer items except among ties, so it is left out. Weights are summed exactly as the
    integers L/d, L = lcm(1..window) (decimal, so the order of addition and rational ties
    cannot change a list); one (a, b, d) row per click and offset, no quadratic self-join.
    """
    lcm = math.lcm(*range(1, window + 1))
    weights = F.array(*[F.lit(lcm // d).cast("decimal(38,0)") for d in range(1, window + 1)])
    later = train.filter(F.col(POSITION) > 1).select(
        SESSION,
        F.col(ITEM).alias("_next"),
        F.explode(F.sequence(F.lit(1), F.least(F.lit(window), F.col(POSITION) - 1))).alias("_d"),
        POSITION,
    )
    rules = (
        later.select(SESSION, "_next", "_d", (F.col(POSITION) - F.col("_d")).alias(POSITION))
        .join(train.select(SESSION, POSITION, ITEM), on=[SESSION, POSITION])
        .groupBy(ITEM, "_next", "_d")
        .agg(F.count(F.lit(1)).cast("decimal(38,0)").alias("_n"))
        .groupBy(ITEM, "_next")
        .agg(F.sum(F.col("_n") * F.element_at(weights, F.col("_d"))).alias(SCORE))
    )
    return _neighbour_lists(events, rules, k=k)


def external_lists(events: DataFrame, predictions: DataFrame, *, k: int) -> DataFrame:
    """Predictions (session_id, position, item_id, score) ranked per event by score."""
    known = predictions.join(events.select(*EVENT), on=EVENT, how="left_semi")
    return rank_per_event(known, F.col(SCORE).desc(), k=k)


def _neighbour_lists(events: DataFrame, neighbours: DataFrame, *order: Column, k: int) -> DataFrame:
    """Events joined with the top k (item_id -> _next) rows of their last item in ``order``
    (default: score descending), then _next ascending."""
    keys = order or (F.col(SCORE).desc(),)
    order_by = Window.partitionBy(ITEM).orderBy(*keys, F.col("_next").asc())
    top = neighbours.withColumn(RANK, F.row_number().over(order_by)).filter(F.col(RANK) <= k)
    return (
        events.select(*EVENT, ITEM)
        .join(top, on=ITEM)
        .select(*EVENT, F.col("_next").alias(ITEM), RANK)
    )
