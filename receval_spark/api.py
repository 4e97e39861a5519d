"""The public Python API; the command line (receval_spark.cli) is a shell over it.

``evaluate`` / ``evaluate_sessions`` take DataFrames the caller holds (or read the tables the
config names) and return an :class:`Evaluation` of Spark DataFrames with the report schemas;
nothing is written until :func:`write_reports` commits them. :func:`read_reports` and
:func:`render_report` read committed reports back. Problems raise ``ConfigError`` (the
configuration) or ``InputError`` (a table), each naming what is wrong and the fix.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from receval_spark.cache import tracking_cache
from receval_spark.commit import (
    REPORT_DATASETS,
    commit_datasets,
    read_log,
    report_root,
)
from receval_spark.committed import read_as_of, read_committed
from receval_spark.config import JobConfig, SessionJobConfig
from receval_spark.config_files import check_output_path
from receval_spark.errors import ConfigError, InputError
from receval_spark.evaluation import (
    Commit,
    Evaluation,
    build_evaluation,
    judge_run,
    new_run_id,
    run_record,
    utc_now,
)
from receval_spark.given import ConfigLike, given_frames, job_config, load_job_config
from receval_spark.io import local_path
from receval_spark.judgement import Judgement
from receval_spark.progress import StageClock
from receval_spark.ranking.pipeline import evaluate_ranking
from receval_spark.report.render import load_report, write_report
from receval_spark.results import (
    REPORT_SCHEMAS,
    Outcome,
    attribution_table,
    comparisons_table,
    metrics_table,
    runs_table,
)
from receval_spark.sessions.pipeline import evaluate_session_protocol
from receval_spark.sources import read_ranking_inputs, read_session_inputs

__all__ = [
    "Commit",
    "ConfigLike",
    "Evaluation",
    "evaluate",
    "evaluate_sessions",
    "judge",
    "load_job_config",
    "read_reports",
    "render_report",
    "write_reports",
]


def evaluate(
    spark: SparkSession,
    config: ConfigLike,
    *,
    interactions: DataFrame | None = None,
    items: DataFrame | None = None,
    recommendations: Mapping[str, DataFrame] | None = None,
    impressions: DataFrame | None = None,
    train: DataFrame | None = None,
    test: DataFrame | None = None,
    catalogue: DataFrame | None = None,
    keep_cached: bool = False,
) -> Evaluation:
    """Evaluate the ranking protocol (docs/evaluation.md) and return the report datasets; nothing
    is written.

    ``config``: a mapping or a YAML path with the schema of the YAML config, or a
    :class:`JobConfig`. A DataFrame given here replaces the table of ``data.interactions``,
    ``data.items`` or ``data.impressions`` (its ``columns:`` mapping still applies, default
    ``user_id``, ``item_id``, ``timestamp``), and ``recommendations[name]`` the table of the
    external model ``name`` (added as ``{name, kind: external}`` when the config has no
    model of that name; columns default ``user_id``, ``item_id``, ``score``). ``train`` and
    ``test`` replace ``data.train`` / ``data.test`` of ``split: {method: given}`` (the split
    is then set to given when the config has none), ``catalogue`` the item ids of
    ``data.catalogue`` (column ``item_id`` unless mapped). ``spark`` is used as it is (the
    config's ``spark`` section is ignored). Raises ConfigError / InputError.
    """
    given = given_frames(
        {
            "interactions": interactions,
            "items": items,
            "impressions": impressions,
            "train": train,
            "test": test,
            "catalogue": catalogue,
        },
        recommendations,
    )
    job = job_config(config, JobConfig, given)

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
    given = given_frames({"clicks": clicks, "train": train, "test": test}, predictions)
    job = job_config(config, SessionJobConfig, given)
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
    return judge_run(
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
    metrics = evaluation.metrics
    if judgement.stability:
        stability = metrics_table(spark, judgement.stability, run_id=evaluation.run_id)
        metrics = metrics.unionByName(stability)
    tables: dict[str, DataFrame] = {"metrics": metrics.coalesce(1)}
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
    if evaluation.lists is not None:
        tables["lists"] = evaluation.lists
    if judgement.attribution:
        rows = attribution_table(spark, judgement.attribution, run_id=evaluation.run_id)
        tables["attribution"] = rows.coalesce(1)
    record = run_record(
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
        table_format=config.output.format,
    )
    return tuple(tables)


def read_reports(
    spark: SparkSession,
    output: str,
    *,
    dataset: str,
    dates: str | dt.date | list[str | dt.date] | None = None,
    before: str | dt.date | None = None,
    as_of: str | None = None,
) -> DataFrame:
    """The committed rows of one report dataset at ``output`` (every run date, only
    ``dates``, or only the dates before ``before``), with a string ``run_date`` column, read
    through Spark: for each run date, exactly the rows of the run that committed it last (no
    rows for a dataset that run did not write). ``as_of``: a run id; the rows readers saw
    right after that run committed, read from the table versions its commit recorded (time
    travel; Delta and Iceberg outputs only, docs/tables.md#time-travel). An output without
    any commit is an InputError."""
    if dataset not in REPORT_DATASETS:
        raise ConfigError(
            f"dataset: {dataset!r} is not a report dataset; use one of {list(REPORT_DATASETS)}"
        )
    events = read_log(spark, report_root(output))
    if not events:
        raise InputError(
            f"output: no committed reports under {output}; point it at the output.path of a "
            "job that has run"
        )
    wanted = None
    if dates is not None:
        wanted = [str(d) for d in ([dates] if isinstance(dates, str | dt.date) else dates)]
    if as_of is not None:
        rows = read_as_of(spark, output, dataset, events, run_id=as_of)
        rows = rows if wanted is None else rows.filter(F.col("run_date").isin(*wanted))
    else:
        rows = read_committed(spark, output, dataset, schema=REPORT_SCHEMAS[dataset], dates=wanted)
    return rows if before is None else rows.filter(F.col("run_date") < str(before))


def render_report(
    spark: SparkSession, output: str, *, date: str | None = None, out: str | None = None
) -> Path:
    """Render the human report (HTML and Markdown) of one committed run date (default: the
    latest) from the report datasets at ``output`` alone, read through Spark; returns the
    HTML file's path (default ``output/report/DATE/report.html`` for a local output; ``out``
    is required for any other filesystem). The Markdown is written beside it. An output
    without a committed run is an InputError (:func:`load_report`)."""
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
            evaluation = build_evaluation(
                spark, config, outcome, run_id=run_id, started_at=started_at, cached=cached
            )
        except BaseException:
            cached.release()
            raise
    if not keep_cached:
        cached.release()
    return evaluation
