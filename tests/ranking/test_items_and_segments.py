"""Item popularity segments, scoped truth, item metadata mapping and content expectedness,
each worked out by hand on tiny literal tables."""

from __future__ import annotations

import math

import pytest
from pyspark.sql import types as T

from receval_spark.config import ItemColumns
from receval_spark.errors import InputError
from receval_spark.metadata_inputs import canonical_items
from receval_spark.metrics.diversity import unit_vectors
from receval_spark.metrics.novelty import content_expected
from receval_spark.ranking.beyond_stage import describe_items
from receval_spark.ranking.relevance import item_popularity_segments, scoped_truth

CATALOGUE_DDL = "item_id long, n_users long, n_interactions long"


def _segments(df) -> dict[int, str]:
    return {r["item_id"]: r["segment"] for r in df.collect()}


def _items(df) -> dict:
    return {
        r["item_id"]: (
            sorted(r["categories"]) if r["categories"] is not None else None,
            r["embedding"],
        )
        for r in df.collect()
    }


# --- item_popularity_segments -------------------------------------------------------------


def test_popularity_segments_head_share_cut(spark):
    # ids deliberately not in popularity order; total = 50 + 30 + 15 + 5 = 100
    catalogue = spark.createDataFrame(
        [(4, 9, 50), (1, 8, 30), (3, 7, 15), (2, 1, 5)], CATALOGUE_DDL
    )
    # head_share 0.5 -> threshold 50. covered before: item 4: 0 < 50 head;
    # item 1: 50 < 50 false -> tail; item 3: 80 tail; item 2: 95 tail
    assert _segments(item_popularity_segments(catalogue, head_share=0.5)) == {
        4: "items=head",
        1: "items=tail",
        3: "items=tail",
        2: "items=tail",
    }
    # head_share 0.6 -> threshold 60. item 4: 0 < 60 head; item 1: 50 < 60 head;
    # item 3: 80 < 60 false -> tail; item 2: 95 tail
    assert _segments(item_popularity_segments(catalogue, head_share=0.6)) == {
        4: "items=head",
        1: "items=head",
        3: "items=tail",
        2: "items=tail",
    }


def test_popularity_segments_ties_broken_by_item_id(spark):
    # total = 40 + 40 + 20 = 100; head_share 0.4 -> threshold 40.
    # order: (40, id 3), (40, id 7), (20, id 9). covered before: id 3: 0 < 40 head;
    # id 7: 40 < 40 false -> tail; id 9: 80 tail
    catalogue = spark.createDataFrame([(7, 1, 40), (9, 1, 20), (3, 1, 40)], CATALOGUE_DDL)
    assert _segments(item_popularity_segments(catalogue, head_share=0.4)) == {
        3: "items=head",
        7: "items=tail",
        9: "items=tail",
    }


# --- scoped_truth -------------------------------------------------------------------------


def test_scoped_truth_all_and_item_segment(spark):
    truth = spark.createDataFrame(
        [(1, 10, 5.0), (1, 20, 4.0), (2, 30, 3.0)], "user_id long, item_id long, rating double"
    )
    segments = spark.createDataFrame(
        [(10, "items=head"), (20, "items=tail")], "item_id long, segment string"
    )
    rows = sorted(
        (r["scope"], r["user_id"], r["item_id"], r["rating"])
        for r in scoped_truth(truth, (segments, "items=tail")).collect()
    )
    # 3 rows under "all" + each row again under its segment; item 30 is not in the segment
    # table -> items=tail
    assert rows == [
        ("all", 1, 10, 5.0),
        ("all", 1, 20, 4.0),
        ("all", 2, 30, 3.0),
        ("items=head", 1, 10, 5.0),
        ("items=tail", 1, 20, 4.0),
        ("items=tail", 2, 30, 3.0),
    ]


def test_scoped_truth_without_segments_only_all(spark):
    truth = spark.createDataFrame([(1, 10), (2, 30)], "user_id long, item_id long")
    out = scoped_truth(truth)
    assert sorted(out.columns) == ["item_id", "scope", "user_id"]
    assert sorted((r["scope"], r["user_id"], r["item_id"]) for r in out.collect()) == [
        ("all", 1, 10),
        ("all", 2, 30),
    ]


# --- canonical_items ----------------------------------------------------------------------


def test_canonical_items_delimited_string_merge_and_null(spark):
    raw = spark.createDataFrame(
        [
            ("1", " Action | Comedy ||", [1.0, 2.0]),
            ("1", "Drama|Action", None),  # second row for item 1: merged
            ("2", None, None),  # no categories -> empty array
        ],
        "movie string, genres string, vec array<float>",
    )
    out = canonical_items(
        raw,
        columns=ItemColumns(item="movie", category="genres", embedding="vec"),
        separator="|",
        item_type=T.LongType(),
        source="items",
    )
    assert out.schema["item_id"].dataType == T.LongType()
    assert out.schema["categories"].dataType.simpleString() == "array<string>"
    assert out.schema["embedding"].dataType.simpleString() == "array<double>"
    # item 1: "Action","Comedy" (trimmed, empty parts dropped) union "Drama","Action";
    # embedding = the first non-null one (array<float> cast to array<double>)
    assert _items(out) == {
        1: (["Action", "Comedy", "Drama"], [1.0, 2.0]),
        2: ([], None),
    }


