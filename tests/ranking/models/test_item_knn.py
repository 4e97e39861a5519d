"""Item-kNN (models/item_knn.py) on a literal example, against the cosine written out."""

from __future__ import annotations

import math

import pytest

from receval_spark.ranking.models.item_knn import item_knn_candidates, item_neighbours

HISTORY = [  # users 1-3; user 1 saw item 10 twice (counts once)
    (1, 10),
    (1, 10),
    (1, 11),
    (2, 10),
    (2, 11),
    (2, 12),
    (3, 12),
    (3, 13),
]


def test_neighbours_are_the_most_similar_other_items(spark):
    history = spark.createDataFrame(HISTORY, "user_id long, item_id long")

    got = {
        (r.item_id, r.neighbour): r.similarity
        for r in item_neighbours(history, neighbours=1).collect()
    }

    # U_10 = U_11 = {1, 2}, U_12 = {2, 3}, U_13 = {3}
    assert got == pytest.approx(
        {
            (10, 11): 1.0,
            (11, 10): 1.0,
            (12, 13): 1 / math.sqrt(2),  # beats 10 and 11 (1/2 each)
            (13, 12): 1 / math.sqrt(2),
        },
        abs=1e-12,
    )


def test_scores_sum_the_similarities_of_the_users_items(spark):
    history = spark.createDataFrame(HISTORY, "user_id long, item_id long")
    users = spark.createDataFrame([(2,), (3,), (4,)], "user_id long")

    got = {
        (r.user_id, r.item_id): r.score
        for r in item_knn_candidates(
            history, users, item_neighbours(history, neighbours=2)
        ).collect()
    }

    # N(10) = {11: 1, 12: 1/2}, N(11) = {10: 1, 12: 1/2}, N(12) = {13: 1/sqrt 2, 10: 1/2},
    # N(13) = {12: 1/sqrt 2}; user 4 has no train items and gets nothing
    half, root = 0.5, 1 / math.sqrt(2)
    assert got == pytest.approx(
        {
            (2, 10): 1 + half,  # from 11 and 12
            (2, 11): 1,  # from 10
            (2, 12): half + half,  # from 10 and 11
            (2, 13): root,  # from 12
            (3, 10): half,  # from 12
            (3, 12): root,  # from 13
            (3, 13): root,  # from 12
        },
        abs=1e-12,
    )
