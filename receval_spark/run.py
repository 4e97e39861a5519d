"""The one run shell both protocols share: refuse early if another writer holds the output,
read the inputs and evaluate (:func:`receval_spark.api.evaluate` /
:func:`~receval_spark.api.evaluate_sessions`), judge against the committed history
(:func:`~receval_spark.api.judge`), commit (:func:`~receval_spark.api.write_reports`), render
the human report, log to MLflow. The command line is this function plus printing; a
scheduler's or a notebook's Python calls it as ``rv.run_job(spark, config)``
(docs/usage.md#the-nightly-job-from-python).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from receval_spark.api import (
    Commit,
    ConfigLike,
    Evaluation,
    evaluate,
    evaluate_sessions,
    judge,
    load_job_config,
    render_report,
    write_reports,
)
from receval_spark.cache import local_master
from receval_spark.commit import empty_folder, refuse_if_held, report_root
from receval_spark.config import JobConfig, SessionJobConfig
from receval_spark.io import local_path
from receval_spark.registry import HEADLINE_METRICS
from receval_spark.results import AttributionRow, MetricRow
from receval_spark.spark import classic_context
from receval_spark.tables import require_format

CHECKPOINTS = "_checkpoints"  # a cluster run's reliable checkpoints, under its output
_OWN_CHECKPOINTS: set[str] = set()  # the checkpoint directories use_run_checkpoints set


@dataclass(frozen=True)
class Run:
    """One finished run: its ``evaluation``, the ``commit`` (status, alerts, comparisons),
    the rendered ``report`` (None where the output is not local: ``notes`` says how to render
    it), the MLflow run id (``tracked``; None when tracking is off or failed) and ``notes``:
    what the shell could not do that does not fail the run (rendering elsewhere, tracking)."""

    evaluation: Evaluation
    commit: Commit
    report: Path | None = None
    tracked: str | None = None
    notes: list[str] = field(default_factory=list)


def run_job(
    spark: SparkSession,
    config: ConfigLike,
    *,
    protocol: str | None = None,
) -> Run:
    """The nightly job: evaluate ``config`` (a ranking or, with ``protocol="session"`` or a
    :class:`SessionJobConfig`, a session job), judge it against the reports at
    ``output.path``, commit, render the report and track. Raises ConfigError / InputError
    (nothing written), WriterConflict when a live writer holds the output (checked before any
    work), and the commit's own errors. On a cluster master the intermediates are checkpoint
    files under ``<output>/_checkpoints`` (:func:`use_run_checkpoints`), which the returned
    run's lazy datasets read: Spark's cleaner deletes them once nothing references them
    (``spark.cleaner.referenceTracking.cleanCheckpoints``), the command line when it ends."""
    job: JobConfig | SessionJobConfig
    if protocol == "session" or isinstance(config, SessionJobConfig):
        job = load_job_config(config, SessionJobConfig)
    else:
        job = load_job_config(config, JobConfig)
    refuse_if_held(spark, job.output.path, lease_seconds=job.output.lease_seconds)
    if job.output.format != "parquet":  # fail before any work, not at the commit
        require_format(spark, job.output.format, job.output.catalog)
    use_run_checkpoints(spark, job.output.path)
    if isinstance(job, SessionJobConfig):
        evaluation = evaluate_sessions(spark, job, keep_cached=True)
    else:
        evaluation = evaluate(spark, job, keep_cached=True)
    with evaluation:
        commit = write_reports(evaluation, judgement=judge(evaluation))
    notes: list[str] = []
    report = _render(spark, commit, notes)
    return Run(evaluation, commit, report, _track(evaluation, commit, report, notes), notes)


def use_run_checkpoints(spark: SparkSession, output_path: str) -> str | None:
    """A run's reliable checkpoints on a cluster master (receval_spark/cache.py): when a
    classic session on a master other than ``local`` has no checkpoint directory, set one under
    the run's output, ``<output>/_checkpoints`` (Spark adds the application's own subfolder; a
    later run in the session keeps it). Returns the session's checkpoint folder when it is one
    set here, else None (local checkpoints; a directory the session was given, its owner's to
    clean; Spark Connect, whose checkpoint directory is the server's)."""
    context = classic_context(spark)
    if context is None or local_master(spark):
        return None
    folder = context.getCheckpointDir()
    if folder is None:
        context.setCheckpointDir(f"{report_root(output_path)}/{CHECKPOINTS}")
        folder = context.getCheckpointDir()
        _OWN_CHECKPOINTS.update([folder] if folder else [])
    return folder if folder in _OWN_CHECKPOINTS else None


def delete_run_checkpoints(spark: SparkSession) -> None:
    """Delete, through Spark, the files of the checkpoint folder :func:`use_run_checkpoints`
    set for the session: for the command line once its run is done, since a returned
    :class:`Run`'s lazy datasets (``per_user``, ``long_tail``, ``lists``) read them. Best
    effort: a lost connection must not hide the run's own result or error."""
    context = classic_context(spark)
    folder = context.getCheckpointDir() if context is not None else None
    if folder in _OWN_CHECKPOINTS:
        with contextlib.suppress(Exception):
            empty_folder(spark, folder)


def _render(spark: SparkSession, commit: Commit, notes: list[str]) -> Path | None:
    """The human report of the committed run in ``output/report/DATE/``; for an output on
    another filesystem, a note on how to render it locally from there."""
    if local_path(commit.output) is None:
        notes.append(
            f"{commit.output} is not on the local filesystem; render the human report with: "
            f"receval report --reports {commit.output} --date {commit.run_date} --out report.html"
        )
        return None
    return render_report(spark, commit.output, date=commit.run_date.isoformat())


def _track(
    evaluation: Evaluation, commit: Commit, report: Path | None, notes: list[str]
) -> str | None:
    """Log the run to MLflow when ``tracking.mlflow`` is configured; a tracking failure is a
    note (the reports are committed, the run's status stands)."""
    if evaluation.config.tracking.mlflow is None:
        return None
    from receval_spark.tracking import log_run

    try:
        return log_run(evaluation, commit, report=report)
    except Exception as exc:  # MLflow's errors (unreachable server, permissions) vary
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        notes.append(f"tracking.mlflow: {type(exc).__name__}: {first}")
        return None


def run_summary(evaluation: Evaluation, commit: Commit) -> dict[str, Any]:
    """What a scheduler reads of a finished run (``--summary-json``): identity, status, stage
    seconds, the headline metrics and comparisons (segment all), the night-over-night stability
    (``output.lists``: segments all and idle), the change attribution of the headline metrics
    since the previous date, checks, alerts, warnings and the data-quality facts."""
    outcome = evaluation.outcome
    session = evaluation.protocol == "session"
    headline = [
        {
            "model": r.model,
            "metric": r.metric,
            "k": r.k,
            "protocol": r.protocol,
            "value": r.value,
            "ci_low": r.ci_low,
            "ci_high": r.ci_high,
        }
        for r in sorted(outcome.metrics, key=lambda r: (r.model, r.metric, r.k or 0, r.protocol))
        if r.segment == "all" and (session or r.metric in HEADLINE_METRICS) and r.window is None
    ]
    comparisons = [
        {
            "model": c.model,
            "baseline": c.baseline,
            "metric": c.metric,
            "k": c.k,
            "protocol": c.protocol,
            "mean_diff": c.mean_diff,
            "ci_low": c.ci_low,
            "ci_high": c.ci_high,
            "p_holm": c.p_holm,
            "p_adjusted": c.p_adjusted,
            "correction": c.correction,
            "p_randomization": c.p_randomization,
            "effect_size": c.effect_size,
            "mde": c.mde,
        }
        for c in sorted(commit.comparisons, key=lambda c: (c.model, c.baseline, c.metric, c.k or 0))
        if c.segment == "all" and c.metric in HEADLINE_METRICS and c.window is None
    ]
    return {
        "run_id": commit.run_id,
        "run_name": evaluation.config.run.name,
        "run_date": commit.run_date.isoformat(),
        "protocol": evaluation.protocol,
        "run_status": commit.status,
        "output": commit.output,
        "units_evaluated": outcome.n_users_evaluated,
        "stage_seconds": {
            stage: round(seconds, 3)
            for stage, seconds in {**evaluation.stage_seconds, "write": commit.seconds}.items()
        },
        "metrics": headline,
        "comparisons": comparisons,
        "stability": _stability_summary(commit.judgement.stability),
        "attribution": _attribution_summary(commit.judgement.attribution),
        "windows": _window_summary(outcome.metrics, outcome.split.get("windows", [])),
        "checks": [dataclasses.asdict(c) for c in evaluation.checks],
        "alerts": commit.alerts,
        "warnings": evaluation.warnings,
        "data_quality": outcome.split.get("data_quality", []),
    }


def _stability_summary(rows: Sequence[MetricRow]) -> list[dict[str, Any]]:
    """The night-over-night stability rows of segments all and idle (``output.lists``)."""
    return [
        {
            "model": r.model,
            "segment": r.segment,
            "metric": r.metric,
            "k": r.k,
            "value": r.value,
            "n_users": r.n_users,
            "ci_low": r.ci_low,
            "ci_high": r.ci_high,
        }
        for r in sorted(rows, key=lambda r: (r.model, r.metric, r.k or 0, r.segment))
        if r.segment in ("all", "idle")
    ]


def _attribution_summary(rows: Sequence[AttributionRow]) -> list[dict[str, Any]]:
    """The change attribution's totals (segment all) of the headline metrics: each model's
    change since the previous date, split into its mix and within parts per segmentation."""
    return [
        {
            "model": r.model,
            "metric": r.metric,
            "k": r.k,
            "protocol": r.protocol,
            "previous_date": r.previous_date,
            "segmentation": r.segmentation,
            "change": None
            if r.value is None or r.value_previous is None
            else r.value - r.value_previous,
            "mix": r.mix,
            "within": r.within,
        }
        for r in rows
        if r.segment == "all" and r.metric in HEADLINE_METRICS
    ]


def _window_summary(rows: Sequence[MetricRow], windows: Sequence[dict[str, Any]]) -> list[Any]:
    """A rolling backtest's headline metrics (segment all) per window, with its test period."""
    return [
        {
            "window": r.window,
            "test_start": windows[r.window - 1].get("cutoff"),
            "test_end": windows[r.window - 1].get("test_end"),
            "model": r.model,
            "metric": r.metric,
            "k": r.k,
            "protocol": r.protocol,
            "value": r.value,
            "n_users": r.n_users,
        }
        for r in sorted(rows, key=lambda r: (r.window or 0, r.model, r.metric, r.k or 0))
        if r.window is not None and r.segment == "all" and r.metric in HEADLINE_METRICS
    ]
