"""Splitters: interactions -> Split(train, validation, test), without time travel.

Each splitter is a pure DataFrame transform; cut-offs derived from quantiles are resolved
first by ``time_points`` (one small aggregate), so the split itself takes literals.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RATING, TIMESTAMP, USER
from receval_spark.config import (
    GlobalTemporalSplit,
    LeaveLastNSplit,
    UserHoldoutSplit,
    UserRandomSplit,
)
from receval_spark.errors import InputError
from receval_spark.expressions import from_micros, iso, seeded_hash, uniform

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


def time_points(
    interactions: DataFrame, quantiles: Sequence[float] = ()
) -> tuple[dt.datetime, dt.datetime, list[dt.datetime]]:
    """The earliest and latest interaction timestamps (UTC) and the q-quantile of the
    timestamps for each q of ``quantiles`` (approximate, relative error 1e-6), from one
    aggregate: one pass over the log however many cut-offs the split derives."""
    micros = F.unix_micros(TIMESTAMP)
    aggregates = [F.min(micros).alias("lo"), F.max(micros).alias("hi")]
    if quantiles:
        aggregates.append(F.percentile_approx(micros, list(quantiles), 1_000_000).alias("q"))
    row = interactions.agg(*aggregates).collect()[0]
    points = [from_micros(m) for m in row["q"]] if quantiles else []
    return from_micros(row["lo"]), from_micros(row["hi"]), points


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
    cutoff = to_datetime(config.cutoff) if config.cutoff is not None else resolved[config.quantile]
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


def split_interactions(
    config: GlobalTemporalSplit | LeaveLastNSplit | UserRandomSplit | UserHoldoutSplit,
    interactions: DataFrame,
) -> Split:
    """Dispatch on ``split.method``."""
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
