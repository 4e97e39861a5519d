"""An external model's predicted ratings (``task: rating_prediction``, ``columns.prediction``)
and its rank column (``rank_semantics``: an order whose gaps close, or positions whose gaps
are empty slots), on hand-worked examples (docs/evaluation.md, "Rating prediction" and "Ranks
of an external model")."""

from __future__ import annotations

import datetime as dt
import math
from fractions import Fraction

import pandas as pd
import pytest
import yaml
from helpers import TINY_SPARK_CONF, kept_sql_conf

import receval_spark as rv
from receval_spark.cli import main
from receval_spark.config import validate_config
from receval_spark.errors import ConfigError, InputError

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
RATED_LOG = "user_id long, item_id long, timestamp timestamp, rating double"
CUTOFF = "2026-01-10T00:00:00Z"


def day(d: int) -> dt.datetime:
    return T0 + dt.timedelta(days=d)


# ---------------------------------------------------------------------------------------------
# predicted ratings

# train: days 1-3; test: days 11-15. User 4 has no train rating, so (4, 10) is not scored;
# user 2 rated item 11 twice in test (3, then 4): both ratings count.
RATINGS = [
    (1, 10, 1, 4.0), (1, 11, 2, 2.0), (2, 10, 1, 5.0), (2, 12, 2, 3.0), (3, 11, 1, 4.0),
    (3, 12, 3, 1.0),
    (1, 12, 11, 5.0), (2, 11, 12, 3.0), (3, 10, 13, 2.0), (4, 10, 14, 5.0), (2, 11, 15, 4.0),
]  # fmt: skip
# "mf" predicts two of the three known pairs (not (3, 10)), a cold pair and an unrelated one;
# "mean" predicts 3.5 for every known pair
MF = [(1, 12, 4.5), (2, 11, 3.5), (4, 10, 4.0), (9, 9, 1.0)]
MEAN = [(1, 12, 3.5), (2, 11, 3.5), (3, 10, 3.5)]
PREDICTIONS = "user_id long, item_id long, pred double"


def rating_config(**evaluation) -> dict:
    return {
        "run": {"name": "external-ratings", "date": dt.date(2026, 2, 1)},
        "task": "rating_prediction",
        "split": {"method": "global_temporal", "cutoff": CUTOFF},
        "evaluation": {"min_users": 1, "baseline": "mean", **evaluation},
        "models": [
            {"name": "mf", "kind": "external", "columns": {"prediction": "pred"}},
            {"name": "mean", "kind": "external", "columns": {"prediction": "pred"}},
            {"name": "bias", "kind": "bias"},
        ],
    }


@pytest.fixture(scope="module")
def rated(spark):
    log = spark.createDataFrame([(u, i, day(d), r) for u, i, d, r in RATINGS], RATED_LOG)
    with kept_sql_conf(spark):
        for key, value in TINY_SPARK_CONF.items():
            spark.conf.set(key, str(value))
        return rv.evaluate(
            spark,
            rating_config(),
            interactions=log,
            recommendations={
                "mf": spark.createDataFrame(MF, PREDICTIONS),
                "mean": spark.createDataFrame(MEAN, PREDICTIONS),
            },
        ).outcome


def rows(outcome, model: str) -> dict:
    return {r.metric: r for r in outcome.metrics if r.model == model}


def test_external_predictions_score_mae_mse_rmse_by_hand(rated):
    """mf on the known ratings it predicts: errors -0.5 (1, 12), +0.5 and -0.5 (2, 11 rated
    3 and 4): MAE 1/2, MSE 1/4, RMSE 1/2 over 3 ratings, all terms equal so the intervals are
    points. mean (3.5 everywhere): errors -1.5, 0.5, -0.5, 1.5: MAE 1, MSE 5/4, RMSE √5 / 2."""
    mf = rows(rated, "mf")
    assert {m: Fraction(r.value) for m, r in mf.items()} == {
        "mae": Fraction(1, 2),
        "mse": Fraction(1, 4),
        "rmse": Fraction(1, 2),
    }
    assert {r.n_users for r in mf.values()} == {3} and {r.k for r in mf.values()} == {None}
    assert (mf["mae"].ci_low, mf["mae"].ci_high) == (0.5, 0.5)
    assert (mf["mse"].std, mf["mse"].ci_low, mf["mse"].ci_high) == (0.0, 0.25, 0.25)
    mean = rows(rated, "mean")
    assert Fraction(mean["mae"].value) == 1 and Fraction(mean["mse"].value) == Fraction(5, 4)
    assert mean["rmse"].value == math.sqrt(5) / 2
    assert {r.n_users for r in mean.values()} == {4}
    assert {r.n_users for r in rows(rated, "bias").values()} == {4}  # built-ins alongside


