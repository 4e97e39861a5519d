"""Splitters: interactions -> Split(train, validation, test), without time travel.

Each splitter is a pure DataFrame transform; cut-offs derived from quantiles are resolved
first by ``time_points`` (one small aggregate), so the split itself takes literals.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RATING, TIMESTAMP, USER
from receval_spark.config.ranking_data import (
    GivenSplit,
    GlobalTemporalSplit,
    LeaveLastNSplit,
    RollingSplit,
    UserHoldoutSplit,
    UserRandomSplit,
)
from receval_spark.errors import InputError
from receval_spark.expressions import from_micros, iso, iso_micros, seeded_hash, uniform
from receval_spark.metrics.aggregate import union_all

LEAKY_METHODS = {
    "leave_last_n": "leave_last_n: users' test periods overlap other users' training periods, "
    "so models may learn from interactions later than a test interaction",
    "user_random": "user_random ignores time: train contains interactions later than test ones "
    "(leaky; use global_temporal when timestamps exist)",
}


@dataclass(frozen=True)
class Split:
    """The parts of a split and the parameters that produced them (for the run record)."""

    train: DataFrame
    test: DataFrame
    validation: DataFrame | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def history(self) -> DataFrame:
        """What models learn from and seen-item filtering uses: train (+ validation)."""
        return self.train if self.validation is None else self.train.unionByName(self.validation)


# percentile_approx only brackets each quantile: its summary holds O(A·log(n/A)) entries per task
# for accuracy A (1e6 did not fit a 1 GB heap at 20M interactions; benchmarks/README.md, driver
# memory); the bracket's distinct timestamps, about 2·MARGIN·n rows, then give the exact value.
QUANTILE_ACCURACY = 10_000
QUANTILE_MARGIN = 3 / QUANTILE_ACCURACY


def time_points(
    interactions: DataFrame, quantiles: Sequence[float] = ()
) -> tuple[dt.datetime, dt.datetime, list[dt.datetime]]:
    """The earliest and latest interaction timestamps (UTC) and the exact q-quantile of the
    timestamps for each q of ``quantiles``: the smallest timestamp with at least q·n of the n
    interactions at or before it.

    One aggregate gives the bounds, n and a bracket per q (the approximate (q ± margin)-quantiles,
    relative rank error 1/QUANTILE_ACCURACY, so the exact one lies inside); a second counts the
    rows below each bracket and collects the distinct timestamps inside with their counts."""
    times = interactions.select(F.unix_micros(TIMESTAMP).alias("t"))
    aggregates = [F.min("t").alias("lo"), F.max("t").alias("hi"), F.count("t").alias("n")]
    for i, q in enumerate(quantiles):
        bounds = [max(q - QUANTILE_MARGIN, 0.0), min(q + QUANTILE_MARGIN, 1.0)]
        aggregates.append(F.percentile_approx("t", bounds, QUANTILE_ACCURACY).alias(f"b{i}"))
    row = times.agg(*aggregates).collect()[0]
    ranks = [max(1, math.ceil(Fraction(str(q)) * row["n"])) for q in quantiles]
    brackets = [tuple(row[f"b{i}"]) for i in range(len(quantiles))]
    points = order_statistics(times, ranks, brackets) if quantiles else []
    return from_micros(row["lo"]), from_micros(row["hi"]), [from_micros(p) for p in points]


def order_statistics(
    times: DataFrame, ranks: Sequence[int], brackets: Sequence[tuple[int, int]]
) -> list[int]:
    """The r-th smallest ``t`` of ``times`` for each rank r (1-based), given a bracket [lo, hi]
    of values that holds it, from one grouping: every distinct ``t`` inside a bracket with its
    count, and the rows outside all brackets counted per number of bracket starts at or below
    them (``gap``), which gives the rows below each bracket."""
    t = F.col("t")
    starts = sorted({lo for lo, _ in brackets})
    inside = functools.reduce(
        lambda a, b: a | b, [t.between(F.lit(lo), F.lit(hi)) for lo, hi in brackets]
    )
    gap = functools.reduce(
        lambda a, b: a + b, [F.when(t >= F.lit(lo), 1).otherwise(0) for lo in starts]
    )
    counts = times.groupBy(
        F.when(inside, t).alias("inner"), F.when(~inside, gap).alias("gap")
    ).count()
    inner: dict[int, int] = {}
    gaps: dict[int, int] = {}
    for value, outside, count in counts.collect():
        if outside is None:
            inner[value] = count
        else:
            gaps[outside] = count
    values = sorted(inner)
    answers = []
    for rank, (lo, hi) in zip(ranks, brackets, strict=True):
        # outside rows below lo: those with at most starts.index(lo) starts at or below them
        seen = sum(c for j, c in gaps.items() if j <= starts.index(lo))
        seen += sum(inner[v] for v in values if v < lo)
        for v in (v for v in values if lo <= v <= hi):
            seen += inner[v]
            if seen >= rank:
                answers.append(v)
                break
        else:  # percentile_approx's error bound makes this unreachable
            raise RuntimeError(f"the {rank}-th timestamp is outside its bracket [{lo}, {hi}]")
    return answers


def to_datetime(value: dt.datetime | dt.date | float) -> dt.datetime:
    """A config time point (ISO datetime, date, or epoch seconds) as an aware UTC datetime."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    return dt.datetime.fromtimestamp(float(value), tz=dt.UTC)


