"""Off-policy estimators (metrics/offpolicy.py): a literal example, cluster-robust standard
errors against a numpy hand computation, the logging policy scored against itself, SNIPS
against IPS on logs with a known true value, input validation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from receval_spark.errors import InputError
from receval_spark.inputs import validate_impressions
from receval_spark.metrics.offpolicy import estimates, importance_weights, off_policy_sums

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

    # w * r = (2, 0) for user 1, (5, 0) for user 2: cluster sums A = (2, 5), n_g = (2, 2);
    # theta = 7/4, sum (A_g - theta n_g)^2 = 1.5^2 + 1.5^2 = 4.5, se = sqrt(2/1 * 4.5) / 4
    ips = got[(("new",), "ips")]
    assert ips.value == pytest.approx(7 / 4, abs=1e-12)
    assert ips.std_error == pytest.approx(0.75, abs=1e-12)
    # theta ± t_{0.975, 1} · 0.75 = [-7.78, 11.28], clipped to the range of w r: [0, 5]
    assert (ips.ci_low, ips.ci_high) == (0.0, 5.0)
    assert (ips.n_impressions, ips.max_weight) == (4, 5.0)
    assert ips.effective_n == pytest.approx(49 / 29, abs=1e-12)  # (2 + 5)^2 / (4 + 25)
    assert got[(("new",), "clipped_ips")].value == pytest.approx(4 / 4, abs=1e-12)  # min(w, 2)
    snips = got[(("new",), "snips")]
    assert snips.value == pytest.approx(7 / 7, abs=1e-12)
    assert snips.std_error == pytest.approx(0.0, abs=1e-12)  # every weighted reward is 1


def test_cluster_robust_standard_errors_equal_a_numpy_hand_computation(spark):
    """3 slots per user whose rewards move together (a user clicks all or nothing): the
    cluster-robust se (clusters = users) is far above the naive one that treats the slots as
    independent."""
    rng = np.random.default_rng(21)
    users, slots = 40, 3
    user = np.repeat(np.arange(users), slots)
    position = np.tile(np.arange(1, slots + 1), users)
    clicks = rng.random(users) < 0.4  # one draw per user: the slots of a list are correlated
    reward = np.where(clicks[user], 1.0, 0.0)
    propensity = rng.choice([0.5, 1.0], size=users * slots)
    shown = rng.random(users * slots) < 0.8  # the target policy shows these (pi = 1)
    log = pd.DataFrame(
        {
            "user_id": user,
            "item_id": 100 + position,
            "position": position.astype("int32"),
            "reward": reward,
            "propensity": propensity,
        }
    )
    impressions = spark.createDataFrame(log, IMPRESSIONS)
    target = spark.createDataFrame(
        log[shown].assign(model="new", probability=1.0)[
            ["model", "user_id", "item_id", "position", "probability"]
        ],
        TARGET,
    )
    clip = 1.5

    got = estimate(spark, impressions, target, clip=clip)

    w = np.where(shown, 1.0 / propensity, 0.0)
    n, g = len(w), users
    frame = pd.DataFrame({"user": user, "t": w * reward, "c": np.minimum(w, clip) * reward, "w": w})
    sums = frame.groupby("user").sum()
    t_crit = stats.t.ppf(0.975, g - 1)
    for name, column in (("ips", "t"), ("clipped_ips", "c")):
        theta = frame[column].mean()
        robust = np.sqrt(g / (g - 1) * ((sums[column] - theta * slots) ** 2).sum()) / n
        naive = frame[column].std(ddof=1) / np.sqrt(n)
        e = got[(("new",), name)]
        assert e.value == pytest.approx(theta, abs=1e-12)
        assert e.std_error == pytest.approx(robust, rel=1e-9)
        assert e.std_error > 1.3 * naive, (name, e.std_error, naive)
        assert (e.ci_low, e.ci_high) == pytest.approx(
            (max(theta - t_crit * robust, 0.0), theta + t_crit * robust), rel=1e-9
        )
    snips = got[(("new",), "snips")]
    theta = frame["t"].sum() / frame["w"].sum()
    robust = np.sqrt(g / (g - 1) * ((sums["t"] - theta * sums["w"]) ** 2).sum()) / w.sum()
    naive = np.sqrt((w**2 * (reward - theta) ** 2).sum()) / w.sum()
    assert snips.value == pytest.approx(theta, abs=1e-12)
    assert snips.std_error == pytest.approx(robust, rel=1e-9)
    assert snips.std_error > 1.3 * naive
    low, high = theta - t_crit * robust, theta + t_crit * robust
    assert (snips.ci_low, snips.ci_high) == pytest.approx((max(low, 0.0), min(high, 1.0)), rel=1e-9)


def test_one_impression_per_cluster_gives_the_naive_standard_error(spark):
    rng = np.random.default_rng(4)
    log = pd.DataFrame(
        {
            "user_id": np.arange(30),
            "item_id": 10,
            "position": np.ones(30, dtype="int32"),
            "reward": (rng.random(30) < 0.5).astype(float),
            "propensity": rng.choice([0.25, 0.5], size=30),
        }
    )
    target = spark.createDataFrame([("new", u, 10, 1, 1.0) for u in range(30)], TARGET)

    got = estimate(spark, spark.createDataFrame(log, IMPRESSIONS), target)

    terms = log["reward"] / log["propensity"]
    assert got[(("new",), "ips")].std_error == pytest.approx(
        terms.std(ddof=1) / np.sqrt(30), rel=1e-9
    )


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
