"""Off-policy evaluation in the job (``receval evaluate`` with ``data.impressions``), in-process
on the session ``spark``, on a small generated log whose logging policy is known: each user is
shown 4 of their unseen items in a uniformly random order, so the propensity of an item at a
position is 1 / (number of the user's unseen items).

The estimates of two external models are recomputed by hand in pandas from the impressions and
the models' own top-k lists; bad impressions are exit 2 with nothing written.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import TINY_SPARK_CONF, kept_sql_conf, read

from receval_spark.cli import main

pytestmark = pytest.mark.integration

DATE, LATER_DATE = "2026-02-01", "2026-02-02"
BASE = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
DAY = 86_400
ITEMS = np.arange(100, 112)  # 12 items
WARM_USERS, COLD_USERS = range(1, 31), range(31, 36)  # cold users have no interactions
SHOWN, KS, CLIP = 4, [2, 3], 5.0  # positions 1..4 logged; max k = 3: position 4 gets pi = 0
ESTIMATORS = {"ips", "clipped_ips", "snips"}
MODELS = {"popularity", "random", "oracle", "replay", "shuffle"}
OFF_POLICY_TYPES = [
    ("run_id", "string"),
    ("model", "string"),
    ("estimator", "string"),
    ("value", "double"),
    ("std_error", "double"),
    ("ci_low", "double"),
    ("ci_high", "double"),
    ("n_impressions", "bigint"),
    ("effective_n", "double"),
    ("max_weight", "double"),
    ("clip", "double"),
]


def generate(seed: int = 3) -> dict[str, pd.DataFrame]:
    """interactions (6 distinct items per warm user: days 0-3 train, days 4-5 test), the
    impressions (source column names uid, iid, slot, clicked, p), and two external models:
    ``replay`` scores the logged order (-position), ``shuffle`` random scores over all items.

    ``replay`` is read off the log itself, so it is no fixed policy and its IPS is inflated
    (w = 1/p on every logged slot up to max k); it is here as an extreme that is easy to check
    by hand, not as a sensible target."""
    rng = np.random.default_rng(seed)
    interactions, impressions, shuffle = [], [], []
    rate = dict(zip(ITEMS, rng.uniform(0.2, 0.9, len(ITEMS)), strict=True))
    for user in [*WARM_USERS, *COLD_USERS]:
        items = rng.choice(ITEMS, 6, replace=False) if user in WARM_USERS else []
        for day, item in enumerate(items):
            ts = int(BASE.timestamp()) + day * DAY + user * 60
            interactions.append({"user_id": user, "item_id": int(item), "timestamp": ts})
        unseen = [i for i in ITEMS if i not in set(items[:4])]
        for position, item in enumerate(rng.permutation(unseen)[:SHOWN], start=1):
            clicked = float(rng.random() < rate[item] / position)
            impressions.append((user, int(item), position, clicked, 1.0 / len(unseen)))
        scores = rng.permutation(len(ITEMS)).astype(float)
        shuffle += [(user, int(i), s) for i, s in zip(ITEMS, scores, strict=True)]
    logged = pd.DataFrame(impressions, columns=["uid", "iid", "slot", "clicked", "p"])
    return {
        "interactions": pd.DataFrame(interactions),
        "impressions": logged,
        "replay": pd.DataFrame(
            {"user_id": logged.uid, "item_id": logged.iid, "score": -logged.slot.astype(float)}
        ),
        "shuffle": pd.DataFrame(shuffle, columns=["user_id", "item_id", "score"]),
    }


def job_config(folder: Path, output: Path, date: str) -> dict[str, Any]:
    external = {"kind": "external", "format": "parquet"}
    return {
        "run": {"name": "off-policy-test", "date": date},
        "spark": {"master": "local[2]", "conf": dict(TINY_SPARK_CONF)},
        "output": {"path": str(output)},
        "data": {
            "interactions": {"path": str(folder / "interactions.parquet")},
            "impressions": {
                "path": str(folder / "impressions.parquet"),
                "columns": {
                    "user": "uid",
                    "item": "iid",
                    "position": "slot",
                    "reward": "clicked",
                    "propensity": "p",
                },
            },
        },
        "split": {"method": "global_temporal", "cutoff": (BASE + dt.timedelta(days=4)).isoformat()},
        "evaluation": {
            "k": KS,
            "min_users": 0,
            "segments": [],
            "metrics": ["precision", "ndcg"],
            "bootstrap_samples": 0,
            "embeddings": {"source": "none"},
            "off_policy": {"clip": CLIP},
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "random", "kind": "random", "seed": 3},
            {"name": "oracle", "kind": "oracle"},
            {"name": "replay", "path": str(folder / "replay.parquet"), **external},
            {"name": "shuffle", "path": str(folder / "shuffle.parquet"), **external},
        ],
    }


def write_inputs(folder: Path, data: dict[str, pd.DataFrame]) -> None:
    for name, frame in data.items():
        frame.to_parquet(folder / f"{name}.parquet", index=False)


def run(folder: Path, config: dict[str, Any], spark) -> tuple[int, str, str]:
    """``receval evaluate`` in-process: (exit status, stdout, stderr)."""
    path = folder / f"job-{config['run']['date']}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    stdout, stderr = io.StringIO(), io.StringIO()
    with (
        kept_sql_conf(spark),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
    ):
        status = main(["evaluate", "--config", str(path)])
    return status, stdout.getvalue(), stderr.getvalue()


def reference(data: dict[str, pd.DataFrame], model: str) -> dict[str, float]:
    """IPS, clipped IPS, SNIPS and effective n of an external model, by hand: its top-max(k)
    list per user without the user's train items, pi = 1 where it ranks the logged item at the
    logged position."""
    interactions = data["interactions"]
    train = interactions[interactions.timestamp < (BASE + dt.timedelta(days=4)).timestamp()]
    recs = data[model].merge(
        train[["user_id", "item_id"]], on=["user_id", "item_id"], how="left", indicator=True
    )
    recs = recs[recs["_merge"] == "left_only"].sort_values(
        ["user_id", "score", "item_id"], ascending=[True, False, True]
    )
    recs["rank"] = recs.groupby("user_id").cumcount() + 1
    lists = recs[recs["rank"] <= max(KS)]
    log = data["impressions"].merge(
        lists[["user_id", "item_id", "rank"]],
        left_on=["uid", "iid", "slot"],
        right_on=["user_id", "item_id", "rank"],
        how="left",
    )
    w = log["rank"].notna() / log["p"]
    r = log["clicked"]
    # cluster-robust standard errors, clusters = users (the 4 slots of a user's logged list)
    cluster = pd.DataFrame({"uid": log["uid"], "a": w * r, "b": w, "n": 1.0}).groupby("uid").sum()
    g = len(cluster)

    def robust(theta: float, denominator: str) -> float:
        spread = ((cluster["a"] - theta * cluster[denominator]) ** 2).sum()
        return float(np.sqrt(g / (g - 1) * spread) / cluster[denominator].sum())

    return {
        "ips_se": robust(float((w * r).mean()), "n"),
        "snips_se": robust(float((w * r).sum() / w.sum()), "b"),
        "ips": float((w * r).mean()),
        "clipped_ips": float((np.minimum(w, CLIP) * r).mean()),
        "snips": float((w * r).sum() / w.sum()),
        "effective_n": float(w.sum() ** 2 / (w**2).sum()),
        "max_weight": float(w.max()),
    }


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture(scope="module")
def good_run(spark, tmp_path_factory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("off_policy")
    data = generate()
    write_inputs(folder, data)
    output = folder / "reports"
    status, stdout, stderr = run(folder, job_config(folder, output, DATE), spark)
    return {"status": status, "stdout": stdout, "stderr": stderr, "data": data, "output": output}


def test_off_policy_rows_for_every_model_equal_a_hand_computation(spark, good_run):
    assert good_run["status"] == 0, good_run["stderr"]
    frame = read(spark, good_run["output"], "off_policy", DATE)
    assert frame.dtypes == OFF_POLICY_TYPES
    rows = {(r.model, r.estimator): r for r in frame.collect()}
    n = len(good_run["data"]["impressions"])

    assert set(rows) == {(m, e) for m in MODELS for e in ESTIMATORS} | {("logging", "logged_mean")}
    for (_, estimator), r in rows.items():
        assert r.n_impressions == n
        assert r.clip == (CLIP if estimator == "clipped_ips" else None)
        if r.value is None:  # SNIPS of a model that never shows a logged item at its position
            assert (estimator, r.max_weight) == ("snips", 0.0), r
            continue
        assert math.isfinite(r.value) and math.isfinite(r.std_error), r
        assert r.ci_low <= r.value <= r.ci_high, r

    for model in ("replay", "shuffle"):
        expected = reference(good_run["data"], model)
        for estimator in ESTIMATORS:
            got = rows[(model, estimator)]
            assert got.value == pytest.approx(expected[estimator], abs=1e-12), (model, estimator)
            assert got.effective_n == pytest.approx(expected["effective_n"], abs=1e-9)
            assert got.max_weight == pytest.approx(expected["max_weight"], abs=1e-12)
        for estimator in ("ips", "snips"):
            se = rows[(model, estimator)].std_error
            assert se == pytest.approx(expected[f"{estimator}_se"], rel=1e-9), (model, estimator)
    # the replay model shows every logged item at its logged position up to max k: w = 1 / p
    log = good_run["data"]["impressions"]
    top = log[log.slot <= max(KS)]
    assert rows[("replay", "ips")].value == pytest.approx((top.clicked / top.p).sum() / n)
    assert rows[("replay", "ips")].max_weight == 12.0  # a cold user: 12 unseen items
    logged = rows[("logging", "logged_mean")]
    assert logged.value == pytest.approx(log.clicked.mean(), abs=1e-12)
    assert (logged.effective_n, logged.max_weight) == (n, 1.0)


def test_the_command_prints_and_the_report_shows_the_estimates(good_run):
    assert good_run["status"] == 0, good_run["stderr"]
    out = good_run["stdout"]
    assert "off-policy estimates" in out
    assert any(line.split()[:2] == ["replay", "snips"] for line in out.splitlines()), out
    markdown = (good_run["output"] / "report" / DATE / "report.md").read_text(encoding="utf-8")
    assert "## Off-policy estimates" in markdown and "common support" in markdown
    assert "| logging | logged_mean |" in markdown


def zero_propensity(data: dict[str, pd.DataFrame]) -> None:
    data["impressions"].loc[5, "p"] = 0.0


def no_propensity_column(data: dict[str, pd.DataFrame]) -> None:
    data["impressions"] = data["impressions"].drop(columns="p")


def zero_based_positions(data: dict[str, pd.DataFrame]) -> None:
    data["impressions"]["slot"] -= 1


@pytest.mark.parametrize(
    ("breaks", "names"),
    [
        (zero_propensity, ("data.impressions", "propensity is 0 or negative", "(1 rows)")),
        (
            no_propensity_column,
            ("data.impressions", "'p'", "is missing", "Fix data.impressions.columns.propensity"),
        ),
        (zero_based_positions, ("data.impressions", "position is below 1", "(35 rows)")),
    ],
    ids=["zero_propensity", "missing_propensity_column", "zero_based_positions"],
)
def test_bad_impressions_are_exit_2_and_write_nothing(spark, good_run, tmp_path, breaks, names):
    data = {name: frame.copy() for name, frame in good_run["data"].items()}
    breaks(data)
    write_inputs(tmp_path, data)
    output = tmp_path / "reports"
    shutil.copytree(good_run["output"], output)
    before = snapshot(output)

    status, _, err = run(tmp_path, job_config(tmp_path, output, LATER_DATE), spark)

    assert status == 2, err
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    for name in names:
        assert name in err, err
    assert not list(output.glob(f"*/run_date={LATER_DATE}"))  # no metrics/, off_policy/, ...
    assert snapshot(output) == before  # the earlier date's reports untouched
