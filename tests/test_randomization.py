"""Fisher's paired randomization (sign-flip) test (receval_spark.metrics.randomization): a
hand-worked exact example, the grouped exact enumeration against the enumeration over users of
tests/reference.py, the Monte Carlo path against the exact distribution and the reference's
per-user simulation, seeding, and the job writing ``p_randomization``."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import reference
from helpers import Nights, crafted_job_config, crafted_log, sql_conf
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from receval_spark import read_reports
from receval_spark.config import RandomizationTest, validate_config
from receval_spark.errors import ConfigError
from receval_spark.metrics.compare import comparison_rows, family_adjusted, randomization_pvalues
from receval_spark.metrics.randomization import (
    EXACT_POINTS,
    exact_pvalue,
    sign_flip_pvalue,
)

KEYS = ["model", "baseline", "segment", "metric", "k"]
DIFFERENCES = (
    "model string, baseline string, segment string, metric string, k int, user_id int, diff double"
)


def grouped(d: list[float] | np.ndarray) -> tuple[list[float], list[int], list[int]]:
    """(magnitudes, counts, positives) of differences, as Spark groups them."""
    counts, positives = (
        Counter(abs(float(x)) for x in d),
        Counter(abs(float(x)) for x in d if x > 0),
    )
    magnitudes = sorted(counts)
    return magnitudes, [counts[v] for v in magnitudes], [positives[v] for v in magnitudes]


def p_of(d, *, permutations: int = 10_000, seed: int = 0) -> float:
    return sign_flip_pvalue(*grouped(d), permutations=permutations, seed=seed)


def differences_frame(spark, comparisons: dict[tuple[str, int | None], list[float]]):
    rows = [
        ("m", "b", "all", metric, k, u, float(v))
        for (metric, k), d in comparisons.items()
        for u, v in enumerate(d)
    ]
    return spark.createDataFrame(rows, DIFFERENCES)


def connect_comparisons() -> dict[tuple[str, int | None], list[float]]:
    """The hand-worked example (exact) and 40 seeded normal differences (drawn), compared over
    Spark Connect in tests/test_connect.py."""
    drawn = np.random.default_rng(4).normal(0.1, 1, 40)
    return {("ndcg", 10): [1.0, 2.0, -1.0, 3.0], ("coverage", None): [float(x) for x in drawn]}


# --- exact --------------------------------------------------------------------------------


def test_a_hand_worked_exact_p_value(spark):
    """d = (1, 2, -1, 3): T_obs = 5. Flipping signs, T = ±1 ±2 ±1 ±3 (the two users with
    |d| = 1 give ±1 each). Writing a + c for the two 1s (2, 0, 0, -2) and b + e for ±2 ±3
    (5, 1, -1, -5), the 16 sums are
        a + c =  2:  7,  3,  1, -3
        a + c =  0:  5,  1, -1, -5   (twice)
        a + c = -2:  3, -1, -3, -7
    and |T| >= 5 for 7, 5, 5, -5, -5, -7: 6 of 16, p = 3/8. Grouped: |d| = 1 (2 users, 1
    positive), 2 (1, 1), 3 (1, 1): 3 · 2 · 2 = 12 points, exact."""
    d = [1.0, 2.0, -1.0, 3.0]
    assert grouped(d) == ([1.0, 2.0, 3.0], [2, 1, 1], [1, 1, 1])

    assert reference.sign_flip_exact(d) == Fraction(3, 8)
    assert sign_flip_pvalue([1.0, 2.0, 3.0], [2, 1, 1], [1, 1, 1], permutations=1, seed=0) == 0.375
    row = randomization_pvalues(
        differences_frame(spark, {("ndcg", 10): d}), by=KEYS, test=RandomizationTest(1, 0)
    ).collect()[0]
    assert (row.model, row.metric, row.k, row.p_randomization) == ("m", "ndcg", 10, 0.375)


def test_zero_differences_carry_no_sign():
    """Zeros are left out (p of (0, 0, 1, 2, -1, 3) is that of (1, 2, -1, 3)); all zeros: p = 1;
    one user moving: both signs are as extreme, p = 1; every one of 6 users up: p = 2/64."""
    assert p_of([0.0, 0.0, 1.0, 2.0, -1.0, 3.0]) == 0.375
    assert p_of([0.0, 0.0, 0.0]) == 1.0
    assert sign_flip_pvalue([], [], [], permutations=10, seed=0) == 1.0
    assert p_of([0.0, 0.5]) == 1.0
    assert p_of([1.0] * 6) == 2 / 64


def test_sums_equal_but_for_rounding_tie():
    """0.1 + 0.2 - 0.3 is 5.6e-17 in doubles, not 0: within the tolerance every sign
    assignment is as extreme (p = 1, as for an exact 0), and of (0.1, 0.2, 0.3) both
    assignments with |T| = 0.6 count, whichever way rounding went (2/8 = 0.25)."""
    assert 0.1 + 0.2 - 0.3 != 0
    assert p_of([0.1, 0.2, -0.3]) == 1.0
    assert p_of([0.1, 0.2, 0.3]) == 0.25
    assert float(reference.sign_flip_exact([0.1, 0.2, 0.3])) == 0.25


DYADIC = st.lists(st.integers(-16, 16).map(lambda j: j / 8), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(DYADIC)
def test_grouped_exact_equals_the_enumeration_over_users(d):
    """Up to 12 users (2^12 sign assignments, exact): the grouped enumeration's p equals the
    reference's count over every assignment, exactly (multiples of 1/8: sums exact)."""
    assert p_of(d) == float(reference.sign_flip_exact(d))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-1, 1, allow_nan=False, allow_subnormal=False), min_size=1, max_size=40),
    st.integers(0, 2**63),
)
def test_p_is_in_0_1_never_0_and_symmetric_in_the_sign_of_every_difference(d, seed):
    """p in (0, 1]; negating every difference (the model and the baseline swapped) gives the
    same p, exact or drawn: the draws depend on the magnitudes and the seed alone."""
    p = p_of(d, permutations=200, seed=seed)
    assert 0 < p <= 1
    assert p_of([-x for x in d], permutations=200, seed=seed) == p
    if not any(d):
        assert p == 1.0


