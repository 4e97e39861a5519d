"""The demo job (conf/demo.yaml, ml-latest-small) run as a user runs it, in subprocesses; shared
by the end-to-end tests through the session-scoped ``demo_runs`` fixture (tests/conftest.py)."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
TIMEOUT = 900  # seconds per subprocess: each starts its own JVM on a possibly busy machine
DATE_M, DATE_A = "2026-01-01", "2026-01-02"  # python -m run, then receval runs (twice)
# The deployment tests (python -m, re-runs, cluster, Connect) run the demo with its baselines
# only: they check how the job runs, not the candidate models, whose fitting would multiply
# the suite's time; the shipped demo as a whole runs once (test_cli_end_to_end.py).
DEPLOYMENT_SETTINGS = [
    "--set",
    "evaluation.embeddings.source=none",  # ALS is covered by test_als.py
    "--set",
    "models=[{name: popularity, kind: popularity}, {name: random, kind: random, seed: 7}, "
    "{name: oracle, kind: oracle}]",
    "--set",
    "evaluation.protocol=full",
]


def same_value(a: object, b: object) -> bool:
    """Bit-for-bit equal values of the same type (NaN equals NaN): how runs of the same input
    under different partitionings, parallelism or deployments must compare."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def job_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=REPO, env=job_env(), capture_output=True, text=True, timeout=TIMEOUT
    )


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"


def snapshot(root: Path, date: str) -> dict[str, bytes | None]:
    """Files (bytes) and folders (None) of every dataset's partition for ``date``."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for part in sorted(root.glob(f"*/run_date={date}"))
        for p in [part, *sorted(part.rglob("*"))]
    }


@dataclass
class DemoRuns:
    output: Path
    after_first: Path  # copy of the output after the first receval run (before the re-run)
    by_module: subprocess.CompletedProcess[str]
    first: subprocess.CompletedProcess[str]
    again: subprocess.CompletedProcess[str]
    date_m_before_rerun: dict[str, bytes | None]


def run_demo(tmp: Path) -> DemoRuns:
    """conf/demo.yaml three times into one output folder under ``tmp``:
    ``python -m receval_spark`` for DATE_M, then ``receval`` for DATE_A, then DATE_A again."""
    output = tmp / "reports"

    def evaluate(launcher: list[str], date: str) -> subprocess.CompletedProcess[str]:
        return run(
            [
                *launcher,
                "evaluate",
                "--config",
                "conf/demo.yaml",
                "--set",
                f"output.path={output}",
                "--set",
                f"run.date={date}",
                *DEPLOYMENT_SETTINGS,
            ]
        )

    by_module = evaluate([sys.executable, "-m", "receval_spark"], DATE_M)
    first = evaluate([str(VENV_BIN / "receval")], DATE_A)
    after_first = tmp / "after_first"
    if output.exists():
        shutil.copytree(output, after_first)
    date_m_before_rerun = snapshot(output, DATE_M)
    again = evaluate([str(VENV_BIN / "receval")], DATE_A)
    return DemoRuns(output, after_first, by_module, first, again, date_m_before_rerun)
