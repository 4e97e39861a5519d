"""Every door a team's data comes through (docs/configuration.md#input-tables): any format
Spark's DataFrameReader knows (ORC, JSON lines gzipped and in several files), reader options,
a ``where`` predicate pushed down to the files, catalog tables, and the one-line errors of a
format the session lacks, a table the catalog lacks and a predicate Spark cannot apply."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import (
    crafted_job_config,
    crafted_log,
    explain,
    job_env,
    kept_sql_conf,
    metric_values,
)

from receval_spark import evaluate
from receval_spark.cli import main
from receval_spark.config import ExternalModel, InteractionsSource
from receval_spark.errors import ConfigError, InputError
from receval_spark.io import read_table
from receval_spark.sources import load_interactions

POPULARITY = [{"name": "popularity", "kind": "popularity"}]


def _values(spark, output: Path) -> dict:
    return metric_values(spark, output, "2024-02-01")


def _cli(raw: dict, tmp: Path, spark, *args: str) -> int:
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with kept_sql_conf(spark):
        return main(["evaluate", "--config", str(path), *args])


def _with_external_model(spark, tmp: Path, log: pd.DataFrame) -> tuple[dict, pd.DataFrame, dict]:
    """The crafted job on ``log`` with popularity and an external model ``ext`` read from a
    Parquet file, its config, the model's lists and the metrics of its run from files."""
    raw = crafted_job_config(tmp, log, POPULARITY)
    recs = pd.DataFrame(
        [(u, 100 + u, 1.0) for u in range(1, 7)] + [(u, 11, 0.5) for u in range(1, 7)],
        columns=["user_id", "item_id", "score"],
    )
    recs_path = tmp / "recs.parquet"
    recs.to_parquet(recs_path, index=False)
    raw["models"] = [*POPULARITY, {"name": "ext", "kind": "external", "path": str(recs_path)}]
    assert _cli(raw, tmp, spark) == 0
    return raw, recs, _values(spark, tmp / "reports")


def _json_lines_gz(log: pd.DataFrame, folder: Path, parts: int = 2) -> Path:
    """The log as ``parts`` gzipped JSON-lines files in ``folder``."""
    folder.mkdir()
    records = log.to_dict(orient="records")
    for n in range(parts):
        with gzip.open(folder / f"part-{n}.json.gz", "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in records[n::parts])
    return folder


def _canonical(spark, source: InteractionsSource) -> list[tuple]:
    """The interaction log as the protocol receives it (read, mapped, validated), sorted."""
    table = load_interactions(read_table(spark, source, key="data.interactions"), source)
    assert [f.dataType.simpleString() for f in table.schema] == [
        "bigint",
        "bigint",
        "timestamp",
        "double",
    ]
    return sorted(tuple(r) for r in table.collect())


def test_orc_and_gzipped_json_lines_reach_the_job_as_parquet_does(spark, tmp_path) -> None:
    """The same log as Parquet, ORC and two gzipped JSON-lines files (a glob): the protocol
    receives the same rows and types (so every number equals; the CLI runs below read files,
    tables and a where window end to end)."""
    log = crafted_log(reconsumed=False)
    columns = {"rating": "rating"}
    parquet, orc = tmp_path / "log.parquet", tmp_path / "log.orc"
    log.to_parquet(parquet, index=False)
    spark.createDataFrame(log).write.orc(str(orc))
    jsonl = _json_lines_gz(log, tmp_path / "jsonl")
    expected = _canonical(spark, InteractionsSource(path=str(parquet), columns=columns))
    assert len(expected) == len(log)
    for source in (
        InteractionsSource(path=str(orc), format="orc", columns=columns),
        InteractionsSource(path=str(jsonl / "*.json.gz"), format="json", columns=columns),
    ):
        assert _canonical(spark, source) == expected, source.format


def test_where_is_pushed_down_to_the_files(spark, tmp_path, capsys) -> None:
    log = crafted_log(reconsumed=False)
    path = tmp_path / "log.parquet"
    spark.createDataFrame(log).write.parquet(str(path))
    source = InteractionsSource(path=str(path), where="user_id <= 4 AND rating >= 3.0")
    df = read_table(spark, source, key="data.interactions")
    assert df.count() == len(log[(log.user_id <= 4) & (log.rating >= 3.0)])
    df.explain()
    plan = capsys.readouterr().out
    pushed = next(line for line in plan.splitlines() if "PushedFilters" in line)
    assert "LessThanOrEqual(user_id,4)" in pushed and "GreaterThanOrEqual(rating,3.0)" in pushed


def test_a_where_window_restricts_the_run(spark, tmp_path) -> None:
    """Users 5 and 6 (the cold users) left out at the read: the protocol receives the rows of
    a log without them (so every number is that log's), and the job evaluates the 4 others."""
    log = crafted_log(reconsumed=False)
    raw = crafted_job_config(tmp_path, log, POPULARITY)
    raw["data"]["interactions"]["where"] = "user_id <= 4"
    without = tmp_path / "without.parquet"
    log[log.user_id <= 4].to_parquet(without, index=False)
    windowed = raw["data"]["interactions"]
    plain = {**windowed, "where": None, "path": str(without)}
    assert _canonical(spark, InteractionsSource.model_validate(windowed)) == _canonical(
        spark, InteractionsSource.model_validate(plain)
    )
    assert _cli(raw, tmp_path, spark) == 0
    users = {key[1]: n for key, (_, n, *_) in _values(spark, tmp_path / "reports").items()}
    assert users["all"] == users["warm"] == 4 and not users.get("cold")


def test_reader_options_reach_the_reader(spark, tmp_path) -> None:
    log = crafted_log(reconsumed=False)
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log.to_dict(orient="records"), indent=1), encoding="utf-8")
    source = InteractionsSource(path=str(path), format="json", options={"multiLine": True})
    assert read_table(spark, source, key="data.interactions").count() == len(log)


