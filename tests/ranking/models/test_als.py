"""ALS item factors as item embeddings, and embedding diversity on them."""

from __future__ import annotations

import math
from dataclasses import replace

from helpers import beyond_metric
from pyspark.sql import functions as F

from receval_spark.config.als import AlsParams
from receval_spark.metrics.diversity import unit_vectors
from receval_spark.ranking.models.als import als_item_embeddings


def test_als_gives_one_finite_vector_of_the_configured_rank_per_train_item(spark):
    # two taste groups: users 1-4 play items 10-13, users 5-8 play items 20-23
    rows = [(u, i) for u in range(1, 5) for i in range(10, 14)]
    rows += [(u, i) for u in range(5, 9) for i in range(20, 24)]
    history = spark.createDataFrame(rows, "user_id int, item_id int")

    params = AlsParams(
        rank=4, max_iter=5, reg_param=0.1, alpha=10.0, implicit=True, blocks=2, seed=3
    )
    vectors = als_item_embeddings(history, params=params)
    got = {r.item_id: r.embedding for r in vectors.collect()}

    assert sorted(got) == [10, 11, 12, 13, 20, 21, 22, 23]
    assert all(len(v) == 4 and all(math.isfinite(x) for x in v) for v in got.values())

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
            sum(x * x for x in a) * sum(y * y for y in b)
        )

    # items played by the same users point the same way; the two groups do not
    assert cosine(got[10], got[11]) > 0.9
    assert cosine(got[10], got[20]) < cosine(got[10], got[11]) - 0.5

    units = unit_vectors(vectors)
    same_group = spark.createDataFrame([(1, 10), (1, 11)], "user_id int, item_id int")
    mixed = spark.createDataFrame([(2, 10), (2, 20)], "user_id int, item_id int")
    lists = same_group.unionByName(mixed).withColumn("k", F.lit(2))
    diversity = {
        r.user_id: r.value for r in beyond_metric(lists, "ild_embedding", units=units).collect()
    }
    assert diversity[1] < 0.1 < diversity[2]


def test_als_renumbers_string_ids(spark):
    rows = [(f"u{u}", f"i{i}") for u in range(6) for i in range(u % 3, u % 3 + 3)]
    history = spark.createDataFrame(rows, "user_id string, item_id string")

    params = AlsParams(
        rank=3, max_iter=3, reg_param=0.1, alpha=1.0, implicit=True, blocks=2, seed=1
    )
    vectors = als_item_embeddings(history, params=params)

    assert sorted(r.item_id for r in vectors.collect()) == ["i0", "i1", "i2", "i3", "i4"]


def test_the_item_embeddings_are_fitted_once_per_session_for_the_same_rows(spark):
    """A notebook's second evaluation on the same train rows reuses the fit; other rows (even
    one more), other params or the rows in another order/partitioning decide anew: the same
    rows in any order are the same fit, anything else is a new one."""
    from receval_spark.ranking.models.als import memoized_item_embeddings

    rows = [(u, i) for u in range(1, 7) for i in range(10, 10 + u)]
    history = spark.createDataFrame(rows, "user_id int, item_id int")
    params = AlsParams(
        rank=3, max_iter=3, reg_param=0.1, alpha=5.0, implicit=True, blocks=2, seed=1
    )

    first = memoized_item_embeddings(history, params=params)
    shuffled = spark.createDataFrame(list(reversed(rows)), "user_id int, item_id int")
    assert memoized_item_embeddings(shuffled.repartition(3), params=params) is first

    more = spark.createDataFrame([*rows, (1, 99)], "user_id int, item_id int")
    refit = memoized_item_embeddings(more, params=params)
    assert refit is not first
    assert 99 not in {r.item_id for r in first.collect()}  # the kept fit is unchanged
    assert 99 in {r.item_id for r in refit.collect()}
    other = memoized_item_embeddings(more, params=replace(params, seed=2))
    assert other is not refit

    fresh = {r.item_id: r.embedding for r in als_item_embeddings(more, params=params).collect()}
    assert {r.item_id: r.embedding for r in refit.collect()} == fresh  # equal to a new fit
