"""Experiment tracking (``tracking.mlflow``): one MLflow run per evaluation run.

The run is named ``<run name> <run date>`` and tagged with the evaluation's run id, date,
protocol and status; its params are the configuration (dotted keys), its metrics every
metric of segment ``all`` (``<model>.<metric>_at_<k>``, the protocol appended when it is not
``full``), its artifacts the JSON summary (``--summary-json``'s), the metrics table as CSV and,
when given, the human report. MLflow is imported only here, only when configured.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from receval_spark.api import Commit, Evaluation

MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param value
BATCH = 100  # params per log_batch call (MLflow's limit); metrics go in batches of this too


def log_run(evaluation: Evaluation, commit: Commit, *, report: Path | None = None) -> str:
    """Log the committed run to the MLflow tracking server of ``tracking.mlflow`` and return
    the MLflow run id; an MLflow error propagates (the reports are committed already)."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    from receval_spark.run import run_summary

    config = evaluation.config
    settings = config.tracking.mlflow
    if settings is None:
        raise ValueError("tracking.mlflow is not configured")
    client = MlflowClient(tracking_uri=settings.tracking_uri)
    experiment = client.get_experiment_by_name(settings.experiment)
    experiment_id = (
        experiment.experiment_id
        if experiment is not None
        else client.create_experiment(settings.experiment)
    )
    run = client.create_run(
        experiment_id,
        run_name=f"{config.run.name} {commit.run_date}",
        tags={
            "receval.run_id": commit.run_id,
            "receval.run_date": commit.run_date.isoformat(),
            "receval.protocol": evaluation.protocol,
            "receval.status": commit.status,
            "receval.output": commit.output,
        },
    )
    run_id = run.info.run_id
    params = [
        Param(key, value[:MAX_PARAM_LENGTH])
        for key, value in flat(config.model_dump(mode="json", exclude={"tracking"}))
    ]
    at = int(evaluation.finished_at.timestamp() * 1000)
    # as committed; a rolling backtest's pooled rows (its windows' are in metrics.csv)
    rows = [
        r for r in (*evaluation.outcome.metrics, *commit.judgement.stability) if r.window is None
    ]
    metrics = [
        Metric(metric_key(r.model, r.metric, r.k, r.protocol), r.value, at, 0)
        for r in rows
        if r.segment == "all" and r.value is not None
    ]
    for start in range(0, max(len(params), len(metrics)), BATCH):
        client.log_batch(
            run_id, metrics=metrics[start : start + BATCH], params=params[start : start + BATCH]
        )
    client.log_dict(run_id, run_summary(evaluation, commit), "summary.json")
    table = pd.DataFrame([vars(r) for r in rows])
    client.log_text(run_id, table.to_csv(index=False), "metrics.csv")
    if report is not None:
        for page in (report, report.with_suffix(".md")):
            if page.exists():
                client.log_artifact(run_id, str(page), "report")
    failed = commit.status == "failed_checks"
    client.set_terminated(run_id, status="FAILED" if failed else "FINISHED")
    return str(run_id)


def metric_key(model: str, metric: str, k: int | None, protocol: str) -> str:
    """``<model>.<metric>_at_<k>`` (no ``_at_`` without a cut-off), ``.<protocol>`` appended
    unless ``full``."""
    key = f"{model}.{metric}" + ("" if k is None else f"_at_{k}")
    return key if protocol == "full" else f"{key}.{protocol}"


def flat(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted key, value as text) for every leaf of a JSON-like value; lists by position,
    None as ``null``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from flat(item, f"{prefix}{key}.")
    elif isinstance(value, list) and any(isinstance(v, Mapping | list) for v in value):
        for position, item in enumerate(value):
            yield from flat(item, f"{prefix}{position}.")
    else:
        yield prefix.rstrip("."), json.dumps(value) if not isinstance(value, str) else value
