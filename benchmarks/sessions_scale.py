"""The session protocol end to end: wall time on the two real samples and on a generated
DIGINETICA-shaped click log of ~1M clicks (the size class of the real Yoochoose 1/4 and
DIGINETICA sets).

The generator writes ``session_id;user_id;item_id;timeframe;eventdate`` (the DIGINETICA
layout): session lengths 1 + Geometric(p = 0.22) (mean ~4.5 clicks, long tail), items drawn
Zipf(1.1) over 40,000 items with a per-session "repeat the previous item" probability of 0.25
(DIGINETICA views repeat items), one date per session uniform over 150 days, timeframe the
milliseconds since the session start. Deterministic for a given seed.

    python benchmarks/sessions_scale.py --clicks 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]


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


def run_job(config: str, *overrides: str) -> tuple[float, str]:
    """Seconds of one ``receval sessions`` run in a fresh process, and its output."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with tempfile.TemporaryDirectory() as out:
        argv = [
            sys.executable,
            "-m",
            "receval_spark",
            "sessions",
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=1_000_000)
    parser.add_argument("--data", type=Path, default=Path("/tmp/receval-bench"))
    parser.add_argument("--skip-samples", action="store_true")
    args = parser.parse_args()
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
