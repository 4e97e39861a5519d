"""The Delta Lake and Iceberg tests' session (docs/tables.md): they run in ``.venv-lake``
(pyspark 4.1 and the Delta and Iceberg jars of tests/lake_env.py) through
``python tests/lake_env.py test`` (``make test-all``), with this folder's conftest alone
(``--confcutdir``). The main suite, on pyspark 4.3 (for which neither format has a release),
does not collect them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import bytecode_cache  # noqa: F401  (first: the imports below write Python's bytecode cache)
import pyspark
import pytest
from helpers import INTERPRETED, SHORT_LIVED_JVM
from lake_env import PYSPARK, jars

from receval_spark.tables import DELTA_EXTENSION, ICEBERG_EXTENSION

collect_ignore_glob = [] if pyspark.__version__ == PYSPARK else ["test_*.py"]

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_LIVED_JVM)  # the jobs run as processes


def lake_conf(jar_files: list[Path], warehouse: Path) -> dict[str, str]:
    """Delta (path tables, the session catalog) and an Iceberg Hadoop catalog ``lake`` on
    ``warehouse``, for the tests' session and the jobs they start as processes."""
    return {
        "spark.jars": ",".join(str(jar) for jar in jar_files),
        "spark.sql.extensions": f"{DELTA_EXTENSION},{ICEBERG_EXTENSION}",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "hadoop",
        "spark.sql.catalog.lake.warehouse": warehouse.as_uri(),
        "spark.databricks.delta.snapshotPartitions": "1",  # tiny logs: one task, not 50
        "spark.sql.shuffle.partitions": "1",
        "spark.sql.adaptive.enabled": "false",
        "spark.ui.enabled": "false",
    }


@pytest.fixture(scope="session")
def lake_settings(tmp_path_factory) -> dict[str, str]:
    """The lake's Spark settings (skips, with the reason, without the jars)."""
    found = jars()
    if isinstance(found, str):
        pytest.skip(found)
    return lake_conf(found, tmp_path_factory.mktemp("warehouse"))


@pytest.fixture(scope="session")
def spark(lake_settings):
    from pyspark.sql import SparkSession

    from receval_spark.spark import DEFAULT_CONF

    builder = SparkSession.builder.master("local[2]").appName("receval-lake-tests")
    for key, value in {**DEFAULT_CONF, **lake_settings, **INTERPRETED}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    yield session
    session.stop()