def test_the_exact_rule_counts_points_not_users():
    """The enumeration runs while prod (c_v + 1) <= max(N, 2^16): 100,000 hit-rate-like
    differences of ±1 are one magnitude (100,001 points: exact with N = 200,000, with p the
    two-sided binomial sign test's), 17 distinct magnitudes are 2^17 points (drawn)."""
    plus, n = 50_400, 100_000
    exact = sign_flip_pvalue([1.0], [n], [plus], permutations=200_000, seed=0)
    assert exact == pytest.approx(stats.binomtest(plus, n).pvalue, rel=1e-9)
    seventeen = np.arange(1, 18) / 17
    drawn = [
        sign_flip_pvalue(seventeen, [1] * 17, [1] * 12 + [0] * 5, permutations=1000, seed=s)
        for s in (1, 2)
    ]
    assert EXACT_POINTS < 2**17 and drawn[0] != drawn[1]  # drawn: the seed matters
    assert all(math.isclose(p * 1001, round(p * 1001)) for p in drawn)  # (1 + hits) / (N + 1)


# --- Monte Carlo --------------------------------------------------------------------------


def within(p: float, exact: float, permutations: int, sigmas: float = 4.0) -> bool:
    """|p - exact| within ``sigmas`` binomial standard errors of a proportion over
    ``permutations`` draws (plus the 1 / (N + 1) of the +1 rule)."""
    error = math.sqrt(exact * (1 - exact) / permutations)
    return abs(p - exact) <= sigmas * error + 1 / (permutations + 1)


