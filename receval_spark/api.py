"""The public Python API; the command line (receval_spark.cli) is a shell over it.

``evaluate`` / ``evaluate_sessions`` take DataFrames the caller holds (or read the tables the
config names) and return an :class:`Evaluation` of Spark DataFrames with the report schemas;
nothing is written until :func:`write_reports` commits them. :func:`read_reports` and
:func:`render_report` read committed reports back. Problems raise ``ConfigError`` (the
configuration) or ``InputError`` (a table), each naming what is wrong and the fix.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import os
import platform
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

import pyspark
from pydantic import BaseModel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from receval_spark import __version__
from receval_spark.cache import CachedTables, tracking_cache
from receval_spark.columns import RATING
from receval_spark.commit import (
    REPORT_DATASETS,
    commit_datasets,
    read_committed,
    read_log,
    report_root,
)
from receval_spark.config import JobConfig, SessionJobConfig, validate_config
from receval_spark.config_files import (
    check_output_path,
    check_sources,
    read_config_file,
    resolve_paths,
)
from receval_spark.errors import ConfigError, InputError
from receval_spark.io import local_path
from receval_spark.judge import Judgement, judge_outcome
from receval_spark.progress import StageClock
from receval_spark.ranking.pipeline import evaluate as evaluate_ranking
from receval_spark.registry import HEADLINE_METRICS
from receval_spark.report.render import load_report, write_report
from receval_spark.results import (
    REPORT_SCHEMAS,
    Check,
    ComparisonRow,
    Outcome,
    RunRecord,
    comparisons_table,
    long_tail_table,
    metrics_table,
    off_policy_table,
    per_user_table,
    runs_table,
)
from receval_spark.sessions.pipeline import evaluate_sessions as evaluate_session_protocol
from receval_spark.sources import read_ranking_inputs, read_session_inputs

ConfigLike = JobConfig | SessionJobConfig | Mapping[str, Any] | str | os.PathLike[str]
_Config = TypeVar("_Config", JobConfig, SessionJobConfig)


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_run_id(now: dt.datetime) -> str:
    """Sortable by start time, unique per run: ``20261129T185100Z-1a2b3c4d``."""
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, eq=False)
class Evaluation:
    """One evaluation run of either protocol: the report datasets as Spark DataFrames with
    the contract's schemas (``metrics``, ``comparisons``, ``per_user``, ``long_tail``,
    ``off_policy``, ``runs``; None where the run has no such dataset), the driver-side
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


def evaluate(
    spark: SparkSession,
    config: ConfigLike,
    *,
    interactions: DataFrame | None = None,
    items: DataFrame | None = None,
    recommendations: Mapping[str, DataFrame] | None = None,
    impressions: DataFrame | None = None,
    keep_cached: bool = False,
) -> Evaluation:
    """Evaluate the ranking protocol (docs/evaluation.md) and return the report datasets; nothing
    is written.

    ``config``: a mapping or a YAML path with the schema of the YAML config, or a
    :class:`JobConfig`. A DataFrame given here replaces the table of ``data.interactions``,
    ``data.items`` or ``data.impressions`` (its ``columns:`` mapping still applies, default
    ``user_id``, ``item_id``, ``timestamp``), and ``recommendations[name]`` the table of the
    external model ``name`` (added as ``{name, kind: external}`` when the config has no
    model of that name; columns default ``user_id``, ``item_id``, ``score``). ``spark`` is used
    as it is (the config's ``spark`` section is ignored). Raises ConfigError / InputError.
    """
    given = _given(
        {"interactions": interactions, "items": items, "impressions": impressions},
        recommendations,
    )
    job = _job_config(config, JobConfig, given)

    def compute(clock: StageClock) -> Outcome:
        return evaluate_ranking(job, read_ranking_inputs(spark, job, given), clock=clock)

    return _run(spark, job, compute, keep_cached=keep_cached)