def test_unknown_pairs_are_counted_and_named(rated):
    """Of 5 test ratings, 4 have a user and an item with train ratings; mf has no prediction
    for one of them, (3, 10): counted in the run record and a warning, never scored."""
    assert rated.split["rating_prediction"] == {
        "test_ratings": 5,
        "scored_ratings": 4,
        "unpredicted": {"mf": 1, "mean": 0},
    }
    named = [w for w in rated.warnings if w.startswith("models.mf:")]
    assert named == [
        "models.mf: no predicted rating for 1 of 4 scored test ratings; its mae, mse and rmse "
        "are over the other 3, its paired comparisons over the ratings both it and the "
        "baseline predict (runs.split.rating_prediction.unpredicted)"
    ]
    assert not any(w.startswith("models.mean:") for w in rated.warnings)
    assert any("not how well a model ranks" in w for w in rated.warnings)  # not ranking


def test_paired_comparison_with_the_baseline_over_common_ratings(rated):
    """mf - mean on the 3 ratings both predict: absolute errors 0.5 - 1.5, 0.5 - 0.5,
    0.5 - 0.5 (mean -1/3); squared errors 0.25 - 2.25, 0, 0 (mean -2/3). RMSE has no
    per-rating term: no comparison row."""
    got = {(c.model, c.metric): c for c in rated.comparisons}
    assert set(got) == {(m, e) for m in ("mf", "bias") for e in ("mae", "mse")}
    mae, mse = got[("mf", "mae")], got[("mf", "mse")]
    assert {c.baseline for c in got.values()} == {"mean"}
    assert (mae.n_users, mse.n_users) == (3, 3)
    assert (mae.segment, mae.k, mae.protocol) == ("all", None, "full")
    assert mae.mean_diff == pytest.approx(-1 / 3, abs=1e-15)
    assert mse.mean_diff == pytest.approx(-2 / 3, abs=1e-15)
    # differences (-1, 0, 0): std 1/√3
    assert mae.std_diff == pytest.approx(1 / math.sqrt(3), abs=1e-15)
    assert mae.p_ttest is not None and 0 < mae.p_ttest < 1
    assert got[("bias", "mae")].n_users == 4


def test_predictions_from_yaml_with_set_through_the_cli(spark, tmp_path, capsys):
    """The same job from files: YAML names the prediction column, ``--set`` renames it."""
    log = pd.DataFrame(RATINGS, columns=["user_id", "item_id", "day", "rating"])
    log["timestamp"] = [int(day(d).timestamp()) for d in log.pop("day")]
    log.to_parquet(tmp_path / "log.parquet")
    pd.DataFrame(MF, columns=["user_id", "item_id", "predicted"]).to_parquet(tmp_path / "mf.pq")
    pd.DataFrame(MEAN, columns=["user_id", "item_id", "pred"]).to_parquet(tmp_path / "mean.pq")
    config = rating_config()
    config["spark"] = {"master": "local[2]", "conf": dict(TINY_SPARK_CONF)}
    config["output"] = {"path": str(tmp_path / "reports")}
    config["data"] = {
        "interactions": {"path": str(tmp_path / "log.parquet"), "columns": {"rating": "rating"}}
    }
    config["models"][0]["path"] = str(tmp_path / "mf.pq")
    config["models"][1]["path"] = str(tmp_path / "mean.pq")
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    argv = ["evaluate", "--config", str(tmp_path / "job.yaml")]
    with kept_sql_conf(spark):
        status = main([*argv, "--set", "models.0.columns.prediction=predicted"])
    assert status == 0, capsys.readouterr().err
    metrics = spark.read.parquet(str(tmp_path / "reports" / "metrics"))
    mf = {r.metric: r.value for r in metrics.filter("model = 'mf'").collect()}
    assert mf == {"mae": 0.5, "mse": 0.25, "rmse": 0.5}
    compared = spark.read.parquet(str(tmp_path / "reports" / "comparisons"))
    assert compared.filter("model = 'mf' AND baseline = 'mean'").count() == 2