def plan_global_temporal(
    config: GlobalTemporalSplit, interactions: DataFrame
) -> tuple[dt.datetime, dt.datetime | None]:
    """Resolve the test and validation cut-offs and check both lie inside the data.

    A cut-off at or before the first timestamp leaves train empty, one after the last
    timestamp leaves test empty: both are errors naming the data's time range.
    """
    quantiles = [q for q in (config.quantile, config.validation_quantile) if q is not None]
    lo, hi, points = time_points(interactions, quantiles)
    resolved = dict(zip(quantiles, points, strict=True))
    if config.cutoff is not None:
        cutoff = to_datetime(config.cutoff)
    else:
        assert config.quantile is not None  # GlobalTemporalSplit: a cutoff or a quantile
        cutoff = resolved[config.quantile]
    validation = None
    if config.validation_cutoff is not None:
        validation = to_datetime(config.validation_cutoff)
    elif config.validation_quantile is not None:
        validation = resolved[config.validation_quantile]
    for key, point in (
        ("split.cutoff", cutoff),
        ("split.validation_cutoff", validation),
    ):
        if point is not None and not lo < point <= hi:
            raise InputError(
                f"{key}: {iso(point)} is outside the data, whose timestamps run from "
                f"{iso(lo)} to {iso(hi)}; choose a cut-off strictly after the first "
                "and at or before the last timestamp (or use split.quantile)."
            )
    if validation is not None and validation >= cutoff:
        raise InputError(
            f"split.validation_cutoff: {iso(validation)} must be earlier than split.cutoff "
            f"{iso(cutoff)}."
        )
    return cutoff, validation


def global_temporal_split(
    interactions: DataFrame,
    *,
    cutoff: dt.datetime,
    validation_cutoff: dt.datetime | None = None,
) -> Split:
    """train: timestamp < cutoff, test: timestamp >= cutoff.

    With ``validation_cutoff`` (earlier than ``cutoff``): train is before it, validation lies
    in [validation_cutoff, cutoff), test as above.
    """
    ts = F.col(TIMESTAMP)
    cut = F.lit(cutoff)
    params: dict[str, Any] = {"method": "global_temporal", "cutoff": iso(cutoff)}
    test = interactions.filter(ts >= cut)
    if validation_cutoff is None:
        return Split(train=interactions.filter(ts < cut), test=test, params=params)
    vcut = F.lit(validation_cutoff)
    params["validation_cutoff"] = iso(validation_cutoff)
    return Split(
        train=interactions.filter(ts < vcut),
        validation=interactions.filter((ts >= vcut) & (ts < cut)),
        test=test,
        params=params,
    )


def leave_last_n_split(interactions: DataFrame, *, n: int) -> Split:
    """Each user's last n interactions (timestamp, then item id, descending) are test.

    Users with n or fewer interactions keep all of them in train (nothing would remain to
    learn from) and are not evaluated.
    """
    by_user = Window.partitionBy(USER)
    latest_first = by_user.orderBy(
        F.col(TIMESTAMP).desc(), F.col(ITEM).desc(), F.col(RATING).desc_nulls_last()
    )
    ranked = interactions.select(
        "*",
        F.row_number().over(latest_first).alias("_position"),
        F.count(F.lit(1)).over(by_user).alias("_n"),
    )
    is_test = (F.col("_position") <= n) & (F.col("_n") > n)
    return _by_flag(ranked, is_test, {"method": "leave_last_n", "n": n})


