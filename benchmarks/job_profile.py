"""Where a job's wall time goes, per stage, from Spark's own event log.

Runs one evaluation in this process (the API, then the commit) with ``spark.eventLog.enabled``,
stops Spark to flush the log, and attributes every Spark job to the job stage (``read``,
``split``, ... ``checks``, then ``assemble`` and ``write``) during which it was submitted:

* jobs: Spark jobs submitted (AQE runs every shuffle stage as a job of its own);
* busy: seconds with at least one Spark job running; idle = wall - busy: planning,
  optimisation and driver-side Python (the fixed cost of a small job);
* task: executor run time summed over tasks (the work itself).

    .venv/bin/python benchmarks/job_profile.py --config conf/demo.yaml
    .venv/bin/python benchmarks/job_profile.py --config conf/demo.yaml --repeat 3  # warm JVM
    .venv/bin/python benchmarks/job_profile.py --config conf/nightly.yaml \
        --set run.date=2026-12-02 --previous-date 2026-12-01   # lists: the stability step
    .venv/bin/python benchmarks/job_profile.py --config conf/movielens-100k.yaml \
        --set data.interactions.path=../shared/data/ml-100k/u.data
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from receval_spark import evaluate, write_reports  # noqa: E402
from receval_spark.config_files import load_config  # noqa: E402
from receval_spark.spark import build_session  # noqa: E402


def read_events(folder: Path) -> list[dict[str, Any]]:
    """Every event of the one application log in ``folder``."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and "appstatus" not in p.name)
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line]


def job_intervals(events: list[dict[str, Any]]) -> list[tuple[float, float, float]]:
    """(submitted, completed, task seconds) per Spark job, in epoch seconds."""
    start, end, stage_job, task = {}, {}, {}, defaultdict(float)
    for e in events:
        kind = e["Event"]
        if kind == "SparkListenerJobStart":
            start[e["Job ID"]] = e["Submission Time"] / 1000
            for stage in e["Stage IDs"]:
                stage_job[stage] = e["Job ID"]
        elif kind == "SparkListenerJobEnd":
            end[e["Job ID"]] = e["Completion Time"] / 1000
        elif kind == "SparkListenerTaskEnd" and e.get("Task Metrics"):
            job = stage_job.get(e["Stage ID"])
            if job is not None:
                task[job] += e["Task Metrics"]["Executor Run Time"] / 1000
    return [(start[j], end.get(j, start[j]), task[j]) for j in sorted(start)]


