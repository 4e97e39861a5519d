"""The Delta Lake and Iceberg tests' session (docs/tables.md): they run in ``.venv-lake``
(pyspark 4.1 and the Delta and Iceberg jars of tests/lake_env.py) through
``python tests/lake_env.py test`` (``make test-all``), with this folder's conftest alone
(``--confcutdir``). The main suite, on pyspark 4.3 (for which neither format has a release),
does not collect them."""

from __future__ import annotations

import os
import sys

import bytecode_cache  # noqa: F401  (first: the imports below write Python's bytecode cache)
import pyspark
import pytest
from helpers import INTERPRETED, SHORT_LIVED_JVM
from jvm_archive import archive_path, jvm_options, start_build
from lake_env import PYSPARK, class_path_settings, jars, lake_conf

collect_ignore_glob = [] if pyspark.__version__ == PYSPARK else ["test_*.py"]

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
if pyspark.__version__ == PYSPARK and isinstance(JARS := jars(), list):
    # the jobs run as processes: C1 alone, interpreted, mapping a class archive of a lake job's
    # JVM, built in the background at the first run (tests/jvm_archive.py): 66-68 -> 50-52 CPU s
    # for a lake job as a process (docs/contributing.md)
    ARCHIVE = archive_path(class_path_settings(JARS))
    os.environ.setdefault("SPARK_SUBMIT_OPTS", f"{SHORT_LIVED_JVM} {jvm_options(ARCHIVE)}")
    start_build(ARCHIVE, SHORT_LIVED_JVM, lake=True)


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
