"""Off-policy estimators (metrics/offpolicy.py): a literal example, the logging policy scored
against itself, SNIPS against IPS on logs with a known true value, input validation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from receval_spark.errors import InputError
from receval_spark.metrics.offpolicy import estimates, importance_weights, off_policy_sums
from receval_spark.schema import validate_impressions

IMPRESSIONS = "user_id long, item_id long, position int, reward double, propensity double"
TARGET = "model string, user_id long, item_id long, position int, probability double"


def estimate(spark, impressions, target, *, by=("model",), clip=2.0):
    """{(group, estimator): OffPolicyEstimate} for every target policy."""
    weighted = importance_weights(impressions, target, by=list(by))
    rows = off_policy_sums(weighted, by=list(by), clip=clip).collect()
    return {(e.group, e.estimator): e for row in rows for e in estimates(row, by=list(by))}


def test_literal_example(spark):
    impressions = spark.createDataFrame(
        [
            (1, 10, 1, 1.0, 0.5),  # the new policy shows it here: w = 2
            (1, 11, 2, 0.0, 0.25),  # not shown by the new policy: w = 0
            (2, 10, 1, 1.0, 0.2),  # w = 5
            (2, 12, 1, 0.0, 0.8),  # w = 0
        ],
        IMPRESSIONS,
    )
    target = spark.createDataFrame([("new", 1, 10, 1, 1.0), ("new", 2, 10, 1, 1.0)], TARGET)

    got = estimate(spark, impressions, target, clip=2.0)

    terms = np.array([2.0, 0.0, 5.0, 0.0])  # w * r
    ips = got[(("new",), "ips")]
    assert ips.value == pytest.approx(7 / 4, abs=1e-12)
    assert ips.std_error == pytest.approx(np.std(terms, ddof=1) / 2, abs=1e-12)
    assert (ips.n_impressions, ips.max_weight) == (4, 5.0)
    assert ips.effective_n == pytest.approx(49 / 29, abs=1e-12)  # (2 + 5)^2 / (4 + 25)
    assert got[(("new",), "clipped_ips")].value == pytest.approx(4 / 4, abs=1e-12)  # min(w, 2)
    snips = got[(("new",), "snips")]
    assert snips.value == pytest.approx(7 / 7, abs=1e-12)
    assert snips.std_error == pytest.approx(0.0, abs=1e-12)  # every weighted reward is 1


def logged(rng, *, users, items, propensities, reward_rate, replicate=0):
    """One impression per user at position 1: the item drawn from the logging policy's
    ``propensities``, a Bernoulli reward with the item's ``reward_rate``."""
    item = rng.choice(items, size=users, p=propensities)
    return pd.DataFrame(
        {
            "replicate": replicate,
            "user_id": np.arange(users),
            "item_id": item,
            "position": 1,
            "reward": (rng.random(users) < reward_rate[item]).astype(float),
            "propensity": propensities[item],
        }
    )


def test_the_logging_policy_scored_against_itself_gets_the_logged_mean_reward(spark):
    rng = np.random.default_rng(5)
    propensities = np.array([0.5, 0.3, 0.15, 0.05])
    log = logged(
        rng, users=2_000, items=4, propensities=propensities, reward_rate=np.array([0.1] * 4)
    )
    impressions = spark.createDataFrame(log.drop(columns="replicate"))
    # the logging policy itself: pi = mu for every logged impression, so w = 1
    target = spark.createDataFrame(
        log.assign(model="logging", probability=log["propensity"])[
            ["model", "user_id", "item_id", "position", "probability"]
        ]
    )

    got = estimate(spark, impressions, target)

    for name in ("ips", "clipped_ips", "snips"):
        assert got[(("logging",), name)].value == pytest.approx(log["reward"].mean(), abs=1e-12)
    assert got[(("logging",), "ips")].effective_n == pytest.approx(2_000, abs=1e-9)


