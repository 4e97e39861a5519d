r"""The popularity-debiased protocol ``debiased_iqr``
(docs/evaluation.md#popularity-debiased-protocol-debiased_iqr): every model's full-catalogue
lists against a Rel(u) whose bestsellers are down-sampled, so that accuracy cannot be won by
recommending them (RecTools' ``DebiasConfig``).

With pop(i) the number of users whose Rel(u) holds item i, over the items of any Rel(u), and
Q1, Q3 its quartiles (linear interpolation between order statistics, as pandas' and numpy's
default and Spark's exact ``percentile``):

.. math::

    b = \lfloor Q_3 + c \cdot (Q_3 - Q_1) \rfloor

and an item with pop(i) > b keeps b of its (user, item) pairs, chosen by a seeded hash: the
pairs of the item ordered by xxhash64(seed, user, item), then user id, the first b kept. Items
with pop(i) <= b keep every pair. A user left without a relevant item is not evaluated here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, USER
from receval_spark.config import DEBIASED_PROTOCOL, EvaluationConfig
from receval_spark.expressions import seeded_hash
from receval_spark.ranking.accuracy_stage import ProtocolAccuracy, accuracy_per_user, macro_rows
from receval_spark.ranking.population import Population


@dataclass(frozen=True)
class DebiasFacts:
    """What the down-sampling did (``runs.split.debiased_iqr``): the coefficient c, the
    quartiles of the item popularities and the bound b; the items of Rel(u) and those above the
    bound (down-sampled); the (user, item) pairs of Rel(u) and those removed; the users with a
    relevant item and those left without one (not evaluated under the protocol)."""

    iqr_coef: float
    q1: float
    q3: float
    bound: int
    items: int
    items_down_sampled: int
    pairs: int
    pairs_removed: int
    users: int
    users_removed: int

    def record(self) -> dict[str, object]:
        """The run record's ``debiased_iqr`` object."""
        return dataclasses.asdict(self)


def popularity_bound(truth: DataFrame, *, iqr_coef: float) -> DataFrame:
    """One row (_q1, _q3, _bound): the quartiles of the items' popularity in ``truth`` (users
    per item) and the bound floor(Q3 + iqr_coef · (Q3 - Q1))."""
    popularity = truth.groupBy(ITEM).agg(F.count(F.lit(1)).alias("_popularity"))
    quartiles = popularity.agg(F.percentile("_popularity", [0.25, 0.75]).alias("_q"))
    q1, q3 = F.col("_q")[0], F.col("_q")[1]
    bound = F.floor(q3 + F.lit(float(iqr_coef)) * (q3 - q1))
    return quartiles.select(q1.alias("_q1"), q3.alias("_q3"), bound.alias("_bound"))


def marked_truth(truth: DataFrame, *, iqr_coef: float, seed: int) -> DataFrame:
    """``truth`` with each pair's item popularity (_popularity), its place among the item's
    pairs in the seeded order (_place: 1 = first kept) and the run's _q1, _q3 and _bound: one
    window partitioned by item."""
    by_item = Window.partitionBy(ITEM)
    order = by_item.orderBy(seeded_hash(seed, USER, ITEM), F.col(USER).asc())
    return truth.select(
        *truth.columns,
        F.count(F.lit(1)).over(by_item).alias("_popularity"),
        F.row_number().over(order).alias("_place"),
    ).crossJoin(F.broadcast(popularity_bound(truth, iqr_coef=iqr_coef)))


def debias_facts(marked: DataFrame, *, iqr_coef: float) -> DebiasFacts:
    """The facts of :func:`marked_truth`'s rows, in one Spark job."""
    kept = F.col("_place") <= F.col("_bound")
    by_user = marked.groupBy(USER).agg(F.max(kept.cast("int")).alias("_kept"))
    users = by_user.agg(
        F.count(F.lit(1)).alias("users"),
        F.count(F.when(F.col("_kept") == 0, True)).alias("users_removed"),
    )
    above = F.col("_popularity") > F.col("_bound")
    pairs = marked.agg(
        F.first("_q1").alias("q1"),
        F.first("_q3").alias("q3"),
        F.first("_bound").alias("bound"),
        F.count_distinct(ITEM).alias("items"),
        F.count_distinct(F.when(above, F.col(ITEM))).alias("items_down_sampled"),
        F.count(F.lit(1)).alias("pairs"),
        F.count(F.when(~kept, True)).alias("pairs_removed"),
    )
    row = pairs.crossJoin(users).first()
    assert row is not None  # global aggregates: one row
    return DebiasFacts(
        iqr_coef=iqr_coef,
        q1=float(row["q1"]),
        q3=float(row["q3"]),
        bound=int(row["bound"]),
        **{name: int(row[name]) for name in ("items", "items_down_sampled", "pairs")},
        **{name: int(row[name]) for name in ("pairs_removed", "users", "users_removed")},
    )


def debiased_truth(
    truth: DataFrame, *, iqr_coef: float, seed: int
) -> tuple[DataFrame, DebiasFacts]:
    """Rel(u) with every item above the bound down-sampled to it (the same pairs for any
    partitioning or input order; a filter of the persisted marked pairs), and the facts of the
    down-sampling: two Spark jobs."""
    marked = persist(marked_truth(truth, iqr_coef=iqr_coef, seed=seed))
    facts = debias_facts(marked, iqr_coef=iqr_coef)
    kept = marked.filter(F.col("_place") <= F.col("_bound")).select(*truth.columns)
    return kept, facts


def debiased_protocol(
    ranked: DataFrame,
    population: Population,
    *,
    models: DataFrame,
    settings: EvaluationConfig,
    item_segments: DataFrame | None = None,
) -> tuple[ProtocolAccuracy, DebiasFacts]:
    """Accuracy under ``debiased_iqr``: every model's full-catalogue lists (``ranked``, the same
    top-k and seen filter as under ``full``) against the debiased Rel(u), by user and item
    segment as under ``full``. Evaluated: the users with a relevant item left (an evaluated
    user of ``users: listed_or_relevant`` without one is not evaluated here)."""
    truth, facts = debiased_truth(
        population.truth, iqr_coef=settings.debias_iqr_coef, seed=settings.seed
    )
    debiased = dataclasses.replace(
        population,
        truth=truth,
        users=truth.select(USER).distinct(),
        n_users=facts.users - facts.users_removed,
        empty_truth=0,
    )
    per_user = accuracy_per_user(
        ranked, debiased, models=models, settings=settings, item_segments=item_segments
    )
    rows = [] if per_user is None else macro_rows(per_user, protocol=DEBIASED_PROTOCOL)
    return ProtocolAccuracy(rows, per_user), facts
