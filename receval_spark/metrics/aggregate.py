"""From wide per-user metric tables to long per-user rows and macro averages.

Sums of doubles are computed with ``exact_sum``: Spark adds partial sums in an order that
depends on the partitioning (and on a cluster, on which shuffle block arrives first), so a
plain ``F.sum``/``F.avg`` of doubles can change in the last bits between runs of the same input.
Fixed-point limbs summed as longs make every mean, deviation and interval bit-for-bit identical
under any number of partitions, executors or cores.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, WindowSpec
from pyspark.sql import functions as F

LIMB = 2.0**31  # the fraction in two 31-bit limbs: resolution 2^-62, exact for |x| >= 2^-9


def _column(x: Column | str) -> Column:
    return F.col(x) if isinstance(x, str) else x


def _limbs(x: Column) -> tuple[Column, Column, Column]:
    """Longs h, m, l with x = h + (m + l / 2^31) / 2^31 up to 2^-62 (floors; every step exact)."""
    h = F.floor(x)
    middle = (x - h) * F.lit(LIMB)
    m = F.floor(middle)
    return h, m, F.floor((middle - m) * F.lit(LIMB))


def exact_sum(x: Column | str) -> Column:
    """Sum of a double column (nulls skipped) that does not depend on the order of addition:
    each value is cut into fixed-point limbs (``_limbs``) whose long sums are exact, then
    recombined; within 2^-62 per value of the exact sum, for sums of |x| below 9.2e18.
    An aggregate expression."""
    return limb_sum(*_limbs(_column(x)))


def exact_window_sum(x: Column | str, window: WindowSpec) -> Column:
    """``exact_sum`` of ``x`` over ``window``: the same limbs, each summed over the window, so
    the total does not depend on the order of the window's rows either."""
    h, m, low = (F.sum(limb).over(window).cast("double") for limb in _limbs(_column(x)))
    return h + (m + low / F.lit(LIMB)) / F.lit(LIMB)


def limb_sum(h: Column | str, m: Column | str, low: Column | str) -> Column:
    """``exact_sum`` from columns of limbs already cut (or partly summed elsewhere, e.g. in a
    numpy kernel: floor(x), floor((x - h) 2^31), floor of the rest times 2^31, as longs): the
    long sums recombined. An aggregate expression."""
    h, m, low = (F.sum(_column(limb)).cast("double") for limb in (h, m, low))
    return h + (m + low / F.lit(LIMB)) / F.lit(LIMB)


def exact_mean(x: Column | str) -> Column:
    """Mean of the non-null values, summed with ``exact_sum``."""
    x = _column(x)
    return exact_sum(x) / F.count(x)


def exact_std(x: Column | str) -> Column:
    """Sample standard deviation sqrt((sum x^2 - (sum x)^2 / n) / (n - 1)) from exact sums
    (so sum x^2 must stay below 9.2e18: metric values, not raw counts); 0 when all values are
    equal, null below 2 values (as ``stddev_samp``)."""
    x = _column(x)
    n = F.count(x)
    sum_x = exact_sum(x)
    variance = (exact_sum(x * x) - sum_x * sum_x / n) / (n - 1)
    return (
        F.when(n < 2, F.lit(None))
        .when(F.min(x) == F.max(x), F.lit(0.0))
        .otherwise(F.sqrt(F.greatest(variance, F.lit(0.0))))
    )


def summary(x: str) -> list[Column]:
    """(value, n_users, std): the mean, the number of rows and the sample deviation of ``x``."""
    return [
        exact_mean(x).alias("value"),
        F.count(F.lit(1)).alias("n_users"),
        exact_std(x).alias("std"),
    ]


def union_all(frames: Sequence[DataFrame]) -> DataFrame | None:
    """The rows of all frames (matched by column name); None when there are none."""
    return reduce(lambda left, right: left.unionByName(right), frames) if frames else None


def to_long(per_user: DataFrame, *, metrics: Sequence[str], keys: Sequence[str]) -> DataFrame:
    """Unpivot metric columns: (*keys, metric, value) with one row per metric."""
    return per_user.unpivot(
        ids=list(keys),
        values=list(metrics),
        variableColumnName="metric",
        valueColumnName="value",
    )


def macro_average(per_user_long: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """Mean over users of each metric: (*by, value, n_users, std) with std the sample deviation.

    Each (group, user) must appear once, so the mean is a macro average over users.
    """
    return per_user_long.groupBy(*by).agg(*summary("value"))
