"""Whether a split lets models see the future: the ``no_temporal_leakage`` check of a global
temporal cut, and of a given train/test pair (docs/evaluation.md#given-split), with the
warnings that state what could not be checked or is leaky without being time travel."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import functions as F

from receval_spark.columns import TIMESTAMP, USER
from receval_spark.config.ranking_data import (
    GivenSplit,
    GlobalTemporalSplit,
    RollingSplit,
    SplitConfig,
)
from receval_spark.expressions import iso_micros
from receval_spark.ranking.checks import temporal_leakage_check
from receval_spark.ranking.split import Split
from receval_spark.results import Check

NO_TIMESTAMPS = (
    "given split: train or test carries no timestamps, so no_temporal_leakage cannot run; "
    "map columns.timestamp of data.train and data.test to have it checked"
)


@dataclass(frozen=True)
class Leakage:
    """The split's leakage checks and warnings."""

    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def split_leakage(config: SplitConfig, split: Split, *, timestamps: bool) -> Leakage:
    """``no_temporal_leakage`` where the split has a time rule to check: a global temporal
    cut (and a given pair with its ``cutoff``) against its cut-off; a given pair without one
    per user (:func:`given_leakage`); nothing for the other methods (their leaky ones are
    warned about by :func:`~receval_spark.ranking.checks.run_warnings`). ``timestamps``:
    whether every part carries them."""
    if isinstance(config, GlobalTemporalSplit | RollingSplit):
        return Leakage([temporal_leakage_check(split)])
    if not isinstance(config, GivenSplit):
        return Leakage()
    if not timestamps:
        return Leakage(warnings=[NO_TIMESTAMPS])
    if config.cutoff is not None:
        return Leakage([temporal_leakage_check(split)])
    return given_leakage(split)


def given_leakage(split: Split) -> Leakage:
    """A given pair without a cut-off: the check fails when some user's train holds an
    interaction at or after that user's first test interaction (the model saw that user's
    future); train ending after test begins across users is leaky in leave_last_n's way (a
    warning, as for that method). One aggregation over train joined with each test user's
    first time, one over both parts' bounds."""
    ts = F.unix_micros(TIMESTAMP)
    first_test = split.test.groupBy(USER).agg(F.min(ts).alias("_first_test"))
    travelled = (
        split.train.join(first_test, on=USER)
        .filter(ts >= F.col("_first_test"))
        .agg(F.count(F.lit(1)).alias("rows"), F.countDistinct(USER).alias("users"))
        .collect()[0]
    )
    train_last = split.train.agg(F.max(ts)).collect()[0][0]
    test_first = split.test.agg(F.min(ts)).collect()[0][0]
    rows, users = int(travelled["rows"]), int(travelled["users"])
    detail = (
        f"{rows} train interactions of {users} users lie at or after that user's first test "
        "interaction"
        if rows
        else "no user has a train interaction at or after their own first test interaction"
    )
    warnings = []
    if train_last is not None and test_first is not None and train_last >= test_first:
        span = f"train ends {iso_micros(train_last)}, test starts {iso_micros(test_first)}"
        detail += f"; {span}"
        warnings.append(
            f"leaky split: the given train and test overlap in time ({span}): models may learn "
            "from other users' interactions later than a test interaction; a global cut "
            "(split.method: global_temporal) avoids it"
        )
    return Leakage([Check("no_temporal_leakage", rows == 0, detail)], warnings)
