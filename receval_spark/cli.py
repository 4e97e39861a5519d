"""Command line: ``receval evaluate|sessions --config FILE [--set KEY=VALUE ...]``.

Exit status: 0 success; 2 bad configuration or input (one message naming the key or column
and the fix, nothing written); 1 any other failure, including a failed sanity check (the run
record is written first, with the failure stated); 3 a regression alert fired
(``evaluation.alerts``; the reports are written, the run's status is ``regressed``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from receval_spark.config import JobConfig, SessionJobConfig
from receval_spark.config_files import load_config
from receval_spark.errors import ConfigError, SetupError, UserError, first_line
from receval_spark.progress import LOGGER
from receval_spark.registry import HEADLINE_METRICS, definitions

if TYPE_CHECKING:
    from receval_spark.api import Commit, Evaluation
    from receval_spark.run import Run

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, EXIT_REGRESSED = 0, 1, 2, 3


def _remember(key: str) -> Callable[[click.Context, click.Parameter, object], None]:
    """An eager option's callback: record its value under ``key`` in the options dict that
    ``main`` reads after the command (also when it fails)."""

    def callback(ctx: click.Context, _param: click.Parameter, value: object) -> None:
        if value:
            ctx.ensure_object(dict)[key] = value

    return callback


# Accepted before the command (receval -v evaluate ...) and after it (spark-submit
# jobs/evaluate.py -v ...).
VERBOSE_OPTION = click.option(
    "-v",
    "--verbose",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=_remember("verbose"),
    help="On a failure, also print the Python (and Java) stack traces.",
)
QUIET_OPTION = click.option(
    "-q",
    "--quiet",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=_remember("quiet"),
    help="Do not print a progress line as each stage starts and ends.",
)
SUMMARY_OPTION = click.option(
    "--summary-json",
    is_eager=True,
    expose_value=False,
    callback=_remember("summary_json"),
    metavar="FILE",
    help="Also write the outcome as JSON to this local file (status, exit status, stage "
    "seconds, headline metrics, checks, alerts), whether the run succeeds or fails.",
)


def _json_on_stdout(ctx: click.Context, _param: click.Parameter, value: object) -> None:
    """--json: keep stdout for the JSON document alone; the command's lines go to stderr
    until ``main`` (whose ``outputs`` stack restores stdout) prints the document."""
    options = ctx.ensure_object(dict)
    if value and not options.get("json"):
        options["json"] = True
        options["outputs"].enter_context(contextlib.redirect_stdout(sys.stderr))


JSON_OPTION = click.option(
    "--json",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=_json_on_stdout,
    help="Print the outcome as JSON on stdout (the --summary-json document), whether the run "
    "succeeds or fails; progress and results go to stderr.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="receval_spark")
@VERBOSE_OPTION
@QUIET_OPTION
@SUMMARY_OPTION
@JSON_OPTION
def cli() -> None:
    """Offline evaluation of recommender systems on Spark."""


def _given(key: str) -> bool:
    """Whether the eager option recorded under ``key`` (verbose, quiet) was given, before or
    after the command."""
    return bool(click.get_current_context().ensure_object(dict).get(key))


class _EchoHandler(logging.Handler):
    """Log records as lines on stdout (click.echo), where the job's other output goes."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(self.format(record))


@contextlib.contextmanager
def _progress_lines(quiet: bool) -> Iterator[None]:
    """Print the stage lines of receval_spark.progress (INFO) with a time stamp while the
    block runs, unless ``quiet``."""
    if quiet:
        yield
        return
    handler = _EchoHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    saved = LOGGER.level
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    try:
        yield
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(saved)


CONFIG_OPTION = click.option(
    "--config", "config_path", required=True, help="YAML job configuration."
)
SET_OPTION = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config key (dotted, value parsed as YAML); repeatable.",
)

