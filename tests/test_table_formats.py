"""``output.format`` and inputs at a table version, where no Delta or Iceberg jar is needed:
the configuration's rules and the one-line error of a session without the format's classes
(the tables themselves: tests/lake/, in the environment of tests/lake_env.py)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from helpers import crafted_job_config, crafted_log

from receval_spark.cli import main
from receval_spark.config.validation import validate_config
from receval_spark.errors import ConfigError

POPULARITY = [{"name": "popularity", "kind": "popularity"}]


def job(tmp_path, **output: Any) -> dict[str, Any]:
    raw = crafted_job_config(tmp_path, crafted_log(reconsumed=False), POPULARITY)
    raw["output"].update(output)
    return raw


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"version": 3}, "format parquet has no versions"),
        ({"format": "delta", "version": 3, "as_of": "2024-01-01T00:00:00Z"}, "not both"),
        ({"format": "delta", "version": 3, "options": {"versionAsOf": 2}}, "not options"),
        ({"format": "iceberg", "version": -1}, "greater than or equal to 0"),
    ],
)
def test_a_version_is_read_only_from_a_table_format(tmp_path, source, message) -> None:
    raw = job(tmp_path)
    raw["data"]["interactions"].update(source)
    with pytest.raises(ConfigError, match=message) as info:
        validate_config(raw)
    assert "data.interactions" in str(info.value)


def test_versions_of_delta_and_iceberg_sources_and_catalog_tables_are_accepted(tmp_path) -> None:
    raw = job(tmp_path)
    raw["data"]["interactions"].update(format="delta", version=4)
    raw["models"].append(
        {
            "name": "ext",
            "kind": "external",
            "table": "lake.db.recs",
            "as_of": "2024-02-01T02:00:00Z",
        }
    )
    config = validate_config(raw)
    assert config.data.interactions.version == 4
    assert config.models[1].as_of is not None


def test_iceberg_reports_need_a_catalog_namespace(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"output: .*output\.catalog\.database"):
        validate_config(job(tmp_path, format="iceberg"))


@pytest.mark.parametrize(
    ("table_format", "jar"),
    [("delta", "io.delta:delta-spark_2.13"), ("iceberg", "iceberg-spark-runtime-4.1_2.13")],
)
def test_a_session_without_the_format_fails_with_exit_2_naming_jar_and_setting(
    spark, tmp_path, capsys, table_format, jar
) -> None:
    output = {"format": table_format}
    if table_format == "iceberg":
        output["catalog"] = {"database": "lake.receval"}
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(job(tmp_path, **output)), encoding="utf-8")

    assert main(["evaluate", "--config", str(config)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and jar in errors[0] and "spark.sql.extensions" in errors[0]
    assert not (tmp_path / "reports").exists()  # nothing written
