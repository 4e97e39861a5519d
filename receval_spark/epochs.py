"""Numeric epoch times: their conversion to timestamps, and the plausibility rule that catches
a wrong ``timestamp_unit`` (docs/configuration.md#timestamp-units).

The rule, on the minimum and maximum of a numeric time column read in its configured unit:

- every time must fall in [1900-01-01, 2200-01-01) UTC: epoch milliseconds read as seconds
  land after the year 2200 for any date after March 1970 (and Python, which collects the
  cut-off, stops at the year 9999); times before 1970 (negative epochs) are legitimate;
- with ``timestamp_unit: ms``, values that as seconds fall in [1971, 2200) (so as milliseconds
  all fall in the first 84 days of 1970) are epoch seconds. Small values (relative times of
  a synthetic log, e.g. 0, 1000, ...) are never refused.

The message names the column, the range of values seen, the times they give, and the unit
that would put every value in [1971, 2200) when one does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import TIMESTAMP
from receval_spark.errors import InputError
from receval_spark.expressions import EPOCH, from_micros

EPOCH_UNIT = "epoch_unit"  # column metadata of a timestamp read from numbers: their unit

MICROS: dict[str, Fraction] = {
    "s": Fraction(1_000_000),
    "ms": Fraction(1_000),
    "us": Fraction(1),
    "ns": Fraction(1, 1_000),
}
UNIT_WORDS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
# the instant of +-9e12 s is near Spark's last timestamp (year 294247, Long.MaxValue us)
_EXACT_SECONDS = 9_000_000_000_000
_LONG_MAX = (1 << 63) - 1


def _micros(year: int) -> int:
    return (dt.datetime(year, 1, 1, tzinfo=dt.UTC) - EPOCH) // dt.timedelta(microseconds=1)


PLAUSIBLE = (_micros(1900), _micros(2200))  # [first, end) of an event log's times
LIKELY = (_micros(1971), _micros(2200))  # where a suggested unit must put every value


def epoch_timestamp(value: Column, unit: str) -> Column:
    """A numeric epoch column as a UTC timestamp, exactly (``timestamp_seconds``,
    ``timestamp_millis``) where the instant fits Spark's timestamps; beyond that the time
    saturates at Spark's first or last timestamp instead of failing the query, so that
    :func:`check_epoch_range` can name the column. NaN and infinity become null."""
    finite = F.when(~F.isnan(value) & (F.abs(value) != float("inf")), value)
    per_second = 1000 if unit == "ms" else 1
    exact = (
        F.timestamp_millis(finite.try_cast("long")) if unit == "ms" else F.timestamp_seconds(finite)
    )
    saturated = F.timestamp_seconds(finite.cast("double") / per_second)
    inside = F.abs(finite.cast("double")) < _EXACT_SECONDS * per_second
    return F.when(inside, exact).otherwise(saturated)


def epoch_range(df: DataFrame) -> dict[str, Column]:
    """Aggregates of the first and last time (epoch microseconds) of the canonical ``timestamp``
    column when it was read from numbers (none otherwise), for the validation's one pass."""
    if EPOCH_UNIT not in df.schema[TIMESTAMP].metadata:
        return {}
    micros = F.unix_micros(TIMESTAMP)
    return {"first": F.min(micros), "last": F.max(micros)}


def check_epoch_range(
    df: DataFrame, times: Mapping[str, Any], *, column: str | None, role: str, source: str
) -> None:
    """Raise InputError when the first and last ``times`` (of :func:`epoch_range`) of the
    numeric source ``column``, read in its unit, break the module's rule."""
    unit = df.schema[TIMESTAMP].metadata.get(EPOCH_UNIT)
    first, last = times.get("first"), times.get("last")
    if unit is None or column is None or first is None or last is None:
        return
    if PLAUSIBLE[0] <= first and last < PLAUSIBLE[1]:
        if unit != "ms" or _other_unit(first, last, unit) != "s":
            return
        problem = "all within the first 84 days of 1970"
    else:
        problem = "not between 1900 and 2200"
    key = f"{source}.timestamp_unit"
    raise InputError(
        f"{source}: column {column!r} ({role}) holds values from {_value(first, unit)} to "
        f"{_value(last, unit)}; read as epoch {UNIT_WORDS[unit]} ({key}: {unit}) they are "
        f"times from {_when(first)} to {_when(last)}, {problem}; {_advice(first, last, unit, key)}."
    )


def _other_unit(first: int, last: int, unit: str) -> str | None:
    """The unit other than ``unit`` that puts every value in LIKELY, if one does."""
    if max(abs(first), abs(last)) >= _LONG_MAX:  # saturated: the values are not known
        return None
    for other, micros in MICROS.items():
        scale = micros / MICROS[unit]
        if other != unit and LIKELY[0] <= first * scale and last * scale < LIKELY[1]:
            return other
    return None


def _advice(first: int, last: int, unit: str, key: str) -> str:
    other = _other_unit(first, last, unit)
    if other in ("s", "ms"):
        return f"they look like epoch {UNIT_WORDS[other]}: set {key}: {other}"
    if other is not None:
        factor = "1000" if other == "us" else "1000000"
        return (
            f"they look like epoch {UNIT_WORDS[other]}: divide the column by {factor} and set "
            f"{key}: ms"
        )
    return (
        "no unit puts them between 1971 and 2200: write the column as epoch seconds or "
        f"milliseconds ({key}: s or ms), or as a timestamp"
    )


def _value(micros: int, unit: str) -> str:
    """The column's value behind ``micros`` as written (integers without a fraction)."""
    if abs(micros) >= _LONG_MAX:  # saturated (epoch_timestamp): beyond Spark's timestamps
        return f"{'more' if micros > 0 else 'less'} than {float(micros / MICROS[unit]):.3g}"
    value = micros / MICROS[unit]
    return str(value.numerator) if value.denominator == 1 else f"{float(value):.15g}"


def _when(micros: int) -> str:
    """The date of ``micros``, or its year where Python's dates end (years 1 to 9999)."""
    try:
        return from_micros(micros).date().isoformat()
    except (OverflowError, ValueError):
        return f"year {1970 + round(micros / 31_556_952_000_000)}"