def user_random_split(interactions: DataFrame, *, fraction: float, seed: int) -> Split:
    """round(fraction * n_u) of each user's interactions, chosen by a seeded hash, are test.

    The hash of (seed, user, item, timestamp) orders each user's rows, so the result does not
    depend on partitioning or input order. Users whose share rounds to 0 stay in train.
    """
    by_user = Window.partitionBy(USER)
    shuffled = by_user.orderBy(
        seeded_hash(seed, USER, ITEM, TIMESTAMP),
        F.col(ITEM),
        F.col(TIMESTAMP),
        F.col(RATING),
    )
    ranked = interactions.select(
        "*",
        F.row_number().over(shuffled).alias("_position"),
        F.count(F.lit(1)).over(by_user).alias("_n"),
    )
    is_test = F.col("_position") <= F.round(F.col("_n") * F.lit(fraction))
    return _by_flag(ranked, is_test, {"method": "user_random", "fraction": fraction, "seed": seed})


def user_holdout_split(interactions: DataFrame, *, fraction: float, seed: int) -> Split:
    """Users whose seeded hash falls below ``fraction`` go wholly to test (cold start).

    Each user is held out independently with probability ``fraction``, so the held-out share
    is ``fraction`` in expectation, not exactly.
    """
    is_test = uniform(seeded_hash(seed, USER)) < F.lit(fraction)
    return _by_flag(
        interactions,
        is_test,
        {"method": "user_holdout", "fraction": fraction, "seed": seed},
    )


def given_split(config: GivenSplit, train: DataFrame | None, test: DataFrame) -> Split:
    """The caller's own train (None: no train rows) and test, as given; ``cutoff``, when
    configured, is recorded for the leakage check."""
    params: dict[str, Any] = {"method": "given"}
    if config.cutoff is not None:
        params["cutoff"] = iso(to_datetime(config.cutoff))
    return Split(train=test.limit(0) if train is None else train, test=test, params=params)


def rolling_splits(config: RollingSplit, interactions: DataFrame) -> list[Split]:
    """The windows of a rolling backtest, oldest first (docs/evaluation.md#rolling-backtests):
    the last test window ends at ``end`` (default: just after the last timestamp), window w of
    n starts at end - test_length - (n - w)·step; its test is [start, start + test_length),
    its train every interaction before start (before start - validation_length, with that
    stretch as validation). One aggregate finds the data's bounds; an empty train is an error
    naming them."""
    lo, hi, _ = time_points(interactions)
    end = to_datetime(config.end) if config.end is not None else hi + dt.timedelta(microseconds=1)
    n, length = config.windows, config.test_length
    starts = [end - length - (n - w) * config.stride for w in range(1, n + 1)]
    first_train_end = starts[0] - (config.validation_length or dt.timedelta(0))
    if first_train_end <= lo:
        raise InputError(
            f"split: the first of {n} rolling windows starts at {iso(starts[0])}, so its train "
            f"(before {iso(first_train_end)}) is empty: the data's timestamps run from "
            f"{iso(lo)} to {iso(hi)}; use fewer windows, a shorter test_length or step, or a "
            "later split.end."
        )
    ts = F.col(TIMESTAMP)
    validation = config.validation_length
    splits = []
    for w, start in enumerate(starts, 1):
        test = interactions.filter((ts >= F.lit(start)) & (ts < F.lit(start + length)))
        params: dict[str, Any] = {
            "method": "rolling",
            "window": w,
            "windows": n,
            "cutoff": iso(start),
            "test_end": iso(start + length),
        }
        split = global_temporal_split(
            interactions.filter(ts < F.lit(start)),
            cutoff=start,
            validation_cutoff=start - validation if validation is not None else None,
        )
        splits.append(dataclasses.replace(split, test=test, params={**split.params, **params}))
    return splits