def test_snips_is_closer_than_ips_to_a_known_true_value(spark):
    """30 logs of 400 impressions from a logging policy that rarely shows the item a new,
    deterministic policy always shows (p = 0.04: weights of 25). The new policy's true value
    is that item's reward rate, 0.6."""
    rng = np.random.default_rng(11)
    propensities = np.array([0.6, 0.36, 0.04])
    rates = np.array([0.1, 0.2, 0.6])
    logs = pd.concat(
        [
            logged(
                rng, users=400, items=3, propensities=propensities, reward_rate=rates, replicate=b
            )
            for b in range(30)
        ]
    )
    impressions = spark.createDataFrame(logs)
    users = logs[["replicate", "user_id"]].drop_duplicates()
    target = spark.createDataFrame(
        users.assign(model="rare", item_id=2, position=1, probability=1.0)[
            ["replicate", "model", "user_id", "item_id", "position", "probability"]
        ]
    )

    got = estimate(spark, impressions, target, by=("replicate", "model"), clip=1e9)

    errors = {
        name: np.array([got[((b, "rare"), name)].value - 0.6 for b in range(30)])
        for name in ("ips", "snips")
    }
    rmse = {name: float(np.sqrt(np.mean(e**2))) for name, e in errors.items()}
    assert abs(errors["snips"].mean()) < abs(errors["ips"].mean())
    assert rmse["snips"] < rmse["ips"]  # here 0.119 against 0.166
    # with clipping out of reach, clipped IPS is IPS
    assert all(
        got[((b, "rare"), "clipped_ips")].value == got[((b, "rare"), "ips")].value
        for b in range(30)
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ((1, 10, 1, 1.0, None), "propensity is missing"),
        ((1, 10, 1, 1.0, float("nan")), "propensity is missing, NaN or infinite"),
        ((1, 10, 1, 1.0, 0.0), "propensity is 0 or negative"),
        ((1, 10, 1, 1.0, 1.5), "propensity is above 1"),
        ((1, 10, 1, None, 0.5), "reward has null"),
        ((None, 10, 1, 1.0, 0.5), "user_id, item_id or position has null values"),
    ],
)
def test_bad_impressions_are_named(spark, row, message):
    good = (2, 11, 1, 0.0, 0.5)
    impressions = spark.createDataFrame([good, row], IMPRESSIONS)

    with pytest.raises(InputError, match=message) as caught:
        validate_impressions(impressions, source="data.impressions")
    assert "(1 rows)" in str(caught.value)


def test_missing_impression_column_is_named(spark):
    impressions = spark.createDataFrame(
        [(1, 10, 1, 1.0)], "user_id long, item_id long, position int, reward double"
    )

    with pytest.raises(InputError, match="'propensity'"):
        validate_impressions(impressions, source="data.impressions")


def test_a_policy_without_target_rows_is_scored_with_zero_weights(spark):
    impressions = spark.createDataFrame([(1, 10, 1, 1.0, 0.5), (2, 11, 1, 0.0, 0.5)], IMPRESSIONS)
    target = spark.createDataFrame([("new", 1, 10, 1, 1.0)], TARGET)
    policies = spark.createDataFrame([("new",), ("empty",)], "model string")

    weighted = importance_weights(impressions, target, by=["model"], policies=policies)
    rows = off_policy_sums(weighted, by=["model"], clip=2.0).collect()
    got = {(e.group, e.estimator): e for row in rows for e in estimates(row, by=["model"])}

    assert got[(("new",), "ips")].value == pytest.approx(1.0, abs=1e-12)  # (2 * 1 + 0) / 2
    empty = {name: got[(("empty",), name)] for name in ("ips", "clipped_ips", "snips")}
    assert (empty["ips"].value, empty["clipped_ips"].value) == (0.0, 0.0)
    assert empty["snips"].value is None and empty["ips"].max_weight == 0.0
    assert empty["ips"].n_impressions == 2