@pytest.mark.parametrize(
    "name, magnitudes, counts, positives",
    [
        # 20 distinct |d| (2^20 points: drawn as one random bit per user)
        ("continuous", np.linspace(0.05, 1.0, 20), [1] * 20, [1] * 12 + [0] * 8),
        # two magnitudes of 300 users (one binomial count each) and one of 10 (bits)
        ("discrete", [0.25, 0.5, 1.0], [10, 300, 300], [7, 162, 160]),
    ],
)
def test_monte_carlo_agrees_with_the_exact_distribution_and_the_reference(
    name, magnitudes, counts, positives
):
    """Past the exact limit, p from 50,000 draws lies within 4 standard errors of the exact
    p (the enumeration, run directly), and so does the reference's plain per-user
    simulation: grouped binomial counts and per-user bits draw the same distribution."""
    v, c, p = (np.asarray(x) for x in (magnitudes, counts, positives))
    threshold = abs(float(v @ (2 * p - c))) - 1e-10 * float(v @ c)
    exact = exact_pvalue(v.astype(float), c.astype(np.int64), threshold)
    assert 0.005 < exact < 0.5, exact  # a p-value the draws can resolve

    permutations = 50_000
    ours = sign_flip_pvalue(v, c, p, permutations=permutations, seed=11)
    d = np.concatenate(
        [
            np.repeat(m, n) * np.where(np.arange(n) < k, 1, -1)
            for m, n, k in zip(v, c, p, strict=True)
        ]
    )
    theirs = reference.sign_flip_monte_carlo(d, permutations, np.random.default_rng(12))
    assert ours != exact  # drawn, not enumerated
    assert within(ours, exact, permutations), (ours, exact)
    assert within(theirs, exact, permutations), (theirs, exact)


def test_monte_carlo_against_the_reference_where_no_exact_p_is_at_hand():
    """60 normal differences (no enumeration): ours and the reference's simulation, 100,000
    draws each, agree within 4 standard errors of their difference."""
    d = np.random.default_rng(3).normal(0.15, 1.0, 60)
    permutations = 100_000
    ours = p_of(d, permutations=permutations, seed=5)
    theirs = reference.sign_flip_monte_carlo(d, permutations, np.random.default_rng(6))
    error = math.sqrt(2 * theirs * (1 - theirs) / permutations)
    assert 0.01 < theirs < 0.9 and abs(ours - theirs) <= 4 * error, (ours, theirs)


# --- seeds and partitioning ---------------------------------------------------------------


def test_the_seed_fixes_p_whatever_the_partitioning_and_row_order(spark):
    """Three drawn comparisons (40 users each): the same p-values on a re-run, with 1 or 7
    shuffle partitions and with the rows reversed; another seed gives other p-values."""
    rng = np.random.default_rng(4)
    comparisons = {("ndcg", 10): rng.normal(0.1, 1, 40), ("recall", 5): rng.normal(0, 1, 40)}
    comparisons[("coverage", None)] = np.round(rng.normal(0.2, 1, 40), 1)  # repeated |d|
    frame = differences_frame(spark, comparisons)
    reversed_rows = spark.createDataFrame(list(reversed(frame.collect())), frame.schema)

    def pvalues(differences, seed: int = 7) -> dict:
        test = RandomizationTest(permutations=2000, seed=seed)
        rows = randomization_pvalues(differences, by=KEYS, test=test).collect()
        return {(r.metric, r.k): r.p_randomization for r in rows}

    with sql_conf(spark, {"spark.sql.shuffle.partitions": "1"}):
        first = pvalues(frame)
        assert pvalues(frame) == first
    with sql_conf(spark, {"spark.sql.shuffle.partitions": "7"}):
        assert pvalues(reversed_rows) == first
    assert set(first) == set(comparisons)
    drawn = [first[("ndcg", 10)], first[("recall", 5)]]
    assert all(math.isclose(p * 2001, round(p * 2001)) for p in drawn)  # (1 + hits) / 2001
    assert pvalues(frame, seed=8) != first