def test_a_catalog_table_is_an_input(spark, tmp_path) -> None:
    """A table of the session's catalog (here its in-memory one; a Hive metastore through the
    CLI below) as interactions and as an external model's lists, with ``where`` on the
    table: the rows of the files they were written from."""
    log = crafted_log(reconsumed=False)
    columns = {"rating": "rating"}
    parquet = tmp_path / "log.parquet"
    log[log.user_id <= 4].to_parquet(parquet, index=False)
    expected = _canonical(spark, InteractionsSource(path=str(parquet), columns=columns))
    recs = spark.createDataFrame(
        [(u, 100 + u, 1.0) for u in range(1, 7)], "user_id int, item_id int, score double"
    )
    try:
        spark.createDataFrame(log).write.saveAsTable("receval_test_events")
        recs.write.saveAsTable("receval_test_recs")
        source = InteractionsSource(
            table="receval_test_events", where="user_id <= 4", columns=columns
        )
        assert _canonical(spark, source) == expected
        model = ExternalModel(name="ext", kind="external", table="receval_test_recs")
        read = read_table(spark, model, key="models.ext")
        assert sorted(map(tuple, read.collect())) == sorted(map(tuple, recs.collect()))
    finally:
        spark.sql("DROP TABLE IF EXISTS receval_test_events")
        spark.sql("DROP TABLE IF EXISTS receval_test_recs")


@pytest.mark.parametrize(
    ("source", "key", "words"),
    [
        ({"format": "avro"}, "data.interactions.format", ["'avro'", "spark-avro", "packages"]),
        ({"format": "no_such_format"}, "data.interactions.format", ["'no_such_format'"]),
        ({"where": "no_such_column > 1"}, "data.interactions.where", ["no_such_column"]),
        ({"where": "user_id >"}, "data.interactions.where", ["SQL predicate"]),
    ],
)
def test_a_bad_source_is_one_line_and_writes_nothing(
    spark, tmp_path, capsys, source, key, words
) -> None:
    raw = crafted_job_config(tmp_path, crafted_log(reconsumed=False), POPULARITY)
    raw["data"]["interactions"] |= source
    assert _cli(raw, tmp_path, spark) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {key}") or key in err, err
    assert all(word in err for word in words), err
    assert not (tmp_path / "reports").exists()


def test_a_missing_catalog_table_is_named(spark, tmp_path, capsys) -> None:
    raw = crafted_job_config(tmp_path, crafted_log(reconsumed=False), POPULARITY)
    columns = raw["data"]["interactions"]["columns"]
    raw["data"]["interactions"] = {"table": "lake.no_such_events", "columns": columns}
    assert _cli(raw, tmp_path, spark) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "data.interactions.table" in err, err
    assert "'lake.no_such_events'" in err, err
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ({"path": "x.parquet", "table": "db.t"}, ["path or table"]),
        ({"table": "db.t", "format": "csv"}, ["format applies to a path"]),
    ],
)
def test_path_and_table_are_exclusive(source, words) -> None:
    with pytest.raises(ValueError, match="|".join(words)):
        InteractionsSource(**source)


