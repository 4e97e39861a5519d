"""Column expressions and time conversions shared by both protocols: seeded hashes (the
partition-independent randomness of splits, samples and tie-breaks), the co-occurrence cosine
and its exact order (item-kNN in both protocols), and exact ISO-8601 / epoch-microsecond
conversions."""

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


DIGITS = 10**9  # cosine_order's fraction: two longs of 9 decimals each


def cosine(both: str, support: str, other: str) -> Column:
    """The cosine both / sqrt(support * other) of counts (long columns) as the double
    sqrt(double(both²) / double(support * other)): IEEE division and square root are correctly
    rounded, so equal rationals both² / (support * other) give the same double (while both² and
    the product are below 2^53, exact as doubles), where both / sqrt(...) rounds twice (1/√3
    and 3/√27 differ in the last bit)."""
    square = (F.col(both) * F.col(both)).cast("double")
    return F.sqrt(square / (F.col(support) * F.col(other)).cast("double"))


def cosine_order(both: str, other: str) -> list[Column]:
    """Window sort keys, most similar first, of the cosines both / sqrt(|S_i| * other) of one
    item i's neighbours (|S_i| is common, so they are ordered as the rationals both² / other):
    the integer part of both² / other, then its first 18 decimals as two floors of 9 digits,
    by long division only. Exact while every support (``other``) is at most 10^9: both² fits a
    long, and two distinct ratios of such denominators differ by at least 10^-18, so their keys
    differ; equal ratios (1/3 and 9/27) get equal keys, left for the item id to break."""
    square, below = F.col(both) * F.col(both), F.col(other)
    rest = square % below
    return [
        F.call_function("div", square, below).desc(),
        F.call_function("div", rest * DIGITS, below).desc(),
        F.call_function("div", rest * DIGITS % below * DIGITS, below).desc(),
    ]


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