def busy_seconds(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of ``intervals`` clipped to [lo, hi]."""
    total, reach = 0.0, lo
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in intervals):
        if b <= reach:
            continue
        total += b - max(a, reach)
        reach = b
    return total


def profile(stages: list[tuple[str, float, float]], jobs: list[tuple[float, float, float]]):
    """Rows (stage, wall, jobs, busy, idle, task) and the totals."""
    rows = []
    for name, lo, hi in stages:
        mine = [(a, b, t) for a, b, t in jobs if lo <= a < hi]
        busy = busy_seconds([(a, b) for a, b, _ in mine], lo, hi)
        rows.append((name, hi - lo, len(mine), busy, hi - lo - busy, sum(t for *_, t in mine)))
    total = tuple(sum(r[i] for r in rows) for i in range(1, 6))
    return rows, ("total", *total)


ACTIONS = {
    "pyspark.sql.classic.dataframe.DataFrame": (
        "collect",
        "count",
        "localCheckpoint",
        "checkpoint",
        "toPandas",
        "take",
        "isEmpty",
    ),
    "pyspark.sql.readwriter.DataFrameWriter": ("save", "parquet", "saveAsTable", "insertInto"),
    "pyspark.ml.base.Estimator": ("fit",),
}


def record_actions() -> list[tuple[float, float, str]]:
    """Wrap the DataFrame actions (and Spark ML's ``fit``) so that each call records (start,
    end, the two innermost receval_spark frames that called it, cache.py's left out); returns
    the list being filled."""
    import functools
    import importlib
    import traceback

    calls: list[tuple[float, float, str]] = []

    def wrap(method):
        @functools.wraps(method)
        def timed(*args, **kwargs):
            # cache.py's persist/keep are skipped: the site is the code that materialises
            frames = [
                f
                for f in traceback.extract_stack()[:-1]
                if "/receval_spark/" in f.filename and not f.filename.endswith("/cache.py")
            ]
            site = " < ".join(
                [method.__name__]
                + [
                    f"{f.filename.split('/receval_spark/')[1]}:{f.lineno} ({f.name})"
                    for f in frames[::-1][:2]
                ]
            )
            began = time.time()
            try:
                return method(*args, **kwargs)
            finally:
                calls.append((began, time.time(), site))

        timed.__wrapped_by_profile__ = True
        return timed

    for path, names in ACTIONS.items():
        module, cls = path.rsplit(".", 1)
        owner = getattr(importlib.import_module(module), cls)
        for name in names:
            method = getattr(owner, name)
            if not getattr(method, "__wrapped_by_profile__", False):
                setattr(owner, name, wrap(method))
    return calls


def print_sites(
    stages: list[tuple[str, float, float]],
    jobs: list[tuple[float, float, float]],
    calls: list[tuple[float, float, str]],
) -> None:
    """Per stage, the actions that ran in it grouped by call site (most Spark jobs first):
    calls, Spark jobs submitted while they ran, wall seconds of the calls, task seconds."""
    outermost = [c for c in calls if not any(o[0] < c[0] and c[1] <= o[1] for o in calls)]
    for name, lo, hi in stages:
        by_site: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0])
        for a, b, site in outermost:
            if lo <= a < hi:
                entry = by_site[site]
                entry[0] += 1
                entry[2] += b - a
                for start, _, task in jobs:
                    if a <= start <= b:
                        entry[1] += 1
                        entry[3] += task
        for site, (n, njobs, wall, task) in sorted(by_site.items(), key=lambda kv: -kv[1][1]):
            print(
                f"{name:10} {n:3d} calls {njobs:4d} jobs {wall:6.1f} s {task:6.1f} task s  {site}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument(
        "--sites",
        action="store_true",
        help="also list, per stage, the call sites that submitted its Spark jobs (jobs, "
        "wall seconds of those jobs, task seconds)",
    )
    parser.add_argument(
        "--previous-date",
        metavar="YYYY-MM-DD",
        help="first commit the same job for this earlier run date (not profiled), so that "
        "the profiled run has a previous night: with output.lists, its stability step",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the evaluation this many times in one session and profile the last "
        "(a warm JVM, as in a notebook or the test suite)",
    )
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="receval-profile-"))
    logs = scratch / "events"
    logs.mkdir()
    overrides = [
        *args.set,
        f"output.path={scratch / 'reports'}",
        "spark.conf.spark.eventLog.enabled=true",
        f"spark.conf.spark.eventLog.dir={logs.as_uri()}",
        "spark.conf.spark.eventLog.compress=false",
        "spark.conf.spark.eventLog.rolling.enabled=false",
    ]
    config = load_config(args.config, overrides)
    calls = record_actions() if args.sites else []
    spark = build_session(config.spark, app_name="receval-profile", quiet=True)
    if args.previous_date:
        night = config.run.model_copy(update={"date": dt.date.fromisoformat(args.previous_date)})
        write_reports(evaluate(spark, config.model_copy(update={"run": night})))
    for _ in range(args.repeat):
        calls.clear()
        began = time.time()
        evaluation = evaluate(spark, config)
        evaluated = time.time()
        write_reports(evaluation)
        written = time.time()
    spark.stop()
    stages, lo = [], began
    for name, seconds in evaluation.stage_seconds.items():
        stages.append((name, lo, lo + seconds))
        lo += seconds
    stages += [("assemble", lo, evaluated), ("write", evaluated, written)]
    jobs = job_intervals(read_events(logs))
    rows, total = profile(stages, jobs)
    print("| stage | wall (s) | Spark jobs | busy (s) | idle (s) | task (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, wall, n, busy, idle, task in [*rows, total]:
        print(f"| {name} | {wall:.1f} | {n} | {busy:.1f} | {idle:.1f} | {task:.1f} |")
    if args.sites:
        print_sites(stages, jobs, calls)
    if args.json:
        Path(args.json).write_text(json.dumps({"stages": rows, "total": total}, indent=1))


if __name__ == "__main__":
    main()