def test_a_prediction_frame_given_to_the_api_needs_no_model_entry(spark):
    """Under task rating_prediction, a DataFrame given for a model the config does not name
    is an external model reading the column ``prediction``."""
    log = spark.createDataFrame([(u, i, day(d), r) for u, i, d, r in RATINGS], RATED_LOG)
    config = rating_config(baseline=None)
    config["models"] = [{"name": "bias", "kind": "bias"}]
    given = spark.createDataFrame(MEAN, "user_id long, item_id long, prediction double")
    with kept_sql_conf(spark):
        outcome = rv.evaluate(
            spark, config, interactions=log, recommendations={"mean": given}
        ).outcome
    assert Fraction(rows(outcome, "mean")["mse"].value) == Fraction(5, 4)
    assert outcome.comparisons == []  # baseline: null


# ---------------------------------------------------------------------------------------------
# rank columns: an order, or positions

# user 1: train 10, 11; relevant test items 12, 14. user 2: train 10; relevant test item 13.
RANK_LOG = [(1, 10, 1), (1, 11, 2), (2, 10, 1), (1, 12, 11), (1, 14, 12), (2, 13, 11)]
# user 1: 12 at rank 1, 10 (seen in train: filtered) at 2, 13 at 3, 14 at 5 (nothing at 4);
# user 2: nothing at rank 1, 11 at 2, 13 at 4
RANKED = [(1, 12, 1), (1, 10, 2), (1, 13, 3), (1, 14, 5), (2, 11, 2), (2, 13, 4)]
RANKS = "user_id long, item_id long, pos long"


def rank_config(**models) -> dict:
    return {
        "run": {"name": "external-ranks", "date": dt.date(2026, 2, 1)},
        "split": {"method": "global_temporal", "cutoff": CUTOFF},
        "evaluation": {
            "k": [2, 4],
            "segments": [],
            "metrics": ["precision", "ndcg", "mrr"],
            "min_users": 1,
            "bootstrap_samples": 0,
            "baseline": None,
            "embeddings": {"source": "none"},
        },
        "models": [
            {"name": "ordered", "kind": "external", "columns": {"rank": "pos"}},
            {
                "name": "slots",
                "kind": "external",
                "columns": {"rank": "pos"},
                "rank_semantics": "positions",
            },
        ],
        **models,
    }


def evaluate_ranks(spark, ranked: list[tuple], config: dict | None = None):
    log = spark.createDataFrame(
        [(u, i, day(d)) for u, i, d in RANK_LOG], "user_id long, item_id long, timestamp timestamp"
    )
    table = spark.createDataFrame(ranked, RANKS)
    with kept_sql_conf(spark):
        for key, value in TINY_SPARK_CONF.items():
            spark.conf.set(key, str(value))
        return rv.evaluate(
            spark,
            config or rank_config(),
            interactions=log,
            recommendations={"ordered": table, "slots": table},
        ).outcome