def split_interactions(
    config: GlobalTemporalSplit | LeaveLastNSplit | UserRandomSplit | UserHoldoutSplit | GivenSplit,
    interactions: DataFrame,
    given: tuple[DataFrame | None, DataFrame] | None = None,
) -> Split:
    """Dispatch on ``split.method``; the given split takes ``given`` (train or None, test)."""
    if isinstance(config, GivenSplit):
        assert given is not None  # the sources read data.test under the given split
        return given_split(config, *given)
    if isinstance(config, GlobalTemporalSplit):
        cutoff, validation = plan_global_temporal(config, interactions)
        split = global_temporal_split(interactions, cutoff=cutoff, validation_cutoff=validation)
        if config.quantile is not None:
            split.params["quantile"] = config.quantile
        if config.validation_quantile is not None:
            split.params["validation_quantile"] = config.validation_quantile
        return split
    if isinstance(config, LeaveLastNSplit):
        return leave_last_n_split(interactions, n=config.n)
    if isinstance(config, UserRandomSplit):
        return user_random_split(interactions, fraction=config.fraction, seed=config.seed)
    return user_holdout_split(interactions, fraction=config.fraction, seed=config.seed)


def _by_flag(rows: DataFrame, is_test: Column, params: dict[str, Any]) -> Split:
    flagged = rows.withColumn("_is_test", is_test).drop("_position", "_n")
    return Split(
        train=flagged.filter(~F.col("_is_test")).drop("_is_test"),
        test=flagged.filter(F.col("_is_test")).drop("_is_test"),
        params=params,
    )


@dataclass(frozen=True)
class PartCounts:
    """One split part in the run record: rows, distinct users and items, and the first and
    last timestamp (ISO 8601, UTC; None for an empty part)."""

    rows: int
    users: int
    items: int
    first_timestamp: str | None
    last_timestamp: str | None

    def record(self) -> dict[str, int | str | None]:
        """The run record's form of the part."""
        return {
            "rows": self.rows,
            "users": self.users,
            "items": self.items,
            "first_timestamp": self.first_timestamp,
            "last_timestamp": self.last_timestamp,
        }


def describe_parts(parts: Mapping[str, DataFrame]) -> dict[str, PartCounts]:
    """Rows, distinct users and items, and the time range of each split part, from one
    aggregation over all of them (an empty part: zero counts, no time range)."""
    micros = F.unix_micros(TIMESTAMP)
    labelled = union_all(
        [df.select(F.lit(name).alias("_part"), USER, ITEM, TIMESTAMP) for name, df in parts.items()]
    )
    assert labelled is not None  # train and test at least
    found = {
        row["_part"]: PartCounts(
            rows=int(row["rows"]),
            users=int(row["users"]),
            items=int(row["items"]),
            first_timestamp=iso_micros(row["first"]),
            last_timestamp=iso_micros(row["last"]),
        )
        for row in labelled.groupBy("_part")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.countDistinct(USER).alias("users"),
            F.countDistinct(ITEM).alias("items"),
            F.min(micros).alias("first"),
            F.max(micros).alias("last"),
        )
        .collect()
    }
    empty = PartCounts(rows=0, users=0, items=0, first_timestamp=None, last_timestamp=None)
    return {name: found.get(name, empty) for name in parts}


def describe_split(split: Split) -> dict[str, PartCounts]:
    """The counts of the split's parts (train, test, and validation when there is one) for
    the run record's ``split`` (docs/evaluation.md#splits-no-time-travel).

    Raises InputError when train or test (or a validation part) is empty.
    """
    parts = {"train": split.train, "test": split.test}
    if split.validation is not None:
        parts["validation"] = split.validation
    described = describe_parts(parts)
    # a given pair may come without train rows (no seen items, no popularity)
    needed = ("test",) if split.params.get("method") == "given" else ("train", "test")
    for name in needed:
        if described[name].rows == 0:
            fix = (
                "give data.test (or test=df) with rows, or check its where predicate"
                if split.params.get("method") == "given"
                else "change split.cutoff, split.quantile, split.fraction or split.n so that "
                "both train and test hold rows"
            )
            raise InputError(f"split: the {name} part is empty ({split.params}); {fix}.")
    if "validation" in described and described["validation"].rows == 0:
        raise InputError("split.validation_cutoff: the validation part is empty; move it earlier.")
    return described


def history_row_count(parts: Mapping[str, PartCounts]) -> int:
    """Rows of the train history (train + validation) of :func:`describe_split`'s parts."""
    return parts["train"].rows + (parts["validation"].rows if "validation" in parts else 0)
