"""The benchmark's own tools: the generator's comparison data and the numpy floor.

The side-by-side benchmark compares times only after the tools agree on the values, so its
numpy floor must compute DESIGN §5's numbers; here it is checked against this project's
Spark implementation on a small generated scale, and the generator's promises are checked.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import REPO

BENCHMARKS = REPO / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
generate = importlib.import_module("generate")
side_by_side = importlib.import_module("side_by_side")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scale")
    kwargs = {**generate.SCALE_DEFAULTS, "users": 400, "items": 500}
    generate.generate(**kwargs, out=out)
    return out


def test_the_generator_is_deterministic(data: Path, tmp_path: Path) -> None:
    generate.generate(**{**generate.SCALE_DEFAULTS, "users": 400, "items": 500}, out=tmp_path)
    for name in ("interactions.parquet", "items.parquet", "candidates.parquet", "meta.json"):
        assert (tmp_path / name).read_bytes() == (data / name).read_bytes(), name


def test_candidates_are_unseen_items_of_test_users(data: Path) -> None:
    meta = json.loads((data / "meta.json").read_text())
    log = pq.read_table(data / "interactions.parquet").to_pandas()
    candidates = pq.read_table(data / "candidates.parquet").to_pandas()
    train = log[log["timestamp"] < meta["cutoff"]]
    test = log[log["timestamp"] >= meta["cutoff"]]
    assert set(candidates["user_id"]) <= set(test["user_id"])
    assert meta["test_users"] == test["user_id"].nunique() > 0
    seen = set(zip(train["user_id"], train["item_id"], strict=True))
    pairs = list(zip(candidates["user_id"], candidates["item_id"], strict=True))
    assert not seen.intersection(pairs)
    assert len(set(pairs)) == len(pairs)  # one row per (user, item)
    held_out = set(zip(test["user_id"], test["item_id"], strict=True)) - seen
    assert held_out.intersection(pairs)  # the model has some signal


def test_numpy_floor_equals_the_spark_metrics(spark, data: Path) -> None:
    floor = side_by_side.numpy_four(side_by_side.numpy_inputs(data))
    inputs = side_by_side.spark_inputs(spark, data)
    try:
        values = side_by_side.receval_four(inputs)
        ml = side_by_side.spark_ml_four(inputs)
    finally:
        for df in inputs.values():
            df.unpersist()
    assert 0 < floor["ndcg"] < 1
    for metric in side_by_side.FOUR:
        assert np.isclose(values[metric], floor[metric], rtol=0, atol=1e-12), metric
        assert np.isclose(ml[metric], floor[metric], rtol=0, atol=1e-12), metric
