"""The session protocol end to end: wall time on the two real samples and on a generated
DIGINETICA-shaped click log of ~1M clicks (the size class of the real Yoochoose 1/4 and
DIGINETICA sets); with ``--shape yoochoose``, seconds and Spark jobs per stage on generated
YOOCHOOSE-shaped logs (issue 50, target 6: ~6M clicks in ~1.5M sessions, and a tenth of it).

The generator writes ``session_id;user_id;item_id;timeframe;eventdate`` (the DIGINETICA
layout): session lengths 1 + Geometric(p = 0.22) (mean ~4.5 clicks, long tail), items drawn
Zipf(1.1) over 40,000 items with a per-session "repeat the previous item" probability of 0.25
(DIGINETICA views repeat items), one date per session uniform over 150 days, timeframe the
milliseconds since the session start. Deterministic for a given seed.

    python benchmarks/sessions_scale.py --clicks 1000000
    python benchmarks/sessions_scale.py --shape yoochoose --clicks 600000 6000000

The YOOCHOOSE-shaped generator draws from the real sample in ../shared/data
(yoochoose-clicks-100k, train_full + test): session lengths from its empirical distribution
(2-78 clicks, mean 3.95), the gaps between a session's clicks from its empirical gaps, items
from a Zipf law over 30,000 items (a chosen catalogue size: the sample's 2,933 are too few for
millions of clicks) with the exponent fitted to the sample's rank-frequency curve (~1.04), the
previous item repeated with the sample's share (~26 %), sessions starting uniformly over 45 days
(about a quarter of the challenge's six months). It writes ``session_id,item_id,time`` (unix
seconds with milliseconds); the job preprocesses it as YOOCHOOSE is (sessions >= 2 clicks,
items >= 5 until stable, test = sessions ending in the last day) and fits the five models of
conf/yoochoose-100k.yaml.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SAMPLE = Path(os.environ.get("RECEVAL_SHARED_DATA", REPO.parent / "shared" / "data"))
YOOCHOOSE = SAMPLE / "yoochoose-clicks-100k"
DAY = 86_400.0


def generate_clicks(clicks: int, *, items: int = 40_000, seed: int = 5) -> pd.DataFrame:
    """A DIGINETICA-shaped click log with about ``clicks`` rows (see module doc)."""
    rng = np.random.default_rng(seed)
    lengths = 1 + rng.geometric(0.22, size=int(clicks / 4.5) + 1)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), clicks) + 1]
    n = int(lengths.sum())
    session = np.repeat(np.arange(1, len(lengths) + 1), lengths)
    item = (rng.zipf(1.1, size=n) - 1) % items + 1
    first = np.r_[True, session[1:] != session[:-1]]
    repeat = (~first) & (rng.random(n) < 0.25)
    for i in np.flatnonzero(repeat):  # vectorising the chain of repeats is not worth it here
        item[i] = item[i - 1]
    day = rng.integers(0, 150, size=len(lengths))
    start = np.cumsum(np.r_[0, lengths[:-1]])
    offset = rng.integers(5_000, 120_000, size=n)
    offset[start] = 0
    timeframe = np.zeros(n, dtype=np.int64)
    for s, length in zip(start, lengths, strict=True):
        timeframe[s : s + length] = np.cumsum(offset[s : s + length])
    dates = pd.Timestamp("2016-01-03") + pd.to_timedelta(np.repeat(day, lengths), unit="D")
    return pd.DataFrame(
        {
            "session_id": session,
            "user_id": "NA",
            "item_id": item,
            "timeframe": timeframe,
            "eventdate": dates.strftime("%Y-%m-%d"),
        }
    )


def yoochoose_sample() -> pd.DataFrame:
    """The real sample's clicks (SessionId, ItemId, Time), train_full and test, in order."""
    parts = [YOOCHOOSE / f"yoochoose-clicks-100k_{name}.txt" for name in ("train_full", "test")]
    clicks = pd.concat([pd.read_csv(path, sep="\t") for path in parts])
    return clicks.sort_values(["SessionId", "Time"], kind="stable")


@dataclass(frozen=True)
class SampleShape:
    """What the YOOCHOOSE-shaped log draws from the real sample (see the module doc)."""

    lengths: np.ndarray  # clicks per session
    gaps: np.ndarray  # seconds between consecutive clicks of a session
    exponent: float  # Zipf exponent fitted to the items' rank-frequency curve
    repeat: float  # share of clicks repeating the session's previous item

    def facts(self) -> dict[str, float]:
        return {"exponent": round(self.exponent, 3), "repeat": round(self.repeat, 3)}


def sample_shape() -> SampleShape:
    """The real sample's :class:`SampleShape`."""
    sample = yoochoose_sample()
    new = sample.SessionId.ne(sample.SessionId.shift()).to_numpy()
    counts = np.sort(sample.ItemId.value_counts().to_numpy())[::-1]
    ranks = np.arange(1, len(counts) + 1)
    return SampleShape(
        lengths=sample.groupby("SessionId").size().to_numpy(),
        gaps=sample.Time.diff().to_numpy()[~new],
        exponent=float(-np.polyfit(np.log(ranks), np.log(counts), 1)[0]),
        repeat=float(sample.ItemId.eq(sample.ItemId.shift()).to_numpy()[~new].mean()),
    )


