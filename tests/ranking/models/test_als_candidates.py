"""ALS candidates (models/als.py::als_candidates) on two clear taste groups, and its ids."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from receval_spark.config.als import AlsParams
from receval_spark.ranking.models import als
from receval_spark.ranking.models.als import (
    als_candidates,
    als_scores,
    fit_als,
    seen_tiers,
    tier_groups,
    tiered_als_candidates,
)
from receval_spark.ranking.models.common import dense_ids
from receval_spark.ranking.topk import rank_candidates

# users 0-9 like items 100-104, users 10-19 items 200-204; each user misses one item of
# their group, which ALS must rank above the other group's items. Explicit ratings also need
# dislikes: every user rated one item of the other group 1.
LIKES = [(u, (100 if u < 10 else 200) + i, 5.0) for u in range(20) for i in range(5) if i != u % 5]
DISLIKES = [(u, (200 if u < 10 else 100) + u % 5, 1.0) for u in range(20)]


@pytest.fixture(scope="module")
def fitted_als(spark):
    """``fit(rows, implicit=...)``: ALS (rank 2, 10 iterations) on ``rows``, fitted once per
    (rows, implicit) in this module: fitting runs many small Spark jobs, and a fit does not
    change when it is read."""
    fits = {}

    def fit(rows, *, implicit):
        key = (tuple(rows), implicit)
        if key not in fits:
            history = spark.createDataFrame(rows, "user_id long, item_id long, rating double")
            params = AlsParams(
                rank=2,
                max_iter=10,
                reg_param=0.1,
                alpha=10.0,
                implicit=implicit,
                blocks=2,
                seed=3,
            )
            fits[key] = fit_als(history, params=params)
        return fits[key]

    return fit


@pytest.mark.parametrize(("implicit", "rows"), [(True, LIKES), (False, LIKES + DISLIKES)])
def test_als_ranks_the_missing_item_of_the_users_group_first(spark, fitted_als, implicit, rows):
    users = spark.createDataFrame([(u,) for u in range(20)] + [(99,)], "user_id long")

    fitted = fitted_als(rows, implicit=implicit)
    most_seen = 4 if implicit else 5
    candidates = als_candidates(fitted, users, m=2 + most_seen).collect()

    by_user: dict[int, list[tuple[float, int]]] = {}
    for r in candidates:
        by_user.setdefault(r.user_id, []).append((r.score, r.item_id))
    assert set(by_user) == set(range(20))  # user 99 has no train rows: no candidates
    assert all(len(v) == 2 + most_seen for v in by_user.values())  # k + the most seen items
    for user, scored in by_user.items():
        seen_items = {i for u, i, _ in rows if u == user}
        best_unseen = max((s, -i) for s, i in scored if i not in seen_items)
        missing = (100 if user < 10 else 200) + user % 5
        assert -best_unseen[1] == missing, (user, sorted(scored, reverse=True))


def test_als_scores_any_pair_and_leaves_unknown_users_and_items_unscored(spark, fitted_als):
    fitted = fitted_als(LIKES, implicit=True)  # the fit of the implicit case above
    pairs = spark.createDataFrame(
        [(0, 100), (0, 200), (99, 100), (0, 999)], "user_id long, item_id long"
    )
    scores = {(r.user_id, r.item_id): r.score for r in als_scores(fitted, pairs).collect()}
    assert scores[(0, 100)] > scores[(0, 200)]  # own group above the other group
    assert scores[(99, 100)] is None and scores[(0, 999)] is None
    candidates = {
        (r.user_id, r.item_id): r.score
        for r in als_candidates(fitted, pairs.select("user_id"), m=10).collect()
    }
    assert abs(candidates[(0, 100)] - scores[(0, 100)]) < 1e-6  # the same factor dot product


def test_als_keeps_users_apart_whose_ids_collided_under_the_old_31_bit_hash(spark, fitted_als):
    """64-bit user ids 11486 and 46871 both mapped to pmod(xxhash64(id), 2^31 - 1) = 294593864,
    so ALS fitted their histories as one user and gave both the same list. With dense ids they
    are two users: two numbers, two factor rows, each ranking its own group's missing item."""
    old = spark.createDataFrame([(11486,), (46871,)], "user_id long").select(
        F.pmod(F.xxhash64("user_id"), F.lit(2**31 - 1)).alias("h")
    )
    assert {r.h for r in old.collect()} == {294593864}
    # user 11486 plays like users 0-9 (items 100-103), user 46871 like users 10-19 (200-203)
    rows = LIKES + [(11486, 100 + i, 5.0) for i in range(4)]
    rows += [(46871, 200 + i, 5.0) for i in range(4)]
    fitted = fitted_als(rows, implicit=True)

    numbers = {r.user_id: r._user for r in fitted.user_ids.collect()}
    assert len(numbers) == 22 and sorted(numbers.values()) == list(range(22))
    factors = {r.id: r.features for r in fitted.model.userFactors.collect()}  # one row per ALS user
    assert factors[numbers[11486]] != factors[numbers[46871]]
    users = spark.createDataFrame([(11486,), (46871,)], "user_id long")
    best = {}
    for r in als_candidates(fitted, users, m=5).collect():
        seen = set(range(100, 104)) if r.user_id == 11486 else set(range(200, 204))
        if r.item_id not in seen and r.score > best.get(r.user_id, (-1e9, 0))[0]:
            best[r.user_id] = (r.score, r.item_id)
    assert best[11486][1] == 104 and best[46871][1] == 204


