"""Persisted intermediates, released when the job ends.

A local or spark-submit job frees its cache when its SparkContext stops, but a Spark Connect
server outlives its clients and shares one cache among all their sessions: a DataFrame a
client persisted stays cached after ``stop()``, and a later run whose plan matches it (the
same input path, even with new files in it) is answered from the stale cache. So every
``persist`` of the jobs goes through :func:`persist`, and the jobs run inside
:func:`releasing_cache`, which unpersists them all on the way out, failures included.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from pyspark.sql import DataFrame

_PERSISTED: ContextVar[list[DataFrame] | None] = ContextVar("receval_persisted", default=None)


def persist(df: DataFrame) -> DataFrame:
    """``df.persist()`` (MEMORY_AND_DISK), unpersisted when the enclosing
    :func:`releasing_cache` ends (outside one it simply stays persisted)."""
    persisted = df.persist()
    tracked = _PERSISTED.get()
    if tracked is not None:
        tracked.append(persisted)
    return persisted


@contextlib.contextmanager
def releasing_cache() -> Iterator[None]:
    """Unpersist every DataFrame :func:`persist` cached inside the block when it exits."""
    tracked: list[DataFrame] = []
    token = _PERSISTED.set(tracked)
    try:
        yield
    finally:
        _PERSISTED.reset(token)
        for df in reversed(tracked):
            # best effort: a lost connection must not hide the job's own result or error
            with contextlib.suppress(Exception):
                df.unpersist()
