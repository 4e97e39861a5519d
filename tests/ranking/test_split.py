"""Splitters (DESIGN §2): global temporal with validation, leave-last-n, user-random, holdout."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from chispa import assert_df_equality

from receval_spark.config import GlobalTemporalSplit
from receval_spark.errors import InputError
from receval_spark.ranking.split import (
    QUANTILE_ACCURACY,
    global_temporal_split,
    leave_last_n_split,
    order_statistics,
    plan_global_temporal,
    split_interactions,
    time_points,
    user_holdout_split,
    user_random_split,
)

SCHEMA = "user_id int, item_id int, timestamp timestamp, rating double"


def at(seconds: int) -> dt.datetime:
    """An aware UTC datetime ``seconds`` after the epoch."""
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)


def frame(spark, rows):
    return spark.createDataFrame([(u, i, at(t), r) for u, i, t, r in rows], SCHEMA)


def assert_rows(actual, spark, rows):
    assert_df_equality(actual, frame(spark, rows), ignore_row_order=True, ignore_nullable=True)


# ---------------------------------------------------------------- global temporal

LOG = [
    (1, 10, 100, 4.0),
    (1, 11, 200, 3.0),
    (2, 10, 300, 5.0),  # exactly at the cut-off of 300: test, not train
    (2, 12, 400, 1.0),
    (3, 13, 500, 2.0),
]


def test_global_temporal_split_train_before_cutoff_test_at_or_after(spark):
    split = global_temporal_split(frame(spark, LOG), cutoff=at(300))

    assert_rows(split.train, spark, [(1, 10, 100, 4.0), (1, 11, 200, 3.0)])
    assert_rows(split.test, spark, [(2, 10, 300, 5.0), (2, 12, 400, 1.0), (3, 13, 500, 2.0)])
    assert split.validation is None
    assert split.params == {
        "method": "global_temporal",
        "cutoff": "1970-01-01T00:05:00.000000+00:00",
    }
    assert_rows(split.history, spark, [(1, 10, 100, 4.0), (1, 11, 200, 3.0)])


def test_global_temporal_split_with_validation_cutoff_gives_three_parts(spark):
    split = global_temporal_split(frame(spark, LOG), cutoff=at(400), validation_cutoff=at(200))

    assert_rows(split.train, spark, [(1, 10, 100, 4.0)])
    assert_rows(split.validation, spark, [(1, 11, 200, 3.0), (2, 10, 300, 5.0)])
    assert_rows(split.test, spark, [(2, 12, 400, 1.0), (3, 13, 500, 2.0)])
    # models refit on train + validation
    assert_rows(split.history, spark, [(1, 10, 100, 4.0), (1, 11, 200, 3.0), (2, 10, 300, 5.0)])
    assert split.params == {
        "method": "global_temporal",
        "cutoff": "1970-01-01T00:06:40.000000+00:00",
        "validation_cutoff": "1970-01-01T00:03:20.000000+00:00",
    }


def test_plan_global_temporal_accepts_cutoffs_inside_the_data(spark):
    log = frame(spark, LOG)
    config = GlobalTemporalSplit(method="global_temporal", cutoff=500.0, validation_cutoff=101.0)

    assert plan_global_temporal(config, log) == (at(500), at(101))


@pytest.mark.parametrize(
    ("cutoff", "why"),
    [
        (100.0, "at the first timestamp: train would be empty"),
        (50.0, "before the first timestamp"),
        (501.0, "after the last timestamp: test would be empty"),
    ],
)
def test_plan_global_temporal_rejects_a_cutoff_outside_the_data(spark, cutoff, why):
    config = GlobalTemporalSplit(method="global_temporal", cutoff=cutoff)

    with pytest.raises(InputError, match=r"split\.cutoff: .* is outside the data") as info:
        plan_global_temporal(config, frame(spark, LOG))
    message = str(info.value)
    assert "1970-01-01T00:01:40.000000+00:00" in message, why  # first timestamp, 100 s
    assert "1970-01-01T00:08:20.000000+00:00" in message, why  # last timestamp, 500 s


def test_plan_global_temporal_rejects_validation_cutoff_outside_or_after_the_cutoff(spark):
    log = frame(spark, LOG)
    outside = GlobalTemporalSplit(method="global_temporal", cutoff=300.0, validation_cutoff=100.0)
    with pytest.raises(InputError, match=r"split\.validation_cutoff: .* is outside the data"):
        plan_global_temporal(outside, log)

    later = GlobalTemporalSplit(method="global_temporal", cutoff=300.0, validation_cutoff=400.0)
    with pytest.raises(InputError, match=r"split\.validation_cutoff: .* must be earlier"):
        plan_global_temporal(later, log)


TEN = [(u, 100 + u, 100 * u, 1.0) for u in range(1, 11)]  # timestamps 100, 200, ..., 1000


def test_time_points_are_the_bounds_and_the_quantiles_of_the_timestamps(spark):
    log = frame(spark, TEN)

    # smallest timestamp with at least q of the rows at or before it
    assert time_points(log, [0.5, 0.7, 0.25]) == (at(100), at(1000), [at(500), at(700), at(300)])
    assert time_points(log) == (at(100), at(1000), [])


def exact_quantile(seconds: np.ndarray, q: float) -> int:
    """The smallest value with at least q·n of the n values at or before it (numpy)."""
    ordered = np.sort(seconds)
    return int(ordered[max(1, int(np.ceil(round(q * len(ordered), 9)))) - 1])


def test_quantiles_are_exact_where_percentile_approx_is_not(spark):
    """40,000 timestamps, many tied, so n / QUANTILE_ACCURACY = 4 rows of rank error for the
    approximation: the cut-offs still equal the exact order statistics."""
    rng = np.random.default_rng(5)
    seconds = np.concatenate([rng.integers(0, 30_000, 30_000), np.full(10_000, 12_345)])
    assert len(seconds) / QUANTILE_ACCURACY > 1
    log = spark.createDataFrame(
        [(int(i), 1, at(int(s)), 1.0) for i, s in enumerate(seconds)], SCHEMA
    )
    qs = [0.001, 0.3, 0.31, 0.5, 0.8, 0.9999]
    lo, hi, points = time_points(log, qs)

    assert (lo, hi) == (at(int(seconds.min())), at(int(seconds.max())))
    assert points == [at(exact_quantile(seconds, q)) for q in qs]


def test_order_statistics_walk_any_bracket_that_holds_the_rank(spark):
    """Given brackets of any width that hold the rank (overlapping, nested, at the ends), the
    r-th smallest value, ties counted."""
    values = [5, 1, 9, 9, 9, 3, 7, 7, 2, 8]  # sorted: 1 2 3 5 7 7 8 9 9 9
    times = spark.createDataFrame([(v,) for v in values], "t long")
    ranks = [1, 4, 5, 6, 7, 8, 10]
    brackets = [(1, 1), (2, 7), (5, 9), (7, 7), (3, 8), (8, 9), (9, 9)]

    assert order_statistics(times, ranks, brackets) == [1, 5, 7, 7, 8, 9, 9]
    # timestamps before 1970 are negative microseconds: the same walk
    before_1970 = spark.createDataFrame([(v - 100,) for v in values], "t long")
    shifted = [(lo - 100, hi - 100) for lo, hi in brackets]
    assert order_statistics(before_1970, ranks, shifted) == [-99, -95, -93, -93, -92, -91, -91]


def test_split_interactions_resolves_quantiles_and_records_them(spark):
    log = frame(spark, TEN)
    config = GlobalTemporalSplit(method="global_temporal", quantile=0.7, validation_quantile=0.4)

    assert plan_global_temporal(config, log) == (at(700), at(400))
    split = split_interactions(config, log)

    assert_rows(split.train, spark, TEN[:3])  # 100..300
    assert_rows(split.validation, spark, TEN[3:6])  # 400..600
    assert_rows(split.test, spark, TEN[6:])  # 700..1000
    assert split.params == {
        "method": "global_temporal",
        "cutoff": "1970-01-01T00:11:40.000000+00:00",
        "validation_cutoff": "1970-01-01T00:06:40.000000+00:00",
        "quantile": 0.7,
        "validation_quantile": 0.4,
    }


# ---------------------------------------------------------------- leave last n


def test_leave_last_n_ties_broken_by_item_id_and_short_histories_stay_in_train(spark):
    log = frame(
        spark,
        [
            (1, 10, 100, 1.0),
            (1, 13, 300, 1.0),  # tied with item 11 at 300: the larger item id is "later"
            (1, 11, 300, 1.0),
            (1, 12, 200, 1.0),
            (2, 20, 100, 1.0),  # a single interaction: nothing would remain, stays in train
            (3, 31, 200, 1.0),
            (3, 30, 100, 1.0),
        ],
    )

    split = leave_last_n_split(log, n=1)

    assert_rows(
        split.train,
        spark,
        [
            (1, 10, 100, 1.0),
            (1, 11, 300, 1.0),
            (1, 12, 200, 1.0),
            (2, 20, 100, 1.0),
            (3, 30, 100, 1.0),
        ],
    )
    assert_rows(split.test, spark, [(1, 13, 300, 1.0), (3, 31, 200, 1.0)])
    assert split.params == {"method": "leave_last_n", "n": 1}


def test_leave_last_n_with_n_2_keeps_users_with_exactly_n_interactions_in_train(spark):
    log = frame(
        spark,
        [
            (1, 10, 100, 1.0),
            (1, 11, 200, 1.0),
            (1, 12, 300, 1.0),
            (2, 20, 100, 1.0),  # exactly n = 2 interactions: all in train
            (2, 21, 200, 1.0),
        ],
    )

    split = leave_last_n_split(log, n=2)

    assert_rows(split.train, spark, [(1, 10, 100, 1.0), (2, 20, 100, 1.0), (2, 21, 200, 1.0)])
    assert_rows(split.test, spark, [(1, 11, 200, 1.0), (1, 12, 300, 1.0)])


# ---------------------------------------------------------------- user random

# users with 8, 4, 1 and 12 interactions; with fraction 0.25: 2, 1, 0 and 3 test rows
RANDOM_LOG = (
    [(1, i, 10 * i, 1.0) for i in range(8)]
    + [(2, 100 + i, 10 * i, 2.0) for i in range(4)]
    + [(3, 200, 0, 3.0)]
    + [(4, 300 + i, 5 * i, 4.0) for i in range(12)]
)


def _counts(df):
    return {r["user_id"]: r["count"] for r in df.groupBy("user_id").count().collect()}


def test_user_random_split_takes_round_fraction_times_n_of_each_user(spark):
    log = frame(spark, RANDOM_LOG)

    split = user_random_split(log, fraction=0.25, seed=3)

    assert _counts(split.test) == {1: 2, 2: 1, 4: 3}  # user 3: round(0.25) = 0, stays in train
    assert _counts(split.train) == {1: 6, 2: 3, 3: 1, 4: 9}
    # the parts partition the log: nothing lost, nothing duplicated
    assert_df_equality(
        split.train.unionByName(split.test), log, ignore_row_order=True, ignore_nullable=True
    )
    assert split.params == {"method": "user_random", "fraction": 0.25, "seed": 3}


def test_user_random_split_can_put_a_user_wholly_in_test(spark):
    """round is half-up: a one-row user at fraction 0.5 (round(0.5) = 1) has no train row,
    so user_random can have cold test users (why segments default to [warm, cold] there)."""
    split = user_random_split(
        frame(spark, [(1, 10, 1, 1.0), (2, 20, 1, 1.0), (2, 21, 2, 1.0)]), fraction=0.5, seed=3
    )

    assert _counts(split.test) == {1: 1, 2: 1}
    assert _counts(split.train) == {2: 1}


def test_user_random_split_is_the_same_for_any_partitioning_or_row_order(spark):
    reference = user_random_split(frame(spark, RANDOM_LOG), fraction=0.25, seed=3)
    shuffled = frame(spark, list(reversed(RANDOM_LOG))).repartition(5, "item_id")

    again = user_random_split(shuffled, fraction=0.25, seed=3)

    assert_df_equality(again.test, reference.test, ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(again.train, reference.train, ignore_row_order=True, ignore_nullable=True)


def test_user_random_split_depends_on_the_seed(spark):
    log = frame(spark, RANDOM_LOG)
    first = {tuple(r) for r in user_random_split(log, fraction=0.25, seed=3).test.collect()}
    other = {tuple(r) for r in user_random_split(log, fraction=0.25, seed=4).test.collect()}

    assert len(first) == len(other) == 6
    assert first != other


# ---------------------------------------------------------------- user holdout

HOLDOUT_LOG = [(u, 10 * u + j, 100 * j, 1.0) for u in range(1, 41) for j in range(1 + u % 3)]


def _users(df):
    return {r["user_id"] for r in df.select("user_id").distinct().collect()}


def test_user_holdout_split_puts_every_user_wholly_in_one_part(spark):
    log = frame(spark, HOLDOUT_LOG)

    split = user_holdout_split(log, fraction=0.5, seed=11)

    train_users, test_users = _users(split.train), _users(split.test)
    assert not train_users & test_users
    assert train_users | test_users == set(range(1, 41))
    assert 0 < len(test_users) < 40
    assert_df_equality(
        split.train.unionByName(split.test), log, ignore_row_order=True, ignore_nullable=True
    )
    assert split.params == {"method": "user_holdout", "fraction": 0.5, "seed": 11}


def test_user_holdout_split_is_deterministic_by_seed(spark):
    log = frame(spark, HOLDOUT_LOG)
    shuffled = frame(spark, list(reversed(HOLDOUT_LOG))).repartition(3)

    first = _users(user_holdout_split(log, fraction=0.5, seed=11).test)
    again = _users(user_holdout_split(shuffled, fraction=0.5, seed=11).test)
    other = _users(user_holdout_split(log, fraction=0.5, seed=12).test)

    assert first == again
    assert first != other
