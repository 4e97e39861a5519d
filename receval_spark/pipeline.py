"""The evaluation job as a readable sequence of steps.

config -> inputs -> split -> relevance -> candidates -> top-k -> per-user metrics ->
macro averages with intervals -> checks -> report datasets (written together per run date).
Only bounded results reach the driver: counts, cut-offs and the metric aggregates.
"""

from __future__ import annotations

import datetime as dt
import platform
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyspark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from receval_spark import __version__
from receval_spark.config import (
    ExternalModel,
    GlobalTemporalSplit,
    InteractionsSource,
    ItemsSource,
    JobConfig,
    OracleModel,
)
from receval_spark.errors import InputError
from receval_spark.io import read_table, write_reports
from receval_spark.metrics.accuracy import ACCURACY_METRICS, per_user_accuracy
from receval_spark.metrics.aggregate import macro_average, to_long
from receval_spark.models import model_candidates
from receval_spark.relevance import relevant_items, user_segments
from receval_spark.report.tables import (
    Check,
    MetricRow,
    RunRecord,
    metrics_table,
    per_user_table,
    runs_table,
)
from receval_spark.schema import (
    ITEM,
    TIMESTAMP,
    USER,
    canonical_interactions,
    canonical_recommendations,
    require_columns,
    validate_interactions,
    validate_recommendations,
)
from receval_spark.split import LEAKY_METHODS, Split, from_micros, iso, split_interactions
from receval_spark.stats import t_interval
from receval_spark.topk import rank_candidates

ORACLE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Evaluation:
    """What one evaluation produced: small aggregates, plus the lazy per-user table."""

    metrics: list[MetricRow]
    per_user: DataFrame
    split: dict[str, Any]
    n_users_evaluated: int
    checks: list[Check]
    warnings: list[str]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


def load_interactions(spark: SparkSession, source: InteractionsSource) -> DataFrame:
    """Read, map and validate the interaction log (one validation pass)."""
    raw = read_table(spark, source, key="data.interactions")
    interactions = canonical_interactions(
        raw,
        columns=source.columns,
        timestamp_unit=source.timestamp_unit,
        source="data.interactions",
    ).persist()
    validate_interactions(interactions, columns=source.columns, source="data.interactions")
    return interactions


def count_items_with_metadata(spark: SparkSession, source: ItemsSource) -> int:
    """Read the item metadata table, check its mapped columns, and count its distinct items."""
    raw = read_table(spark, source, key="data.items")
    require_columns(raw, source.columns.model_dump(), source="data.items")
    return raw.select(source.columns.item).distinct().count()


def load_external(
    spark: SparkSession, model: ExternalModel, *, interactions: DataFrame
) -> DataFrame:
    """Read and validate an external model's recommendations as (user_id, item_id, score)."""
    key = f"models.{model.name}"
    raw = read_table(spark, model, key=key)
    recs = canonical_recommendations(
        raw,
        columns=model.columns,
        user_type=interactions.schema[USER].dataType,
        item_type=interactions.schema[ITEM].dataType,
        source=key,
    )
    return validate_recommendations(recs, columns=model.columns, source=key)


def describe_part(part: DataFrame) -> dict[str, Any]:
    """Rows, distinct users and items, and the time range of one split part."""
    micros = F.unix_micros(TIMESTAMP)
    row = part.agg(
        F.count(F.lit(1)).alias("rows"),
        F.countDistinct(USER).alias("users"),
        F.countDistinct(ITEM).alias("items"),
        F.min(micros).alias("first"),
        F.max(micros).alias("last"),
    ).collect()[0]
    return {
        "rows": int(row["rows"]),
        "users": int(row["users"]),
        "items": int(row["items"]),
        "first_timestamp": _iso(row["first"]),
        "last_timestamp": _iso(row["last"]),
    }


