"""Who is evaluated, and against what (docs/evaluation.md#relevance-and-evaluated-users):
Rel(u) of the test part under the seen rule, the evaluated users (non-empty Rel(u)) with their
segments, the seen pairs to filter and the train catalogue."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, USER
from receval_spark.config import EvaluationConfig, RelevanceConfig, UserSegmentsSource
from receval_spark.errors import InputError
from receval_spark.metadata_inputs import UNASSIGNED
from receval_spark.metrics.lists import item_statistics
from receval_spark.quality import Fact
from receval_spark.ranking.quality import Reconsumption, reconsumption
from receval_spark.ranking.relevance import (
    activity_counts,
    activity_thresholds,
    relevant_items,
    user_segments,
)
from receval_spark.ranking.split import Split


@dataclass(frozen=True)
class ActivityQuartiles:
    """The quartiles t1 <= t2 <= t3 of the warm evaluated users' train interaction counts that
    bound the ``activity=q1..q4`` segments (None: no warm evaluated user)."""

    thresholds: list[float] | None


@dataclass(frozen=True)
class Population:
    """Who is evaluated, and against what: the train history (train + validation), Rel(u)
    (``truth``: under filter_seen without the pairs seen in train), the evaluated users
    (non-empty Rel(u)) with their segments, the seen pairs to filter (None without
    filter_seen), the catalogue (train items with counts), the data-quality facts of Rel(u)
    (receval_spark.ranking.quality.reconsumption) and the activity quartiles (None when the
    activity segment is off)."""

    history: DataFrame
    truth: DataFrame
    users: DataFrame
    n_users: int
    segments: DataFrame
    seen: DataFrame | None
    catalogue: DataFrame
    facts: list[Fact]
    activity: ActivityQuartiles | None = None


def evaluated_population(
    split: Split,
    relevance: RelevanceConfig,
    settings: EvaluationConfig,
    *,
    named: DataFrame | None = None,
) -> Population:
    """The evaluated users of the split (docs/evaluation.md#relevance-and-evaluated-users);
    raises InputError when there are none. ``named``: (user_id, segment) of the user-segment
    table of ``settings.user_segments``; an evaluated user without a row there is in
    ``<name>=unassigned``."""
    history = persist(split.history)
    relevant = relevant_items(split.test, relevance)
    seen = persist(history.select(USER, ITEM).distinct()) if settings.filter_seen else None
    rel = reconsumption(relevant, history, seen=seen, filter_seen=settings.filter_seen)
    if rel.n_users == 0:
        raise InputError(_no_users_message(rel))
    truth = persist(rel.truth)
    users = persist(truth.select(USER).distinct())
    activity = None
    if "activity" in settings.segments:
        thresholds = activity_thresholds(activity_counts(users, history)).collect()[0][0]
        activity = ActivityQuartiles(thresholds)
    segments = user_segments(users, history, segments=settings.segments)
    return Population(
        history=history,
        truth=truth,
        users=users,
        n_users=rel.n_users,
        segments=persist(with_named_segments(segments, users, named, settings.user_segments)),
        seen=seen,
        catalogue=persist(item_statistics(history)),
        facts=rel.facts,
        activity=activity,
    )


def _no_users_message(rel: Reconsumption) -> str:
    """Why no user can be evaluated: no relevant test item, or (under the seen filter) every
    relevant test item already seen in train."""
    reconsumed = next(f for f in rel.facts if f.fact == "reconsumed_pairs")
    if reconsumed.total and reconsumed.count == reconsumed.total:
        return (
            f"evaluation.filter_seen: all {reconsumed.total} relevant test pairs were already "
            "consumed in train, so they leave Rel(u) and no user can be evaluated; set "
            "evaluation.filter_seen=false to evaluate re-consumption."
        )
    return (
        "relevance: no test interaction is relevant, so no user can be evaluated; "
        "lower relevance.threshold or move split.cutoff earlier."
    )


def with_named_segments(
    segments: DataFrame,
    users: DataFrame,
    named: DataFrame | None,
    source: UserSegmentsSource | None,
) -> DataFrame:
    """``segments`` and, for each evaluated user, their segments of the user-segment table
    ``named`` (read from ``source``, evaluation.user_segments); a user without a row there is
    in ``<name>=unassigned``."""
    if named is None or source is None:
        return segments
    unassigned = F.lit(f"{source.label}={UNASSIGNED}")
    joined = users.join(named, on=USER, how="left")
    return segments.unionByName(
        joined.select(USER, F.coalesce(F.col("segment"), unassigned).alias("segment"))
    )