def evaluate_sessions(
    spark: SparkSession,
    config: ConfigLike,
    *,
    clicks: DataFrame | None = None,
    train: DataFrame | None = None,
    test: DataFrame | None = None,
    predictions: Mapping[str, DataFrame] | None = None,
    keep_cached: bool = False,
) -> Evaluation:
    """Evaluate the session-based next-item protocol (docs/sessions.md): Recall@k and MRR@k over
    every prediction event, coverage and popularity bias of the lists; nothing is written.

    ``clicks`` replaces ``data.clicks`` (a raw log, preprocessed and split by the job);
    ``train`` and ``test`` replace ``data.train`` / ``data.test`` (taken as given);
    ``predictions[name]`` the table of the external session model ``name``. Otherwise as
    :func:`evaluate`.
    """
    given = _given({"clicks": clicks, "train": train, "test": test}, predictions)
    job = _job_config(config, SessionJobConfig, given)
    return _run(
        spark,
        job,
        lambda clock: evaluate_session_protocol(
            job, read_session_inputs(spark, job, given), clock=clock
        ),
        keep_cached=keep_cached,
    )


def judge(evaluation: Evaluation, output: str | None = None) -> Judgement:
    """Tonight's verdict against the reports committed at ``output`` (default: the config's
    ``output.path``), before anything is written: every comparison (with the baseline and,
    where earlier dates committed per-user rows, each model against its own values there),
    Holm-adjusted as one family; the regression alerts of ``evaluation.alerts`` against the
    earlier dates; the status the run record will state. Reads the history once; writes
    nothing. Pass the result to :func:`write_reports` to commit exactly this verdict."""
    output = output if output is not None else evaluation.config.output.path
    check_output_path(output)
    return _judge(
        evaluation.outcome,
        evaluation.config,
        run_date=evaluation.run_date,
        per_user=evaluation.per_user,
        spark=evaluation.metrics.sparkSession,
        output=output,
    )


def write_reports(
    evaluation: Evaluation,
    output: str | None = None,
    *,
    per_user: bool | None = None,
    judgement: Judgement | None = None,
) -> Commit:
    """Commit the evaluation's report datasets for its run date (all together or none;
    other dates are never touched), and return the commit.

    ``output``: a local folder or a Hadoop URI (default: the config's ``output.path``);
    ``per_user``: also write ``per_user`` (default: ``output.per_user``); ``judgement``: the
    verdict of :func:`judge` against the same output (default: judged here), whose status,
    alerts and comparisons the commit writes.
    """
    config = evaluation.config
    output = output if output is not None else config.output.path
    if judgement is None:
        judgement = judge(evaluation, output)
    elif judgement.output != output:
        raise ConfigError(
            f"judgement: it was made against {judgement.output}, not {output}; judge the "
            "evaluation against the output it is written to (rv.judge(evaluation, output))"
        )
    spark = evaluation.metrics.sparkSession
    with StageClock(spark, run=config.run.name) as clock:
        clock.start("write")
        datasets = _commit(evaluation, output, judgement, per_user=per_user)
        clock.note(datasets=len(datasets), status=judgement.status)
        clock.stop()
    return Commit(
        output=output,
        run_date=evaluation.run_date,
        run_id=evaluation.run_id,
        datasets=datasets,
        judgement=judgement,
        seconds=clock.seconds["write"],
    )


def _commit(
    evaluation: Evaluation, output: str, judgement: Judgement, *, per_user: bool | None
) -> tuple[str, ...]:
    """Write and commit the report datasets as ``judgement`` says; their names."""
    config = evaluation.config
    per_user = config.output.per_user if per_user is None else per_user
    spark = evaluation.metrics.sparkSession
    tables: dict[str, DataFrame] = {"metrics": evaluation.metrics.coalesce(1)}
    if evaluation.comparisons is not None:
        committed = comparisons_table(spark, judgement.comparisons, run_id=evaluation.run_id)
        tables["comparisons"] = committed.coalesce(1)
    for name, table in (
        ("long_tail", evaluation.long_tail),
        ("off_policy", evaluation.off_policy),
    ):
        if table is not None:
            tables[name] = table.coalesce(1)
    if per_user and evaluation.per_user is not None:
        tables["per_user"] = evaluation.per_user
    record = _record(
        spark,
        config,
        evaluation.outcome,
        run_id=evaluation.run_id,
        started_at=evaluation.started_at,
        finished_at=evaluation.finished_at,
        judgement=judgement,
    )
    tables["runs"] = runs_table(spark, record).coalesce(1)
    commit_datasets(
        tables,
        output_path=output,
        run_date=evaluation.run_date.isoformat(),
        run_id=evaluation.run_id,
        lease_seconds=config.output.lease_seconds,
        catalog=config.output.catalog,
    )
    return tuple(tables)