def test_a_missing_glob_is_a_config_error(spark, tmp_path) -> None:
    raw = crafted_job_config(tmp_path, crafted_log(reconsumed=False), POPULARITY)
    raw["data"]["interactions"]["path"] = str(tmp_path / "nothing" / "*.json.gz")
    with pytest.raises(ConfigError, match=r"data.interactions.path: .* does not exist"):
        evaluate(spark, raw)


def test_where_applies_to_a_dataframe_given(spark, tmp_path) -> None:
    log = crafted_log(reconsumed=False)
    raw = crafted_job_config(tmp_path, log, POPULARITY)
    del raw["data"]["interactions"]["path"]
    raw["data"]["interactions"]["where"] = "user_id <= 4"
    result = evaluate(spark, raw, interactions=spark.createDataFrame(log))
    assert result.outcome.n_users_evaluated == 4
    raw["data"]["interactions"]["where"] = "nope = 1"
    with pytest.raises(InputError, match=r"^data.interactions.where: "):
        evaluate(spark, raw, interactions=spark.createDataFrame(log))


# A team's nightly CLI against its Hive metastore: the events and a model's lists are tables,
# the night's window a where predicate. One process (embedded Derby admits one JVM).
METASTORE_NIGHT = """
import sys, yaml
from pyspark.sql import SparkSession
from receval_spark.cli import main
config, log, recs = sys.argv[1:4]
raw = yaml.safe_load(open(config))
spark = SparkSession.builder.master("local[2]").enableHiveSupport()
for key, value in raw["spark"]["conf"].items():
    spark = spark.config(key, str(value))
spark = spark.getOrCreate()
spark.sql("CREATE DATABASE IF NOT EXISTS lake")
spark.read.parquet(log).write.mode("overwrite").saveAsTable("lake.events")
spark.read.parquet(recs).write.mode("overwrite").saveAsTable("lake.recs")
sys.exit(main(["evaluate", "--config", config]))
"""


@pytest.mark.integration
@pytest.mark.metastore
def test_the_nightly_cli_reads_hive_metastore_tables(spark, tmp_path) -> None:
    from test_catalog import metastore_conf

    log = crafted_log(reconsumed=False)
    raw, _, expected = _with_external_model(spark, tmp_path, log[log.user_id <= 4])

    night = tmp_path / "night"
    night.mkdir()
    log.to_parquet(night / "all.parquet", index=False)
    conf = metastore_conf(night, {})  # the reports on file://: no storage settings
    raw["spark"]["conf"] = {**raw["spark"]["conf"], **conf, "spark.ui.enabled": False}
    raw["data"]["interactions"] = {
        "table": "lake.events",
        "where": "user_id <= 4",
        "columns": raw["data"]["interactions"]["columns"],
    }
    raw["models"][1] = {"name": "ext", "kind": "external", "table": "lake.recs"}
    raw["output"]["path"] = str(night / "reports")
    config = night / "job.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    argv = [sys.executable, "-c", METASTORE_NIGHT, str(config), str(night / "all.parquet")]
    proc = subprocess.run(
        [*argv, str(tmp_path / "recs.parquet")],
        cwd=night,  # Derby's files and log
        env=job_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, explain(proc)
    assert _values(spark, night / "reports") == expected


def test_the_session_protocol_reads_through_the_same_door(spark, tmp_path) -> None:
    """Session clicks as gzipped JSON lines in two files, restricted by ``where``."""
    from receval_spark.config import SessionJobConfig, validate_config
    from receval_spark.sources import read_session_inputs

    clicks = pd.DataFrame(
        [
            (s, 10 + (s + j) % 4, 1_700_000_000 + 60 * (10 * s + j))
            for s in range(6)
            for j in range(3)
        ],
        columns=["session_id", "item_id", "time"],
    )
    folder = _json_lines_gz(clicks, tmp_path / "clicks")
    config = validate_config(
        {
            "data": {
                "clicks": {
                    "path": str(folder / "part-*.json.gz"),
                    "format": "json",
                    "where": "session_id < 4",
                }
            },
            "models": [{"name": "pop", "kind": "pop"}],
        },
        schema=SessionJobConfig,
    )
    inputs = read_session_inputs(spark, config)
    assert inputs.clicks is not None and inputs.clicks.count() == 12