REMOTE_OPTION = click.option(
    "--remote",
    "remote",
    default=None,
    metavar="sc://HOST:PORT",
    help="Run as a Spark Connect client of this server (same as --set spark.remote=...).",
)


def _with_remote(overrides: tuple[str, ...], remote: str | None) -> tuple[str, ...]:
    """``--remote URL`` as the last ``--set``: it wins over the config file and other --sets."""
    return (*overrides, f"spark.remote={remote}") if remote else overrides


def _run(config: JobConfig | SessionJobConfig, *, verbose: bool) -> Run:
    """Start (or reuse) Spark, run the job through the public run shell
    (receval_spark.run.run_job), delete its checkpoints on a cluster, stop what we started;
    print where the report went and what the shell could not do."""
    from pyspark.sql import SparkSession  # imported late: --help and config errors stay fast

    from receval_spark.run import delete_run_checkpoints, run_job
    from receval_spark.spark import build_session

    owns_session = SparkSession.getActiveSession() is None
    spark = build_session(config.spark, app_name=f"receval:{config.run.name}", quiet=not verbose)
    try:
        quieted = contextlib.nullcontext() if verbose else _quiet_failures()
        with _progress_lines(_given("quiet")), quieted:
            done = run_job(spark, config)
    finally:
        delete_run_checkpoints(spark)  # nothing reads the run's DataFrames after this
        if owns_session:
            spark.stop()
    if done.report is not None:
        click.echo(f"report: {done.report}")
    if done.tracked is not None:
        click.echo(f"mlflow run: {done.tracked}")
    for note in done.notes:
        click.echo(f"{'warning' if note.startswith('tracking') else 'note'}: {note}", err=True)
    return done


# PySpark's (Python) loggers of an error's DataFrame or SQL query context: they print a trace.
_PYSPARK_TRACE_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


@contextlib.contextmanager
def _quiet_failures() -> Iterator[None]:
    """Silence PySpark's query-context loggers while the job runs, and restore them after: the
    job's one ``error:`` line says what failed (``--verbose`` keeps them). The Java side is
    quieted by the log4j configuration of the session (``spark.QUIET_LOG4J``)."""
    import logging

    from pyspark.logger import PySparkLogger

    loggers = [PySparkLogger.getLogger(name) for name in _PYSPARK_TRACE_LOGGERS]
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, saved, strict=True):
            logger.setLevel(level)


def _finish(evaluation: Evaluation, commit: Commit) -> int:
    """Print warnings, failed checks and alerts; record the summary; the exit status (a
    fired alert: ``evaluation.alerts_exit_code``, 3 by default)."""
    for warning in evaluation.warnings:
        click.echo(f"warning: {warning}", err=True)
    failed = [c for c in evaluation.checks if not c.passed]
    for check in failed:
        click.echo(f"error: check {check.name} failed: {check.detail}", err=True)
    alerts = commit.alerts
    for alert in alerts:
        click.echo(f"alert: {alert}", err=True)
    from receval_spark.run import run_summary

    click.get_current_context().ensure_object(dict)["summary"] = run_summary(evaluation, commit)
    if failed:
        return EXIT_FAILURE
    return evaluation.config.evaluation.alerts_exit_code if alerts else EXIT_OK