def test_rank_gaps_close_as_an_order_and_stay_empty_as_positions(spark):
    """``order``: user 1's list is 12, 13, 14 (ranks 1, 3, 5 close up; the seen 10 leaves
    nothing), user 2's is 11, 13. ``positions``: user 1 has 12 at 1, an empty slot 2 (10 was
    seen), 13 at 3, 14 at 5; user 2 has 11 at 2 and 13 at 4. With L(i) = 1 / log2(i + 1) and
    Rel = {12, 14} (user 1), {13} (user 2):

    order      P@2 = (1/2 + 1/2) / 2           P@4 = (2/4 + 1/4) / 2
               NDCG@2 = (1 / (1 + L2) + L2) / 2  NDCG@4 = ((1 + L3) / (1 + L2) + L2) / 2
               MRR@2 = MRR@4 = (1 + 1/2) / 2
    positions  P@2 = (1/2 + 0) / 2             P@4 = (1/4 + 1/4) / 2
               NDCG@2 = (1 / (1 + L2) + 0) / 2   NDCG@4 = (1 / (1 + L2) + L4) / 2
               MRR@2 = (1 + 0) / 2, MRR@4 = (1 + 1/4) / 2
    """
    outcome = evaluate_ranks(spark, RANKED)
    got = {(r.model, r.metric, r.k): r.value for r in outcome.metrics if r.segment == "all"}
    L = [0.0, *(1 / math.log2(i + 1) for i in range(1, 6))]  # L[i]: the discount at rank i
    expected = {
        ("ordered", "precision", 2): Fraction(1, 2),
        ("ordered", "precision", 4): Fraction(3, 8),
        ("ordered", "mrr", 2): Fraction(3, 4),
        ("ordered", "mrr", 4): Fraction(3, 4),
        ("slots", "precision", 2): Fraction(1, 4),
        ("slots", "precision", 4): Fraction(1, 4),
        ("slots", "mrr", 2): Fraction(1, 2),
        ("slots", "mrr", 4): Fraction(5, 8),
    }
    for key, value in expected.items():
        assert Fraction(got[key]) == value, key
    ndcg = {
        ("ordered", 2): (1 / (1 + L[2]) + L[2]) / 2,
        ("ordered", 4): ((1 + L[3]) / (1 + L[2]) + L[2]) / 2,
        ("slots", 2): (1 / (1 + L[2])) / 2,
        ("slots", 4): (1 / (1 + L[2]) + L[4]) / 2,
    }
    for (model, k), value in ndcg.items():
        assert got[(model, "ndcg", k)] == pytest.approx(value, abs=1e-15), (model, k)
    # short lists count filled slots up to k: positions 1 and 3 are not a list of 2 at k = 2
    short = {
        (f["model"], f["k"]): f["count"]
        for f in outcome.split["data_quality"]
        if f["fact"] == "short_lists"
    }
    assert short == {("ordered", 2): 0, ("ordered", 4): 2, ("slots", 2): 2, ("slots", 4): 2}


def test_rank_semantics_positions_through_set(tmp_path):
    """``--set models.<i>.rank_semantics=positions`` and a YAML rank column validate."""
    path = tmp_path / "job.yaml"
    config = rank_config()
    config["models"][1].pop("rank_semantics")
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    from receval_spark.config_files import read_config_file

    raw = read_config_file(path, ["models.1.rank_semantics=positions"])
    job = validate_config(raw)
    assert [m.rank_semantics for m in job.models] == ["order", "positions"]
    assert job.models[0].columns.score is None  # left out beside a rank: null


@pytest.mark.parametrize(
    ("ranked", "names"),
    [
        (
            [(1, 12, 1), (1, 13, 1), (2, 11, 2)],
            ("models.slots", "'pos' (rank)", "more than one item at one position",
             "user 1 at rank 1", "remove models.slots.rank_semantics"),
        ),
    ],
    ids=["two_items_in_one_slot"],
)  # fmt: skip
def test_positions_hold_one_item_per_slot(spark, ranked, names):
    with pytest.raises(InputError) as error:
        evaluate_ranks(spark, ranked)
    message = str(error.value)
    assert "\n" not in message
    for name in names:
        assert name in message


def test_fractional_positions_are_refused(spark):
    config = rank_config()
    config["models"] = config["models"][1:]  # the order reads 1.5 as an order: allowed there
    log = spark.createDataFrame(
        [(u, i, day(d)) for u, i, d in RANK_LOG], "user_id long, item_id long, timestamp timestamp"
    )
    table = spark.createDataFrame([(1, 12, 1.5)], "user_id long, item_id long, pos double")
    with kept_sql_conf(spark), pytest.raises(InputError, match=r"not whole numbers \(e.g. 1.5\)"):
        rv.evaluate(spark, config, interactions=log, recommendations={"slots": table})


