"""The whole job on a large generated log with a small driver: proof that nothing the driver
holds grows with the data.

Generates (once) a log with ``generate.py`` (1.03M users, mean 20 interactions: ~20M rows by
default, no external candidates), then runs ``receval evaluate`` on it as a user does, in its
own process, with ``spark.driver.memory`` (default 1g) and local[2]: the built-in popularity,
random and oracle models, k = 5, 10, 20, every metric, segments, bootstrap and comparisons.
In local mode the driver JVM also runs the executors, so its heap bounds the whole job.
Reported: exit status, wall time, the peak resident memory (VmHWM) of the driver JVM and of the
Python driver process, the heap limit seen on the JVM's command line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from generate import generate

HERE = Path(__file__).resolve().parent
RECEVAL = Path(sys.executable).with_name("receval")


def config(
    data: Path,
    output: Path,
    driver_memory: str,
    partitions: int,
    lean: bool,
    extra: dict[str, str] | None = None,
) -> dict:
    """The job; ``lean``: popularity and random at k = 10, no segments, bootstrap or comparisons
    (the same driver-side results per row, a fraction of the executor work); ``extra``: more
    Spark settings."""
    job = {
        "run": {"name": "bench-driver-memory", "date": "2026-11-30"},
        "spark": {
            "master": "local[2]",
            "conf": {
                "spark.driver.memory": driver_memory,
                "spark.sql.shuffle.partitions": partitions,
                "spark.ui.enabled": False,
                **(extra or {}),
            },
        },
        "data": {
            "interactions": {
                "path": str(data / "interactions.parquet"),
                "columns": {"rating": "rating"},
            },
            "items": {"path": str(data / "items.parquet"), "columns": {"category": "categories"}},
        },
        "split": {"method": "global_temporal", "quantile": 0.9},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "random", "kind": "random", "seed": 42},
            {"name": "oracle", "kind": "oracle"},
        ],
        "evaluation": {
            "k": [5, 10, 20],
            "baseline": "popularity",
            "segments": ["warm", "cold"],
            "embeddings": {"source": "none"},
        },
        "output": {"path": str(output)},
    }
    if lean:
        job["models"] = job["models"][:2]
        job["evaluation"] = {
            "k": [10],
            "baseline": None,
            "bootstrap_samples": 0,
            "embeddings": {"source": "none"},
        }
    return job


def peak_rss_kib(pid: int) -> int:
    """VmHWM (peak resident set) of a live process, in KiB; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """pid and every live process below it (the job's Python, spark-submit's shell, the JVM)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return [pid]
    return [pid, *(d for child in text.split() for d in descendants(int(child)))]


def describe(pid: int) -> str | None:
    """'jvm -Xmx1g' or 'python' for a live process, None once it is gone."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return None
    if not args[0].endswith("java"):
        return "python" if "python" in args[0] or "receval" in " ".join(args[:2]) else None
    return " ".join(["jvm", *(a for a in args if a.startswith("-Xmx"))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1_030_000)  # ~20.1M interactions
    parser.add_argument("--data", type=Path, default=Path("/tmp/receval-bench/20m"))
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--lean", action="store_true", help="2 models, k = 10, no statistics")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="another Spark setting"
    )
    args = parser.parse_args()

    if not (args.data / "interactions.parquet").exists():
        started = time.monotonic()
        sizes = generate(
            users=args.users,
            items=20_000,
            mean_activity=20.0,
            n_candidates=0,
            seed=7,
            out=args.data,
        )
        print(f"generated {sizes} in {time.monotonic() - started:.0f} s", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.yaml"
        path.write_text(
            yaml.safe_dump(
                config(
                    args.data,
                    Path(tmp) / "reports",
                    args.driver_memory,
                    args.partitions,
                    args.lean,
                    dict(c.split("=", 1) for c in args.conf),
                )
            )
        )
        started = time.monotonic()
        proc = subprocess.Popen([str(RECEVAL), "evaluate", "--config", str(path)])
        peaks: dict[int, tuple[str, int]] = {}
        while proc.poll() is None:
            for pid in descendants(proc.pid):
                what, rss = describe(pid), peak_rss_kib(pid)
                if what and rss:
                    peaks[pid] = (what, max(rss, peaks.get(pid, ("", 0))[1]))
            time.sleep(1)
        seconds = time.monotonic() - started
    result = {
        "exit": proc.returncode,
        "seconds": round(seconds, 1),
        "driver_memory": args.driver_memory,
        "partitions": args.partitions,
        "lean": args.lean,
        "conf": args.conf,
        "peak_rss_mib": {what: round(kib / 1024) for what, kib in peaks.values()},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