@cli.command("evaluate")
@CONFIG_OPTION
@SET_OPTION
@REMOTE_OPTION
@VERBOSE_OPTION
@QUIET_OPTION
@SUMMARY_OPTION
@JSON_OPTION
def evaluate_command(config_path: str, overrides: tuple[str, ...], remote: str | None) -> int:
    """Split, score every configured model and write the reports for run.date."""
    config = load_config(config_path, _with_remote(overrides, remote))
    done = _run(config, verbose=_given("verbose"))
    evaluation, commit = done.evaluation, done.commit
    outcome = evaluation.outcome
    click.echo(
        f"run {commit.run_id} ({commit.run_date}): {outcome.n_users_evaluated} users "
        f"evaluated; reports in {commit.output}"
    )
    click.echo(
        "  stages (s): "
        + ", ".join(
            f"{name} {seconds:.1f}"
            for name, seconds in {**evaluation.stage_seconds, "write": commit.seconds}.items()
        )
    )
    windows = outcome.split.get("windows")
    if windows:
        click.echo(f"  rolling backtest: {len(windows)} windows; pooled over them (metrics.window)")
    for row in sorted(outcome.metrics, key=lambda r: (r.model, r.metric, r.k or 0)):
        if row.segment == "all" and row.metric in HEADLINE_METRICS and row.window is None:
            name = f"{row.metric}@{row.k}" if row.k is not None else row.metric
            click.echo(
                f"  {row.model:<16} {name + ' ' + _protocol(row.protocol):<22} {row.value:.4f}"
                f"{_interval(row.ci_low, row.ci_high)}"
            )
    headline = [
        c
        for c in commit.comparisons
        if c.segment == "all"
        and c.metric in HEADLINE_METRICS
        and c.protocol == "full"
        and c.window is None
    ]
    for c in sorted(headline, key=lambda c: (c.model, c.metric, c.k or 0)):
        click.echo(
            f"  {c.model + ' - ' + c.baseline:<28} "
            f"{c.metric + '@' + str(c.k) + ' ' + _protocol(c.protocol):<22} "
            f"{c.mean_diff:+.4f}{_interval(c.ci_low, c.ci_high)}  "
            f"{c.adjusted_column} {_p(c.p_adjusted)}"
            + ("" if c.p_randomization is None else f"  p_randomization {_p(c.p_randomization)}")
        )
    if outcome.off_policy:
        click.echo("  off-policy estimates (mean reward per logged impression):")
    for o in outcome.off_policy:
        value = "n/a" if o.value is None else f"{o.value:.4f}"
        effective = "" if o.effective_n is None else f"  effective n {o.effective_n:.1f}"
        click.echo(
            f"  {o.model:<16} {o.estimator:<14} {value}{_interval(o.ci_low, o.ci_high)}"
            f"  n {o.n_impressions}{effective}"
        )
    return _finish(evaluation, commit)


@cli.command()
@CONFIG_OPTION
@SET_OPTION
@REMOTE_OPTION
@VERBOSE_OPTION
@QUIET_OPTION
@SUMMARY_OPTION
@JSON_OPTION
def sessions(config_path: str, overrides: tuple[str, ...], remote: str | None) -> int:
    """Session-based next-item protocol: preprocess, split, predict every next click."""
    config = load_config(config_path, _with_remote(overrides, remote), schema=SessionJobConfig)
    done = _run(config, verbose=_given("verbose"))
    evaluation, commit = done.evaluation, done.commit
    outcome = evaluation.outcome
    click.echo(
        f"run {commit.run_id} ({commit.run_date}): {outcome.n_users_evaluated} prediction "
        f"events; reports in {commit.output}"
    )
    for row in sorted(outcome.metrics, key=lambda r: (r.model, r.metric, r.k or 0)):
        percent = definitions(row.protocol)[row.metric].display == "percent"
        if row.value is None:  # popularity bias of a model without any list
            value = "n/a"
        else:
            value = f"{100 * row.value:6.2f}%" if percent else f"{row.value:.4f}"
        click.echo(f"  {row.model:<16} {row.metric + '@' + str(row.k):<20} {value}")
    return _finish(evaluation, commit)


