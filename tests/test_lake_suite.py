"""The Delta Lake and Iceberg tests (tests/lake/, docs/tables.md) as one step of the main suite.

They need pyspark 4.1 and the format jars, so they run in their own environment, ``.venv-lake``
(``tests/lake_env.py``; ``make lake`` builds it, ``make test-all`` first). This test runs them
there in a subprocess: under xdist they then take one worker's time beside the other worker's
tests (tests/conftest.py starts this module first) instead of running after the whole suite.
Without the environment or the jars it skips with the reason ``tests/lake_env.py`` gives."""

from __future__ import annotations

import os
import subprocess

import pytest
from helpers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.lake]

LAKE = REPO / "tests" / "lake_env.py"
TIMEOUT = 3600  # seconds: 9 min measured on a loaded 2-core machine, 18 at load 12-16


def test_the_delta_and_iceberg_tests_pass_in_the_lake_environment() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("lake_env", LAKE)
    assert spec is not None and spec.loader is not None
    lake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lake)
    jars = lake.jars()
    if isinstance(jars, str):
        pytest.skip(jars)
    if not lake.STAMP.exists():
        pytest.skip(f"{lake.VENV} is not built: `make lake` builds it")
    command = [str(lake.VENV / "bin" / "python"), "-m", "pytest", "--confcutdir=tests/lake"]
    proc = subprocess.run(
        [*command, "-p", "no:cacheprovider", "-q", "tests/lake"],
        cwd=REPO,
        env=lake_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-8000:]}\n{proc.stderr[-3000:]}"
    )


def lake_env() -> dict[str, str]:
    """This process's environment without what tests/conftest.py set for pyspark 4.3 (its
    Python for the workers, its JVM options with the class archive of 4.3's jars) and without
    pytest's own variables (the lake run is a pytest session of its own)."""
    dropped = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_SUBMIT_OPTS")
    return {
        key: value
        for key, value in os.environ.items()
        if key not in dropped and not key.startswith("PYTEST_")
    }
