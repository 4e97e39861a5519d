"""Column expressions and time conversions shared by both protocols: seeded hashes (the
partition-independent randomness of splits, samples and tie-breaks) and exact ISO-8601 /
epoch-microsecond conversions."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column
from pyspark.sql import functions as F


def seeded_hash(seed: int, *columns: str) -> Column:
    """A 64-bit hash of the seed and the columns: a partition-independent pseudo-random key."""
    return F.xxhash64(F.lit(seed), *[F.col(c) for c in columns])


def uniform(hash_column: Column) -> Column:
    """Map a 64-bit hash to [0, 1)."""
    buckets = 1 << 40
    return F.pmod(hash_column, F.lit(buckets)).cast("double") / float(buckets)


def iso(moment: dt.datetime) -> str:
    """Fixed-width ISO-8601 text (microseconds, UTC offset), so strings sort as times."""
    return moment.isoformat(timespec="microseconds")


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def from_micros(micros: int) -> dt.datetime:
    """Microseconds since the epoch as an aware UTC datetime."""
    return EPOCH + dt.timedelta(microseconds=int(micros))


def to_micros(moment: str) -> int:
    """Microseconds since the epoch of an ISO-8601 time (:func:`iso`), in exact integers."""
    delta = dt.datetime.fromisoformat(moment) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def iso_micros(micros: int | None) -> str | None:
    """:func:`iso` of microseconds since the epoch; None stays None."""
    return None if micros is None else iso(from_micros(micros))
