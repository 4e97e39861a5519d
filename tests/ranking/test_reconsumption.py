"""Seen items leave Rel(u) under the seen filter, and the data-quality facts of a run
(docs/evaluation.md#seen-items, #data-quality-facts), on a crafted log whose every count is
written out below."""

from __future__ import annotations

import json

import pandas as pd
import yaml
from helpers import DAY, T0, crafted_job_config

from receval_spark.api import evaluate
from receval_spark.cli import main


def reconsumption_log() -> pd.DataFrame:
    """Train (days 0-2, rating 3, never relevant at threshold 4): users 1-4 rate items 10u+0..2;
    user 4's first row appears twice (one exact duplicate row). Test (days 5-6):

    - user 1: only item 10, seen in train (rated 3, now 5): no relevant item left, not evaluated;
    - user 2: item 20 (seen) and item 102 (unseen), both 5: |Rel(2)| = 1 under the filter;
    - user 3: item 103 rated 5 on day 5 and 2 on day 6 (relevant: the maximum grade counts);
    - user 4: item 104; users 5, 6: cold, items 105, 106.
    """
    t0 = int(T0.timestamp())
    rows = [(u, 10 * u + j, t0 + j * DAY, 3.0) for u in range(1, 5) for j in range(3)]
    rows.append((4, 40, t0, 3.0))  # exact duplicate of user 4's first row
    rows += [
        (1, 10, t0 + 5 * DAY, 5.0),
        (2, 20, t0 + 5 * DAY, 5.0),
        (2, 102, t0 + 5 * DAY, 5.0),
        (3, 103, t0 + 5 * DAY, 5.0),
        (3, 103, t0 + 6 * DAY, 2.0),
        (4, 104, t0 + 5 * DAY, 5.0),
        (5, 105, t0 + 6 * DAY, 5.0),
        (6, 106, t0 + 6 * DAY, 5.0),
    ]
    return pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp", "rating"])


MODELS = [{"name": "popularity", "kind": "popularity"}, {"name": "oracle", "kind": "oracle"}]


def job(tmp_path, *, filter_seen: bool = True) -> dict:
    raw = crafted_job_config(tmp_path, reconsumption_log(), MODELS)
    raw["evaluation"] |= {"k": [1, 2], "filter_seen": filter_seen}
    return raw


def facts(outcome) -> dict[tuple, tuple[int, int]]:
    return {
        (f["fact"], f["model"], f["k"]): (f["count"], f["total"])
        for f in outcome.split["data_quality"]
    }


def values(outcome, model: str, metric: str) -> dict[int, tuple[float, int]]:
    return {
        r.k: (r.value, r.n_users)
        for r in outcome.metrics
        if (r.model, r.metric, r.segment, r.protocol) == (model, metric, "all", "full")
    }


def test_seen_relevant_items_leave_rel_and_a_user_left_without_any_is_not_evaluated(
    spark, tmp_path
):
    outcome = evaluate(spark, job(tmp_path)).outcome

    assert outcome.n_users_evaluated == 5  # users 2-6; user 1's only relevant item was seen
    assert values(outcome, "oracle", "ndcg") == {1: (1.0, 5), 2: (1.0, 5)}
    # |Rel(2)| = 1: the oracle's first item is all of it, so recall@1 is 1 for every user
    assert values(outcome, "oracle", "recall") == {1: (1.0, 5), 2: (1.0, 5)}
    checks = {c.name: c for c in outcome.checks}
    assert all(c.passed for c in outcome.checks), outcome.checks
    assert checks["heldout_not_in_train"].detail == (
        "2 of 7 relevant test (user, item) pairs also occur in train and left Rel(u) (seen "
        "items are filtered); 1 users lost all their relevant items and are not evaluated"
    )
    found = facts(outcome)
    assert found[("reconsumed_pairs", None, None)] == (2, 7)
    assert found[("users_all_relevant_seen", None, None)] == (1, 6)
    assert found[("cold_users", None, None)] == (2, 5)
    assert any(
        w.startswith(
            "data quality: 28.57% of relevant test pairs (2 of 7): relevant test pairs "
            "were already consumed in train and left Rel(u)"
        )
        for w in outcome.warnings
    ), outcome.warnings