def generate_yoochoose(
    clicks: int, shape: SampleShape, *, items: int = 30_000, days: int = 45, seed: int = 7
) -> pd.DataFrame:
    """A YOOCHOOSE-shaped click log of about ``clicks`` rows drawn from ``shape`` (see the
    module doc)."""
    rng = np.random.default_rng(seed)
    lengths, gaps, exponent, repeat = shape.lengths, shape.gaps, shape.exponent, shape.repeat
    drawn = rng.choice(lengths, size=int(1.1 * clicks / lengths.mean()) + 10)  # then cut
    drawn = drawn[: np.searchsorted(np.cumsum(drawn), clicks) + 1]
    n, start = int(drawn.sum()), np.cumsum(np.r_[0, drawn[:-1]])
    weights = np.arange(1, items + 1, dtype=float) ** -exponent
    item = np.searchsorted(np.cumsum(weights) / weights.sum(), rng.random(n)) + 1
    first = np.zeros(n, dtype=bool)
    first[start] = True
    again = np.flatnonzero(~first & (rng.random(n) < repeat))
    for i in again:  # a chain of repeats copies forward, in order
        item[i] = item[i - 1]
    step = rng.choice(gaps, size=n)
    step[start] = 0.0
    session_start = np.repeat(rng.uniform(0, days * DAY, size=len(drawn)), drawn)
    within = np.cumsum(step) - np.repeat(np.cumsum(step)[start], drawn)
    time_s = np.round(1_396_310_400.0 + session_start + within, 3)  # from 2014-04-01
    session = np.repeat(np.arange(1, len(drawn) + 1), drawn)
    return pd.DataFrame({"session_id": session, "item_id": item, "time": time_s})


def run_job(config: str, *overrides: str, verbose: bool = False) -> tuple[float, str]:
    """Seconds of one ``receval sessions`` run in a fresh process, and its output (with
    ``verbose``: also its stage lines)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with tempfile.TemporaryDirectory() as out:
        argv = [
            sys.executable,
            "-m",
            "receval_spark",
            "sessions",
            *(["--verbose"] if verbose else []),
            "--config",
            config,
            "--set",
            f"output.path={out}",
        ]
        for override in overrides:
            argv += ["--set", override]
        start = time.perf_counter()
        done = subprocess.run(argv, check=True, env=env, capture_output=True, text=True)
        return time.perf_counter() - start, done.stdout


def jobs_per_stage(events: Path) -> Counter[str]:
    """Spark jobs per job stage, from an event log folder (``job_profile.read_events``): each
    job carries its stage's tag (``receval-<stage>``, receval_spark/progress.py)."""
    from job_profile import read_events

    jobs: Counter[str] = Counter()
    for event in read_events(events):
        if event.get("Event") != "SparkListenerJobStart":
            continue
        tags = (event.get("Properties") or {}).get("spark.job.tags", "")
        # a tag as Spark reports it: spark-session-<id>-thread-<id>-receval-<stage>
        stage = [t.rpartition("receval-")[2] for t in tags.split(",") if "receval-" in t]
        jobs[stage[0] if stage else "(none)"] += 1
    return jobs


def profile_yoochoose(clicks: int, shape: SampleShape, data: Path) -> dict[str, object]:
    """One ``receval sessions`` run on a YOOCHOOSE-shaped log of ``clicks`` rows drawn from
    ``shape`` (generated once into ``data``): wall seconds, the job's stage seconds (its own
    clock) and Spark jobs per stage."""
    path = data / f"yoochoose-shaped-{clicks}.csv"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        generate_yoochoose(clicks, shape).to_csv(path, index=False)
    with tempfile.TemporaryDirectory() as events:
        seconds, stdout = run_job(
            str(REPO / "conf" / "yoochoose-100k.yaml"),
            "data.train=null",
            "data.test=null",
            f"data.clicks={{path: {path}, format: csv, header: true, "
            "columns: {session: session_id, item: item_id, time: time}}",
            "preprocessing={test_days: 1, split_by: end}",
            "spark.conf.spark.sql.shuffle.partitions=8",
            "spark.conf.spark.driver.memory=4g",
            "spark.conf.spark.eventLog.enabled=true",
            f"spark.conf.spark.eventLog.dir={Path(events).as_uri()}",
            "spark.conf.spark.eventLog.compress=false",
            "spark.conf.spark.eventLog.rolling.enabled=false",
            verbose=True,
        )
        jobs = jobs_per_stage(Path(events))
    done = [re.search(r" · (\w+) done in ([\d.]+) s", line) for line in stdout.splitlines()]
    return {
        "clicks": clicks,
        **shape.facts(),
        "seconds": round(seconds, 1),
        "stages": {m.group(1): float(m.group(2)) for m in done if m},
        "jobs": dict(jobs),
        "output": [line for line in stdout.splitlines() if "@20 " in line or "events" in line],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--data", type=Path, default=Path("/tmp/receval-bench"))
    parser.add_argument("--skip-samples", action="store_true")
    parser.add_argument("--shape", choices=["diginetica", "yoochoose"], default="diginetica")
    args = parser.parse_args()
    if args.shape == "yoochoose":
        shape = sample_shape()
        runs = [profile_yoochoose(n, shape, args.data) for n in args.clicks]
        print(json.dumps(runs, indent=2))
        return
    args.clicks = args.clicks[0]
    results = {}
    if not args.skip_samples:
        for name in ("diginetica-sample", "yoochoose-100k"):
            seconds, stdout = run_job(str(REPO / "conf" / f"{name}.yaml"))
            results[name] = {"seconds": round(seconds, 1), "output": stdout.splitlines()}
    path = args.data / f"diginetica-shaped-{args.clicks}.csv"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        generate_clicks(args.clicks).to_csv(path, sep=";", index=False)
    seconds, stdout = run_job(
        str(REPO / "conf" / "diginetica-sample.yaml"),
        f"data.clicks.path={path}",
        "spark.conf.spark.sql.shuffle.partitions=8",
        "spark.conf.spark.driver.memory=4g",
    )
    results["generated"] = {
        "clicks": args.clicks,
        "seconds": round(seconds, 1),
        "output": stdout.splitlines(),
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
