"""The demo job as a Spark Connect client (``--remote sc://...``) against a Connect
server started from the installed pyspark, compared with the local run of the same date.

The client runs in a subprocess: a Connect session cannot share a Python process with the
classic ``spark`` fixture. Its environment points SPARK_HOME at an empty folder, so it could
not start a local JVM even if it tried: every Spark operation goes through the server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
import pytest
from helpers import (
    DATE_A,
    DATE_M,
    DEPLOYMENT_SETTINGS,
    REPO,
    VENV_BIN,
    DemoRuns,
    explain,
    free_port,
    job_env,
    metric_values,
    port_accepts,
    read,
    same_value,
    tied_item_pairs,
)

pytestmark = [pytest.mark.integration, pytest.mark.connect]

PYSPARK_HOME = Path(pyspark.__file__).resolve().parent
SERVER_START_TIMEOUT = 600  # seconds until the gRPC port accepts connections (busy machines)
CLIENT_TIMEOUT = 1800  # the whole demo job through the server


@dataclass
class ConnectServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


def _tail(path: Path, chars: int = 6000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group (spark-submit execs the JVM in it), then SIGKILL."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 30)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory, demo_runs: DemoRuns) -> Iterator[ConnectServer]:
    """A Spark Connect server on 127.0.0.1 from the installed pyspark (its jars ship
    spark-connect_2.13-*.jar, so no --packages download), stopped in teardown by process group.

    Started after the local demo runs it is compared with (``demo_runs``), so it does not sit
    in memory while they run."""
    jars = sorted((PYSPARK_HOME / "jars").glob("spark-connect_*.jar"))
    assert jars, f"no spark-connect jar under {PYSPARK_HOME / 'jars'}"
    home = tmp_path_factory.mktemp("connect-server")
    log = home / "server.log"
    port = free_port()
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(PYSPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
    )
    argv = [
        str(PYSPARK_HOME / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        "local[2]",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        f"spark.sql.warehouse.dir={home / 'warehouse'}",
        "--driver-memory",
        "1g",
        "spark-internal",
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            argv,
            cwd=home,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: teardown stops the JVM with it
        )
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while not port_accepts(port):
            if process.poll() is not None:
                pytest.fail(f"the Connect server exited ({process.returncode}):\n{_tail(log)}")
            if time.monotonic() > deadline:
                pytest.fail(f"the Connect server did not listen within the timeout:\n{_tail(log)}")
            time.sleep(1)
        yield ConnectServer(f"sc://127.0.0.1:{port}", process, log)
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def connect_run(connect_server: ConnectServer, demo_runs: DemoRuns, tmp_path_factory):
    """``receval evaluate`` of the demo for DATE_A as a Connect client, re-running that date
    in a copy of the local runs' output (which holds DATE_M's per-user rows, so the client
    also reads committed reports to compare each model with its previous date);
    (process, output)."""
    tmp = tmp_path_factory.mktemp("connect-client")
    output = tmp / "reports"
    shutil.copytree(demo_runs.after_first, output)
    no_spark = tmp / "no-spark-home"
    no_spark.mkdir()
    env = job_env()
    env["SPARK_HOME"] = str(no_spark)  # a local session could not start: no spark-submit
    started = time.monotonic()
    proc = subprocess.run(
        [
            str(VENV_BIN / "receval"),
            "evaluate",
            "--config",
            "conf/demo.yaml",
            "--remote",
            connect_server.url,
            "--set",
            f"output.path={output}",
            "--set",
            f"run.date={DATE_A}",
            *DEPLOYMENT_SETTINGS,  # as demo_runs
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
    )
    print(f"Connect client run: {time.monotonic() - started:.1f} s")
    return proc, output


def _rows(spark, output: Path, dataset: str, keys: list[str]) -> dict:
    """key columns -> the other columns (run_id left out) of one dataset for DATE_A."""
    df = read(spark, output, dataset, DATE_A).drop("run_id")
    values = [c for c in df.columns if c not in keys]
    rows = {}
    for r in df.collect():
        key = tuple(r[c] for c in keys)
        assert key not in rows, (dataset, key)
        rows[key] = tuple(r[c] for c in values)
    return rows


def _assert_equal(local: dict, remote: dict, what: str) -> None:
    """Same keys and bit-for-bit equal values (NaN equals NaN)."""
    assert local.keys() == remote.keys(), (what, set(local) ^ set(remote))
    for key in local:
        assert all(map(same_value, local[key], remote[key])), (what, key, local[key], remote[key])


def test_connect_client_run_succeeds_through_the_server(connect_server, connect_run) -> None:
    proc, output = connect_run
    assert proc.returncode == 0, explain(proc) + f"\nserver log:\n{_tail(connect_server.log)}"
    assert f"({DATE_A})" in proc.stdout and "users evaluated" in proc.stdout, proc.stdout
    assert (output / "report" / DATE_A / "report.html").is_file()
    # the work happened in the server's JVM: it read the shipped ratings
    assert "ml-latest-small/ratings.csv" in connect_server.log.read_text(errors="replace")
    assert connect_server.process.poll() is None  # the client's stop() left the server up


def test_connect_metrics_equal_the_local_run(spark, demo_runs: DemoRuns, connect_run) -> None:
    assert demo_runs.first.returncode == 0, explain(demo_runs.first)
    proc, output = connect_run
    assert proc.returncode == 0, explain(proc)
    local = metric_values(spark, demo_runs.after_first, DATE_A)
    remote = metric_values(spark, output, DATE_A)
    assert len(local) > 400
    _assert_equal(local, remote, "metrics")


def test_connect_comparisons_and_other_datasets_equal_the_local_run(
    spark, demo_runs: DemoRuns, connect_run
) -> None:
    proc, output = connect_run
    assert proc.returncode == 0, explain(proc)
    keys = {
        "comparisons": ["model", "baseline", "segment", "protocol", "metric", "k"],
        "long_tail": ["model", "k", "popularity_bin"],
        "per_user": ["model", "segment", "user_id", "metric", "k"],
    }
    for dataset, columns in keys.items():
        local = _rows(spark, demo_runs.after_first, dataset, columns)
        assert local, dataset
        _assert_equal(local, _rows(spark, output, dataset, columns), dataset)
    previous = {key[1] for key in _rows(spark, output, "comparisons", keys["comparisons"])}
    assert f"popularity@{DATE_M}" in previous, previous  # against the previous date's rows


def test_connect_run_record(spark, demo_runs: DemoRuns, connect_run) -> None:
    proc, output = connect_run
    assert proc.returncode == 0, explain(proc)
    (record,) = read(spark, output, "runs", DATE_A).collect()
    (local,) = read(spark, demo_runs.after_first, "runs", DATE_A).collect()
    assert record.status == "succeeded"
    assert all(check.passed for check in record.checks), record.checks
    assert [c.name for c in record.checks] == [c.name for c in local.checks]
    assert record.n_users_evaluated == local.n_users_evaluated
    assert record.split == local.split
    assert sorted(record.warnings) == sorted(local.warnings)
    assert json.loads(record.versions)["spark"] == pyspark.__version__


RELEASE_CHECK = """
import sys
import pyarrow as pa, pyarrow.parquet as pq
from pyspark.sql import SparkSession
import receval_spark.cache
from receval_spark.cache import cuts_lineage, persist, releasing_cache