def test_canonical_items_array_column(spark):
    raw = spark.createDataFrame(
        [(5, ["a", "b"], [0.5, 0.25]), (6, ["c"], [1.0, 0.0])],
        "item int, cats array<string>, emb array<double>",
    )
    out = canonical_items(
        raw,
        columns=ItemColumns(item="item", category="cats", embedding="emb"),
        separator=None,
        item_type=T.LongType(),
        source="items",
    )
    assert out.schema["item_id"].dataType == T.LongType()
    assert _items(out) == {5: (["a", "b"], [0.5, 0.25]), 6: (["c"], [1.0, 0.0])}


def test_canonical_items_flag_columns(spark):
    raw = spark.createDataFrame(
        [(1, 1, 0, 1), (2, 0, 0, 0), (3, 0, 1, 0)],
        "item_id long, Action int, Comedy int, Drama int",
    )
    out = canonical_items(
        raw,
        columns=ItemColumns(category=["Action", "Comedy", "Drama"]),
        separator=None,
        item_type=T.LongType(),
        source="items",
    )
    # item 1 flags (1,0,1) -> Action, Drama; item 2 none -> []; item 3 (0,1,0) -> Comedy;
    # no embedding mapped -> null
    assert _items(out) == {
        1: (["Action", "Drama"], None),
        2: ([], None),
        3: (["Comedy"], None),
    }


def test_canonical_items_input_errors(spark):
    raw = spark.createDataFrame([(1, "a|b")], "item_id long, genres string")
    with pytest.raises(InputError, match="category_separator"):
        canonical_items(
            raw,
            columns=ItemColumns(category="genres"),
            separator=None,
            item_type=T.LongType(),
            source="items",
        )
    with pytest.raises(InputError, match="'tags'"):
        canonical_items(
            raw,
            columns=ItemColumns(category="tags"),
            separator="|",
            item_type=T.LongType(),
            source="items",
        )
    with pytest.raises(InputError, match="'Horror'"):
        canonical_items(
            raw,
            columns=ItemColumns(category=["genres", "Horror"]),
            separator=None,
            item_type=T.LongType(),
            source="items",
        )


def test_a_category_column_of_integers_is_not_called_strings(spark):
    """An integer category column is neither split text nor an array: the message names its
    type and both readings (one category id a row, or a 0/1 flag column); with a separator
    each value is one category."""
    raw = spark.createDataFrame([(1, 3), (1, 4), (2, 3)], "item_id long, genre int")
    with pytest.raises(InputError) as error:
        canonical_items(
            raw,
            columns=ItemColumns(category="genre"),
            separator=None,
            item_type=T.LongType(),
            source="data.items",
        )
    message = str(error.value)
    assert "strings;" not in message and "holds int values, not strings or arrays" in message
    assert "set data.items.category_separator" in message
    assert "data.items.columns.category: [genre]" in message
    out = canonical_items(
        raw,
        columns=ItemColumns(category="genre"),
        separator="|",
        item_type=T.LongType(),
        source="data.items",
    )
    assert _items(out) == {1: (["3", "4"], None), 2: (["3"], None)}


def test_describe_items_counts_missing_embeddings_only_of_a_mapped_column(spark):
    """The run record counts catalogue items that data.items gives no embedding only when
    data.items maps an embedding column, under a name saying so; a run whose vectors come from
    ALS (split.embeddings: als) has no such count to misread."""
    catalogue = spark.createDataFrame([(1,), (2,), (3,)], "item_id long")
    items = spark.createDataFrame(
        [(1, ["a"], [1.0, 0.0]), (2, [], None)],
        "item_id long, categories array<string>, embedding array<double>",
    )
    assert describe_items(items, catalogue, embeddings=False) == {
        "metadata_rows": 2,
        "catalogue_items": 3,
        "catalogue_items_without_categories": 2,
    }
    counts = describe_items(items, catalogue, embeddings=True)
    assert counts["catalogue_items_without_items_embedding"] == 2  # item 2 (null), item 3 (no row)


# --- content_expected ---------------------------------------------------------------------


def test_content_expected_threshold(spark):
    embeddings = spark.createDataFrame(
        [(1, [1.0, 0.0]), (2, [0.0, 1.0]), (3, [1.0, 1.0]), (5, [0.0, 0.0])],
        "item_id long, embedding array<double>",
    )
    units = unit_vectors(embeddings)
    # item 3 -> (1/sqrt2, 1/sqrt2); the zero vector of item 5 is dropped
    unit_map = {r["item_id"]: r["unit"] for r in units.collect()}
    assert sorted(unit_map) == [1, 2, 3]
    assert unit_map[3] == pytest.approx([1 / math.sqrt(2), 1 / math.sqrt(2)])

    history = spark.createDataFrame([(1, 1), (1, 1)], "user_id long, item_id long")
    lists = spark.createDataFrame(
        # user 1: items 2, 3, 4 (no embedding), 5 (zero vector); user 2: no history
        [(1, 2, 1), (1, 3, 2), (1, 4, 3), (1, 5, 4), (2, 2, 1)],
        "user_id long, item_id long, rank int",
    )
    # profile of user 1 = (1, 0). cos(item 2) = 0 < 0.5 -> unexpected;
    # cos(item 3) = 1/sqrt2 ~ 0.7071 >= 0.5 -> expected; items 4, 5 have no unit -> expected;
    # user 2 has no profile -> expected
    out = content_expected(lists, history, units, threshold=0.5)
    assert sorted((r["user_id"], r["item_id"]) for r in out.collect()) == [
        (1, 3),
        (1, 4),
        (1, 5),
        (2, 2),
    ]
    # threshold 0.75 > 0.7071 -> item 3 becomes unexpected too
    out = content_expected(lists, history, units, threshold=0.75)
    assert sorted((r["user_id"], r["item_id"]) for r in out.collect()) == [
        (1, 4),
        (1, 5),
        (2, 2),
    ]
