"""Report datasets as DataFrames with the schemas of CONTRACT.md (metrics, comparisons, runs,
per_user) and of the README (long_tail, off_policy)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from receval_spark.columns import USER
from receval_spark.metrics.beyond import LONG_TAIL_COUNTS

METRICS_SCHEMA = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("model", T.StringType(), False),
        T.StructField("segment", T.StringType(), False),
        T.StructField("protocol", T.StringType(), False),
        T.StructField("metric", T.StringType(), False),
        T.StructField("k", T.IntegerType(), True),
        T.StructField("value", T.DoubleType(), True),
        T.StructField("n_users", T.LongType(), False),
        T.StructField("std", T.DoubleType(), True),
        T.StructField("ci_low", T.DoubleType(), True),
        T.StructField("ci_high", T.DoubleType(), True),
    ]
)

COMPARISONS_SCHEMA = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("model", T.StringType(), False),
        T.StructField("baseline", T.StringType(), False),
        T.StructField("segment", T.StringType(), False),
        T.StructField("protocol", T.StringType(), False),
        T.StructField("metric", T.StringType(), False),
        T.StructField("k", T.IntegerType(), True),
        T.StructField("n_users", T.LongType(), False),
        T.StructField("mean_diff", T.DoubleType(), True),
        T.StructField("std_diff", T.DoubleType(), True),
        T.StructField("ci_low", T.DoubleType(), True),
        T.StructField("ci_high", T.DoubleType(), True),
        T.StructField("p_ttest", T.DoubleType(), True),
        T.StructField("p_wilcoxon", T.DoubleType(), True),
        T.StructField("p_holm", T.DoubleType(), True),
        T.StructField("p_wilcoxon_holm", T.DoubleType(), True),
        T.StructField("holm_family_size", T.LongType(), True),
    ]
)

OFF_POLICY_SCHEMA = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("model", T.StringType(), False),
        T.StructField("estimator", T.StringType(), False),
        T.StructField("value", T.DoubleType(), True),
        T.StructField("std_error", T.DoubleType(), True),
        T.StructField("ci_low", T.DoubleType(), True),
        T.StructField("ci_high", T.DoubleType(), True),
        T.StructField("n_impressions", T.LongType(), False),
        T.StructField("effective_n", T.DoubleType(), True),
        T.StructField("max_weight", T.DoubleType(), True),
        T.StructField("clip", T.DoubleType(), True),
    ]
)

CHECK_TYPE = T.StructType(
    [
        T.StructField("name", T.StringType(), False),
        T.StructField("passed", T.BooleanType(), False),
        T.StructField("detail", T.StringType(), True),
    ]
)

RUNS_SCHEMA = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("run_name", T.StringType(), False),
        T.StructField("started_at", T.TimestampType(), False),
        T.StructField("finished_at", T.TimestampType(), False),
        T.StructField("status", T.StringType(), False),
        T.StructField("config", T.StringType(), False),
        T.StructField("split", T.StringType(), False),
        T.StructField("n_users_evaluated", T.LongType(), False),
        T.StructField("versions", T.StringType(), False),
        T.StructField("checks", T.ArrayType(CHECK_TYPE, False), False),
        T.StructField("warnings", T.ArrayType(T.StringType(), False), False),
        T.StructField("alerts", T.ArrayType(T.StringType(), False), False),
        T.StructField("tuning", T.StringType(), False),
    ]
)


@dataclass(frozen=True)
class MetricRow:
    """One (model, segment, metric, k) aggregate."""

    model: str
    segment: str
    metric: str
    k: int | None
    value: float | None
    n_users: int
    std: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    protocol: str = "full"


@dataclass(frozen=True)
class ComparisonRow:
    """One paired comparison of a model with the baseline at (segment, metric, k).

    p_holm / p_wilcoxon_holm: the t-test / Wilcoxon p-values Holm-adjusted over all
    comparisons of the run (every protocol and segment: one family per test);
    holm_family_size: the number of comparisons in that family."""

    model: str
    baseline: str
    segment: str
    metric: str
    k: int | None
    n_users: int
    mean_diff: float | None
    std_diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_ttest: float | None
    p_wilcoxon: float | None
    p_holm: float | None = None
    p_wilcoxon_holm: float | None = None
    holm_family_size: int | None = None
    protocol: str = "full"


@dataclass(frozen=True)
class OffPolicyRow:
    """One off-policy estimate of a model's mean reward per logged impression (estimator ips,
    clipped_ips, snips), or the logging policy's own mean reward (model ``logging``, estimator
    ``logged_mean``); ``clip`` is M on clipped_ips rows, None elsewhere."""

    model: str
    estimator: str
    value: float | None
    std_error: float | None
    ci_low: float | None
    ci_high: float | None
    n_impressions: int
    effective_n: float | None
    max_weight: float | None
    clip: float | None = None


@dataclass(frozen=True)
class Check:
    """A sanity check written into the run record."""

    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class RunRecord:
    """Everything the ``runs`` dataset says about one run."""

    run_id: str
    run_name: str
    started_at: dt.datetime
    finished_at: dt.datetime
    status: str
    config: dict[str, Any]
    split: dict[str, Any]
    n_users_evaluated: int
    versions: dict[str, str]
    checks: Sequence[Check] = field(default_factory=tuple)
    warnings: Sequence[str] = field(default_factory=tuple)
    alerts: Sequence[str] = field(default_factory=tuple)
    tuning: dict[str, Any] = field(default_factory=dict)  # per model: grid scores, chosen values


def metrics_table(spark: SparkSession, rows: Sequence[MetricRow], *, run_id: str) -> DataFrame:
    """The ``metrics`` dataset for one run, ordered by model, segment, metric, k."""
    data = [
        (
            run_id,
            r.model,
            r.segment,
            r.protocol,
            r.metric,
            r.k,
            _finite(r.value),
            r.n_users,
            _finite(r.std),
            _finite(r.ci_low),
            _finite(r.ci_high),
        )
        for r in sorted(rows, key=lambda r: (r.model, r.segment, r.metric, r.k or 0))
    ]
    return spark.createDataFrame(data, METRICS_SCHEMA)


def comparisons_table(
    spark: SparkSession, rows: Sequence[ComparisonRow], *, run_id: str
) -> DataFrame:
    """The ``comparisons`` dataset for one run, ordered by model, segment, metric, k."""
    data = [
        (
            run_id,
            r.model,
            r.baseline,
            r.segment,
            r.protocol,
            r.metric,
            r.k,
            r.n_users,
            *(
                _finite(v)
                for v in (
                    r.mean_diff,
                    r.std_diff,
                    r.ci_low,
                    r.ci_high,
                    r.p_ttest,
                    r.p_wilcoxon,
                    r.p_holm,
                    r.p_wilcoxon_holm,
                )
            ),
            r.holm_family_size,
        )
        for r in sorted(rows, key=lambda r: (r.model, r.segment, r.metric, r.k or 0))
    ]
    return spark.createDataFrame(data, COMPARISONS_SCHEMA)


def off_policy_table(
    spark: SparkSession, rows: Sequence[OffPolicyRow], *, run_id: str
) -> DataFrame:
    """The ``off_policy`` dataset for one run, ordered by model and estimator."""
    data = [
        (
            run_id,
            r.model,
            r.estimator,
            *(_finite(v) for v in (r.value, r.std_error, r.ci_low, r.ci_high)),
            r.n_impressions,
            *(_finite(v) for v in (r.effective_n, r.max_weight, r.clip)),
        )
        for r in sorted(rows, key=lambda r: (r.model, r.estimator))
    ]
    return spark.createDataFrame(data, OFF_POLICY_SCHEMA)


def runs_table(spark: SparkSession, record: RunRecord) -> DataFrame:
    """The ``runs`` dataset: one row for one run."""
    row = (
        record.run_id,
        record.run_name,
        record.started_at,
        record.finished_at,
        record.status,
        json.dumps(record.config, sort_keys=True, default=str),
        json.dumps(record.split, sort_keys=True, default=str),
        record.n_users_evaluated,
        json.dumps(record.versions, sort_keys=True),
        [(c.name, c.passed, c.detail) for c in record.checks],
        list(record.warnings),
        list(record.alerts),
        json.dumps(record.tuning, sort_keys=True),
    )
    return spark.createDataFrame([row], RUNS_SCHEMA)


def per_user_table(per_user_long: DataFrame, *, run_id: str) -> DataFrame:
    """The ``per_user`` dataset: run_id, model, segment, user_id (string), metric, k, value."""
    return per_user_long.select(
        F.lit(run_id).alias("run_id"),
        "model",
        "segment",
        F.col(USER).cast("string").alias(USER),
        "metric",
        F.col("k").cast("int").alias("k"),
        F.col("value").cast("double").alias("value"),
    )


def long_tail_table(long_tail: DataFrame, *, run_id: str) -> DataFrame:
    """The ``long_tail`` dataset: run_id, model, k, popularity_bin, min_interactions (2^bin, 0
    outside the catalogue), n_items, train_interactions, n_recommended_items, recommendations."""
    return long_tail.select(
        F.lit(run_id).alias("run_id"),
        "model",
        F.col("k").cast("int").alias("k"),
        F.col("popularity_bin").cast("int").alias("popularity_bin"),
        F.when(F.col("popularity_bin") >= 0, F.pow(F.lit(2), F.col("popularity_bin")))
        .otherwise(F.lit(0))
        .cast("long")
        .alias("min_interactions"),
        *[F.col(c).cast("long").alias(c) for c in LONG_TAIL_COUNTS],
    )


def _finite(value: float | None) -> float | None:
    return None if value is None or value != value else float(value)


@dataclass(frozen=True)
class Outcome:
    """What one evaluation computed, for either protocol: the driver-side aggregates (a few
    rows per model, segment, metric and k), plus the lazy per-user and long-tail tables.

    ``n_users_evaluated``: users with a non-empty Rel(u) (ranking), prediction events
    (session). ``stage_seconds``: wall seconds per stage of the job."""

    metrics: list[MetricRow]
    split: dict[str, Any]
    n_users_evaluated: int
    checks: list[Check]
    warnings: list[str]
    comparisons: list[ComparisonRow] = field(default_factory=list)
    per_user: DataFrame | None = None
    long_tail: DataFrame | None = None
    off_policy: list[OffPolicyRow] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    tuning: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Whether every sanity check passed."""
        return all(check.passed for check in self.checks)
