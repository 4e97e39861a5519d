"""receval_spark.cache: what the jobs persist is unpersisted when they end, failures included
(a Spark Connect server would otherwise keep it and serve later runs from it); a local session
cuts the lineage instead of caching."""

from __future__ import annotations

import pytest
from pyspark import StorageLevel

import receval_spark.cache
from receval_spark.cache import persist, releasing_cache


@pytest.fixture
def caching(monkeypatch):
    """persist as on a cluster or over Spark Connect: a tracked cache entry."""
    monkeypatch.setattr(receval_spark.cache, "cuts_lineage", lambda df: False)


def test_a_local_session_checkpoints_instead_of_caching(spark) -> None:
    df = spark.range(50).selectExpr("id % 7 AS x").groupBy("x").count()
    with releasing_cache():
        cut = persist(df)
        assert sorted(r["x"] for r in cut.collect()) == list(range(7))
        plan = cut._jdf.queryExecution().analyzed().toString()
    assert "LogicalRDD" in plan and "Aggregate" not in plan  # starts from the rows
    assert cut.storageLevel == StorageLevel.NONE  # no cache entry a later plan could match
    assert df.storageLevel == StorageLevel.NONE


@pytest.mark.usefixtures("caching")
def test_releasing_cache_unpersists_what_was_persisted_inside(spark) -> None:
    outside = persist(spark.range(3).selectExpr("id + 100 AS x"))
    with releasing_cache():
        first = persist(spark.range(5).selectExpr("id * 3 AS x"))
        second = persist(first.filter("x > 2"))
        assert first.count() == 5 and second.count() == 4
        assert first.storageLevel != StorageLevel.NONE
        assert second.storageLevel != StorageLevel.NONE
    assert first.storageLevel == StorageLevel.NONE
    assert second.storageLevel == StorageLevel.NONE
    assert outside.storageLevel != StorageLevel.NONE  # not tracked outside a block
    outside.unpersist()


@pytest.mark.usefixtures("caching")
def test_releasing_cache_also_releases_on_failure(spark) -> None:
    with pytest.raises(RuntimeError, match="job failed"), releasing_cache():
        cached = persist(spark.range(4).selectExpr("id * 7 AS x"))
        cached.count()
        raise RuntimeError("job failed")
    assert cached.storageLevel == StorageLevel.NONE
