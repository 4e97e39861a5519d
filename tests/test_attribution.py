"""Change attribution (docs/nightly.md#change-attribution): the shift-share decomposition of a
per-user metric's change since the previous night into the user mix and the change within
segments, on crafted rows written out by hand, then through two committed nights of the job
(the ``attribution`` dataset, the summary JSON and the report's sentence)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from helpers import ReportRoot
from storage import storages

import receval_spark as rv
from receval_spark.attribution import Segmentation, shift_share, user_segmentations
from receval_spark.report.render import load_report, render
from receval_spark.results import MetricRow
from receval_spark.run import run_summary

WARM_COLD = user_segmentations(["warm", "cold"], None)

# on file:// only, for the suite's time: the commit this test goes through runs on viewfs:// and
# s3a:// in tests/test_io.py (docs/datasets.md, "On object storage"), a history read back
# through Hadoop's filesystem API in tests/test_sequential.py (viewfs://) and the nights of the
# job in tests/test_alerts.py (s3a://)
STORAGES = storages("file")


def rows(cells: dict[str, tuple[float, int]], *, metric: str = "ndcg") -> list[MetricRow]:
    return [
        MetricRow(model="m", segment=s, metric=metric, k=10, value=v, n_users=n)
        for s, (v, n) in cells.items()
    ]


def parts(result) -> dict[str, tuple[float, float]]:
    return {r.segment: (r.mix, r.within) for r in result}


def test_a_two_segment_change_splits_into_mix_and_within_parts_that_add_up() -> None:
    """Previous night: 3 warm users at 1/2, 1 cold at 1/4 (all: 7/16). Tonight: 2 warm at 3/4,
    2 cold at 1/4 (all: 1/2). Shares 3/4, 1/4 -> 1/2, 1/2.
    warm: mix (1/2 - 3/4)(1/2 + 3/4)/2 = -5/32, within (3/4 - 1/2)(3/4 + 1/2)/2 = 5/32;
    cold: mix (1/2 - 1/4)(1/4 + 1/4)/2 = 1/16, within 0. Total: mix -3/32, within 5/32,
    their sum 1/16 = 1/2 - 7/16. (Every number is dyadic: the doubles are exact.)"""
    previous = rows({"all": (7 / 16, 4), "warm": (1 / 2, 3), "cold": (1 / 4, 1)})
    tonight = rows({"all": (1 / 2, 4), "warm": (3 / 4, 2), "cold": (1 / 4, 2)})
    result = shift_share(tonight, previous, WARM_COLD, previous_date="2026-11-01")
    assert parts(result) == {
        "warm": (-5 / 32, 5 / 32),
        "cold": (1 / 16, 0.0),
        "all": (-3 / 32, 5 / 32),
    }
    total = next(r for r in result if r.segment == "all")
    assert (total.value_previous, total.value) == (7 / 16, 1 / 2)
    assert Fraction(total.mix) + Fraction(total.within) == Fraction(1, 2) - Fraction(7, 16)
    warm = next(r for r in result if r.segment == "warm")
    assert (warm.share_previous, warm.share, warm.segmentation) == (3 / 4, 1 / 2, "warm/cold")
    assert {r.previous_date for r in result} == {"2026-11-01"}


def test_simpsons_paradox_every_segment_better_the_total_flat() -> None:
    """Warm users improve from 2/3 to 1, cold stay at 0; their share halves (3/4 -> 1/2): the
    total stays at 1/2, a within gain of 5/24 hidden by a mix loss of 5/24."""
    previous = rows({"all": (1 / 2, 4), "warm": (2 / 3, 3), "cold": (0.0, 1)})
    tonight = rows({"all": (1 / 2, 6), "warm": (1.0, 3), "cold": (0.0, 3)})
    total = next(
        r
        for r in shift_share(tonight, previous, WARM_COLD, previous_date="d")
        if r.segment == "all"
    )
    assert total.mix == pytest.approx(-5 / 24, abs=1e-15)
    assert total.within == pytest.approx(5 / 24, abs=1e-15)


def test_a_segment_of_one_night_only_is_all_mix() -> None:
    """No cold user last night; tonight 1 of 4 users is cold at 0: warm's share drops 1 -> 3/4
    at an unchanged 1/2 (mix -1/8), the cold segment enters with 1/4 * 0 (mix 0)."""
    previous = rows({"all": (1 / 2, 4), "warm": (1 / 2, 4)})
    tonight = rows({"all": (3 / 8, 4), "warm": (1 / 2, 3), "cold": (0.0, 1)})
    result = shift_share(tonight, previous, WARM_COLD, previous_date="d")
    assert parts(result) == {"warm": (-1 / 8, 0.0), "cold": (0.0, 0.0), "all": (-1 / 8, 0.0)}
    cold = next(r for r in result if r.segment == "cold")
    assert (cold.value_previous, cold.share_previous) == (None, 0.0)


def test_only_partitions_of_per_user_metrics_are_attributed() -> None:
    """A user in two rows of a segment table (the segments' users exceed all), a group
    statistic (coverage), a stability metric and activity without cold: no rows."""
    named = [Segmentation("market", frozenset(), prefix="market=")]
    overlapping = {"all": (0.5, 4), "market=a": (0.5, 3), "market=b": (0.5, 2)}
    assert shift_share(rows(overlapping), rows(overlapping), named, previous_date="d") == []
    group = rows({"all": (0.5, 4), "warm": (0.5, 3), "cold": (0.5, 1)}, metric="coverage")
    assert shift_share(group, group, WARM_COLD, previous_date="d") == []
    stable = rows({"all": (0.5, 4), "warm": (0.5, 3), "cold": (0.5, 1)}, metric="stability_rbo")
    assert shift_share(stable, stable, WARM_COLD, previous_date="d") == []
    activity = user_segmentations(["activity"], None)
    quartiles = rows({"all": (0.5, 4), "activity=q1": (0.5, 2), "activity=q4": (0.5, 1)})
    assert shift_share(quartiles, quartiles, activity, previous_date="d") == []


def test_the_run_segmentations_come_from_its_segments_and_its_user_segment_table() -> None:
    names = [s.name for s in user_segmentations(["warm", "cold", "activity"], "market")]
    assert names == ["warm/cold", "activity", "market"]
    assert user_segmentations(["warm"], None) == []


# Two nights through the job: the given split, one external model. Users 1-4 have train rows;
# night one tests users 1-3 (warm) and 5 (cold), night two users 1-3 and 5-7 (cold). The model
# hits users 1 and 2 on night one and 1-3 on night two (NDCG@3 1 on a hit, 0 on a miss).
TRAIN = [(u, 10 * u + j) for u in range(1, 5) for j in range(3)]
CONFIG = {
    "evaluation": {
        "k": [3],
        "min_users": 0,
        "baseline": None,
        "segments": ["warm", "cold"],
        "metrics": ["ndcg", "recall", "coverage"],
        "bootstrap_samples": 0,
    },
    "models": [],
}


def _night(spark, output: str, date: str, test_users: list[int], hits: set[int]):
    test = [(u, 100 + u) for u in test_users]
    recs = [(u, 100 + u if u in hits else 200, 1.0) for u in test_users]
    config = {**CONFIG, "run": {"name": "attribution", "date": date}, "output": {"path": output}}
    return rv.evaluate(
        spark,
        config,
        train=spark.createDataFrame(TRAIN, "user_id int, item_id int"),
        test=spark.createDataFrame(test, "user_id int, item_id int"),
        recommendations={
            "ext": spark.createDataFrame(recs, "user_id int, item_id int, score double")
        },
    )


@pytest.mark.nightly  # several committed nights: make test-all and CI
@pytest.mark.parametrize("report_root", STORAGES, indirect=True)
def test_two_nights_commit_the_attribution_and_the_report_says_why(
    spark, report_root: ReportRoot
) -> None:
    """Night two against night one: warm 2/3 -> 1, cold 0 -> 0, warm share 3/4 -> 1/2: NDCG@3
    stays at 1/2 (mix -5/24, within +5/24). Re-running night two commits the same rows."""
    output = report_root.uri
    first = rv.write_reports(_night(spark, output, "2026-11-01", [1, 2, 3, 5], {1, 2}))
    assert "attribution" not in first.datasets  # nothing to compare with yet
    second = _night(spark, output, "2026-11-02", [1, 2, 3, 5, 6, 7], {1, 2, 3})
    commit = rv.write_reports(second)
    assert "attribution" in commit.datasets
    committed = rv.read_reports(spark, output, dataset="attribution", dates="2026-11-02")
    ndcg = committed.filter("metric = 'ndcg'").toPandas().set_index("segment")
    assert set(ndcg.index) == {"all", "warm", "cold"}
    assert ndcg.loc["all", "mix"] == pytest.approx(-5 / 24, abs=1e-12)
    assert ndcg.loc["all", "within"] == pytest.approx(5 / 24, abs=1e-12)
    assert (ndcg.loc["warm", "share_previous"], ndcg.loc["warm", "share"]) == (0.75, 0.5)
    assert set(committed.toPandas().metric) == {"ndcg", "recall"}  # coverage: a group statistic

    summary = run_summary(second, commit)["attribution"]
    assert [(r["metric"], r["segmentation"]) for r in summary] == [
        ("ndcg", "warm/cold"),
        ("recall", "warm/cold"),
    ]
    assert summary[0]["change"] == pytest.approx(0.0, abs=1e-12)
    assert summary[0]["mix"] + summary[0]["within"] == pytest.approx(0.0, abs=1e-12)

    html, markdown = render(load_report(spark, output))
    sentence = (
        "ext: NDCG@3 +0.0000 vs 2026-11-01: -0.2083 from the user mix (cold 25.0% -> 50.0% of "
        "the evaluated users, scoring 0.0000 against 0.5000 overall), +0.2083 within segments "
        "(warm/cold)."
    )
    assert sentence in markdown and sentence.replace(">", "&gt;") in html

    def committed_rows() -> list[tuple]:
        frame = rv.read_reports(spark, output, dataset="attribution", dates="2026-11-02")
        return sorted(map(tuple, frame.drop("run_id").collect()), key=repr)

    before = committed_rows()
    rv.write_reports(_night(spark, output, "2026-11-02", [1, 2, 3, 5, 6, 7], {1, 2, 3}))
    assert committed_rows() == before


def test_the_report_says_how_much_each_models_lists_moved() -> None:
    import pandas as pd

    from receval_spark.report.nightly import stability_sentences

    metrics = pd.DataFrame(
        [
            ("ext", "all", "stability_jaccard", 10, 0.875, 4),
            ("ext", "idle", "stability_jaccard", 10, 0.5, 3),
            ("ext", "all", "exposure_churn", 10, 0.0625, 4),
            ("ext", "all", "ndcg", 10, 0.3, 4),
            ("pop", "all", "ndcg", 10, 0.2, 4),
        ],
        columns=["model", "segment", "metric", "k", "value", "n_users"],
    )
    assert stability_sentences(metrics, 10) == [
        "ext's top-10 lists against the previous night's: Jaccard 0.875 over the 4 users listed "
        "both nights, 0.500 over the 3 idle ones; exposure churn 0.062."
    ]
    assert stability_sentences(metrics, 5) == []
