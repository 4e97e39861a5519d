"""Report tables in a real Hive metastore (Derby, shipped with pyspark) and SQL over JDBC
through the Spark Thrift Server, as BI tools read them; the reports on ``viewfs://`` (or any
storage of ``report_root``).

Two nightly runs, a re-run of the first date and a run killed after its begin event, each a
``receval evaluate`` process with ``output.catalog``; then a Thrift Server over the same
metastore answers beeline's queries, which must equal what ``read_reports`` reads from the
Parquet datasets. (Embedded Derby admits one JVM at a time, so the server starts last.)
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pyspark
import pytest
import yaml
from helpers import (
    ReportRoot,
    crafted_job_config,
    crafted_log,
    explain,
    free_port,
    job_env,
    kill_at_event,
    port_accepts,
    read,
    run,
    stop_group,
)
from storage import storages

pytestmark = [pytest.mark.integration, pytest.mark.metastore]

DATES = ("2024-02-01", "2024-02-02")
DATASETS = ("metrics", "long_tail", "runs")
SPARK_HOME = Path(pyspark.__file__).parent
HEADERS = ("namespace,tableName,isTemporary", "run_date,run_id,n", "model,metric,k,value")
# A scheduler's process running the nights one after the other (one JVM: Derby's lock allows one)
NIGHTS = """
import sys
from receval_spark.cli import main
for config in sys.argv[1:]:
    assert main(["evaluate", "--config", config]) == 0, config
"""


def metastore_conf(tmp: Path, storage: Mapping[str, str]) -> dict[str, str]:
    """A Hive catalog in ``tmp``: Derby database, warehouse, and the reports' ``storage``
    settings."""
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": (tmp / "warehouse").as_uri(),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={tmp / 'metastore_db'};create=true"
        ),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={tmp}",
        **storage,
    }


def beeline(port: int, queries: list[str]) -> list[list[dict[str, str]]]:
    """The rows of each query, sent through the Thrift Server in one pyspark beeline session
    and read back as CSV."""
    proc = subprocess.run(
        [
            str(SPARK_HOME / "bin" / "beeline"),
            "-u",
            f"jdbc:hive2://127.0.0.1:{port}/default",
            "-n",
            "analyst",
            "--silent=true",
            "--showHeader=true",
            "--outputformat=csv2",
            "-e",
            ";\n".join(queries) + ";",
        ],
        env={**job_env(), "SPARK_HOME": str(SPARK_HOME)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, explain(proc)
    # each result is its CSV header and rows (beeline may echo its prompt before a header)
    lines = [re.sub(r"^\d+: jdbc:hive2://\S+> ", "", line) for line in proc.stdout.splitlines()]
    lines = [line for line in lines if line.strip()]
    starts = [i for i, line in enumerate(lines) if line in HEADERS]
    assert len(starts) == len(queries), proc.stdout
    return [
        list(csv.DictReader(io.StringIO("\n".join(lines[start:end]))))
        for start, end in zip(starts, [*starts[1:], len(lines)], strict=True)
    ]


# viewfs:// only, for the suite's time: on s3a:// this test passes too (its Thrift Server with the
# hadoop-aws jars; 222 s on a loaded machine), and tables located in the bucket are
# tests/test_io.py's (docs/datasets.md, "On object storage")
@pytest.mark.parametrize("report_root", storages("viewfs"), indirect=True)
def test_tables_in_the_metastore_answer_sql_over_jdbc(
    spark, tmp_path, report_root: ReportRoot
) -> None:
    output = report_root.uri
    raw = crafted_job_config(
        tmp_path, crafted_log(reconsumed=False), [{"name": "popularity", "kind": "popularity"}]
    )
    conf = metastore_conf(tmp_path, report_root.conf)
    raw["spark"]["conf"] = {"spark.sql.shuffle.partitions": 2, "spark.ui.enabled": False, **conf}
    raw["output"] = {"path": output, "catalog": {"database": "receval", "prefix": "nightly_"}}
    config = tmp_path / "job.yaml"

    def job(date: str) -> None:
        raw["run"]["date"] = date
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")

    nights = []  # two nights, then the first date again: three jobs of one scheduler process
    for n, date in enumerate((*DATES, DATES[0])):
        job(date)
        nights.append(config.with_name(f"night-{n}.yaml"))
        config.replace(nights[-1])
    proc = run([sys.executable, "-c", NIGHTS, *map(str, nights)])
    assert proc.returncode == 0, explain(proc)
    job(DATES[1])
    kill_at_event(config, report_root, "begin")  # a killed run changes no table

    committed = {
        (dataset, date): read(spark, output, dataset, date).toPandas()
        for dataset in DATASETS
        for date in DATES
    }
    run_ids = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("run ")]
    assert committed["runs", DATES[0]].run_id.iloc[0] == run_ids[2]  # the re-run
    assert committed["runs", DATES[1]].run_id.iloc[0] == run_ids[1]  # not the killed run

    port = free_port()
    server_log = tmp_path / "thrift.log"
    server = subprocess.Popen(
        [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--class",
            "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
            "--master",
            "local[1]",
            *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")],
            "--conf",
            "spark.ui.enabled=false",
            "--hiveconf",
            f"hive.server2.thrift.port={port}",
            "--hiveconf",
            "hive.server2.thrift.bind.host=127.0.0.1",
            "spark-internal",
        ],
        cwd=tmp_path,
        env={**job_env(), "SPARK_HOME": str(SPARK_HOME)},
        stdout=server_log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not port_accepts(port):
            assert server.poll() is None, server_log.read_text()[-4000:]
            assert time.monotonic() < deadline, server_log.read_text()[-4000:]
            time.sleep(1)
        counting = [
            f"SELECT run_date, run_id, count(*) AS n FROM receval.nightly_{dataset} "
            "GROUP BY run_date, run_id ORDER BY run_date"
            for dataset in DATASETS
        ]
        values = (
            "SELECT model, metric, k, value FROM receval.nightly_metrics "
            f"WHERE run_date = '{DATES[0]}' AND segment = 'all' ORDER BY metric, k"
        )
        tables, *counts, rows = beeline(port, ["SHOW TABLES IN receval", *counting, values])
        assert {f"nightly_{d}" for d in DATASETS} <= {row["tableName"] for row in tables}
        for dataset, dataset_counts in zip(DATASETS, counts, strict=True):
            assert [(r["run_date"], r["run_id"], int(r["n"])) for r in dataset_counts] == [
                (d, committed[dataset, d].run_id.iloc[0], len(committed[dataset, d])) for d in DATES
            ], dataset
        expected = committed["metrics", DATES[0]]
        expected = expected[expected.segment == "all"].sort_values(["metric", "k"])
        assert [(r["model"], r["metric"], int(r["k"])) for r in rows] == list(
            zip(expected.model, expected.metric, expected.k.astype(int), strict=True)
        )
        assert [float(r["value"]) for r in rows] == pytest.approx(list(expected.value), abs=1e-12)
    finally:
        stop_group(server)