def test_rank_below_one_is_an_input_error_through_the_api(spark):
    with pytest.raises(InputError) as error:
        evaluate_ranks(spark, [(1, 12, 0), (1, 13, 1), (2, 11, 1)])
    message = str(error.value)
    assert message.startswith("models.ordered: column 'pos' (rank) has values below 1")
    assert "add 1 to 0-based ranks" in message and "\n" not in message


def test_rank_below_one_is_exit_2_one_line_nothing_written(spark, tmp_path, capsys):
    log = pd.DataFrame(RANK_LOG, columns=["user_id", "item_id", "day"])
    log["timestamp"] = [int(day(d).timestamp()) for d in log.pop("day")]
    log.to_parquet(tmp_path / "log.parquet")
    ranks = pd.DataFrame(RANKED, columns=["user_id", "item_id", "pos"])
    ranks.loc[0, "pos"] = 0
    ranks.to_parquet(tmp_path / "ranks.parquet")
    config = rank_config()
    config["spark"] = {"master": "local[2]", "conf": dict(TINY_SPARK_CONF)}
    config["output"] = {"path": str(tmp_path / "reports")}
    config["data"] = {"interactions": {"path": str(tmp_path / "log.parquet")}}
    for model in config["models"]:
        model["path"] = str(tmp_path / "ranks.parquet")
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    capsys.readouterr()
    with kept_sql_conf(spark):
        status = main(["evaluate", "--config", str(tmp_path / "job.yaml")])
    err = capsys.readouterr().err
    assert status == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: models.ordered: column 'pos'")
    assert "ranks count from 1 (the best): add 1 to 0-based ranks" in err
    assert not (tmp_path / "reports").exists()


# ---------------------------------------------------------------------------------------------
# the configuration (no Spark)


def external(**fields) -> dict:
    return {"name": "ext", "kind": "external", "path": "recs.parquet", **fields}


@pytest.mark.parametrize(
    ("task", "model", "names"),
    [
        ("ranking", external(columns={"score": None, "rank": None}), ("map columns.score",)),
        ("ranking", external(columns={"score": "s", "rank": "r"}), ("not both",)),
        ("ranking", external(columns={"score": "s"}, rank_semantics="positions"),
         ("rank_semantics: positions", "map columns.rank")),
        ("ranking", external(columns={"prediction": "p"}),
         ("models.ext", "task ranking", "columns.score or columns.rank")),
        ("rating_prediction", external(), ("models.ext", "columns.prediction")),
    ],
    ids=["nothing_mapped", "score_and_rank", "positions_without_rank", "ranking_by_prediction",
         "rating_without_prediction"],
)  # fmt: skip
def test_column_rules_are_config_errors(tmp_path, task, model, names):
    config = {
        "task": task,
        "data": {"interactions": {"path": "log.parquet", "columns": {"rating": "r"}}},
        "split": {"method": "global_temporal", "cutoff": CUTOFF},
        "evaluation": {"baseline": None},
        "models": [model],
    }
    with pytest.raises(ConfigError) as error:
        validate_config(config)
    for name in names:
        assert name in str(error.value)


def test_a_rating_baseline_must_be_a_configured_model():
    config = {
        "task": "rating_prediction",
        "data": {"interactions": {"path": "log.parquet", "columns": {"rating": "r"}}},
        "split": {"method": "global_temporal", "cutoff": CUTOFF},
        "evaluation": {"baseline": "popularity"},
        "models": [{"name": "bias", "kind": "bias"}],
    }
    with pytest.raises(ConfigError, match=r"evaluation.baseline: 'popularity' is not a configured"):
        validate_config(config)
    del config["evaluation"]  # left at its default: no comparison, no error
    assert validate_config(config).evaluation.baseline == "popularity"