def test_comparison_rows_carry_the_p_value_and_its_holm_adjustment(spark):
    """comparison_rows with a test: p_randomization beside the t-test's on the same rows (one
    collect); family_adjusted adds its Holm adjustment; without a test both stay None."""
    differences = differences_frame(
        spark, {("ndcg", 10): [1.0, 2.0, -1.0, 3.0], ("recall", 10): [1.0] * 6}
    )

    rows = family_adjusted(comparison_rows(differences, randomization=RandomizationTest(10, 1)))
    by_metric = {r.metric: r for r in rows}
    assert by_metric["ndcg"].p_randomization == 0.375
    assert by_metric["recall"].p_randomization == 2 / 64
    # Holm over 2: 2 · 1/32, then max(that, 0.375)
    assert by_metric["recall"].p_randomization_holm == 2 / 32
    assert by_metric["ndcg"].p_randomization_holm == 0.375
    assert by_metric["ndcg"].p_ttest is not None

    plain = family_adjusted(comparison_rows(differences))
    assert all(r.p_randomization is None and r.p_randomization_holm is None for r in plain)
    assert [r.p_ttest for r in plain] == [r.p_ttest for r in rows]


# --- configuration and the job ------------------------------------------------------------


def test_the_configuration_turns_the_test_on_and_bounds_the_permutations(tmp_path):
    raw = crafted_job_config(
        tmp_path, crafted_log(reconsumed=False), [{"name": "popularity", "kind": "popularity"}]
    )
    assert validate_config(raw).evaluation.randomization() is None
    raw["evaluation"] |= {"randomization_test": True, "seed": 3}
    assert validate_config(raw).evaluation.randomization() == RandomizationTest(10_000, 3)
    raw["evaluation"]["randomization_permutations"] = 0
    with pytest.raises(ConfigError, match="randomization_permutations"):
        validate_config(raw)


def test_the_job_writes_p_randomization_only_when_asked(spark, tmp_path, capsys):
    """The crafted nightly job (6 users; ext hits every user's relevant item, popularity
    none: ndcg@2 differences of 1 on all 6). Night one without the test: the column is null.
    Night two with it, ext losing users 1 and 2's hits: against popularity d = (0, 0, 1, 1, 1,
    1), p = 2/16 exactly; against ext's own previous night d = (-1, -1, 0, 0, 0, 0), p = 2/4;
    the CLI line and the report's sentence show it."""
    good = pd.DataFrame(
        [(u, 100 + u, 1.0) for u in range(1, 7)], columns=["user_id", "item_id", "score"]
    )
    worse = good.assign(item_id=[200, 200, 103, 104, 105, 106])
    nights = Nights.crafted(spark, tmp_path)
    nights.raw["output"]["per_user"] = True
    assert nights.run("2026-11-01", good, "--quiet") == 0
    nights.raw["evaluation"]["randomization_test"] = True
    capsys.readouterr()
    assert nights.run("2026-11-02", worse) == 0
    out = capsys.readouterr().out

    rows = read_reports(spark, str(tmp_path / "reports"), dataset="comparisons").toPandas()
    first, second = rows[rows.run_date == "2026-11-01"], rows[rows.run_date == "2026-11-02"]
    assert len(first) and first.p_randomization.isna().all()
    assert first.p_randomization_holm.isna().all()
    assert second.p_randomization.notna().all() and second.p_randomization_holm.notna().all()
    ndcg = second[(second.metric == "ndcg") & (second.segment == "all")].set_index("baseline")
    assert ndcg.loc["popularity", "p_randomization"] == 2 / 16
    assert ndcg.loc["ext@2026-11-01", "p_randomization"] == 2 / 4
    assert "p_randomization 0.12" in out
    report = next((tmp_path / "reports" / "report").glob("2026-11-02*/report.md")).read_text()
    assert "randomization test p = 0.12" in report


def test_the_exact_example_by_brute_force_over_sign_patterns():
    """The grouped enumeration against itertools over the 2^n patterns of a few differences
    with repeated magnitudes and both signs (a check of exact_pvalue's weights)."""
    d = [0.5, -0.5, 0.5, 1.0, -1.5, 0.25, 0.25]
    observed = abs(sum(d))
    patterns = list(itertools.product((1, -1), repeat=len(d)))
    count = sum(
        abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed - 1e-12
        for signs in patterns
    )
    assert p_of(d) == count / 2 ** len(d)
