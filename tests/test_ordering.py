"""Global positions without a single-partition window (receval_spark.ordering), against
Python's sort; and the package's windows over data that grows all have a partition."""

import ast
from pathlib import Path

import pytest
from helpers import sql_conf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from receval_spark.ordering import global_row_number, global_sum_before

PACKAGE = Path(__file__).resolve().parents[1] / "receval_spark"


@pytest.fixture
def many_ranges(spark):
    """Adaptive execution would coalesce these tiny tables into one range; keep every range
    (as on data large enough to fill them), so the offsets between ranges are exercised."""
    ranges = {
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
        "spark.sql.shuffle.partitions": "4",  # whatever an earlier test of the session left
    }
    with sql_conf(spark, ranges):
        yield spark


def _expected(rows: list[tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """id -> (position by weight desc then id asc, the weights before it)."""
    ordered = sorted(rows, key=lambda row: (-row[1], row[0]))
    out, total = {}, 0
    for position, (key, weight) in enumerate(ordered, start=1):
        out[key] = (position, total)
        total += weight
    return out


def _positions(spark, rows, partitions):
    df = spark.createDataFrame(rows, "id long, weight long").repartition(partitions)
    order = [F.col("weight").desc(), F.col("id").asc()]
    numbered = global_row_number(df, order, name="position")
    summed = global_sum_before(numbered, order, value="weight", name="before")
    return {r["id"]: (r["position"], r["before"]) for r in summed.collect()}


def test_worked_example_with_ties_across_ranges(many_ranges):
    spark = many_ranges
    rows = [(4, 5), (1, 5), (3, 1), (2, 7), (9, 1), (7, 1)]
    assert _positions(spark, rows, 3) == {
        2: (1, 0),
        1: (2, 7),
        4: (3, 12),
        3: (4, 17),
        7: (5, 18),
        9: (6, 19),
    }


def test_empty_table(spark):
    assert _positions(spark, [], 2) == {}


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    weights=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=300),
    partitions=st.integers(min_value=1, max_value=7),
)
def test_equals_a_sort_for_any_partitioning(many_ranges, weights, partitions):
    spark = many_ranges
    rows = [(index * 7 % 1009, weight) for index, weight in enumerate(weights)]
    assert _positions(spark, rows, partitions) == _expected(rows)


def test_many_ranges_are_used(many_ranges):
    spark = many_ranges
    """The rows really are spread over several ranges (not one task for all)."""
    df = spark.range(0, 5000).withColumn("weight", F.col("id") % 13)
    ranged = df.repartitionByRange(F.col("weight").desc(), F.col("id"))
    assert ranged.select(F.spark_partition_id().alias("p")).distinct().count() > 1
    numbered = global_row_number(df, [F.col("weight").desc(), F.col("id")], name="position")
    stats = numbered.agg(F.min("position"), F.max("position"), F.countDistinct("position"))
    assert tuple(stats.first()) == (1, 5000, 5000)


@pytest.fixture
def without_adaptive_execution(many_ranges):
    """AQE off (as a user's ``spark.conf`` may set it): each use of a range exchange is then
    executed, and its bounds sampled, on its own, with no query stage to reuse."""
    with sql_conf(many_ranges, {"spark.sql.adaptive.enabled": "false"}):
        yield many_ranges


def test_positions_hold_when_the_range_bounds_would_be_sampled_twice(without_adaptive_execution):
    """A regression: the rows and their per-range totals came from two executions of one range
    exchange, and Spark samples the bounds anew each time. With one input partition more than
    three times the average, it re-samples with a seed from the RDD's id (new per execution),
    so the bounds differed and ml-100k's 1,608 items were numbered up to 1,623 with AQE off."""
    spark = without_adaptive_execution
    skewed = spark.range(0, 40_000, 1, 8).where((F.col("id") < 5_000) | (F.col("id") % 1_000 == 0))
    # from a checkpoint, as the split's history: then the plan does not reuse the exchange
    key = ((F.col("id") * 7_919) % 40_009).alias("key")
    df = skewed.localCheckpoint().select(key, (F.col("id") % 3).alias("w"))
    order = [F.col("key").asc()]
    numbered = global_row_number(df, order, name="position")
    stats = numbered.agg(
        F.count("*"), F.min("position"), F.max("position"), F.countDistinct("position")
    )
    n = 5_000 + 35
    assert tuple(stats.first()) == (n, 1, n, n)
    summed = global_sum_before(df, order, value="w", name="before", total="all")
    expected = sum(i % 3 for i in range(40_000) if i < 5_000 or i % 1_000 == 0)
    last = summed.orderBy(F.col("key").desc()).first()
    assert (last["before"] + last["w"], last["all"]) == (expected, expected)


def _unpartitioned_windows(path: Path) -> list[int]:
    """Lines of ``Window.orderBy(...)`` / ``Window.rowsBetween`` / ``Window.rangeBetween``
    (a window with no partition) in a module."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "Window"
            and node.func.attr in {"orderBy", "rowsBetween", "rangeBetween"}
        ):
            lines.append(node.lineno)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "partitionBy"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "Window"
            and (not node.args or all(_is_literal_column(arg) for arg in node.args))
        ):
            lines.append(node.lineno)
    return lines


def _is_literal_column(node: ast.expr) -> bool:
    """``F.lit(...)``: a constant partition, one task like no partition."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "lit"
    )


@pytest.mark.parametrize(
    "module", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_no_window_without_a_partition(module):
    """Every window of the package has a (non-constant) partition: global orders go through
    receval_spark.ordering, so no table growing with users, sessions or items is sorted in
    one task and a user's notebook shows no `No Partition Defined` warning from us."""
    found = _unpartitioned_windows(module)
    assert not found, (
        f"{module.relative_to(PACKAGE)} lines {found}: a window without a partition; use "
        "receval_spark.ordering.global_row_number / global_sum_before, or partition it"
    )
