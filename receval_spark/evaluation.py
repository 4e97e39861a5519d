"""The result types of a run: :class:`Evaluation` (the report datasets of one outcome, with
its own judgement) and :class:`Commit` (what was written), and how an outcome becomes them
(docs/datasets.md)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import platform
import uuid
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal

import pyspark
from pyspark.sql import DataFrame, SparkSession

from receval_spark import __version__
from receval_spark.attribution import Segmentation, user_segmentations
from receval_spark.cache import CachedTables
from receval_spark.commit import committed_runs, read_log, report_root
from receval_spark.config import JobConfig, RollingSplit, SessionJobConfig
from receval_spark.judgement import Judgement, judge_outcome
from receval_spark.results import (
    Check,
    ComparisonRow,
    MetricRow,
    Outcome,
    RunRecord,
    comparisons_table,
    lists_table,
    long_tail_table,
    metrics_table,
    off_policy_table,
    per_user_table,
    runs_table,
)
from receval_spark.stability_history import night_over_night


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_run_id(now: dt.datetime) -> str:
    """Sortable by start time, unique per run: ``20261129T185100Z-1a2b3c4d``."""
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, eq=False)
class Evaluation:
    """One evaluation run of either protocol: the report datasets as Spark DataFrames with
    the contract's schemas (``metrics``, ``comparisons``, ``per_user``, ``long_tail``,
    ``off_policy``, ``lists``, ``runs``; None where the run has no such dataset; the
    stability rows of ``metrics`` come with the judgement against an output), the driver-side
    ``outcome`` they were built from (rows, checks, warnings, stage timings), and the run's
    own ``judgement`` (its comparisons with the baseline, Holm-adjusted as one family, and its
    status; :func:`judge` adds the earlier dates of an output).

    The small datasets are local data; ``per_user`` and ``long_tail`` are lazy. With
    ``keep_cached=True`` the run's cached intermediates stay until :meth:`release` or the end
    of a ``with`` block over this object; otherwise they were released already (the lazy
    datasets then recompute from the inputs when used).
    """

    run_id: str
    run_date: dt.date
    started_at: dt.datetime
    finished_at: dt.datetime
    config: JobConfig | SessionJobConfig
    outcome: Outcome
    judgement: Judgement
    metrics: DataFrame
    runs: DataFrame
    comparisons: DataFrame | None = None
    per_user: DataFrame | None = None
    long_tail: DataFrame | None = None
    off_policy: DataFrame | None = None
    lists: DataFrame | None = None
    _cached: CachedTables = field(default_factory=CachedTables, repr=False)

    @property
    def protocol(self) -> Literal["ranking", "session"]:
        return "ranking" if isinstance(self.config, JobConfig) else "session"

    @property
    def checks(self) -> list[Check]:
        return self.outcome.checks

    @property
    def warnings(self) -> list[str]:
        return self.outcome.warnings

    @property
    def passed(self) -> bool:
        """Whether every sanity check passed (a run that fails one is written as
        ``failed_checks`` and the CLI exits 1)."""
        return self.outcome.passed

    @property
    def stage_seconds(self) -> dict[str, float]:
        return self.outcome.stage_seconds

    def release(self) -> None:
        """Unpersist what this run cached (idempotent)."""
        self._cached.release()

    def __enter__(self) -> Evaluation:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


@dataclass(frozen=True)
class Commit:
    """What :func:`write_reports` committed: where, for which run date, the datasets, and the
    :class:`Judgement` the run record states (``status``, ``alerts``, ``comparisons``: the
    committed ones, those against earlier run dates included); ``seconds``: the wall time of
    the commit (writing computes the lazy datasets)."""

    output: str
    run_date: dt.date
    run_id: str
    datasets: tuple[str, ...]
    judgement: Judgement = field(repr=False)
    seconds: float

    @property
    def status(self) -> str:
        return self.judgement.status

    @property
    def alerts(self) -> list[str]:
        return self.judgement.alerts

    @property
    def comparisons(self) -> list[ComparisonRow]:
        return self.judgement.comparisons


def versions(spark: SparkSession) -> dict[str, str]:
    return {
        "receval_spark": __version__,
        "pyspark": pyspark.__version__,
        "spark": spark.version,
        "python": platform.python_version(),
    }


def build_evaluation(
    spark: SparkSession,
    config: JobConfig | SessionJobConfig,
    outcome: Outcome,
    *,
    run_id: str,
    started_at: dt.datetime,
    cached: CachedTables,
) -> Evaluation:
    """The report datasets of one outcome, with its own judgement (no history)."""
    finished_at = utc_now()
    run_date = config.run.date or started_at.date()
    judgement = judge_run(
        outcome, config, run_date=run_date, per_user=None, spark=spark, output=None
    )
    record = run_record(
        spark,
        config,
        outcome,
        run_id=run_id,
        started_at=started_at,
        finished_at=finished_at,
        judgement=judgement,
    )
    return Evaluation(
        run_id=run_id,
        run_date=run_date,
        started_at=started_at,
        finished_at=finished_at,
        config=config,
        outcome=outcome,
        judgement=judgement,
        metrics=metrics_table(spark, outcome.metrics, run_id=run_id),
        runs=runs_table(spark, record),
        comparisons=(
            comparisons_table(spark, judgement.comparisons, run_id=run_id)
            if isinstance(config, JobConfig)
            else None
        ),
        per_user=(
            per_user_table(outcome.per_user, run_id=run_id)
            if outcome.per_user is not None
            else None
        ),
        long_tail=(
            long_tail_table(outcome.long_tail, run_id=run_id)
            if outcome.long_tail is not None
            else None
        ),
        off_policy=(
            off_policy_table(spark, outcome.off_policy, run_id=run_id)
            if outcome.off_policy
            else None
        ),
        lists=(
            lists_table(outcome.lists.lists, run_id=run_id) if outcome.lists is not None else None
        ),
        _cached=cached,
    )


def run_record(
    spark: SparkSession,
    config: JobConfig | SessionJobConfig,
    outcome: Outcome,
    *,
    run_id: str,
    started_at: dt.datetime,
    finished_at: dt.datetime,
    judgement: Judgement,
) -> RunRecord:
    """The ``runs`` row of one run, with the status and alerts of its ``judgement``."""
    return RunRecord(
        run_id=run_id,
        run_name=config.run.name,
        started_at=started_at,
        finished_at=finished_at,
        status=judgement.status,
        config=config.model_dump(mode="json"),
        split=outcome.split,
        n_users_evaluated=outcome.n_users_evaluated,
        versions=versions(spark),
        checks=outcome.checks,
        warnings=outcome.warnings,
        alerts=judgement.alerts,
        tuning=outcome.tuning,
    )


def rolling(config: JobConfig | SessionJobConfig) -> bool:
    """Whether ``config`` is a rolling backtest (docs/evaluation.md#rolling-backtests)."""
    return isinstance(config, JobConfig) and isinstance(config.split, RollingSplit)


def _segmentations(config: JobConfig | SessionJobConfig) -> list[Segmentation]:
    """The user segmentations of a ranking run's change attribution (none for sessions)."""
    if not isinstance(config, JobConfig):
        return []
    named = config.evaluation.user_segments
    return user_segmentations(
        config.evaluation.segments, named.label if named is not None else None
    )


def judge_run(
    outcome: Outcome,
    config: JobConfig | SessionJobConfig,
    *,
    run_date: dt.date,
    per_user: DataFrame | None,
    spark: SparkSession,
    output: str | None,
) -> Judgement:
    """The statistics step (receval_spark.judgement) of one outcome of ``config``; ``per_user``:
    the run's per-user table in the report's columns (ranking only). With tonight's lists and
    an output, first the stability rows against the previous date with lists
    (receval_spark.stability_history): the alerts judge them with tonight's metrics."""
    stability: list[MetricRow] = []
    # the committed history, read once for the stability step and the judgement
    committed = committed_runs(read_log(spark, report_root(output))) if output else {}
    if outcome.lists is not None and output is not None and isinstance(config, JobConfig):
        stability = night_over_night(
            spark,
            output,
            outcome.lists,
            run_date=run_date.isoformat(),
            ks=config.evaluation.k,
            persistence=config.evaluation.rbo_persistence,
            committed=committed,
        )
    judged = judge_outcome(
        dataclasses.replace(outcome, metrics=[*outcome.metrics, *stability]),
        run_date=run_date.isoformat(),
        rules=config.evaluation.alerts,
        # a rolling backtest's users are not compared with earlier dates' (docs/evaluation.md)
        per_user=per_user if isinstance(config, JobConfig) and not rolling(config) else None,
        spark=spark,
        output=output,
        segmentations=_segmentations(config),
        correction=config.evaluation.correction if isinstance(config, JobConfig) else "holm",
        randomization=(
            config.evaluation.randomization() if isinstance(config, JobConfig) else None
        ),
        committed=committed,
    )
    return dataclasses.replace(judged, stability=stability)