def _judge(
    outcome: Outcome,
    config: JobConfig | SessionJobConfig,
    *,
    run_date: dt.date,
    per_user: DataFrame | None,
    spark: SparkSession,
    output: str | None,
) -> Judgement:
    """The statistics step (receval_spark.judge) of one outcome of ``config``; ``per_user``:
    the run's per-user table in the report's columns (ranking only)."""
    return judge_outcome(
        outcome,
        run_date=run_date.isoformat(),
        rules=config.evaluation.alerts,
        per_user=per_user if isinstance(config, JobConfig) else None,
        spark=spark,
        output=output,
    )


def run_summary(evaluation: Evaluation, commit: Commit) -> dict[str, Any]:
    """What a scheduler reads of a finished run (``--summary-json``): identity, status, stage
    seconds, the headline metrics and comparisons (segment all), checks, alerts, warnings and
    the data-quality facts."""
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
        if r.segment == "all" and (session or r.metric in HEADLINE_METRICS)
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
            "effect_size": c.effect_size,
            "mde": c.mde,
        }
        for c in sorted(commit.comparisons, key=lambda c: (c.model, c.baseline, c.metric, c.k or 0))
        if c.segment == "all" and c.metric in HEADLINE_METRICS
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
        "checks": [dataclasses.asdict(c) for c in evaluation.checks],
        "alerts": commit.alerts,
        "warnings": evaluation.warnings,
        "data_quality": outcome.split.get("data_quality", []),
    }


def read_reports(
    spark: SparkSession,
    output: str,
    *,
    dataset: str,
    dates: str | dt.date | list[str | dt.date] | None = None,
    before: str | dt.date | None = None,
) -> DataFrame:
    """The committed rows of one report dataset at ``output`` (every run date, only
    ``dates``, or only the dates before ``before``), with a string ``run_date`` column, read
    through Spark: for each run date, exactly the rows of the run that committed it last (no
    rows for a dataset that run did not write). An output without any commit is an
    InputError."""
    if dataset not in REPORT_DATASETS:
        raise ConfigError(
            f"dataset: {dataset!r} is not a report dataset; use one of {list(REPORT_DATASETS)}"
        )
    if not read_log(spark, report_root(output)):
        raise InputError(
            f"output: no committed reports under {output}; point it at the output.path of a "
            "job that has run"
        )
    return _committed(spark, output, dataset, dates=dates, before=before)


def _committed(
    spark: SparkSession,
    output: str,
    dataset: str,
    *,
    dates: str | dt.date | list[str | dt.date] | None = None,
    before: str | dt.date | None = None,
) -> DataFrame:
    wanted = None
    if dates is not None:
        wanted = [str(d) for d in ([dates] if isinstance(dates, str | dt.date) else dates)]
    rows = read_committed(spark, output, dataset, schema=REPORT_SCHEMAS[dataset], dates=wanted)
    return rows if before is None else rows.filter(F.col("run_date") < str(before))


def render_report(
    spark: SparkSession, output: str, *, date: str | None = None, out: str | None = None
) -> Path:
    """Render the human report (HTML and Markdown) of one committed run date (default: the
    latest) from the report datasets at ``output`` alone, read through Spark; returns the
    HTML file's path (default ``output/report/DATE/report.html`` for a local output; ``out``
    is required for any other filesystem). The Markdown is written beside it."""
    if not read_log(spark, report_root(output)):
        raise InputError(f"--reports: no committed run under {output}; run receval first.")
    data = load_report(spark, output, date)
    if out is None:
        folder = local_path(output)
        if folder is None:
            raise InputError(
                f"--out: {output} is not on the local filesystem; name the local HTML file to "
                "write (receval report --reports URI --out report.html)"
            )
        target = folder / "report" / data.date / "report.html"
    else:
        target = Path(out)
    return write_report(data, target)


def versions(spark: SparkSession) -> dict[str, str]:
    return {
        "receval_spark": __version__,
        "pyspark": pyspark.__version__,
        "spark": spark.version,
        "python": platform.python_version(),
    }


def _given(
    data: Mapping[str, DataFrame | None], models: Mapping[str, DataFrame] | None
) -> dict[str, DataFrame]:
    """The DataFrames given, keyed as the config's sources: ``data.<name>``, ``models.<name>``."""
    given = {f"data.{name}": df for name, df in data.items() if df is not None}
    given |= {f"models.{name}": df for name, df in (models or {}).items()}
    for key, df in given.items():
        if not isinstance(df, DataFrame):
            raise ConfigError(
                f"{key}: expected a Spark DataFrame, got {type(df).__name__}; pass "
                "spark.createDataFrame(...) of it"
            )
    return given


