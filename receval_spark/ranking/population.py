"""Who is evaluated, and against what (docs/evaluation.md#relevance-and-evaluated-users):
Rel(u) of the test part under the seen rule, the evaluated users (non-empty Rel(u), and under
``evaluation.users: listed_or_relevant`` the users with an external model's list too) with
their segments, the seen pairs to filter and the train catalogue."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, USER
from receval_spark.config import EvaluationConfig, RelevanceConfig, UserSegmentsSource
from receval_spark.errors import InputError
from receval_spark.metadata_inputs import UNASSIGNED
from receval_spark.metrics.aggregate import union_all
from receval_spark.metrics.fairness import AWRF, EXPOSURE_GAP
from receval_spark.metrics.lists import item_statistics
from receval_spark.metrics.per_user import ACLT, APLT
from receval_spark.quality import Fact
from receval_spark.ranking.quality import Reconsumption, reconsumption
from receval_spark.ranking.relevance import (
    POPULARITY_HEAD,
    POPULARITY_SEGMENT,
    activity_counts,
    activity_thresholds,
    relevant_items,
    user_segments,
    with_popularity_segment,
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
    (non-empty Rel(u); under ``users: listed_or_relevant`` also the listed users) with their
    segments, the seen pairs to filter (None without filter_seen), the catalogue (train items
    with counts), the data-quality facts of Rel(u) (receval_spark.ranking.quality.reconsumption;
    under listed_or_relevant ``empty_truth_users`` too), the activity quartiles (None when the
    activity segment is off) and ``empty_truth``: how many evaluated users have an empty Rel(u)
    (they score 0 on every accuracy metric)."""

    history: DataFrame
    truth: DataFrame
    users: DataFrame
    n_users: int
    segments: DataFrame
    seen: DataFrame | None
    catalogue: DataFrame
    facts: list[Fact]
    activity: ActivityQuartiles | None = None
    empty_truth: int = 0

    def popularity_segments(self) -> DataFrame:
        """(item_id, segment): each catalogue item's items=head / items=tail label
        (:func:`~receval_spark.ranking.relevance.with_popularity_segment`, computed once with
        the catalogue when :func:`needs_popularity_segment`)."""
        return self.catalogue.select(ITEM, F.col(POPULARITY_SEGMENT).alias("segment"))

    def head_items(self) -> DataFrame:
        """(item_id) of the catalogue's items=head items."""
        return self.catalogue.filter(F.col(POPULARITY_SEGMENT) == POPULARITY_HEAD).select(ITEM)


def needs_popularity_segment(settings: EvaluationConfig) -> bool:
    """Whether a step reads the catalogue's head/tail labels: the ``popularity`` item
    segments, aplt and aclt, and the exposure groups without an item segment table."""
    exposure = settings.item_segments is None and {AWRF, EXPOSURE_GAP} & set(settings.metrics)
    tail = {APLT, ACLT} & set(settings.metrics)
    return "popularity" in settings.segments or bool(tail) or bool(exposure)