def test_without_the_seen_filter_seen_relevant_items_stay(spark, tmp_path):
    outcome = evaluate(spark, job(tmp_path, filter_seen=False)).outcome

    assert outcome.n_users_evaluated == 6
    # |Rel(2)| = 2 (items 20 and 102): the oracle's first item finds half of it
    assert values(outcome, "oracle", "recall")[1] == ((4 + 0.5 + 1) / 6, 6)
    assert values(outcome, "oracle", "ndcg") == {1: (1.0, 6), 2: (1.0, 6)}
    assert "heldout_not_in_train" not in {c.name for c in outcome.checks}
    found = facts(outcome)
    assert found[("reconsumed_pairs", None, None)] == (2, 7)  # counted, not removed
    assert found[("cold_users", None, None)] == (2, 6)


def test_each_data_quality_count_on_the_crafted_log(spark, tmp_path):
    outcome = evaluate(spark, job(tmp_path)).outcome

    assert facts(outcome) == {
        # 21 rows; user 4's first row twice
        ("duplicate_rows", None, None): (1, 21),
        # 17 distinct pairs (12 in train, 5 more in test); (1, 10), (2, 20), (3, 103), (4, 40)
        # have two rows each; the first three have a relevant and an irrelevant row (3 then 5
        # stars; 5 then 2 stars)
        ("duplicate_pairs", None, None): (4, 17),
        ("conflicting_pairs", None, None): (3, 17),
        ("reconsumed_pairs", None, None): (2, 7),
        ("users_all_relevant_seen", None, None): (1, 6),
        ("cold_users", None, None): (2, 5),
        # popularity: every train item has one user, so every list is one tie; each user has
        # at least 9 unseen train items
        ("no_list", "popularity", None): (0, 5),
        ("score_ties_at_k", "popularity", 1): (5, 5),
        ("score_ties_at_k", "popularity", 2): (5, 5),
        ("short_lists", "popularity", 1): (0, 5),
        ("short_lists", "popularity", 2): (0, 5),
        ("outside_catalogue", "popularity", None): (0, 10),
        # oracle: each user's one relevant item, never a train item
        ("no_list", "oracle", None): (0, 5),
        ("score_ties_at_k", "oracle", 1): (0, 5),
        ("score_ties_at_k", "oracle", 2): (0, 5),
        ("short_lists", "oracle", 1): (0, 5),
        ("short_lists", "oracle", 2): (5, 5),
        ("outside_catalogue", "oracle", None): (5, 5),
    }
    warnings = [w for w in outcome.warnings if w.startswith("data quality:")]
    assert warnings == [
        "data quality: 4.76% of interactions (1 of 21): interaction rows are exact duplicates "
        "of another row; evaluation.data_quality.duplicate_rows = 0.01",
        "data quality: 23.53% of user-item pairs (4 of 17): user-item pairs occur more than "
        "once in the log; evaluation.data_quality.duplicate_pairs = 0.1",
        "data quality: 17.65% of user-item pairs (3 of 17): user-item pairs have rows on both "
        "sides of the relevance threshold (the test keeps the highest grade); "
        "evaluation.data_quality.conflicting_pairs = 0.0",
        "data quality: 28.57% of relevant test pairs (2 of 7): relevant test pairs were "
        "already consumed in train and left Rel(u) (evaluation.filter_seen); "
        "evaluation.data_quality.reconsumed_pairs = 0.01",
        "data quality: popularity: 100.00% of evaluated users (5 of 5): evaluated users have "
        "a score tie between their k-th and (k+1)-th candidates (the item id decides the "
        "cut) (k = 2); evaluation.data_quality.score_ties_at_k = 0.1",
    ]


def test_the_cli_run_exits_0_and_its_json_and_report_carry_the_facts(spark, tmp_path, capsys):
    raw = job(tmp_path)
    raw["evaluation"]["data_quality"] = {"cold_users": 0.3}
    config_path = tmp_path / "job.yaml"
    config_path.write_text(yaml.safe_dump(raw), encoding="utf-8")

    status = main(["evaluate", "--config", str(config_path), "--json", "--quiet"])

    out, err = capsys.readouterr()
    assert status == 0, err
    summary = json.loads(out)
    assert summary["run_status"] == "succeeded"
    reconsumed = [f for f in summary["data_quality"] if f["fact"] == "reconsumed_pairs"]
    assert reconsumed == [
        {
            "fact": "reconsumed_pairs",
            "count": 2,
            "total": 7,
            "of": "relevant test pairs",
            "model": None,
            "k": None,
            "share": 2 / 7,
        }
    ]
    assert (
        "warning: data quality: 40.00% of evaluated users (2 of 5): evaluated users are cold" in err
    )
    report = next((tmp_path / "reports" / "report").glob("*/report.md")).read_text()
    assert "## Data quality" in report
    assert "| relevant test pairs already consumed in train | 2 of 7 | 28.57% |" in report