def load_job_config(config: ConfigLike, schema: type[_Config]) -> _Config:
    """The validated config of ``schema`` from a mapping, a YAML path or a config object, its
    input paths checked (ConfigError / InputError naming the problem)."""
    return _job_config(config, schema, {})


def _job_config(
    config: ConfigLike, schema: type[_Config], given: Mapping[str, DataFrame]
) -> _Config:
    """The validated config of ``schema`` with the given DataFrames' sources filled in: a
    ``data.<name>`` section is created where absent, and a model ``{name, kind: external}``
    added for each given model the config does not name."""
    if isinstance(config, JobConfig | SessionJobConfig) and not isinstance(config, schema):
        function = "evaluate" if schema is JobConfig else "evaluate_sessions"
        raise ConfigError(
            f"config: {type(config).__name__} is not the configuration of {function}; "
            f"pass a {schema.__name__}"
        )
    if isinstance(config, schema) and not given:
        job = config
    else:
        if isinstance(config, BaseModel):
            raw = config.model_dump(exclude_unset=True)
        elif isinstance(config, str | os.PathLike):
            raw = read_config_file(config)
        elif isinstance(config, Mapping):
            raw = copy.deepcopy(dict(config))
            resolve_paths(raw, base=Path.cwd())
        else:
            raise ConfigError(
                f"config: expected a mapping, a YAML path or a {schema.__name__}, got "
                f"{type(config).__name__}"
            )
        _fill_sources(raw, given)
        job = validate_config(raw, schema=schema)
        if isinstance(job, JobConfig) and _canonical_rating(job, given):
            raw["data"]["interactions"].setdefault("columns", {})["rating"] = RATING
            job = validate_config(raw, schema=schema)
    check_sources(job, given)
    return job


def _canonical_rating(job: JobConfig, given: Mapping[str, DataFrame]) -> bool:
    """Whether the interactions DataFrame given supplies the ratings the job needs under the
    canonical name ``rating`` (no rating column mapped); InputError when it has no such
    column."""
    frame = given.get("data.interactions")
    needs = job.needs_ratings
    if frame is None or needs is None or job.data.interactions.columns.rating is not None:
        return False
    if RATING not in frame.columns:
        raise InputError(
            f"data.interactions: {needs} needs ratings, but the DataFrame given has no column "
            f"{RATING!r} (it has {frame.columns}); add one, or map yours with "
            "data.interactions.columns.rating."
        )
    return True


def _fill_sources(raw: dict[str, Any], given: Mapping[str, DataFrame]) -> None:
    data = raw.setdefault("data", {})
    models = raw.setdefault("models", [])
    for key in given:
        section, _, name = key.partition(".")
        if section == "data" and isinstance(data, dict) and data.get(name) is None:
            data[name] = {}
        if section == "models" and isinstance(models, list):
            named = [m for m in models if isinstance(m, dict) and m.get("name") == name]
            if not named:
                models.append({"name": name, "kind": "external"})
            elif named[0].get("kind") != "external":
                raise ConfigError(
                    f"models.{name}: a DataFrame was given for it, but the config's model "
                    f"{name!r} has kind {named[0].get('kind')!r}; give the DataFrame another "
                    "name, or make the model kind: external"
                )


def _run(
    spark: SparkSession,
    config: JobConfig | SessionJobConfig,
    compute: Callable[[StageClock], Outcome],
    *,
    keep_cached: bool,
) -> Evaluation:
    """Run ``compute`` in a cache scope with a stage clock whose first stage, read, is
    running, and build the report datasets of its outcome."""
    started_at = utc_now()
    run_id = new_run_id(started_at)
    with tracking_cache() as cached, StageClock(spark, run=config.run.name) as clock:
        try:
            clock.start("read")
            outcome = compute(clock)
            evaluation = _evaluation(
                spark, config, outcome, run_id=run_id, started_at=started_at, cached=cached
            )
        except BaseException:
            cached.release()
            raise
    if not keep_cached:
        cached.release()
    return evaluation


def _evaluation(
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
    judgement = _judge(outcome, config, run_date=run_date, per_user=None, spark=spark, output=None)
    record = _record(
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
        _cached=cached,
    )


def _record(
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
