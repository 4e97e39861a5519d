"""What committing a night's reports costs on an object store against a local folder, night
after night (docs/datasets.md, "On object storage"): the seconds of ``rv.write_reports`` (its
judgement against the output's history included) and, on ``s3a://``, the S3 requests by method.

The tests' S3 server (moto, ``tests/storage.py``) runs on 127.0.0.1 in this process, with the
s3a jars of ``tests/hadoop_aws.py`` (``make jars``). The job is the tests' crafted one
(``tests/helpers.py``: six users, popularity and random at k = 2): the commit's cost is its
protocol's (the log, the lease, a few small datasets), not the data's. Each night is evaluated
first (not timed), then committed to both outputs; the log grows by a few events a night.

    .venv/bin/python benchmarks/commit_requests.py --nights 8
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from hadoop_aws import cached_jars  # noqa: E402
from helpers import crafted_job_config, crafted_log  # noqa: E402
from storage import S3Server  # noqa: E402

from receval_spark import evaluate, write_reports  # noqa: E402
from receval_spark.config import validate_config  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=8)
    args = parser.parse_args()
    jars = cached_jars()
    if isinstance(jars, str):
        sys.exit(f"no s3a jars: {jars}")
    server = S3Server().start()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("receval-commit-requests")
    settings = {"spark.ui.enabled": "false", **server.spark_conf(jars)}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    scratch = Path(tempfile.mkdtemp(prefix="receval-commit-requests-"))
    models = [{"name": "popularity", "kind": "popularity"}, {"name": "random", "kind": "random"}]
    raw = crafted_job_config(scratch, crafted_log(reconsumed=False), models)
    outputs = {
        "file": (scratch / "reports").as_uri(),
        "s3a": f"s3a://{server.folder('r').bucket}/r",
    }
    print("| night | file:// s | s3a:// s | S3 requests | GET | PUT | HEAD | DELETE | POST |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for night in range(1, args.nights + 1):
        raw["run"]["date"] = (dt.date(2024, 2, 1) + dt.timedelta(days=night - 1)).isoformat()
        evaluation = evaluate(spark, validate_config(raw))
        seconds = {}
        for storage, output in outputs.items():
            server.requests.clear()
            began = time.perf_counter()
            write_reports(evaluation, output)
            seconds[storage] = time.perf_counter() - began
        counts = dict(server.requests)
        methods = [counts.get(m, 0) for m in ("GET", "PUT", "HEAD", "DELETE", "POST")]
        print(
            f"| {night} | {seconds['file']:.1f} | {seconds['s3a']:.1f} | {sum(counts.values())} | "
            + " | ".join(map(str, methods))
            + " |"
        )
    spark.stop()
    server.stop()


if __name__ == "__main__":
    main()