def describe_split(split: Split) -> dict[str, Any]:
    """The run record's ``split``: method, parameters, resolved cut-offs and per-part counts.

    Raises InputError when train or test is empty.
    """
    parts = {"train": split.train, "test": split.test}
    if split.validation is not None:
        parts["validation"] = split.validation
    described = {**split.params, **{name: describe_part(df) for name, df in parts.items()}}
    for name in ("train", "test"):
        if described[name]["rows"] == 0:
            raise InputError(
                f"split: the {name} part is empty ({split.params}); change split.cutoff, "
                "split.quantile, split.fraction or split.n so that both train and test hold rows."
            )
    if split.validation is not None and described["validation"]["rows"] == 0:
        raise InputError("split.validation_cutoff: the validation part is empty; move it earlier.")
    return described


def evaluate(spark: SparkSession, config: JobConfig) -> Evaluation:
    """Split, score every configured model, and aggregate the accuracy metrics."""
    interactions = load_interactions(spark, config.data.interactions)
    externals = {
        m.name: load_external(spark, m, interactions=interactions)
        for m in config.models
        if isinstance(m, ExternalModel)
    }
    split = split_interactions(config.split, interactions)
    split_summary = describe_split(split)
    if config.data.items is not None:
        split_summary["items_with_metadata"] = count_items_with_metadata(spark, config.data.items)
    split_summary["filter_seen"] = config.evaluation.filter_seen

    history = split.history.persist()
    truth = relevant_items(split.test, config.relevance).persist()
    users = truth.select(USER).distinct().persist()
    n_users = users.count()
    if n_users == 0:
        raise InputError(
            "relevance: no test interaction is relevant, so no user can be evaluated; "
            "lower relevance.threshold or move split.cutoff earlier."
        )
    seen = (
        history.select(USER, ITEM).distinct().persist() if config.evaluation.filter_seen else None
    )
    ks = config.evaluation.k
    per_user_frames = []
    for model in config.models:
        candidates = model_candidates(
            model,
            history=history,
            users=users,
            truth=truth,
            k=max(ks),
            seen=seen,
            external=externals.get(model.name),
        )
        ranked = rank_candidates(candidates, k=max(ks), seen=seen)
        per_user_frames.append(
            per_user_accuracy(ranked, truth, ks=ks).withColumn("model", F.lit(model.name))
        )
    per_user = _union(per_user_frames).join(
        user_segments(users, history, segments=config.evaluation.segments), on=USER
    )
    per_user_long = to_long(
        per_user, metrics=ACCURACY_METRICS, keys=["model", "segment", USER, "k"]
    )
    if config.output.per_user:
        per_user_long = per_user_long.persist()
    aggregates = macro_average(per_user_long, by=["model", "segment", "metric", "k"]).collect()
    rows = [_metric_row(r) for r in aggregates]
    checks = _checks(config, split_summary, rows, truth=truth, seen=seen)
    return Evaluation(
        metrics=rows,
        per_user=per_user_long,
        split=split_summary,
        n_users_evaluated=n_users,
        checks=checks,
        warnings=_warnings(config, n_users),
    )


def run_job(
    spark: SparkSession,
    config: JobConfig,
    *,
    run_id: str,
    run_date: dt.date,
    clock: Callable[[], dt.datetime],
) -> Evaluation:
    """Evaluate and write every report dataset for ``run_date`` in one atomic commit."""
    started_at = clock()
    evaluation = evaluate(spark, config)
    record = RunRecord(
        run_id=run_id,
        run_name=config.run.name,
        started_at=started_at,
        finished_at=clock(),
        status="succeeded" if evaluation.passed else "failed_checks",
        config=config.model_dump(mode="json"),
        split=evaluation.split,
        n_users_evaluated=evaluation.n_users_evaluated,
        versions=versions(spark),
        checks=evaluation.checks,
        warnings=evaluation.warnings,
    )
    tables = {
        "metrics": metrics_table(spark, evaluation.metrics, run_id=run_id).coalesce(1),
        "runs": runs_table(spark, record).coalesce(1),
    }
    if config.output.per_user:
        tables["per_user"] = per_user_table(evaluation.per_user, run_id=run_id)
    write_reports(
        tables, output_path=config.output.path, run_date=run_date.isoformat(), run_id=run_id
    )
    return evaluation


