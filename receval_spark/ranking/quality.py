"""Data-quality facts of a ranking run: what the log and the lists look like before anyone
trusts the metrics (docs/evaluation.md#data-quality-facts).

Each fact is a :class:`receval_spark.quality.Fact`: a count out of a total (so its share),
optionally per model and cut-off. Every function here is one Spark job that returns bounded
rows (a few numbers per model and k), never rows that grow with users or items.

- the log: exact duplicate rows, duplicate (user, item) pairs, and the pairs whose rows have
  relevance grades on both sides of the threshold (the test collapses them to the maximum);
- Rel(u): relevant test pairs the user already interacted with in train (re-consumption; under
  the seen filter they leave Rel(u), docs/evaluation.md#seen-items), the users left without any,
  and the cold share of the evaluated users;
- the lists, per model and k: users whose k-th and (k+1)-th candidates tie in score (the item
  id decides the cut), users with fewer than k candidates after the seen filter, and list slots
  whose item is outside the catalogue I (a configured catalogue, else the train items;
  docs/evaluation.md#catalogue).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from receval_spark.columns import GRADE, ITEM, RANK, SCORE, USER
from receval_spark.config.ranking_data import RelevanceConfig
from receval_spark.quality import Fact
from receval_spark.ranking.relevance import relevance_grade


@dataclass(frozen=True)
class Reconsumption:
    """Rel(u) against the train history: ``truth`` the relevant pairs that stay (all of them
    without the seen filter), the evaluated ``users`` count, and the facts."""

    truth: DataFrame
    n_users: int
    facts: list[Fact]


def log_facts(interactions: DataFrame, relevance: RelevanceConfig) -> list[Fact]:
    """Exact duplicate rows (rows equal in every canonical column beyond the first of each),
    duplicate (user, item) pairs (more than one row), and conflicting pairs: duplicates whose
    rows have relevance grades on both sides of the threshold, some relevant and some not
    (always 0 for implicit relevance). One Spark job."""
    columns = interactions.columns
    grade = relevance_grade(
        kind=relevance.kind, threshold=relevance.threshold, grades=relevance.grades
    )
    rows = interactions.groupBy(*columns).agg(F.count(F.lit(1)).alias("_n"))
    pairs = rows.groupBy(USER, ITEM).agg(
        F.sum("_n").alias("_rows"),
        F.count(F.lit(1)).alias("_distinct"),
        (F.min(grade) <= 0).alias("_irrelevant"),
        (F.max(grade) > 0).alias("_relevant"),
    )
    row = pairs.agg(
        F.coalesce(F.sum("_rows"), F.lit(0)).alias("rows"),
        F.coalesce(F.sum(F.col("_rows") - F.col("_distinct")), F.lit(0)).alias("duplicates"),
        F.count(F.lit(1)).alias("pairs"),
        _count(F.col("_rows") > 1).alias("duplicate_pairs"),
        _count((F.col("_rows") > 1) & F.col("_irrelevant") & F.col("_relevant")).alias("both"),
    ).first()
    assert row is not None  # a global aggregate has one row
    return [
        Fact("duplicate_rows", row["duplicates"], row["rows"], "interactions"),
        Fact("duplicate_pairs", row["duplicate_pairs"], row["pairs"], "user-item pairs"),
        Fact("conflicting_pairs", row["both"], row["pairs"], "user-item pairs"),
    ]


def reconsumption(
    relevant: DataFrame, history: DataFrame, *, seen: DataFrame | None = None, filter_seen: bool
) -> Reconsumption:
    """Rel(u) under the seen rule (docs/evaluation.md#seen-items): with ``filter_seen`` the
    relevant test pairs (user_id, item_id, grade) the user interacted with in ``history``
    leave Rel(u); without it they stay. Facts: those pairs (of the relevant pairs), the users
    all of whose relevant items were seen (of the users with relevant items; not evaluated
    under the filter), and cold users (no train interaction) among the evaluated users. One
    Spark job; ``truth`` is a plan (the caller persists it). ``seen``: the distinct (user_id,
    item_id) pairs of ``history`` where the caller holds them already (else derived here)."""
    pairs = seen if seen is not None else history.select(USER, ITEM).distinct()
    warm = history.select(USER).distinct().withColumn("_warm", F.lit(True))
    marked = relevant.join(pairs.withColumn("_seen", F.lit(True)), on=[USER, ITEM], how="left")
    per_user = (
        marked.groupBy(USER)
        .agg(F.count(F.lit(1)).alias("_n"), F.count("_seen").alias("_s"))
        .join(warm, on=USER, how="left")
    )
    kept = F.col("_n") > F.col("_s") if filter_seen else F.lit(True)
    row = per_user.agg(
        F.coalesce(F.sum("_n"), F.lit(0)).alias("pairs"),
        F.coalesce(F.sum("_s"), F.lit(0)).alias("seen"),
        F.count(F.lit(1)).alias("users"),
        _count(F.col("_n") == F.col("_s")).alias("all_seen"),
        _count(kept).alias("evaluated"),
        _count(kept & F.col("_warm").isNull()).alias("cold"),
    ).first()
    assert row is not None  # a global aggregate has one row
    truth = marked.filter(F.col("_seen").isNull()) if filter_seen else marked
    return Reconsumption(
        truth=truth.select(USER, ITEM, GRADE),
        n_users=row["evaluated"],
        facts=[
            Fact("reconsumed_pairs", row["seen"], row["pairs"], "relevant test pairs"),
            Fact("users_all_relevant_seen", row["all_seen"], row["users"], "users with Rel(u)"),
            Fact("cold_users", row["cold"], row["evaluated"], "evaluated users"),
        ],
    )


def list_facts(
    ranked: DataFrame,
    catalogue: DataFrame,
    *,
    models: Sequence[str],
    ks: Sequence[int],
    n_users: int,
) -> list[Fact]:
    """Per model of ``models``: the evaluated users without any list (``no_list``); at every
    k, the evaluated users whose k-th and (k+1)-th candidates have equal scores (``ranked``
    must hold each list to max(ks) + 1), and those with fewer than k candidates after the seen
    filter (users without a list included); list slots up to max(ks) whose item is not in
    ``catalogue`` (item_id). ``ranked``: (model, user_id, item_id, score, rank) of the
    evaluated users. One Spark job; one row per model reaches the driver."""
    top = max(ks)
    known = catalogue.select(ITEM).distinct().withColumn("_known", F.lit(True))
    slots = ranked.filter(F.col(RANK) <= top).join(known, on=ITEM, how="left")
    outside = slots.groupBy("model").agg(
        F.count(F.lit(1)).alias("_slots"), _count(F.col("_known").isNull()).alias("_out")
    )
    at = {k: F.max(F.when(F.col(RANK) == k, F.col(SCORE))) for k in {*ks, *(k + 1 for k in ks)}}
    per_user = ranked.groupBy("model", USER).agg(
        *[at[k].alias(f"_s{k}") for k in sorted(at)],
        # filled slots up to each k (under rank_semantics: positions a list may have gaps)
        *[_count(F.col(RANK) <= k).alias(f"_n{k}") for k in ks],
    )
    counts = per_user.groupBy("model").agg(
        F.count(F.lit(1)).alias("_users"),
        *[_count(F.col(f"_s{k}") == F.col(f"_s{k + 1}")).alias(f"_tie{k}") for k in ks],
        *[_count(F.col(f"_n{k}") >= k).alias(f"_full{k}") for k in ks],
    )
    found = {r["model"]: r for r in counts.join(outside, on="model", how="left").collect()}
    return [f for model in models for f in _model_facts(model, found.get(model), ks, n_users)]


def _model_facts(model: str, row: Row | None, ks: Sequence[int], n_users: int) -> list[Fact]:
    """One model's list facts from its row of :func:`list_facts` (None: no list at all)."""

    def value(name: str) -> int:
        return int(row[name] or 0) if row is not None else 0

    users = "evaluated users"
    return [
        Fact("no_list", n_users - value("_users"), n_users, users, model),
        *[Fact("score_ties_at_k", value(f"_tie{k}"), n_users, users, model, k) for k in ks],
        *[Fact("short_lists", n_users - value(f"_full{k}"), n_users, users, model, k) for k in ks],
        Fact("outside_catalogue", value("_out"), value("_slots"), "list slots", model),
    ]


def _count(condition: Column) -> Column:
    """The number of rows where ``condition`` holds."""
    return F.count(F.when(condition, 1))
