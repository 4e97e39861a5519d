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
    .venv/bin/python benchmarks/job_profile.py --config conf/movielens-100k.yaml \
        --set data.interactions.path=../shared/data/ml-100k/u.data
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", help="also write the rows to this file")
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
    spark = build_session(config.spark, app_name="receval-profile", quiet=True)
    for _ in range(args.repeat):
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
    rows, total = profile(stages, job_intervals(read_events(logs)))
    print("| stage | wall (s) | Spark jobs | busy (s) | idle (s) | task (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, wall, n, busy, idle, task in [*rows, total]:
        print(f"| {name} | {wall:.1f} | {n} | {busy:.1f} | {idle:.1f} | {task:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"stages": rows, "total": total}, indent=1))


if __name__ == "__main__":
    main()