def versions(spark: SparkSession) -> dict[str, str]:
    return {
        "receval_spark": __version__,
        "pyspark": pyspark.__version__,
        "spark": spark.version,
        "python": platform.python_version(),
    }


def _union(frames: list[DataFrame]) -> DataFrame:
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def _metric_row(row: Any) -> MetricRow:
    low, high = t_interval(row["value"], row["std"], row["n_users"])
    return MetricRow(
        model=row["model"],
        segment=row["segment"],
        metric=row["metric"],
        k=row["k"],
        value=row["value"],
        n_users=row["n_users"],
        std=row["std"],
        ci_low=low,
        ci_high=high,
    )


def _checks(
    config: JobConfig,
    split_summary: dict[str, Any],
    rows: list[MetricRow],
    *,
    truth: DataFrame,
    seen: DataFrame | None,
) -> list[Check]:
    checks = []
    if isinstance(config.split, GlobalTemporalSplit):
        checks.append(_temporal_check(split_summary))
    oracles = [m.name for m in config.models if isinstance(m, OracleModel)]
    for name in oracles:
        bad = [
            r
            for r in rows
            if r.model == name
            and r.segment == "all"
            and r.metric == "ndcg"
            and abs((r.value or 0.0) - 1.0) > ORACLE_TOLERANCE
        ]
        detail = "; ".join(f"NDCG@{r.k} = {r.value:.6f}" for r in bad) or "NDCG@k = 1 at every k"
        checks.append(Check(f"oracle_ndcg[{name}]", not bad, detail))
    if seen is not None:
        overlap = truth.join(seen, on=[USER, ITEM], how="left_semi").count()
        checks.append(
            Check(
                "heldout_not_in_train",
                overlap == 0,
                f"{overlap} relevant test (user, item) pairs also occur in train; with filter_seen "
                "they can never be recommended"
                if overlap
                else "no relevant test pair occurs in train",
            )
        )
    counts: dict[tuple[str, str, int | None], set[int]] = {}
    for r in rows:
        counts.setdefault((r.segment, r.metric, r.k), set()).add(r.n_users)
    uneven = sorted(key for key, ns in counts.items() if len(ns) > 1)
    checks.append(
        Check(
            "same_users_all_models",
            not uneven,
            f"models differ in evaluated users at {uneven[:3]}"
            if uneven
            else "every model is evaluated on the same users, split and k",
        )
    )
    return checks


def _temporal_check(split_summary: dict[str, Any]) -> Check:
    """No train (or validation) timestamp at or after the cut-off, no test timestamp before it."""
    cutoff = split_summary["cutoff"]
    problems = []
    if split_summary["train"]["last_timestamp"] >= split_summary.get("validation_cutoff", cutoff):
        problems.append("train has interactions at or after the cut-off")
    if "validation" in split_summary and split_summary["validation"]["last_timestamp"] >= cutoff:
        problems.append("validation has interactions at or after the test cut-off")
    if split_summary["test"]["first_timestamp"] < cutoff:
        problems.append("test has interactions before the cut-off")
    return Check(
        "no_temporal_leakage",
        not problems,
        "; ".join(problems)
        or f"train ends {split_summary['train']['last_timestamp']}, test "
        f"starts {split_summary['test']['first_timestamp']}, cut-off {cutoff}",
    )


def _warnings(config: JobConfig, n_users: int) -> list[str]:
    warnings = []
    if config.split.method in LEAKY_METHODS:
        warnings.append(f"leaky split: {LEAKY_METHODS[config.split.method]}")
    if n_users < config.evaluation.min_users:
        warnings.append(
            f"only {n_users} users evaluated "
            f"(evaluation.min_users = {config.evaluation.min_users}): "
            "averages over so few users are unreliable"
        )
    if not config.evaluation.filter_seen:
        warnings.append(
            "filter_seen is off: items users already interacted with may be recommended"
        )
    return warnings


def _iso(micros: int | None) -> str | None:
    if micros is None:
        return None
    return iso(from_micros(micros))
