"""Report datasets as DataFrames with the schemas of CONTRACT.md (metrics, comparisons, runs,
per_user) and of docs/datasets.md (long_tail, off_policy).

Each row type is written once, as a dataclass; its Spark schema is derived from the field
types (:func:`spark_schema`), and a table's rows are its fields in that order, after run_id."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cache
from types import MappingProxyType, UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from receval_spark.columns import USER
from receval_spark.metrics.exposure import LONG_TAIL_COUNTS
from receval_spark.metrics.stability import NightLists
from receval_spark.stats import mean_interval, metric_bounds, normal_interval

SCALAR_TYPES: dict[type, T.DataType] = {
    str: T.StringType(),
    int: T.LongType(),
    bool: T.BooleanType(),
    dt.datetime: T.TimestampType(),
}
# field metadata for a Spark type other than the Python type's (an int column, not long)
INTEGER = MappingProxyType({"spark_type": T.IntegerType()})


@dataclass(frozen=True, kw_only=True)
class MetricRow:
    """One (model, segment, metric, k) aggregate."""

    model: str
    segment: str
    protocol: str = "full"
    metric: str
    k: int | None = field(metadata=INTEGER)
    value: float | None
    n_users: int
    std: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    window: int | None = field(default=None, metadata=INTEGER)  # rolling: 1..n, pooled: None


# the column of each evaluation.correction's adjusted t-test p-value in ``comparisons``
ADJUSTED_COLUMNS = MappingProxyType(
    {"holm": "p_holm", "bonferroni": "p_bonferroni", "benjamini_hochberg": "p_bh"}
)


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    """One paired comparison of a model with the baseline at (segment, metric, k).

    p_holm / p_wilcoxon_holm: the t-test / Wilcoxon p-values Holm-adjusted over all
    comparisons of the run (every protocol and segment: one family per test);
    holm_family_size: the number of comparisons in that family; p_bonferroni / p_bh: the
    t-test p-values Bonferroni- / Benjamini-Hochberg-adjusted over the same family;
    correction: which of the three decides (evaluation.correction, :attr:`p_adjusted`);
    effect_size: Cohen's d_z (mean_diff / std_diff); mde: the mean difference the paired
    t-test detects at alpha 0.05 with power 0.8 on n_users (receval_spark.stats);
    p_randomization: Fisher's paired randomization (sign-flip) test
    (receval_spark.metrics.randomization), p_randomization_holm: Holm-adjusted over the same
    family (both None unless evaluation.randomization_test)."""

    model: str
    baseline: str
    segment: str
    protocol: str = "full"
    metric: str
    k: int | None = field(metadata=INTEGER)
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
    effect_size: float | None = None
    mde: float | None = None
    window: int | None = field(default=None, metadata=INTEGER)  # rolling: 1..n, pooled: None
    p_bonferroni: float | None = None
    p_bh: float | None = None
    correction: str | None = None  # the evaluation.correction that decides: its p_adjusted
    p_randomization: float | None = None  # evaluation.randomization_test; else None
    p_randomization_holm: float | None = None

    @property
    def p_adjusted(self) -> float | None:
        """The t-test p-value under the run's correction (``holm``: p_holm, ``bonferroni``:
        p_bonferroni, ``benjamini_hochberg``: p_bh); p_holm before any is recorded."""
        if self.correction == "bonferroni":
            return self.p_bonferroni
        if self.correction == "benjamini_hochberg":
            return self.p_bh
        return self.p_holm

    @property
    def adjusted_column(self) -> str:
        """The ``comparisons`` column of :attr:`p_adjusted`."""
        return ADJUSTED_COLUMNS[self.correction or "holm"]


# a comparison of a model with its own values of earlier run dates has the baseline
# "<model>@<date>" (the previous date) or "<model>@<first>..<last>" (each user's mean over a
# trailing window of dates)
PREVIOUS_DATE_MARK = "@"
WINDOW_MARK = ".."


def earlier_baseline(model: str, dates: Sequence[str]) -> str:
    """The baseline of ``model`` against its own values of the run ``dates`` (ascending)."""
    span = dates[0] if len(dates) == 1 else f"{dates[0]}{WINDOW_MARK}{dates[-1]}"
    return f"{model}{PREVIOUS_DATE_MARK}{span}"


def against_own_previous_date(model: str, baseline: str) -> bool:
    """Whether a comparison's baseline is the model's own values of earlier run dates."""
    return baseline.startswith(f"{model}{PREVIOUS_DATE_MARK}")


@dataclass(frozen=True, kw_only=True)
class AttributionRow:
    """One segment's part in a per-user metric's change since ``previous_date``
    (receval_spark.attribution; docs/nightly.md#change-attribution): its share of the
    evaluated users and its value on both nights, and its mix and within parts; segment
    ``all`` holds the totals (shares 1, the values of segment all, the parts' sums)."""

    model: str
    protocol: str = "full"
    metric: str
    k: int | None = field(metadata=INTEGER)
    previous_date: str
    segmentation: str
    segment: str
    share_previous: float
    share: float
    value_previous: float | None
    value: float | None
    mix: float
    within: float


@dataclass(frozen=True, kw_only=True)
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
    """A sanity check written into the run record (``detail`` is nullable in the stored
    schema)."""

    name: str
    passed: bool
    detail: str = field(metadata={"nullable": True})


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """Everything the ``runs`` dataset says about one run (dicts stored as JSON strings)."""

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


def spark_schema(row_type: type) -> T.StructType:
    """The Spark schema of a row dataclass: one column per field, in field order.

    str -> string, int -> long (``INTEGER`` metadata: int), float -> double, bool -> boolean,
    datetime -> timestamp, dict -> string (JSON), Sequence[X] -> array of X without nulls, a
    row dataclass -> struct; nullable iff the field is ``X | None`` (or metadata
    ``nullable``)."""
    hints = get_type_hints(row_type)
    columns = []
    for f in fields(row_type):
        hint, optional = _optional(hints[f.name])
        spark_type = f.metadata.get("spark_type") or _codec(hint)[0]
        columns.append(T.StructField(f.name, spark_type, f.metadata.get("nullable", optional)))
    return T.StructType(columns)


def _cells(row: Any) -> tuple[Any, ...]:
    """A row dataclass's values in :func:`spark_schema`'s column order, as Spark takes them:
    floats as float (NaN as null), dicts as JSON with sorted keys, nested rows as tuples."""
    encoders = _encoders(type(row))  # type: ignore[arg-type]  # a class is hashable
    cells = ((getattr(row, name), encode) for name, encode in encoders)
    return tuple(None if value is None else encode(value) for value, encode in cells)


@cache
def _encoders(row_type: type) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    hints = get_type_hints(row_type)
    return tuple((f.name, _codec(_optional(hints[f.name])[0])[1]) for f in fields(row_type))


def _codec(hint: Any) -> tuple[T.DataType, Callable[[Any], Any]]:
    """The Spark type of a field's (non-optional) Python type, and how a value is encoded."""
    origin = get_origin(hint) or hint
    if origin is dict:
        return T.StringType(), _json
    if origin is Sequence:
        element, encode = _codec(get_args(hint)[0])
        return T.ArrayType(element, False), lambda values: [encode(v) for v in values]
    if isinstance(hint, type) and is_dataclass(hint):
        return spark_schema(hint), _cells
    if hint is float:
        return T.DoubleType(), _finite
    return SCALAR_TYPES[hint], _same


def _optional(hint: Any) -> tuple[Any, bool]:
    """(X, True) for ``X | None``, else (hint, False)."""
    args = get_args(hint)
    if get_origin(hint) in (Union, UnionType) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return inner, True
    return hint, False


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _finite(value: float) -> float | None:
    return None if value != value else float(value)


def _same(value: Any) -> Any:
    return value


RUN_ID = T.StructField("run_id", T.StringType(), False)
METRICS_SCHEMA = T.StructType([RUN_ID, *spark_schema(MetricRow).fields])
COMPARISONS_SCHEMA = T.StructType([RUN_ID, *spark_schema(ComparisonRow).fields])
OFF_POLICY_SCHEMA = T.StructType([RUN_ID, *spark_schema(OffPolicyRow).fields])
ATTRIBUTION_SCHEMA = T.StructType([RUN_ID, *spark_schema(AttributionRow).fields])
RUNS_SCHEMA = spark_schema(RunRecord)
_TEXT, _INT, _LONG = T.StringType(), T.IntegerType(), T.LongType()
PER_USER_SCHEMA = T.StructType(
    [
        T.StructField(name, kind)
        for name, kind in [
            *[(c, _TEXT) for c in ("run_id", "model", "segment", USER, "metric")],
            ("k", _INT),
            ("value", T.DoubleType()),
            ("window", _INT),
        ]
    ]
)
LONG_TAIL_SCHEMA = T.StructType(
    [
        T.StructField(name, kind)
        for name, kind in [
            ("run_id", _TEXT),
            ("model", _TEXT),
            ("k", _INT),
            ("popularity_bin", _INT),
            ("min_interactions", _LONG),
            *[(c, _LONG) for c in LONG_TAIL_COUNTS],
        ]
    ]
)
LISTS_SCHEMA = T.StructType(
    [
        T.StructField(name, kind)
        for name, kind in [
            ("run_id", _TEXT),
            ("model", _TEXT),
            (USER, _TEXT),
            ("rank", _INT),
            ("item_id", _TEXT),
            ("score", T.DoubleType()),
        ]
    ]
)
REPORT_SCHEMAS: dict[str, T.StructType] = {
    "metrics": METRICS_SCHEMA,
    "comparisons": COMPARISONS_SCHEMA,
    "long_tail": LONG_TAIL_SCHEMA,
    "off_policy": OFF_POLICY_SCHEMA,
    "per_user": PER_USER_SCHEMA,
    "lists": LISTS_SCHEMA,
    "attribution": ATTRIBUTION_SCHEMA,
    "runs": RUNS_SCHEMA,
}


def metrics_table(spark: SparkSession, rows: Sequence[MetricRow], *, run_id: str) -> DataFrame:
    """The ``metrics`` dataset for one run, ordered by model, segment, metric, k."""
    ordered = sorted(rows, key=lambda r: (r.window or 0, r.model, r.segment, r.metric, r.k or 0))
    return spark.createDataFrame([(run_id, *_cells(r)) for r in ordered], METRICS_SCHEMA)


def comparisons_table(
    spark: SparkSession, rows: Sequence[ComparisonRow], *, run_id: str
) -> DataFrame:
    """The ``comparisons`` dataset for one run, ordered by model, segment, metric, k."""
    ordered = sorted(rows, key=lambda r: (r.window or 0, r.model, r.segment, r.metric, r.k or 0))
    return spark.createDataFrame([(run_id, *_cells(r)) for r in ordered], COMPARISONS_SCHEMA)


def off_policy_table(
    spark: SparkSession, rows: Sequence[OffPolicyRow], *, run_id: str
) -> DataFrame:
    """The ``off_policy`` dataset for one run, ordered by model and estimator."""
    ordered = sorted(rows, key=lambda r: (r.model, r.estimator))
    return spark.createDataFrame([(run_id, *_cells(r)) for r in ordered], OFF_POLICY_SCHEMA)


def attribution_table(
    spark: SparkSession, rows: Sequence[AttributionRow], *, run_id: str
) -> DataFrame:
    """The ``attribution`` dataset for one run, ordered by model, metric, k, segmentation."""
    ordered = sorted(rows, key=lambda r: (r.model, r.protocol, r.metric, r.k or 0, r.segmentation))
    return spark.createDataFrame([(run_id, *_cells(r)) for r in ordered], ATTRIBUTION_SCHEMA)


def runs_table(spark: SparkSession, record: RunRecord) -> DataFrame:
    """The ``runs`` dataset: one row for one run."""
    return spark.createDataFrame([_cells(record)], RUNS_SCHEMA)


def per_user_table(per_user_long: DataFrame, *, run_id: str) -> DataFrame:
    """The ``per_user`` dataset: run_id, model, segment, user_id (string), metric, k, value,
    window (a rolling backtest's window; else null)."""
    return per_user_long.select(
        F.lit(run_id).alias("run_id"),
        "model",
        "segment",
        F.col(USER).cast("string").alias(USER),
        "metric",
        F.col("k").cast("int").alias("k"),
        F.col("value").cast("double").alias("value"),
        (F.col("window") if "window" in per_user_long.columns else F.lit(None))
        .cast("int")
        .alias("window"),
    )


def lists_table(lists: DataFrame, *, run_id: str) -> DataFrame:
    """The ``lists`` dataset: run_id, model, user_id, rank, item_id, score (ids as strings)."""
    return lists.select(F.lit(run_id).alias("run_id"), *LISTS_SCHEMA.fieldNames()[1:])


def long_tail_table(long_tail: DataFrame, *, run_id: str) -> DataFrame:
    """The ``long_tail`` dataset: run_id, model, k, popularity_bin, min_interactions (2^bin; 0
    in bin -1, the items without a train interaction), n_items, train_interactions,
    n_recommended_items, recommendations."""
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


@dataclass(frozen=True)
class Outcome:
    """What one evaluation computed, for either protocol: the driver-side aggregates (a few
    rows per model, segment, metric and k), plus the lazy per-user and long-tail tables.

    ``n_users_evaluated``: users with a non-empty Rel(u) (ranking), prediction events
    (session). ``stage_seconds``: wall seconds per stage of the job. ``lists``: tonight's
    lists and what tomorrow's stability step needs of them (``output.lists``; else None)."""

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
    lists: NightLists | None = None

    @property
    def passed(self) -> bool:
        """Whether every sanity check passed."""
        return all(check.passed for check in self.checks)


def metric_row(row: Any, *, protocol: str = "full") -> MetricRow:
    """A MetricRow of one aggregate row (model, [segment], metric, k, value, n_users, std)
    with a 95% interval inside the metric's bounds under ``protocol`` (the registry's):
    value ± z·std clipped for bootstrapped group statistics (``interval = bootstrap``), else
    the interval of a mean over n_samples (sampled statistics) or n_users (macro averages,
    session events): Wilson for 0/1 metrics, the clipped t-interval otherwise
    (stats.mean_interval). A row without a segment is segment ``all``."""
    fields = row.asDict()
    if fields.get("interval") == "bootstrap":
        bounds = metric_bounds(row["metric"], protocol=protocol)
        low, high = normal_interval(row["value"], row["std"], bounds=bounds)
    else:
        n = fields.get("n_samples") or row["n_users"]
        low, high = mean_interval(row["metric"], row["value"], row["std"], n, protocol=protocol)
    return MetricRow(
        model=row["model"],
        segment=fields.get("segment", "all"),
        metric=row["metric"],
        k=row["k"],
        value=row["value"],
        n_users=row["n_users"],
        std=row["std"],
        ci_low=low,
        ci_high=high,
        protocol=protocol,
    )
