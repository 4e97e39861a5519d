"""The report tables' schemas, derived from the row dataclasses, against the contract's
columns written out as DDL (the order is that of the reports already on disk)."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import Row
from pyspark.sql import types as T

from receval_spark.results import (
    COMPARISONS_SCHEMA,
    METRICS_SCHEMA,
    OFF_POLICY_SCHEMA,
    RUNS_SCHEMA,
    Check,
    MetricRow,
    RunRecord,
    metrics_table,
    runs_table,
)

METRICS_DDL = (
    "run_id STRING NOT NULL, model STRING NOT NULL, segment STRING NOT NULL, "
    "protocol STRING NOT NULL, metric STRING NOT NULL, k INT, value DOUBLE, "
    "n_users BIGINT NOT NULL, std DOUBLE, ci_low DOUBLE, ci_high DOUBLE, window INT"
)
COMPARISONS_DDL = (
    "run_id STRING NOT NULL, model STRING NOT NULL, baseline STRING NOT NULL, "
    "segment STRING NOT NULL, protocol STRING NOT NULL, metric STRING NOT NULL, k INT, "
    "n_users BIGINT NOT NULL, mean_diff DOUBLE, std_diff DOUBLE, ci_low DOUBLE, "
    "ci_high DOUBLE, p_ttest DOUBLE, p_wilcoxon DOUBLE, p_holm DOUBLE, p_wilcoxon_holm DOUBLE, "
    "holm_family_size BIGINT, effect_size DOUBLE, mde DOUBLE, window INT, p_bonferroni DOUBLE, "
    "p_bh DOUBLE, correction STRING, p_randomization DOUBLE, p_randomization_holm DOUBLE"
)
OFF_POLICY_DDL = (
    "run_id STRING NOT NULL, model STRING NOT NULL, estimator STRING NOT NULL, value DOUBLE, "
    "std_error DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n_impressions BIGINT NOT NULL, "
    "effective_n DOUBLE, max_weight DOUBLE, clip DOUBLE"
)
RUNS_DDL = (
    "run_id STRING NOT NULL, run_name STRING NOT NULL, started_at TIMESTAMP NOT NULL, "
    "finished_at TIMESTAMP NOT NULL, status STRING NOT NULL, config STRING NOT NULL, "
    "split STRING NOT NULL, n_users_evaluated BIGINT NOT NULL, versions STRING NOT NULL, "
    "checks ARRAY<STRUCT<name: STRING NOT NULL, passed: BOOLEAN NOT NULL, detail: STRING>> "
    "NOT NULL, warnings ARRAY<STRING> NOT NULL, alerts ARRAY<STRING> NOT NULL, "
    "tuning STRING NOT NULL"
)


def from_ddl(ddl: str) -> T.StructType:
    """The schema of ``ddl``, every array without null elements (which DDL cannot say)."""
    schema = T.StructType.fromDDL(ddl)
    return T.StructType(
        [
            T.StructField(f.name, T.ArrayType(f.dataType.elementType, False), f.nullable)
            if isinstance(f.dataType, T.ArrayType)
            else f
            for f in schema.fields
        ]
    )


@pytest.mark.parametrize(
    ("derived", "ddl"),
    [
        (METRICS_SCHEMA, METRICS_DDL),
        (COMPARISONS_SCHEMA, COMPARISONS_DDL),
        (OFF_POLICY_SCHEMA, OFF_POLICY_DDL),
        (RUNS_SCHEMA, RUNS_DDL),
    ],
    ids=["metrics", "comparisons", "off_policy", "runs"],
)
def test_derived_schemas_are_the_contract_schemas(spark, derived, ddl):
    assert derived == from_ddl(ddl)


def test_table_rows_are_the_fields_in_column_order(spark):
    rows = [
        MetricRow(model="b", segment="all", metric="ndcg", k=10, value=0.25, n_users=3, std=0.1),
        MetricRow(model="a", segment="all", metric="rmse", k=None, value=1, n_users=4),
        MetricRow(model="a", segment="all", metric="gini", k=5, value=float("nan"), n_users=2),
    ]
    assert metrics_table(spark, rows, run_id="r").collect() == [
        Row("r", "a", "all", "full", "gini", 5, None, 2, None, None, None, None),
        Row("r", "a", "all", "full", "rmse", None, 1.0, 4, None, None, None, None),
        Row("r", "b", "all", "full", "ndcg", 10, 0.25, 3, 0.1, None, None, None),
    ]


def test_the_run_record_stores_dicts_as_json_and_checks_as_structs(spark):
    at = dt.datetime(2026, 11, 29, 18, 51, tzinfo=dt.UTC)
    record = RunRecord(
        run_id="r",
        run_name="nightly",
        started_at=at,
        finished_at=at,
        status="succeeded",
        config={"run": {"name": "nightly"}, "evaluation": {"k": [10]}},
        split={"method": "global_temporal"},
        n_users_evaluated=3,
        versions={"spark": "4"},
        checks=[Check("oracle_ndcg[oracle]", True, "1.0")],
        warnings=["few users"],
    )
    (row,) = runs_table(spark, record).collect()
    assert row["config"] == '{"evaluation": {"k": [10]}, "run": {"name": "nightly"}}'
    assert row["checks"] == [Row(name="oracle_ndcg[oracle]", passed=True, detail="1.0")]
    assert (row["warnings"], row["alerts"], row["tuning"]) == (["few users"], [], "{}")
