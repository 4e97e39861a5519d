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


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local[4,2]", True),  # with task retries
        ("local-cluster[2,1,1024]", False),  # executors in JVMs of their own
        ("spark://127.0.0.1:7077", False),
        ("yarn", False),
        ("k8s://https://127.0.0.1:6443", False),
    ],
)
def test_only_a_local_master_keeps_its_executors_in_the_driver(master, local) -> None:
    """Local checkpoints only where a lost block is a lost driver (module doc); a
    local-cluster's executors are JVMs of their own, as a cluster's are."""

    class Conf:
        def get(self, key, default=None):
            return master if key == "spark.master" else default

    class Session:
        conf = Conf()

    assert receval_spark.cache.local_master(Session()) is local


def test_a_local_run_neither_sets_nor_deletes_a_checkpoint_directory(spark, tmp_path) -> None:
    """On a local master the run checkpoints locally: no directory under its output."""
    from receval_spark.run import delete_run_checkpoints, use_run_checkpoints

    before = spark.sparkContext.getCheckpointDir()
    assert use_run_checkpoints(spark, str(tmp_path)) is None
    delete_run_checkpoints(spark)
    assert spark.sparkContext.getCheckpointDir() == before
    assert not (tmp_path / "_checkpoints").exists()
