"""One local SparkSession for the whole test run, and the shared real datasets."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RECEVAL_SHARED_DATA", REPO.parent / "shared" / "data"))

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # every Spark the tests start: loopback only


def pytest_sessionstart(session: pytest.Session) -> None:
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.exit(
            "Java 17+ is required for the Spark tests: install openjdk-17-jre-headless "
            "or set JAVA_HOME.",
            returncode=3,
        )


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("receval-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory):
    """The demo job run three times as a user runs it (tests/demo_job.py), once per test run."""
    from demo_job import run_demo

    return run_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (or $RECEVAL_SHARED_DATA); tests using it skip with a reason when absent."""
    if not (SHARED_DATA / "ml-100k" / "u.data").exists():
        pytest.skip(
            f"real datasets not found at {SHARED_DATA} (set RECEVAL_SHARED_DATA to the "
            "folder holding ml-100k/ and ml-latest-small/)"
        )
    return SHARED_DATA


@contextlib.contextmanager
def kept_sql_conf(spark):
    """Put back the runtime SQL options a job run in this process sets on the shared session
    (receval_spark.spark.DEFAULT_CONF and the configs' spark.sql.* options)."""
    from receval_spark.spark import DEFAULT_CONF

    keys = [key for key in DEFAULT_CONF if key.startswith("spark.sql.")]
    saved = {key: spark.conf.get(key, None) for key in keys}
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@pytest.fixture
def restore_sql_conf(spark):
    """Function-scoped ``kept_sql_conf`` for tests that call the job in-process."""
    with kept_sql_conf(spark):
        yield


def diginetica_clicks(path: Path | str) -> dict:
    """The ``data`` block of a session job reading a DIGINETICA-layout click log at ``path``
    (``;``-separated CSV: session_id, item_id, eventdate, timeframe)."""
    return {
        "clicks": {
            "path": str(path),
            "format": "csv",
            "delimiter": ";",
            "columns": {
                "session": "session_id",
                "item": "item_id",
                "time": "eventdate",
                "order": "timeframe",
            },
        }
    }
