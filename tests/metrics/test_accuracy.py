"""Per-user accuracy metrics, worked out by hand (DESIGN §5)."""

from __future__ import annotations

from math import log2

from chispa import assert_approx_df_equality

from receval_spark.metrics.accuracy import ACCURACY_METRICS, per_user_accuracy

RANKED = "user_id int, item_id int, rank int"
TRUTH = "user_id int, item_id int, grade double"
PER_USER = (
    "user_id int, k int, precision double, recall double, hit_rate double, mrr double, "
    "map double, ndcg double, arhr double, f1 double"
)


def assert_per_user(actual, spark, rows, schema=PER_USER):
    expected = spark.createDataFrame(rows, schema)
    assert_approx_df_equality(
        actual.select(*expected.columns),
        expected,
        1e-12,
        ignore_row_order=True,
        ignore_nullable=True,
    )


def test_output_columns_are_user_k_and_every_metric():
    assert ACCURACY_METRICS == (
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
    )


NEW = "user_id int, k int, f_beta double, r_precision double, rbp double"


def test_f_beta_r_precision_and_rbp_worked_out(spark):
    """User 1: list 101..105, Rel {101, 103, 199}: rel = [1, 0, 1, 0, 0], |Rel| = 3.
    User 5: list [501, 502, 503], Rel {502}: rel = [0, 1, 0], |Rel| = 1.

    k = 5, user 1: P = 2/5, R = 2/3; F2 = 5·P·R / (4P + R) = (4/3) / (34/15) = 10/17;
      RP = hits in the top min(5, 3) = 3 (ranks 1, 3) / 3 = 2/3;
      RBP = 0.2 · (0.8^0 + 0.8^2) = 0.2 · 1.64 = 0.328.
    k = 1, user 1: P = 1, R = 1/3; F2 = 5 · 1/3 / (4 + 1/3) = 5/13; RP = 1/1; RBP = 0.2.
    k = 3, user 5: P = 1/3, R = 1; F2 = 5 · 1/3 / (4/3 + 1) = 5/7;
      RP = hits in the top min(3, 1) = 1: none -> 0; RBP = 0.2 · 0.8 = 0.16.
    k = 1, user 5: all 0."""
    ranked = spark.createDataFrame(
        [(1, 100 + i, i) for i in range(1, 6)] + [(5, 501, 1), (5, 502, 2), (5, 503, 3)],
        RANKED,
    )
    truth = spark.createDataFrame(
        [(1, 101, 1.0), (1, 103, 1.0), (1, 199, 1.0), (5, 502, 1.0)], TRUTH
    )
    per_user = per_user_accuracy(ranked, truth, ks=[1, 3, 5])
    assert_per_user(
        per_user.filter("(user_id = 1 AND k IN (1, 5)) OR (user_id = 5 AND k IN (1, 3))"),
        spark,
        [
            (1, 1, 5 / 13, 1.0, 0.2),
            (1, 5, 10 / 17, 2 / 3, 0.328),
            (5, 1, 0.0, 0.0, 0.0),
            (5, 3, 5 / 7, 0.0, 0.16),
        ],
        schema=NEW,
    )
    # beta 1 is F1; persistence 0.5 halves each rank's weight: user 1 at k = 5,
    # RBP = 0.5 · (1 + 0.25) = 0.625
    other = per_user_accuracy(ranked, truth, ks=[5], f_beta=1.0, rbp_persistence=0.5)
    row = other.filter("user_id = 1").first()
    assert row is not None and row.f_beta == row.f1 == 0.5 and row.rbp == 0.625


