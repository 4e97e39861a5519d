"""ALS candidates (models/als.py::als_candidates) on two clear taste groups."""

from __future__ import annotations

import pytest

from receval_spark.models.als import als_candidates, als_scores, fit_als

# users 0-9 like items 100-104, users 10-19 items 200-204; each user misses one item of
# their group, which ALS must rank above the other group's items. Explicit ratings also need
# dislikes: every user rated one item of the other group 1.
LIKES = [(u, (100 if u < 10 else 200) + i, 5.0) for u in range(20) for i in range(5) if i != u % 5]
DISLIKES = [(u, (200 if u < 10 else 100) + u % 5, 1.0) for u in range(20)]


@pytest.mark.parametrize(("implicit", "rows"), [(True, LIKES), (False, LIKES + DISLIKES)])
def test_als_ranks_the_missing_item_of_the_users_group_first(spark, implicit, rows):
    history = spark.createDataFrame(rows, "user_id long, item_id long, rating double")
    users = spark.createDataFrame([(u,) for u in range(20)] + [(99,)], "user_id long")

    fitted = fit_als(
        history, rank=2, max_iter=10, reg_param=0.1, alpha=10.0, implicit=implicit, seed=3
    )
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


def test_als_scores_any_pair_and_leaves_unknown_users_and_items_unscored(spark):
    history = spark.createDataFrame(LIKES, "user_id long, item_id long, rating double")
    fitted = fit_als(history, rank=2, max_iter=10, reg_param=0.1, alpha=10.0, implicit=True, seed=3)
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
