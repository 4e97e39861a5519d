"""Order-independent sums, means and deviations (metrics/aggregate.py): the same bits under any
partitioning, and the same numbers as math.fsum / numpy."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StructField, StructType

from receval_spark.metrics.aggregate import exact_mean, exact_std, exact_sum

SCHEMA = StructType([StructField("g", DoubleType()), StructField("x", DoubleType())])


def values(seed: int, n: int) -> list[float]:
    """Mixed magnitudes and signs: metric-like fractions, tiny values, large counts."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append(rng.random())  # an NDCG-like value
        elif kind == 1:
            out.append(1.0 / rng.randint(1, 100))  # a reciprocal rank
        elif kind == 2:
            out.append(-rng.random() * 1e-6)  # a small difference
        else:
            out.append(rng.random() * 1e4)  # a large ratio (popularity bias)
    return out


def aggregate(spark, xs: list[float], partitions: int):
    df = spark.createDataFrame([(0.0, x) for x in xs], SCHEMA).repartition(partitions)
    return df.groupBy("g").agg(
        exact_sum("x").alias("sum"),
        exact_mean("x").alias("mean"),
        exact_std("x").alias("std"),
        F.sum("x").alias("plain_sum"),
    )


def test_the_same_bits_under_any_partitioning(spark) -> None:
    xs = values(7, 3000)
    rows = [aggregate(spark, xs, n).first() for n in (1, 3, 17)]
    shuffled = xs[:]
    random.Random(1).shuffle(shuffled)
    rows.append(aggregate(spark, shuffled, 5).first())
    for row in rows[1:]:
        assert (row["sum"], row["mean"], row["std"]) == (
            rows[0]["sum"],
            rows[0]["mean"],
            rows[0]["std"],
        )


def test_sum_mean_and_std_equal_the_exact_references(spark) -> None:
    xs = values(11, 2000)
    row = aggregate(spark, xs, 4).first()
    exact = math.fsum(xs)
    assert row["sum"] == pytest.approx(exact, rel=1e-15, abs=len(xs) * 2.0**-62)
    assert row["mean"] == pytest.approx(exact / len(xs), rel=1e-15)
    assert row["std"] == pytest.approx(float(np.std(xs, ddof=1)), rel=1e-12)
    # the plain double sum is only close (and may change with the partitioning)
    assert row["plain_sum"] == pytest.approx(exact, rel=1e-12)


def test_worked_examples(spark) -> None:
    """Hand-computed: equal non-dyadic values have deviation 0 (not rounding noise); one value
    has no deviation; nulls are skipped like avg/stddev_samp; a group of nulls sums to null."""
    rows = [
        (1.0, 0.3),
        (1.0, 0.3),
        (1.0, 0.3),
        (2.0, 0.25),
        (3.0, 1.0),
        (3.0, None),
        (3.0, 3.0),
        (4.0, None),
    ]
    df = spark.createDataFrame(rows, SCHEMA)
    got = {
        r["g"]: (r["sum"], r["mean"], r["std"])
        for r in df.groupBy("g")
        .agg(
            exact_sum("x").alias("sum"),
            exact_mean("x").alias("mean"),
            exact_std("x").alias("std"),
        )
        .collect()
    }
    assert got[1.0][0] == pytest.approx(0.9, rel=1e-15)
    assert got[1.0][1] == pytest.approx(0.3, rel=1e-15)
    assert got[1.0][2] == 0.0
    assert got[2.0] == (0.25, 0.25, None)
    assert got[3.0][0] == 4.0 and got[3.0][1] == 2.0
    assert got[3.0][2] == pytest.approx(math.sqrt(2.0), rel=1e-15)  # (1-2)^2+(3-2)^2 over 1
    assert got[4.0] == (None, None, None)