def test_worked_example_relevance_pattern_10100_with_three_relevant_items(spark):
    # user 1: list 101..105, relevant {101, 103, 199}: rel = [1, 0, 1, 0, 0], |Rel| = 3
    ranked = spark.createDataFrame([(1, 100 + i, i) for i in range(1, 6)], RANKED)
    truth = spark.createDataFrame([(1, 101, 1.0), (1, 103, 1.0), (1, 199, 1.0)], TRUTH)

    per_user = per_user_accuracy(ranked, truth, ks=[5])

    # hits@5 = 2
    # P@5    = 2/5                                   = 0.4
    # R@5    = 2/3
    # HR@5   = 1
    # MRR@5  = 1/1 (first hit at rank 1)             = 1
    # AP@5   = 1/min(5, 3) * (P@1 + P@3) = (1 + 2/3) / 3 = 5/9
    # DCG@5  = 1/log2(2) + 1/log2(4) = 1 + 1/2       = 1.5
    # IDCG@5 = 1/log2(2) + 1/log2(3) + 1/log2(4)     = 1.5 + 0.6309297535714575
    # NDCG@5 = 1.5 / 2.1309297535714575              = 0.7039180890341347
    # ARHR@5 = (1/1 + 1/3) / 3                       = 4/9
    # F1@5   = 2 * 0.4 * 2/3 / (0.4 + 2/3) = (8/15) / (16/15) = 0.5
    assert_per_user(
        per_user,
        spark,
        [(1, 5, 0.4, 2 / 3, 1.0, 1.0, 5 / 9, 0.7039180890341347, 4 / 9, 0.5)],
    )


