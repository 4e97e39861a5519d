"""Item-kNN (models/item_knn.py) on a literal example, against the cosine written out."""

from __future__ import annotations

import math

import pytest

from receval_spark.config import ItemKnnModel, TuningConfig
from receval_spark.ranking.models.item_knn import item_knn_candidates, item_neighbours, nearest
from receval_spark.ranking.tuning import tune, validation_score

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


def test_the_first_n_rows_of_a_wider_table_are_the_n_nearest(spark):
    """Items 10 and 11 tie at 1/2 as neighbours of 12: the ranks break the tie by item id in
    both tables, so the rows (and ranks) of a narrower table are those of the wider one."""
    history = spark.createDataFrame(HISTORY, "user_id long, item_id long")
    wide = item_neighbours(history, neighbours=3)
    for n in (1, 2, 3):
        assert sorted(nearest(wide, n).collect()) == sorted(
            item_neighbours(history, neighbours=n).collect()
        )
    assert sorted(r.neighbour for r in nearest(wide, 2).collect() if r.item_id == 12) == [10, 13]


def test_a_neighbours_grid_scores_each_point_as_its_own_fit(spark):
    """tune() computes one neighbour table for the grid (its widest point); each point's
    validation score equals that of the point fitted alone, and they differ."""
    train = spark.createDataFrame(
        [*HISTORY, (4, 10), (4, 12), (4, 13), (5, 11), (5, 13), (6, 12)],
        "user_id long, item_id long",
    )
    truth = spark.createDataFrame(
        [(1, 12, 1.0), (3, 10, 1.0), (5, 12, 1.0), (6, 13, 1.0), (6, 10, 1.0)],
        "user_id long, item_id long, grade double",
    )
    seen = train.distinct()
    tuning = TuningConfig(metric="ndcg", k=2)
    model = ItemKnnModel(name="knn", kind="item_knn", neighbours=[1, 3], fallback="none")

    chosen, record = tune(model, train=train, truth=truth, seen=seen, tuning=tuning)

    alone = [
        validation_score(
            model.model_copy(update={"neighbours": n}),
            train=train,
            truth=truth,
            seen=seen,
            tuning=tuning,
        )
        for n in (1, 3)
    ]
    assert [p["validation_score"] for p in record["grid"]] == alone
    assert alone[0] != alone[1]
    assert chosen.neighbours == (1 if alone[0] >= alone[1] else 3)
