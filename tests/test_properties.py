"""Property tests: metric bounds, the oracle's perfect score, invariance to order and partitions.

Each example runs Spark jobs, so the example counts are small.
"""

from __future__ import annotations

import datetime as dt
import math
from contextlib import AbstractContextManager

from helpers import sql_conf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from receval_spark.config import RelevanceConfig
from receval_spark.metrics.accuracy import ACCURACY_METRICS, per_user_accuracy
from receval_spark.ranking.models.oracle import oracle_candidates
from receval_spark.ranking.relevance import relevant_items
from receval_spark.ranking.split import leave_last_n_split
from receval_spark.ranking.topk import rank_candidates

KS = [1, 3, 5]
INTERACTIONS = "user_id int, item_id int, timestamp timestamp, rating double"
CANDIDATES = "user_id int, item_id int, score double"
EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def spark_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


# (user, item, rating): at graded threshold 1, ratings 1..3 are their own grades (rating - 1 + 1)
# and 0 is not relevant; duplicates are legal
truth_rows = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 7), st.integers(0, 3)), min_size=1, max_size=20
)
# (user, item, score): one row per (user, item); few distinct scores, so ties are common
candidate_rows = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 7), st.integers(0, 3)),
    max_size=25,
    unique_by=lambda r: (r[0], r[1]),
)
# (user, item, minute, rating): a log with tied timestamps and repeats
log_rows = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 7), st.integers(0, 4), st.integers(0, 3)),
    min_size=1,
    max_size=25,
)


def _truth(spark, rows):
    test = spark.createDataFrame([(u, i, EPOCH, float(r)) for u, i, r in rows], INTERACTIONS)
    return relevant_items(test.coalesce(1), RelevanceConfig(kind="graded", threshold=1.0))


def _candidates(spark, rows):
    return spark.createDataFrame([(u, i, float(s)) for u, i, s in rows], CANDIDATES).coalesce(1)


def _expected_relevant(rows) -> dict[int, int]:
    """|Rel(u)| computed in plain Python: distinct (user, item) with max rating > 0."""
    best: dict[tuple[int, int], int] = {}
    for u, i, r in rows:
        best[(u, i)] = max(best.get((u, i), 0), r)
    counts: dict[int, int] = {}
    for (u, _), grade in best.items():
        if grade > 0:
            counts[u] = counts.get(u, 0) + 1
    return counts


def shuffle_partitions(spark, n: int) -> AbstractContextManager[None]:
    """Exactly ``n`` shuffle partitions (AQE would otherwise coalesce tiny data into one)."""
    return sql_conf(
        spark,
        {
            "spark.sql.shuffle.partitions": str(n),
            "spark.sql.adaptive.coalescePartitions.enabled": "false",
        },
    )


@spark_settings(8)
@given(truth=truth_rows, candidates=candidate_rows)
def test_every_accuracy_metric_lies_in_0_1_for_every_evaluated_user(spark, truth, candidates):
    ranked = rank_candidates(_candidates(spark, candidates), k=max(KS), seen=None)

    with shuffle_partitions(spark, 1):  # partitioning is the subject of the last test
        rows = per_user_accuracy(ranked, _truth(spark, truth), ks=KS).collect()

    relevant = _expected_relevant(truth)
    assert sorted((r["user_id"], r["k"]) for r in rows) == sorted(
        (u, k) for u in relevant for k in KS
    )
    for row in rows:
        for metric in ACCURACY_METRICS:
            assert 0.0 <= row[metric] <= 1.0 + 1e-12, (metric, row)


@spark_settings(8)
@given(truth=truth_rows)
def test_the_oracle_scores_1(spark, truth):
    graded = _truth(spark, truth)
    ranked = rank_candidates(oracle_candidates(graded), k=max(KS), seen=None)

    with shuffle_partitions(spark, 1):
        rows = per_user_accuracy(ranked, graded, ks=KS).collect()

    relevant = _expected_relevant(truth)
    assert len(rows) == len(relevant) * len(KS)
    for row in rows:
        for metric in ("ndcg", "map", "mrr", "hit_rate"):
            assert math.isclose(row[metric], 1.0, abs_tol=1e-12), (metric, row)
        if relevant[row["user_id"]] <= row["k"]:
            assert math.isclose(row["recall"], 1.0, abs_tol=1e-12), row


def _evaluate(spark, log, candidates, *, partitions: int, repartition: int | None = None):
    """Split (leave-last-2), graded relevance, seen filtering, top-k, per-user metrics."""
    interactions = spark.createDataFrame(
        [(u, i, EPOCH + dt.timedelta(minutes=t), float(r)) for u, i, t, r in log], INTERACTIONS
    )
    recs = _candidates(spark, candidates)
    if repartition is not None:
        interactions = interactions.repartition(repartition)
        recs = recs.repartition(repartition, "item_id")
    with shuffle_partitions(spark, partitions):
        split = leave_last_n_split(interactions, n=2)
        truth = relevant_items(split.test, RelevanceConfig(kind="graded", threshold=1.0))
        ranked = rank_candidates(recs, k=max(KS), seen=split.train)
        rows = per_user_accuracy(ranked, truth, ks=KS).collect()
    return sorted(tuple(r) for r in rows)


def _assert_same(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert a[:2] == e[:2]
        assert all(
            math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-12)
            for x, y in zip(a[2:], e[2:], strict=True)
        ), (a, e)


@spark_settings(5)
@given(log=log_rows, candidates=candidate_rows, data=st.data())
def test_results_do_not_depend_on_row_order_or_shuffle_partitions(spark, log, candidates, data):
    reordered_log = data.draw(st.permutations(log))
    reordered_candidates = data.draw(st.permutations(candidates))
    keys = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.coalescePartitions.enabled")
    before = {key: spark.conf.get(key, None) for key in keys}

    reference = _evaluate(spark, log, candidates, partitions=1)
    more_partitions = _evaluate(spark, log, candidates, partitions=7)
    reordered = _evaluate(spark, reordered_log, reordered_candidates, partitions=1, repartition=3)

    _assert_same(more_partitions, reference)
    _assert_same(reordered, reference)
    # the session's settings are restored (whatever an earlier test in this worker left)
    assert {key: spark.conf.get(key, None) for key in keys} == before
