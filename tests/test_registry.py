"""The metric registry as a specification; its readers and the documents (the documentation
site's pages, CONTRACT.md) agree with it."""

from __future__ import annotations

import re
from typing import get_args

import pytest
from helpers import REPO

from receval_spark import cli, config
from receval_spark.config import validate_config
from receval_spark.errors import ConfigError
from receval_spark.metrics.bootstrap import BOOTSTRAPPED_METRICS
from receval_spark.metrics.compat import COMPAT_METRICS
from receval_spark.registry import (
    METRICS,
    NON_NEGATIVE,
    SESSION_PROTOCOL,
    UNIT,
    Metric,
    define_custom,
    definitions,
    family,
    names,
)
from receval_spark.report import plots, render
from receval_spark.sessions.metrics import SESSION_ACCURACY, SESSION_EXPOSURE

DOCS = REPO / "docs"
EVALUATION = DOCS / "evaluation.md"  # the accuracy and beyond-accuracy tables
STATISTICS = DOCS / "statistics.md"  # the interval table
CONFIGURATION = DOCS / "configuration.md"  # the guide's row of evaluation.metrics
CONTRACT = REPO.parent / "shared" / "docs" / "CONTRACT.md"


def having(predicate) -> set[tuple[str, str]]:
    return {(m.family, m.name) for m in METRICS if predicate(m)}


def test_the_families_and_their_metrics():
    assert names("accuracy") == (
        "precision",
        "recall",
        "hit_rate",
        "mrr",
        "map",
        "ndcg",
        "arhr",
        "f1",
        "f_beta",
        "r_precision",
        "rbp",
        "auc",
    )
    assert names("beyond") == (
        "coverage",
        "gini",
        "entropy",
        "aplt",
        "aclt",
        "novelty",
        "popularity_bias",
        "personalization",
        "personalization_jaccard",
        "ild_category",
        "ild_embedding",
        "category_coverage",
        "serendipity",
        "miscalibration",
        "awrf",
        "exposure_gap",
        "intersection",
        "agreement_rbo",
        "unexpectedness",
    )
    assert names("stability") == ("stability_jaccard", "stability_rbo", "exposure_churn")
    assert names("rating") == ("mae", "mse", "rmse")
    assert names("session") == ("recall", "mrr", "coverage", "popularity_bias")


def test_each_property_written_out():
    assert having(lambda m: not m.larger_is_better) == {
        ("beyond", "gini"),
        ("beyond", "popularity_bias"),
        ("beyond", "miscalibration"),
        ("beyond", "exposure_gap"),
        ("beyond", "intersection"),
        ("beyond", "agreement_rbo"),
        ("stability", "exposure_churn"),
        ("rating", "mae"),
        ("rating", "mse"),
        ("rating", "rmse"),
        ("session", "popularity_bias"),
    }
    assert having(lambda m: m.binary) == {("accuracy", "hit_rate"), ("session", "recall")}
    assert having(lambda m: m.display == "percent") == {("session", "recall"), ("session", "mrr")}
    assert having(lambda m: m.bootstrapped) == {
        ("beyond", name)
        for name in ("coverage", "gini", "entropy", "popularity_bias", "personalization")
    }
    assert having(lambda m: m.peer_defined) == {
        ("accuracy", name) for name in ("precision", "recall", "ndcg", "map")
    }
    assert having(lambda m: not m.has_k) == {("rating", name) for name in names("rating")}
    assert having(lambda m: m.scope == "group") == {
        ("beyond", "coverage"),
        ("beyond", "gini"),
        ("beyond", "entropy"),
        ("beyond", "popularity_bias"),
        ("beyond", "personalization"),
        ("beyond", "personalization_jaccard"),
        ("beyond", "exposure_gap"),
        ("stability", "exposure_churn"),
        ("rating", "rmse"),
        ("session", "coverage"),
        ("session", "popularity_bias"),
    }
    assert {(m.family, m.name): m.bounds for m in METRICS if m.bounds != UNIT} == {
        ("beyond", "entropy"): NON_NEGATIVE,
        ("beyond", "aclt"): NON_NEGATIVE,
        ("beyond", "novelty"): NON_NEGATIVE,
        ("beyond", "miscalibration"): NON_NEGATIVE,
        ("beyond", "popularity_bias"): NON_NEGATIVE,
        ("beyond", "ild_embedding"): (0.0, 2.0),
        ("rating", "mae"): NON_NEGATIVE,
        ("rating", "mse"): NON_NEGATIVE,
        ("rating", "rmse"): NON_NEGATIVE,
        ("session", "popularity_bias"): NON_NEGATIVE,
    }


def test_properties_fit_together():
    for m in METRICS:
        assert m.formula and "\n" not in m.formula, m.name
        if m.binary:  # a mean of 0/1 values: a proportion of users (events)
            assert (m.scope, m.bounds) == ("user", UNIT), m.name
        if m.bootstrapped:  # the bootstrap is for statistics that are not means
            assert m.scope == "group", m.name


def test_a_metrics_row_names_one_definition_and_shared_names_agree():
    ranking = [m for m in METRICS if m.family != "session"]
    built_in = {n: m for n, m in definitions("full").items() if m.family != "custom"}
    assert len(built_in) == len(ranking)  # names unique across the ranking families
    assert len(definitions("session")) == len(family("session"))
    assert definitions("sampled_100") == definitions("full")
    assert definitions("session")["recall"].binary and not definitions("full")["recall"].binary
    for m in family("session"):
        other = definitions("full")[m.name]
        assert (m.bounds, m.larger_is_better, m.has_k) == (
            other.bounds,
            other.larger_is_better,
            other.has_k,
        )


