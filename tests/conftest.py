"""Fixtures (helpers: tests/helpers.py): one local SparkSession for the whole test run, the
shared demo runs and real datasets; the tiers of `make test` / `make test-all` and the groups
their two xdist workers run."""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter
from pathlib import Path

import bytecode_cache  # noqa: F401  (first: the imports below write Python's bytecode cache)
import pytest
from hadoop_aws import cached_jars
from helpers import (
    GENERATED,
    INTERPRETED,
    SHARED_DATA,
    SHORT_LIVED_JVM,
    kept_sql_conf,
    ml100k_external_recs,
    ml100k_job,
    run_demo,
    run_shipped_demo,
    sql_conf,
)
from jvm_archive import archive_path, jvm_options, start_build
from storage import LocalFolder, ReportRoot, S3Server, storages

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # every Spark the tests start: loopback only
# Every JVM started through spark-submit (the jobs the tests run as processes, spark-submit
# itself, the Connect and Thrift servers, notebook kernels' Spark) lives for one small job, so
# it is set up for starting, not for running long (benchmarks/README.md, "The tests' short-lived
# JVMs"): it compiles Java with C1 only (C2's compiler threads cost it about 45% of its CPU
# time), interprets Spark's expressions instead of generating and compiling Java for each plan
# (Spark's test-only factoryMode), and maps Spark's classes from a class-data-sharing archive
# (jvm_archive.py, built in the background at the first run). Together: a crafted job as a
# process 39 -> 25 CPU seconds, which two workers on two cores pay in wall time. The test
# session's own long-lived JVM keeps C2 (TEST_SESSION_CONF) and interprets too, except for the
# ml-100k jobs (ml100k_run, the models on ml-100k), which run generated code as users' do.
# None of this changes results: Java's floating point is strict since 17, and Spark's
# interpreted and generated expressions are the same functions.
JVM_ARCHIVE = archive_path()
os.environ.setdefault("SPARK_SUBMIT_OPTS", f"{SHORT_LIVED_JVM} {jvm_options(JVM_ARCHIVE)}")

# The tiers (docs/contributing.md, Tests): `make test` runs -m "not slow", `make test-all`
# everything. A test is slow when it carries one of SLOW_MARKERS (pyproject describes each), set
# with pytestmark or on the test, or given here to every test that uses the fixture of
# FIXTURE_MARKERS.
SLOW_MARKERS = (
    "shared_data",
    "real_data",
    "deployment",
    "cluster",
    "connect",
    "metastore",
    "viewfs",
    "s3a",
    "fault",
    "browser",
    "notebook",
    "nightly",
    "lake",
)
FIXTURE_MARKERS = {
    "shared_data": "shared_data",
    "demo_runs": "deployment",
    "shipped_demo": "deployment",
}


def pytest_sessionstart(session: pytest.Session) -> None:
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.exit(
            "Java 17+ is required for the Spark tests: install openjdk-17-jre-headless "
            "or set JAVA_HOME.",
            returncode=3,
        )
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        start_build(JVM_ARCHIVE, SHORT_LIVED_JVM)


# Under pytest-xdist (`make test`, `make test-all`: two workers) a worker runs whole groups: a
# module is a group (its module-scoped fixtures are set up once), and the modules sharing an
# expensive session-scoped fixture form one group, named here, so that one worker computes it.
# (xdist's own loadgroup does not work with pytest 9.2: it renames items through a field that
# pytest no longer reads; the groups are given to xdist's scope scheduler instead.)
SHARED_GROUPS = {
    "demo_runs": ("test_cli_end_to_end.py", "test_cluster.py", "test_connect.py"),
    "shipped_demo": ("test_shipped_demo.py", "report/test_report_browser.py"),
    "ml100k_run": ("metrics/test_beyond_parity.py", "ranking/test_parity_ml100k.py"),
}
# one long test each, started before everything else under xdist (else it would come last)
FIRST = ("tests/test_lake_suite.py",)
GROUP_OF = {f"tests/{path}": group for group, paths in SHARED_GROUPS.items() for path in paths}