@cli.command()
@click.option("--reports", "reports", required=True, help="output.path of the jobs (Parquet).")
@click.option("--date", "date", default=None, help="run date YYYY-MM-DD (default: the latest).")
@click.option(
    "--out",
    "out",
    default=None,
    help="Local HTML file (default: REPORTS/report/DATE/report.html for a local REPORTS).",
)
@click.option(
    "--spark-conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark setting for reading REPORTS (e.g. its filesystem's spark.hadoop.*); repeatable.",
)
@REMOTE_OPTION
@VERBOSE_OPTION
def report(
    reports: str,
    date: str | None,
    out: str | None,
    spark_conf: tuple[str, ...],
    remote: str | None,
) -> int:
    """Render the human report (HTML and Markdown) from the committed reports alone, read
    through Spark from any filesystem it reaches."""
    from pyspark.sql import SparkSession

    from receval_spark.api import render_report
    from receval_spark.config import SparkConfig
    from receval_spark.spark import build_session

    settings = {}
    for item in spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--spark-conf: {item!r} is not KEY=VALUE")
        settings[key] = value
    spark_config = SparkConfig(master="local[1]", remote=remote, conf=settings)
    owns_session = SparkSession.getActiveSession() is None
    spark = build_session(spark_config, app_name="receval:report", quiet=not _given("verbose"))
    try:
        target = render_report(spark, reports, date=date, out=out)
    finally:
        if owns_session:
            spark.stop()
    click.echo(f"report: {target} and {target.with_suffix('.md')}")
    return EXIT_OK


def _protocol(protocol: str) -> str:
    return "" if protocol == "full" else f"[{protocol}]"


def _interval(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f" [{low:.4f}, {high:.4f}]"


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2g}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status (never raises).

    A failure prints one line on stderr; ``--verbose`` prints the stack trace before it.
    """
    with contextlib.ExitStack() as outputs:
        options: dict[str, Any] = {"verbose": False, "outputs": outputs}
        status, error = _status(argv, options)
    document = {"exit_status": status, "run_status": "error", "error": error}
    text = json.dumps({**document, **options.get("summary", {})}, indent=2, default=str) + "\n"
    if options.get("summary_json"):
        _write_summary(options["summary_json"], text)
    if options.get("json"):
        click.echo(text, nl=False)
    return status


def _status(argv: Sequence[str] | None, options: dict[str, Any]) -> tuple[int, str | None]:
    """Run the command line: its exit status and error line (None when it succeeded)."""
    error = None
    try:
        result = cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="receval",
            standalone_mode=False,
            obj=options,
        )
        status = result if isinstance(result, int) else EXIT_OK
    except click.exceptions.Exit as exc:  # --help, --version: no run, so no outcome either
        options.update(summary_json=None, json=False)
        return int(exc.exit_code), None
    except click.ClickException as exc:
        exc.show()
        status, error = EXIT_BAD_INPUT, exc.format_message()
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        status, error = EXIT_FAILURE, "aborted"
    except UserError as exc:
        status, error = EXIT_BAD_INPUT, _error(str(exc), verbose=options["verbose"])
    except SetupError as exc:
        status, error = EXIT_FAILURE, _error(str(exc), verbose=options["verbose"])
    except Exception as exc:
        if options["verbose"]:
            message = "the job failed (see above); no report was written or changed."
        else:
            message = (
                f"{type(exc).__name__}: {first_line(exc)} (run with --verbose for the stack "
                "trace); no report was written or changed."
            )
        status, error = EXIT_FAILURE, _error(message, verbose=options["verbose"])
    return status, error


def _write_summary(path: str, text: str) -> None:
    """The JSON summary, written whole or not at all (a temporary file renamed over it)."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, target)
    except OSError as exc:
        click.echo(f"warning: --summary-json {path}: {exc.strerror or exc}", err=True)


def _error(message: str, *, verbose: bool) -> str:
    """Print ``error: message`` as one line on stderr, after the stack trace when verbose;
    return the line's message."""
    if verbose:
        traceback.print_exc()
    first, *rest = _lines(message) or ["(no message)"]
    line = f"{first} {'; '.join(rest)}".rstrip()
    click.echo(f"error: {line}", err=True)
    return line


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


if __name__ == "__main__":
    sys.exit(main())