def test_readers_take_their_metric_lists_from_the_registry():
    assert names("accuracy") + names("beyond") == config.ALL_METRICS
    assert get_args(config.AccuracyMetric) == names("accuracy")
    assert get_args(config.BeyondMetric) == names("beyond")
    assert get_args(config.SessionMetric) == names("session")
    assert BOOTSTRAPPED_METRICS == (
        "coverage",
        "gini",
        "entropy",
        "popularity_bias",
        "personalization",
    )
    assert set(COMPAT_METRICS) == {"precision", "recall", "ndcg", "map"}
    assert (SESSION_ACCURACY, SESSION_EXPOSURE) == (
        ("recall", "mrr"),
        ("coverage", "popularity_bias"),
    )


def test_config_errors_name_the_registry_metrics():
    raw = {
        "data": {"interactions": {"path": "interactions.parquet"}},
        "split": {"method": "global_temporal", "quantile": 0.8},
        "models": [{"name": "popularity", "kind": "popularity"}],
        "evaluation": {"metrics": ["ndcg", "rmse"], "tuning": {"metric": "gini"}},
    }
    with pytest.raises(ConfigError) as info:
        validate_config(raw)
    allowed = ", ".join(repr(name) for name in config.ALL_METRICS)
    assert f"evaluation.metrics.1: unknown value 'rmse'; use one of {allowed}" in str(info.value)
    *first, last = names("accuracy")
    accuracy = ", ".join(repr(name) for name in first)
    assert f"evaluation.tuning.metric: Input should be {accuracy} or {last!r}" in str(info.value)


def test_presentation_lists_name_registry_metrics():
    ranking = definitions("full")
    shown = (
        cli.HEADLINE_METRICS,
        render.HEADLINE,
        render.RATING_HEADLINE,
        render.HISTORY_METRICS,
        plots.CURVE_METRICS,
        plots.HISTORY_METRICS,
    )
    for metrics in shown:
        assert set(metrics) <= set(ranking), metrics
    # the report's headline at k, and the one of task rating_prediction (no cut-off)
    assert all(ranking[name].has_k for name in render.HEADLINE)
    assert not any(ranking[name].has_k for name in render.RATING_HEADLINE)


# --- the documents ----------------------------------------------------------------------


def table(text: str, heading: str) -> list[list[str]]:
    """The body rows of the first table after ``heading``, as cells (escaped pipes kept)."""
    section = text.split(heading, 1)[1]
    lines = section.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def quoted(cell: str) -> list[str]:
    return re.findall(r"`([a-z_0-9]+)`", cell)


def test_docs_metric_tables_agree_with_the_registry():
    text = EVALUATION.read_text(encoding="utf-8")
    accuracy = table(text, "### Accuracy metrics")
    assert [quoted(row[0])[0] for row in accuracy] == list(names("accuracy"))
    beyond = table(text, "### Beyond-accuracy metrics")
    scope = {"group": "group", "per user": "user"}
    assert {quoted(row[0])[0]: scope[row[2]] for row in beyond} == {
        m.name: m.scope for m in family("beyond")
    }
    guide = CONFIGURATION.read_text(encoding="utf-8")
    assert f"| `evaluation.metrics` | all {len(config.ALL_METRICS)} |" in guide


def test_docs_interval_table_agrees_with_the_registry():
    text = STATISTICS.read_text(encoding="utf-8")
    rows = table(text, "### Intervals, segments")
    assert "receval_spark/registry.py" in text
    named = set()
    for first, range_, method in rows:
        listed = [
            (SESSION_PROTOCOL if protocol else "full", name)
            for protocol, name in re.findall(r"(session )?`([a-z_0-9]+)`", first)
        ]
        if not listed:
            continue  # the row of differences
        low, high = re.match(r"\[(\d+), (\d+|∞)[\])]", range_).groups()
        bounds = (float(low), float(high.replace("∞", "inf")))
        for protocol, name in listed:
            metric = definitions(protocol)[name]
            assert metric.bounds == bounds, name
            assert metric.binary == method.startswith("**Wilson"), name
            assert metric.bootstrapped == method.startswith("bootstrap"), name
        named |= {name for _, name in listed} | set(quoted(method))
    # custom metrics other tests of this process defined are not the docs' business
    assert {n for n, m in definitions("full").items() if m.family != "custom"} <= named


def test_contract_metric_column_lists_the_registry():
    if not CONTRACT.exists():
        pytest.skip(f"{CONTRACT} is not here (the shared docs are outside the repository)")
    rows = table(CONTRACT.read_text(encoding="utf-8"), "`metrics/`")
    (metric,) = [row for row in rows if row[0] == "metric"]
    # the stability family (docs/datasets.md, output.lists) and the metrics the field (issue 49)
    # asked for after the contract (f_beta, r_precision, rbp) are the project's additions
    added = {"f_beta", "r_precision", "rbp", "aplt", "aclt", "miscalibration", "awrf"}
    added |= {"exposure_gap", "intersection", "agreement_rbo", "unexpectedness", "auc"}
    assert set(quoted(metric[2])) == {
        m.name for m in METRICS if m.family != "stability" and m.name not in added
    }


def test_a_custom_metric_joins_the_ranking_definitions_and_never_replaces_a_built_in():
    """define_custom: a custom metric is a ranking definition (not a session one) from then on
    in this process; a built-in name or another family is refused."""
    custom = Metric(name="basket_hit", family="custom", scope="user", formula="test")
    define_custom(custom)
    assert definitions("full")["basket_hit"] is custom
    assert "basket_hit" not in definitions("session")
    with pytest.raises(ValueError, match="only a custom metric with a new name"):
        define_custom(Metric(name="ndcg", family="custom", scope="user", formula="test"))
    with pytest.raises(ValueError, match="only a custom metric with a new name"):
        define_custom(Metric(name="x", family="accuracy", scope="user", formula="test"))
