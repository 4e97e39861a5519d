"""Persisted intermediates, released when the evaluation that made them is done.

A local or spark-submit job frees its cache when its SparkContext stops, but a notebook or a
Spark Connect server outlives a run and shares one cache among all its work: a DataFrame a
run persisted stays cached, and a later run whose plan matches it (the same input path, even
with new files in it) is answered from the stale cache. So every ``persist`` of the jobs goes
through :func:`persist`, which records the DataFrame in the enclosing :class:`CachedTables`;
the API releases them when ``evaluate`` returns, or when the caller's ``with`` block ends.

On a local master (``local[...]``: a classic session, or a Spark Connect server running on one)
:func:`persist` cuts the lineage instead (an eager ``localCheckpoint``): the executors live in
the driver's JVM, so a lost block is a lost driver and a cache's lineage buys no fault tolerance
there, while every later plan that starts from a materialised table instead of the plan that
made it is planned, re-optimised by AQE and reported to listeners in a fraction of the time
(the ml-100k job: 94 -> 58 s). Over Spark Connect the gain is larger still, since every action
sends its whole plan to the server to be analysed again: a crafted job as a Connect client,
86 -> 12 s (benchmarks/README.md, job profile). A checkpoint matches no later plan, so it can
never answer another run; its blocks go when its DataFrame is garbage-collected (over Connect,
when the client releases it or its session ends).

On a cluster master a local checkpoint would not survive a lost executor (its blocks live there
and the lineage that could rebuild them is cut), so :func:`persist` writes a *reliable*
checkpoint when the session has a checkpoint directory (``spark.checkpoint.dir``, or
``SparkContext.setCheckpointDir``; the nightly run sets one, receval_spark/run.py): files on
the shared filesystem that every later plan starts from, which outlive any executor. Without
one it caches, keeping the lineage, so lost partitions are recomputed; every later plan then
carries the whole lineage, and planning those plans dominates: the deployment demo on
``local-cluster[2,1,1024]`` took 185 s cached, 95 s with reliable checkpoints
(benchmarks/README.md, "Checkpoints on a cluster").
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextvars import ContextVar

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from receval_spark.spark import classic_context

# A checkpoint keeps rows, not the cache's compressed column batches: deserialized, a row of the
# log takes ~100 bytes of heap (20M rows: 2 GB). In a local session the executors share the
# driver's heap, so the checkpoints go to local disk (serialized rows; the OS page cache keeps the
# hot ones, outside the heap) and the heap is left to execution: with 1 GB the 20M-row full suite
# completes, where serialized blocks in memory ran out of heap unrolling one (benchmarks/README.md,
# driver memory); on ml-100k both measure the same (58.8-63.9 s).
CHECKPOINT_LEVEL = StorageLevel.DISK_ONLY
CHECKPOINT_DIR = "spark.checkpoint.dir"
LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?")


class CachedTables:
    """The DataFrames :func:`persist` cached while this was the active scope."""

    def __init__(self) -> None:
        self._frames: list[DataFrame] = []

    def add(self, df: DataFrame) -> None:
        self._frames.append(df)

    def __len__(self) -> int:
        return len(self._frames)

    def release(self) -> None:
        """Unpersist every recorded DataFrame (idempotent; best effort: a lost connection
        must not hide the run's own result or error)."""
        frames, self._frames = self._frames, []
        for df in reversed(frames):
            with contextlib.suppress(Exception):
                df.unpersist()


_ACTIVE: ContextVar[CachedTables | None] = ContextVar("receval_cached_tables", default=None)


def persist(df: DataFrame) -> DataFrame:
    """``df`` materialised once for the plans that read it: on a local master (classic or Spark
    Connect) an eager ``localCheckpoint`` on local disk, elsewhere an eager reliable
    ``checkpoint`` when the session has a checkpoint directory (module doc), else
    ``df.persist()`` (MEMORY_AND_DISK), recorded in the active :func:`tracking_cache` scope
    (outside one it simply stays persisted).

    Spark keeps one cache entry per plan: when an equal plan is cached already (another
    evaluation in the session, or the caller's own ``cache()``), that entry is used as it is
    and not recorded, so releasing this scope never drops data another owner still holds."""
    if cuts_lineage(df):
        return keep(df)  # a checkpoint: nothing for the scope to release
    if checkpoint_dir(df.sparkSession):
        return df.checkpoint(eager=True)  # files: Spark's cleaner or the run removes them
    tables = _ACTIVE.get()
    if tables is None or _is_cached(df):
        return df.persist()
    persisted = df.persist()
    tables.add(persisted)
    return persisted


def keep(df: DataFrame) -> DataFrame:
    """``df`` materialised like :func:`persist`, but for the session's lifetime: recorded in no
    scope, so releasing an evaluation keeps it (a memo of several evaluations,
    :func:`receval_spark.ranking.models.als.memoized_item_embeddings`). Only for small tables."""
    if cuts_lineage(df):
        return df.localCheckpoint(eager=True, storageLevel=CHECKPOINT_LEVEL)
    return df.persist()  # not a reliable checkpoint: a run deletes its checkpoints' files


def checkpoint(df: DataFrame) -> DataFrame:
    """``df`` materialised with its lineage cut whatever the master, for iterative rounds whose
    plans would otherwise nest without bound (the session filters): a reliable checkpoint on a
    cluster master with a checkpoint directory (module doc), else a local checkpoint (Spark's
    default level); on a cluster without a directory a lost executor then fails the job, so
    give ``spark.checkpoint.dir`` there (the nightly run sets one)."""
    if not cuts_lineage(df) and checkpoint_dir(df.sparkSession):
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True)


def cuts_lineage(df: DataFrame) -> bool:
    """Whether :func:`persist` checkpoints ``df`` locally: its session (classic, or a Spark
    Connect server's) runs on a local master."""
    return local_master(df.sparkSession)


def local_master(spark: SparkSession) -> bool:
    """Whether the session's executors run in its driver's JVM: a ``local`` or ``local[...]``
    master (not ``local-cluster[...]``, whose executors are JVMs of their own)."""
    return LOCAL_MASTER.fullmatch(spark.conf.get("spark.master", "") or "") is not None


def checkpoint_dir(spark: SparkSession) -> str | None:
    """The folder of the session's reliable checkpoints: a classic session's
    ``SparkContext.getCheckpointDir()`` (``spark.checkpoint.dir`` or ``setCheckpointDir``, with
    the application's own subfolder), over Spark Connect the server's ``spark.checkpoint.dir``;
    None when there is none."""
    context = classic_context(spark)
    if context is not None:
        return context.getCheckpointDir()
    return spark.conf.get(CHECKPOINT_DIR, None) or None


def _is_cached(df: DataFrame) -> bool:
    """Whether the session's cache holds an entry for ``df``'s plan."""
    level = df.storageLevel
    return level.useMemory or level.useDisk or level.useOffHeap


@contextlib.contextmanager
def tracking_cache() -> Iterator[CachedTables]:
    """Record what :func:`persist` caches inside the block; the caller releases it."""
    tables = CachedTables()
    token = _ACTIVE.set(tables)
    try:
        yield tables
    finally:
        _ACTIVE.reset(token)


@contextlib.contextmanager
def releasing_cache() -> Iterator[None]:
    """Unpersist every DataFrame :func:`persist` cached inside the block when it exits."""
    with tracking_cache() as tables:
        try:
            yield
        finally:
            tables.release()