def test_dense_ids_number_every_distinct_id_once_whatever_the_partitioning(spark):
    ids = [(11486,), (46871,), (11486,), (-5,), (2**40,), (7,)]
    frame = spark.createDataFrame(ids, "user_id long")

    def numbering(df):
        return {r.user_id: r._user for r in dense_ids(df, "user_id", name="_user").collect()}

    got = numbering(frame)
    assert sorted(got) == [-5, 7, 11486, 46871, 2**40]
    assert sorted(got.values()) == [0, 1, 2, 3, 4]
    assert numbering(frame.repartition(5)) == got == numbering(frame.orderBy(F.desc("user_id")))
    strings = spark.createDataFrame([(f"u{i}",) for i in range(1000)], "user_id string")
    assert sorted(numbering(strings).values()) == list(range(1000))


@pytest.mark.parametrize(
    ("seen", "tier"),
    [(1, 64), (63, 64), (64, 64), (65, 256), (256, 256), (257, 1024), (1024, 1024), (4097, 16384)],
)
def test_a_users_tier_is_the_smallest_bound_not_below_their_seen_items(spark, seen, tier):
    rows = spark.range(seen).select(F.lit(7).alias("user_id"), F.col("id").alias("item_id"))

    tiers = seen_tiers(rows, k=5)

    assert [(r.user_id, r._bound) for r in tiers.bounds.collect()] == [(7, tier)]
    assert tiers.groups == [(tier, 5 + seen)]  # one group: m = k + its longest history


def test_tiers_merge_where_a_group_costs_more_than_the_rows_it_saves(monkeypatch):
    monkeypatch.setattr(als, "BRANCH_ROWS", 1000)
    # (tier, users, longest history): 100 light users, 10 heavy ones
    light, heavy = (64, 100, 50), (1024, 10, 900)
    assert tier_groups([light, heavy], k=10) == [(64, 60), (1024, 910)]  # 7,100 + 2,000 rows
    few = (64, 5, 50)  # 5 light users: apart 1,400 rows + 2,000, merged 13,650 + 1,000
    assert tier_groups([few, heavy], k=10) == [(64, 60), (1024, 910)]
    monkeypatch.setattr(als, "BRANCH_ROWS", 20_000)
    assert tier_groups([few, heavy], k=10) == [(1024, 910)]
    assert tier_groups([], k=10) == [(64, 10)]  # nobody has seen items: the top k


def test_tiered_lists_rank_as_every_item_would_even_where_scores_tie(
    spark, fitted_als, monkeypatch
):
    """Users with 1-4 seen items in tiers 1, 2 and 4 (first tier 1, base 2), each tier a group
    of its own. Each group's items of a taste group score alike, so a short top m cuts a tie:
    those users get every item. After seen-item filtering every user has the top k of all 10
    items, ties by item id."""
    monkeypatch.setattr(als, "FIRST_TIER", 1)
    monkeypatch.setattr(als, "TIER_BASE", 2)
    monkeypatch.setattr(als, "BRANCH_ROWS", 0)
    fitted = fitted_als(LIKES, implicit=True)  # 10 items
    k = 2
    seen = spark.createDataFrame(
        [(u, i) for u in range(20) for _, i, _ in [r for r in LIKES if r[0] == u][: u % 4 + 1]],
        "user_id long, item_id long",
    )
    users = spark.createDataFrame([(u,) for u in range(20)] + [(99,)], "user_id long")
    tiers = seen_tiers(seen, k=k)
    assert tiers.groups == [(1, 3), (2, 4), (4, 6)]

    tiered = tiered_als_candidates(fitted, users, k=k, tiers=tiers)

    lengths = {r.user_id: r["count"] for r in tiered.groupBy("user_id").count().collect()}
    asked = {u: {0: 3, 1: 4, 2: 6, 3: 6}[u % 4] for u in range(20)}
    assert set(lengths) == set(asked)  # user 99 has no train rows
    assert all(lengths[u] in (asked[u], 10) for u in asked)
    assert 10 in lengths.values()  # a tie cut by a short m: every item
    every_item = als_candidates(fitted, users, m=10)
    assert_df_equality(
        rank_candidates(tiered, k=k, seen=seen),
        rank_candidates(every_item, k=k, seen=seen),
        ignore_row_order=True,
    )
    untiered = tiered_als_candidates(fitted, users, k=k, tiers=None)
    assert untiered.count() == 20 * k  # no seen-item filtering: the top k