def evaluated_population(
    split: Split,
    relevance: RelevanceConfig,
    settings: EvaluationConfig,
    *,
    named: DataFrame | None = None,
    listed: Mapping[str, DataFrame] | None = None,
) -> Population:
    """The evaluated users of the split (docs/evaluation.md#relevance-and-evaluated-users);
    raises InputError when no user has a relevant test item. ``named``: (user_id, segment) of
    the user-segment table of ``settings.user_segments``; an evaluated user without a row there
    is in ``<name>=unassigned``. ``listed``: each external model's recommendations (user_id,
    item_id, score), whose users are evaluated too under ``users: listed_or_relevant``
    (:func:`listed_users`)."""
    history = persist(split.history)
    relevant = relevant_items(split.test, relevance)
    seen = persist(history.select(USER, ITEM).distinct()) if settings.filter_seen else None
    rel = reconsumption(relevant, history, seen=seen, filter_seen=settings.filter_seen)
    if rel.n_users == 0:
        raise InputError(_no_users_message(rel))
    truth = persist(rel.truth)
    evaluated = None
    if settings.user_rule() == "listed_or_relevant":
        evaluated = _evaluated_users(truth, rel, listed_users(split, listed or {}), history)
    users = evaluated.users if evaluated is not None else persist(truth.select(USER).distinct())
    activity = None
    if "activity" in settings.segments:
        thresholds = activity_thresholds(activity_counts(users, history)).collect()[0][0]
        activity = ActivityQuartiles(thresholds)
    segments = user_segments(
        users,
        history,
        segments=settings.segments,
        thresholds=activity.thresholds if activity is not None else None,
    )
    return Population(
        history=history,
        truth=truth,
        users=users,
        n_users=rel.n_users if evaluated is None else evaluated.n_users,
        segments=persist(with_named_segments(segments, users, named, settings.user_segments)),
        seen=seen,
        catalogue=persist(_catalogue(history, settings)),
        facts=rel.facts if evaluated is None else evaluated.facts,
        activity=activity,
        empty_truth=0 if evaluated is None else evaluated.empty_truth,
    )


def _catalogue(history: DataFrame, settings: EvaluationConfig) -> DataFrame:
    """The train catalogue's item table, labelled head/tail when a step reads the labels."""
    statistics = item_statistics(history)
    if not needs_popularity_segment(settings):
        return statistics
    return with_popularity_segment(statistics, head_share=settings.head_share)


def listed_users(split: Split, recommendations: Mapping[str, DataFrame]) -> DataFrame | None:
    """(user_id) of the users with at least one candidate row of an external model
    (``recommendations``: (user_id, item_id, score) by model; before the seen filter) who occur
    in the log's split (train history or test); None without external models. Users outside
    the log are left out: an id the log does not know is nearly always another encoding, which
    the list_coverage check then reports instead of it being evaluated as a 0."""
    listed = union_all([table.select(USER) for table in recommendations.values()])
    if listed is None:
        return None
    known = split.history.select(USER).unionByName(split.test.select(USER))
    return listed.distinct().join(known, on=USER, how="left_semi")


@dataclass(frozen=True)
class _Evaluated:
    """The evaluated users under listed_or_relevant, their count, how many have an empty
    Rel(u), and Rel(u)'s facts with ``cold_users`` counted over them all and
    ``empty_truth_users`` added."""

    users: DataFrame
    n_users: int
    empty_truth: int
    facts: list[Fact]


def _evaluated_users(
    truth: DataFrame, rel: Reconsumption, listed: DataFrame | None, history: DataFrame
) -> _Evaluated:
    """``users: listed_or_relevant``: the users with a non-empty Rel(u) and the ``listed``
    users (persisted), counted with their cold users in one job (none without external
    models: then they are the users of Rel(u))."""
    relevant = truth.select(USER).distinct()
    if listed is None:
        empty = Fact("empty_truth_users", 0, rel.n_users, "evaluated users")
        return _Evaluated(persist(relevant), rel.n_users, 0, [*rel.facts, empty])
    users = persist(relevant.unionByName(listed).distinct())
    warm = history.select(USER).distinct().withColumn("_warm", F.lit(True))
    row = (
        users.join(warm, on=USER, how="left")
        .agg(
            F.count(F.lit(1)).alias("users"),
            F.count(F.when(F.col("_warm").isNull(), True)).alias("cold"),
        )
        .first()
    )
    assert row is not None  # a global aggregate has one row
    n_users, empty_truth = row["users"], row["users"] - rel.n_users
    cold = Fact("cold_users", row["cold"], n_users, "evaluated users")
    facts = [cold if f.fact == "cold_users" else f for f in rel.facts]
    facts.append(Fact("empty_truth_users", empty_truth, n_users, "evaluated users"))
    return _Evaluated(users, n_users, empty_truth, facts)


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
        "lower relevance.threshold, check the test set's rating column (columns.rating), or "
        "move split.cutoff earlier."
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