def test_a_user_without_recommendations_scores_0_and_is_kept(spark):
    # user 2 is relevant to item 201 but got no list; user 4 has a list but nothing relevant
    ranked = spark.createDataFrame([(1, 101, 1), (4, 401, 1), (4, 402, 2)], RANKED)
    truth = spark.createDataFrame([(1, 101, 1.0), (2, 201, 1.0), (2, 202, 1.0)], TRUTH)

    per_user = per_user_accuracy(ranked, truth, ks=[2])

    assert_per_user(
        per_user,
        spark,
        [
            # user 1: 1 hit at rank 1 of k = 2; |Rel| = 1
            # P = 1/2, R = 1, AP = 1/min(2, 1) * 1 = 1, NDCG = 1/1, ARHR = 1, F1 = 2/3
            (1, 2, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2 / 3),
            (2, 2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
            # user 4 is not evaluated: no row
        ],
    )


def test_k_larger_than_the_list_precision_still_divides_by_k(spark):
    # user 3: a list of 2, [301 relevant, 302 not]; Rel = {301, 303}; k = 5
    ranked = spark.createDataFrame([(3, 301, 1), (3, 302, 2)], RANKED)
    truth = spark.createDataFrame([(3, 301, 1.0), (3, 303, 1.0)], TRUTH)

    per_user = per_user_accuracy(ranked, truth, ks=[5])

    # P@5    = 1/5 (not 1/2)                   = 0.2
    # R@5    = 1/2
    # AP@5   = 1/min(5, 2) * P@1 = 1/2
    # NDCG@5 = 1 / (1 + 1/log2(3))             = 0.6131471927654584
    # ARHR@5 = (1/1) / 2                       = 0.5
    # F1@5   = 2 * 0.2 * 0.5 / 0.7             = 2/7
    assert_per_user(
        per_user,
        spark,
        [(3, 5, 0.2, 0.5, 1.0, 1.0, 0.5, 0.6131471927654584, 0.5, 2 / 7)],
    )


def test_graded_ndcg_with_grades_3_2_1(spark):
    # user 6: list [601 (grade 1), 602 (grade 3), 603 (not relevant)]; 604 (grade 2) missed
    ranked = spark.createDataFrame([(6, 601, 1), (6, 602, 2), (6, 603, 3)], RANKED)
    truth = spark.createDataFrame([(6, 601, 1.0), (6, 602, 3.0), (6, 604, 2.0)], TRUTH)

    per_user = per_user_accuracy(ranked, truth, ks=[2, 3])

    # gains 2^g - 1: grade 1 -> 1, grade 2 -> 3, grade 3 -> 7
    # DCG@2 = DCG@3 = 1/log2(2) + 7/log2(3)                      = 5.416508275000202
    # IDCG@2 = 7/log2(2) + 3/log2(3)                             = 8.892789260714372
    # IDCG@3 = 7/log2(2) + 3/log2(3) + 1/log2(4)                 = 9.392789260714372
    # NDCG@2 = 0.6090899172578711, NDCG@3 = 0.5766666455144387
    # other metrics stay binary: hits@2 = hits@3 = 2, |Rel| = 3
    # k=2: P = 1, R = 2/3, AP = (1 + 1)/min(2, 3) = 1, ARHR = (1 + 1/2)/3 = 0.5, F1 = 0.8
    # k=3: P = 2/3, R = 2/3, AP = (1 + 1)/3 = 2/3, ARHR = 0.5, F1 = 2/3
    assert_per_user(
        per_user,
        spark,
        [
            (6, 2, 1.0, 2 / 3, 1.0, 1.0, 1.0, 0.6090899172578711, 0.5, 0.8),
            (6, 3, 2 / 3, 2 / 3, 1.0, 1.0, 2 / 3, 0.5766666455144387, 0.5, 2 / 3),
        ],
    )


def test_several_k_in_one_call(spark):
    ranked = spark.createDataFrame(
        [(1, 100 + i, i) for i in range(1, 6)]  # user 1: rel = [1, 0, 1, 0, 0], |Rel| = 3
        + [(5, 501, 1), (5, 502, 2), (5, 503, 3)],  # user 5: rel = [0, 1, 0], |Rel| = 1
        RANKED,
    )
    truth = spark.createDataFrame(
        [(1, 101, 1.0), (1, 103, 1.0), (1, 199, 1.0), (5, 502, 1.0)], TRUTH
    )

    per_user = per_user_accuracy(ranked, truth, ks=[1, 3, 5])

    idcg3 = 1 + 1 / log2(3) + 0.5  # user 1, |Rel| = 3: IDCG@3 = IDCG@5
    assert_per_user(
        per_user,
        spark,
        [
            # user 1, k=1: hit at 1. P = 1, R = 1/3, AP = 1/min(1, 3) * 1 = 1, NDCG = 1/1,
            #   ARHR = 1/3, F1 = 2 * 1 * 1/3 / (4/3) = 0.5
            (1, 1, 1.0, 1 / 3, 1.0, 1.0, 1.0, 1.0, 1 / 3, 0.5),
            # user 1, k=3: hits at 1, 3. P = 2/3, R = 2/3, AP = (1 + 2/3)/3 = 5/9,
            #   NDCG = 1.5 / IDCG@3, ARHR = (1 + 1/3)/3 = 4/9, F1 = 2/3
            (1, 3, 2 / 3, 2 / 3, 1.0, 1.0, 5 / 9, 1.5 / idcg3, 4 / 9, 2 / 3),
            (1, 5, 0.4, 2 / 3, 1.0, 1.0, 5 / 9, 1.5 / idcg3, 4 / 9, 0.5),
            # user 5, k=1: the hit at rank 2 is outside the list: all 0
            (5, 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
            # user 5, k=3: P = 1/3, R = 1, MRR = 1/2, AP = 1/min(3, 1) * P@2 = 1/2,
            #   NDCG = (1/log2(3)) / 1, ARHR = 1/2, F1 = 2 * 1/3 * 1 / (4/3) = 0.5
            (5, 3, 1 / 3, 1.0, 1.0, 0.5, 0.5, 1 / log2(3), 0.5, 0.5),
            # user 5, k=5: P = 1/5, F1 = 2 * 0.2 * 1 / 1.2 = 1/3
            (5, 5, 0.2, 1.0, 1.0, 0.5, 0.5, 1 / log2(3), 0.5, 1 / 3),
        ],
    )
