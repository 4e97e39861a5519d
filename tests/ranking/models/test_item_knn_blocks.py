"""Item-kNN's neighbour table by blocks of items (models/item_knn.py, item_knn_kernel.py):
equal to the definition (tests/reference.py) whatever the number of blocks, on a generated
history full of ties and on ml-100k."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import tied_item_pairs
from reference import item_neighbours as reference_neighbours

from receval_spark.ranking.models import item_knn
from receval_spark.ranking.models.item_knn import item_neighbours


def table(frame) -> dict[tuple[object, object], tuple[float, int]]:
    return {(r.item_id, r.neighbour): (r.similarity, r.neighbour_rank) for r in frame.collect()}


@pytest.mark.parametrize("cells", [1 << 24, 40 * 3, 40])  # 1 block, 14 blocks, 40 blocks
def test_the_table_is_the_definition_for_any_number_of_blocks(spark, monkeypatch, cells):
    monkeypatch.setattr(item_knn, "BLOCK_CELLS", cells)
    pairs = tied_item_pairs()
    history = spark.createDataFrame(pairs, "user_id long, item_id long")

    got = table(item_neighbours(history, neighbours=6))

    assert got == reference_neighbours(pairs, 6)


def test_string_item_ids_are_ordered_as_text(spark, monkeypatch):
    """Ties go by item id in the ids' own order: for text ids "i133" before "i28"."""
    monkeypatch.setattr(item_knn, "BLOCK_CELLS", 40 * 5)
    pairs = [(user, f"i{item}") for user, item in tied_item_pairs()]
    history = spark.createDataFrame(pairs, "user_id long, item_id string")

    assert table(item_neighbours(history, neighbours=6)) == reference_neighbours(pairs, 6)


def test_a_history_without_pairs_has_no_neighbours(spark):
    history = spark.createDataFrame([(1, 5)], "user_id long, item_id long")
    assert item_neighbours(history, neighbours=3).collect() == []
    assert item_neighbours(history.filter("user_id < 0"), neighbours=3).collect() == []


def test_the_blocks_follow_the_rows_of_the_users(spark, monkeypatch):
    """A row budget of one user's pairs puts every item in a block of its own."""
    monkeypatch.setattr(item_knn, "BLOCK_ROWS", 1)
    pairs = tied_item_pairs()
    history = spark.createDataFrame(pairs, "user_id long, item_id long").distinct()
    assert item_knn.blocks_of(history, 40) >= 40
    assert table(item_neighbours(history, neighbours=3)) == reference_neighbours(pairs, 3)


def test_ml100k_neighbours_equal_the_definition(spark, shared_data):
    log = pd.read_csv(
        shared_data / "ml-100k" / "u.data",
        sep="\t",
        names=["user_id", "item_id", "rating", "timestamp"],
    )
    log = log[log.user_id <= 300]  # 300 users, ~1,600 items: the reference stays quick
    pairs = list(zip(log.user_id.tolist(), log.item_id.tolist(), strict=True))
    history = spark.createDataFrame(pairs, "user_id int, item_id int")

    got = table(item_neighbours(history, neighbours=20))

    assert got == reference_neighbours(pairs, 20)