def group_of(nodeid: str) -> str:
    """The xdist group of a test: its SHARED_GROUPS name, else its module's path."""
    path = nodeid.split("::", 1)[0]
    return GROUP_OF.get(path, path)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scope scheduler with :func:`group_of` as the scope of a test."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return ModuleGroups(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tests; run serially, the modules without a slow test go first (fail
    fast); under xdist, the groups with most slow tests go first (the long ones start at once,
    the quick ones fill the workers' gaps). Order is kept within a module, so module-scoped
    fixtures are set up once. A module using a SHARED_GROUPS fixture outside its group is a
    usage error (the fixture would be computed by both workers)."""
    slow_modules = set()
    for item in items:
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
        for fixture in SHARED_GROUPS:
            if fixture in getattr(item, "fixturenames", ()) and group_of(item.nodeid) != fixture:
                raise pytest.UsageError(
                    f"{item.nodeid} uses {fixture}: add its module to SHARED_GROUPS[{fixture!r}] "
                    "in tests/conftest.py"
                )
        if any(item.get_closest_marker(name) for name in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)
            slow_modules.add(item.module)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.module in slow_modules)
        return
    slow = Counter(group_of(item.nodeid) for item in items if item.module in slow_modules)
    items.sort(key=lambda item: (group_of(item.nodeid) not in FIRST, -slow[group_of(item.nodeid)]))


# The job's defaults (spark.DEFAULT_CONF: plan-string cap, AQE, UTC) plus a session that lives
# for the whole run of hundreds of jobs: its driver keeps the status of only the last few
# queries, jobs and stages (each SQL execution's record holds its plan: deep plans times the
# default 1000 records filled the 2 GiB heap, AGGREGATE_OUT_OF_MEMORY late in a full run).
TEST_SESSION_CONF = {
    # one partition per core of local[2] (tiny data: with 4, make test took 13 min 9 s, with
    # 2 11 min 51 s; still more than one partition, so partition-dependent bugs show)
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "3g",
    "spark.sql.ui.retainedExecutions": "20",
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "1000",
    "spark.ui.dagGraph.retainedRootRDDs": "50",
    # after SPARK_SUBMIT_OPTS on the driver's command line, so this JVM keeps C2 (see above); the
    # parallel collector, not G1's concurrent threads on two cores: tests/metrics' fast tier in
    # one process 200 -> 185 CPU s, 130 -> 124 s (two rounds each, docs/contributing.md)
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=4 -XX:+UseParallelGC",
    # most tests run tiny jobs in this session: -10% time for the in-process tiers' jobs
    **INTERPRETED,
}


@pytest.fixture(scope="session")
def viewfs_mount(tmp_path_factory) -> tuple[str, Path]:
    """A ``viewfs://`` mount table over a temporary folder: (the setting that declares it,
    the folder). ``viewfs://receval/lake/X`` is ``<folder>/X``; Hadoop's ViewFileSystem ships
    with pyspark, and the driver's Python cannot open such a path."""
    folder = tmp_path_factory.mktemp("viewfs-lake")
    return f"{VIEWFS_LINK}={folder.as_uri()}", folder


VIEWFS_LINK = "spark.hadoop.fs.viewfs.mounttable.receval.link./lake"
VIEWFS_ROOT = "viewfs://receval/lake"


# hadoop-aws and the AWS SDK (tests/hadoop_aws.py, fetched by make test), or why they are absent
S3A_JARS = cached_jars()


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1, one per test process (storage.S3Server), when the s3a
    jars are there (else None: the s3a tests skip); stopped at the end of the run."""
    if isinstance(S3A_JARS, str):
        yield None
        return
    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3a_conf(s3_server) -> dict[str, str]:
    """The settings that give a Spark session s3a:// on the tests' S3 server (none without it)."""
    return {} if s3_server is None else s3_server.spark_conf(S3A_JARS)