url, folder, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pq.write_table(pa.table({"x": list(range(n))}), folder + "/part-0.parquet")
spark = SparkSession.builder.remote(url).getOrCreate()
print("checkpoints:", cuts_lineage(spark.range(1)))  # the server runs on local[2]
receval_spark.cache.cuts_lineage = lambda df: False  # the cache path, as on a cluster master
with releasing_cache():
    counted = persist(spark.read.parquet("file://" + folder).groupBy().count())
    print(counted.collect()[0][0])
spark.stop()
"""


def test_connect_persisted_data_is_released_for_the_next_client(connect_server, tmp_path) -> None:
    """The server shares its cache among sessions and keeps it after a client stops: without
    the release a second client reading the same path (new files in it) gets the first
    client's cached answer. Two clients, the file rewritten in between, each persisting
    through the cache as on a cluster master (on this local[2] server the job checkpoints
    instead, which the client reports first)."""
    folder = tmp_path / "table"
    folder.mkdir()
    counts = []
    for n in (10, 20):
        proc = subprocess.run(
            [sys.executable, "-c", RELEASE_CHECK, connect_server.url, str(folder), str(n)],
            cwd=REPO,
            env=job_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, explain(proc)
        assert "checkpoints: True" in proc.stdout, proc.stdout
        counts.append(int(proc.stdout.split()[-1]))
    assert counts == [10, 20]


def remote_json(script: str, url: str, *args: str) -> Any:
    """What the Python ``script`` (the tests' modules importable) prints as JSON on its last
    line when run as a Connect client of the server at ``url`` (then ``args``)."""
    proc = subprocess.run(
        [sys.executable, "-c", script, url, *args],
        cwd=REPO,
        env={**job_env(), "PYTHONPATH": str(REPO / "tests")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, explain(proc)
    return json.loads(proc.stdout.strip().splitlines()[-1])


CUSTOM_CHECK = """
import json, sys
from pathlib import Path
from pyspark.sql import SparkSession
import receval_spark as rv
from helpers import SHOP_RECOMMENDATIONS, shop_job

url, folder = sys.argv[1], Path(sys.argv[2])
job = shop_job(folder)
job["evaluation"]["bootstrap_samples"] = 0
job["evaluation"]["custom_metrics"] = [
    m for m in job["evaluation"]["custom_metrics"] if m["name"] != "provider_share"
]
spark = SparkSession.builder.remote(url).getOrCreate()
ext = spark.createDataFrame(SHOP_RECOMMENDATIONS)
result = rv.evaluate(spark, job, recommendations={"ext": ext})
rows = result.metrics.filter("metric IN ('revenue_hit', 'provider_exposure')").collect()
print(json.dumps({f"{r.metric}|{r.model}|{r.segment}": [r.value, r.n_users] for r in rows}))
spark.stop()
"""


def test_custom_metrics_and_segment_tables_over_connect(connect_server, tmp_path) -> None:
    """A Spark Connect client evaluates a custom per-user metric (imported by path), a custom
    group metric and a user-segment table: the values of tests/metrics/test_custom.py by hand
    (ext's price-weighted hit rate for user u is u / (u + 10))."""
    values = remote_json(CUSTOM_CHECK, connect_server.url, str(tmp_path))
    share = [u / (u + 10) for u in range(1, 7)]
    assert values["revenue_hit|ext|all"] == [pytest.approx(sum(share) / 6, abs=1e-15), 6]
    assert values["revenue_hit|ext|tier=unassigned"] == [pytest.approx(share[5]), 1]
    assert values["provider_exposure|ext|all"] == [0.5, 6]


RANDOMIZATION_CHECK = """
import json, sys
from pyspark.sql import SparkSession
from receval_spark.config import RandomizationTest
from receval_spark.metrics.compare import comparison_rows
from test_randomization import differences_frame, connect_comparisons

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
differences = differences_frame(spark, connect_comparisons())
out = comparison_rows(differences, randomization=RandomizationTest(2000, 7))
print(json.dumps({r.metric: r.p_randomization for r in out}))
spark.stop()
"""


def test_the_randomization_test_over_connect_equals_the_local_one(spark, connect_server) -> None:
    """The randomization test's grouped pandas UDF runs on the Connect server: the exact
    p-value of the hand-worked example (3/8) and a drawn one (40 users, seeded) equal the
    in-process session's."""
    from test_randomization import connect_comparisons, differences_frame

    from receval_spark.config import RandomizationTest
    from receval_spark.metrics.compare import comparison_rows

    remote = remote_json(RANDOMIZATION_CHECK, connect_server.url)
    differences = differences_frame(spark, connect_comparisons())
    rows = comparison_rows(differences, randomization=RandomizationTest(2000, 7))
    assert remote["ndcg"] == 0.375 and remote == {r.metric: r.p_randomization for r in rows}


NEIGHBOURS_CHECK = """
import json, sys
from pyspark.sql import SparkSession
from receval_spark.ranking.models.item_knn import item_neighbours
from helpers import tied_item_pairs

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
history = spark.createDataFrame(tied_item_pairs(), "user_id long, item_id long")
rows = item_neighbours(history, neighbours=6).collect()
print(json.dumps(sorted([r.item_id, r.neighbour, r.similarity, r.neighbour_rank] for r in rows)))
spark.stop()
"""


def test_item_knn_neighbours_over_connect_equal_the_local_ones(spark, connect_server) -> None:
    """Item-kNN's neighbour table (its pandas UDF per block of items) runs on the Connect
    server and equals the in-process session's, row for row."""
    from receval_spark.ranking.models.item_knn import item_neighbours

    remote = remote_json(NEIGHBOURS_CHECK, connect_server.url)
    history = spark.createDataFrame(tied_item_pairs(), "user_id long, item_id long")
    local = item_neighbours(history, neighbours=6).collect()
    expected = sorted([r.item_id, r.neighbour, r.similarity, r.neighbour_rank] for r in local)
    assert len(remote) > 100 and remote == expected
