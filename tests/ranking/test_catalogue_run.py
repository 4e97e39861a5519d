"""A run with an explicit catalogue (docs/evaluation.md#catalogue): the beyond-accuracy
metrics over it, the list slots outside it counted and warned about, and the run record
stating where it came from, on a crafted log whose every value is worked out below.

Train (days 0-2, rating 3): user 1 -> items 1, 2; user 2 -> 1, 3; user 3 -> 1, 2; user 4 -> 4.
Test (day 5, rating 5, relevant at threshold 4): user 1 -> 3, user 2 -> 2, user 3 -> 4,
user 4 -> 1. Train users per item: 1 -> 3, 2 -> 2, 3 -> 1, 4 -> 1 (interactions alike).
The popularity lists at k = 2 without seen items: user 1 [3, 4], user 2 [2, 4],
user 3 [3, 4], user 4 [1, 2]: every train item is shown (train-catalogue coverage 1).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml
from helpers import DAY, T0, crafted_job_config

from receval_spark.api import evaluate
from receval_spark.config_files import read_config_file
from receval_spark.metrics.lists import item_statistics
from receval_spark.ranking.beyond_stage import describe_catalogue
from receval_spark.report.run_record import split_settings

MODELS = [{"name": "popularity", "kind": "popularity"}]
METRICS = ["coverage", "gini", "entropy", "popularity_bias", "novelty", "category_coverage"]
TOL = 1e-12


def catalogue_log() -> pd.DataFrame:
    t0 = int(T0.timestamp())
    train = {1: [1, 2], 2: [1, 3], 3: [1, 2], 4: [4]}
    test = {1: 3, 2: 2, 3: 4, 4: 1}
    rows = [(u, i, t0 + j * DAY, 3.0) for u, items in train.items() for j, i in enumerate(items)]
    rows += [(u, i, t0 + 5 * DAY, 5.0) for u, i in test.items()]
    return pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp", "rating"])


def job(tmp_path) -> dict:
    raw = crafted_job_config(tmp_path, catalogue_log(), MODELS)
    raw["evaluation"] |= {"k": [2], "metrics": METRICS, "segments": [], "baseline": None}
    return raw


def values(outcome) -> dict[str, float]:
    return {
        r.metric: r.value
        for r in outcome.metrics
        if (r.model, r.segment, r.k, r.protocol) == ("popularity", "all", 2, "full")
    }


def outside_fact(outcome) -> tuple[int, int]:
    (fact,) = [f for f in outcome.split["data_quality"] if f["fact"] == "outside_catalogue"]
    return fact["count"], fact["total"]


def test_a_catalogue_given_to_the_api_is_the_item_universe(spark, tmp_path):
    # I = {1, 2, 5, 6}: items 5, 6 without a train interaction, train items 3, 4 outside
    catalogue = spark.createDataFrame([(1,), (2,), (5,), (6,), (6,)], "item_id int")

    outcome = evaluate(spark, job(tmp_path), catalogue=catalogue).outcome

    got = values(outcome)
    # shown from I: 1 (user 4), 2 (users 2, 4) -> coverage 2/4 (1 over the train items)
    assert got["coverage"] == 1 / 2
    # f over I ascending: 5 -> 0, 6 -> 0, 1 -> 1, 2 -> 2; n = 4, weights -3 -1 1 3:
    # G = (1 + 6) / (4 * 3) = 7/12; entropy of shares 1/3, 2/3 = log2 3 - 2/3
    assert got["gini"] == pytest.approx(7 / 12, abs=TOL)
    assert got["entropy"] == pytest.approx(math.log2(3) - 2 / 3, abs=TOL)
    # slots' train interactions: 1 + 1, 2 + 1, 1 + 1, 3 + 2 = 12 over 8 slots = 3/2;
    # mean over I: (3 + 2 + 0 + 0) / 4 = 5/4 -> 6/5
    assert got["popularity_bias"] == pytest.approx(6 / 5, abs=TOL)
    # novelty reads train popularity (4 train users) whatever I is: user 1 [3, 4] -> 2,
    # user 2 [2, 4] -> (1 + 2) / 2, user 3 -> 2, user 4 [1, 2] -> (log2(4/3) + 1) / 2
    novelty = (2 + 1.5 + 2 + (math.log2(4 / 3) + 1) / 2) / 4
    assert got["novelty"] == pytest.approx(novelty, abs=TOL)
    # slots outside I: items 3 and 4 -> user 1: 2, user 2: 1, user 3: 2 -> 5 of 8
    assert outside_fact(outcome) == (5, 8)
    assert (
        "data quality: popularity: 62.50% of list slots (5 of 8): list slots hold items "
        "outside the catalogue"
    ) in "\n".join(outcome.warnings)
    assert outcome.split["catalogue"] == {
        "source": "data.catalogue",
        "items": 4,
        "items_without_train_interactions": 2,
        "train_items_outside": 2,
    }
    assert split_settings(outcome.split)["catalogue"] == (
        "data.catalogue: 4 items (2 without a train interaction; 2 train items outside it)"
    )


def test_a_catalogue_file_set_on_the_command_line(spark, tmp_path):
    # the same I = {1, 2, 5, 6} from a CSV whose item column is sku; item 3 is inactive
    pd.DataFrame({"sku": [1, 2, 5, 6, 3], "active": [1, 1, 1, 1, 0]}).to_csv(
        tmp_path / "catalogue.csv", index=False
    )
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job(tmp_path)), encoding="utf-8")
    overrides = [
        f"data.catalogue.path={tmp_path / 'catalogue.csv'}",
        "data.catalogue.format=csv",
        "data.catalogue.columns.item=sku",
        "data.catalogue.where=active = 1",
    ]

    outcome = evaluate(spark, read_config_file(tmp_path / "job.yaml", overrides)).outcome

    assert values(outcome)["coverage"] == 1 / 2
    assert outside_fact(outcome) == (5, 8)
    assert outcome.split["catalogue"]["source"] == "data.catalogue"
    assert outcome.split["catalogue"]["items"] == 4


def test_data_items_marked_as_the_catalogue(spark, tmp_path):
    # items 1-4 and 7 (no train interaction), categories 1 a, 2 b, 3 a, 4 c, 7 d
    items = pd.DataFrame({"item_id": [1, 2, 3, 4, 7], "genre": ["a", "b", "a", "c", "d"]})
    items.to_parquet(tmp_path / "items.parquet", index=False)
    raw = job(tmp_path)
    raw["data"]["items"] = {
        "path": str(tmp_path / "items.parquet"),
        "columns": {"item": "item_id", "category": "genre"},
        "category_separator": "|",
        "catalogue": True,
    }

    outcome = evaluate(spark, raw).outcome

    got = values(outcome)
    assert got["coverage"] == 4 / 5  # 1, 2, 3, 4 of I = {1, 2, 3, 4, 7}
    # C_I = {a, b, c, d}: user 1 [3, 4] a, c; user 2 [2, 4] b, c; user 3 a, c; user 4 [1, 2]
    # a, b: 2/4 each (2/3 over the train items' categories {a, b, c})
    assert got["category_coverage"] == pytest.approx(1 / 2, abs=TOL)
    # mean interactions over I: (3 + 2 + 1 + 1 + 0) / 5 = 7/5; slots 3/2 -> 15/14
    assert got["popularity_bias"] == pytest.approx(15 / 14, abs=TOL)
    assert outside_fact(outcome) == (0, 8)
    assert not [w for w in outcome.warnings if "outside the catalogue" in w]
    assert outcome.split["catalogue"] == {
        "source": "data.items",
        "items": 5,
        "items_without_train_interactions": 1,
        "train_items_outside": 0,
    }


def test_without_a_configured_catalogue_the_record_names_the_train_items(spark):
    history = spark.createDataFrame([(10, 1), (11, 1), (11, 2)], "user_id int, item_id int")

    record, warnings = describe_catalogue(item_statistics(history), source=None)

    assert (record, warnings) == ({"source": "train items", "items": 2}, [])
    assert split_settings({"catalogue": record})["catalogue"] == "train items: 2 items"