@pytest.fixture(scope="session")
def spark(request, viewfs_mount):
    """The tests' SparkSession; with ``s3a://`` (the S3 server started, the jars on its class
    path) only when a test of this run reads the bucket through it (``make test`` runs none)."""
    from pyspark.sql import SparkSession

    from receval_spark.spark import DEFAULT_CONF

    link, _ = viewfs_mount
    s3a = {}
    if any(item.get_closest_marker("s3a") for item in request.session.items):
        s3a = request.getfixturevalue("s3a_conf")
    builder = SparkSession.builder.master("local[2]").appName("receval-tests")
    builder = builder.config(*link.split("=", 1))
    for key, value in {**DEFAULT_CONF, **TEST_SESSION_CONF, **s3a}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    yield session
    session.stop()


@pytest.fixture(params=storages("file", "viewfs", "s3a"))
def report_root(request, tmp_path, viewfs_mount) -> ReportRoot:
    """An empty output root on ``file://``, ``viewfs://`` and ``s3a://`` (a prefix of the
    tests' bucket), one test each; the s3a one skips, with the reason, without its jars. Only
    the s3a one starts the S3 server."""
    name = f"{request.node.name}".translate(str.maketrans("[]/", "__-"))
    if request.param == "file":
        local = tmp_path / "reports"
        return ReportRoot(uri=local.as_uri(), storage=LocalFolder(local))
    if request.param == "viewfs":
        link, target = viewfs_mount[0].split("=", 1)
        storage = LocalFolder(viewfs_mount[1] / name)
        return ReportRoot(uri=f"{VIEWFS_ROOT}/{name}", storage=storage, conf={link: target})
    s3_server = request.getfixturevalue("s3_server")
    if s3_server is None:
        pytest.skip(str(S3A_JARS))
    prefix = tmp_path.name  # unique in this process, whose server holds nothing else
    return ReportRoot(
        uri=f"s3a://{s3_server.folder(prefix).bucket}/{prefix}",
        storage=s3_server.folder(prefix),
        conf=request.getfixturevalue("s3a_conf"),
    )


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory):
    """The demo job run three times as users run it (helpers.run_demo), once per test run."""
    return run_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="session")
def shipped_demo(tmp_path_factory):
    """conf/demo.yaml as shipped, run once per test run (helpers.run_shipped_demo)."""
    return run_shipped_demo(tmp_path_factory.mktemp("shipped-demo"))


@pytest.fixture(scope="session")
def shared_data():
    """../shared/data (or $RECEVAL_SHARED_DATA); tests using it skip with a reason when absent."""
    if not (SHARED_DATA / "ml-100k" / "u.data").exists():
        pytest.skip(
            f"real datasets not found at {SHARED_DATA} (set RECEVAL_SHARED_DATA to the "
            "folder holding ml-100k/ and ml-latest-small/)"
        )
    return SHARED_DATA


@pytest.fixture(scope="session")
def ml100k_external(shared_data, tmp_path_factory):
    """(frame, Parquet path) of the tie-rich external model on ml-100k (ml100k_external_recs)."""
    recs = ml100k_external_recs(shared_data / "ml-100k" / "u.data")
    path = tmp_path_factory.mktemp("ml100k-external") / "recs.parquet"
    recs.to_parquet(path, index=False)
    return recs, path


@pytest.fixture(scope="session")
def ml100k_run(spark, shared_data, ml100k_external, tmp_path_factory):
    """(config, Evaluation) of the one ml-100k job of the parity modules (helpers.ml100k_job),
    run in-process through the public job API once per test run, on Spark's generated code."""
    from receval_spark import evaluate
    from receval_spark.config import validate_config

    output = tmp_path_factory.mktemp("ml100k-reports")
    config = validate_config(ml100k_job(shared_data / "ml-100k", output, ml100k_external[1]))
    with sql_conf(spark, GENERATED):
        return config, evaluate(spark, config, keep_cached=True).outcome


@pytest.fixture
def restore_sql_conf(spark):
    """Function-scoped ``kept_sql_conf`` for tests that call the job in-process."""
    with kept_sql_conf(spark):
        yield
