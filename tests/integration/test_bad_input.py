"""Bad configuration or bad input: exit status 2, one message naming the problem, no report
written or changed (CONTRACT.md, "Exit status").

Every case runs the real command line in-process (``receval_spark.cli.main``) on the
session-scoped ``spark`` fixture, against an output folder that already holds a report for
an earlier date; the folder must be byte-for-byte identical afterwards.
"""

from __future__ import annotations

import datetime as dt
import math
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import kept_sql_conf

from receval_spark.cli import main
from receval_spark.config import validate_config
from receval_spark.pipeline import load_external, load_interactions

EARLIER_DATE = "2026-01-01"
RUN_DATE = "2026-01-02"
BASE = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
DAY = 86_400
N_USERS, PER_USER, N_ITEMS = 8, 6, 12
FIRST_TS = int(BASE.timestamp()) + 60  # user 1, day 0
LAST_TS = int(BASE.timestamp()) + (PER_USER - 1) * DAY + N_USERS * 60

# ---------------------------------------------------------------------------------------------
# tiny inputs


def interactions_frame() -> pd.DataFrame:
    """8 users x 6 interactions on 6 days; each user's items are distinct; ratings 5 or 3.

    With the cut-off at the start of day 4, every user has 4 train and 2 test rows, exactly one
    of which (rating 5) is relevant at threshold 4 and unseen in train.
    """
    rows = []
    for user in range(1, N_USERS + 1):
        for j in range(PER_USER):
            rows.append(
                {
                    "user_id": user,
                    "item_id": 100 + (3 * user + j) % N_ITEMS,
                    "timestamp": int(BASE.timestamp()) + j * DAY + user * 60,
                    "rating": 5.0 if (user + j) % 2 == 0 else 3.0,
                }
            )
    return pd.DataFrame(rows)


def recommendations_frame() -> pd.DataFrame:
    """An external model: 5 items per user with distinct finite scores."""
    rows = [
        {"user_id": user, "item_id": 100 + (user + j) % N_ITEMS, "score": float(10 - j)}
        for user in range(1, N_USERS + 1)
        for j in range(5)
    ]
    return pd.DataFrame(rows)


def write_parquet(df: pd.DataFrame, path: Path, schema: pa.Schema | None = None) -> Path:
    pq.write_table(pa.Table.from_pandas(df, schema=schema, preserve_index=False), path)
    return path


def base_config(tmp: Path, interactions: Path, output: Path) -> dict[str, Any]:
    """A valid config on the tiny log; each test breaks exactly one thing."""
    return {
        "run": {"name": "bad-input-test", "date": RUN_DATE},
        "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": 2}},
        "output": {"path": str(output), "per_user": True},
        "data": {
            "interactions": {
                "path": str(interactions),
                "format": "parquet",
                "columns": {
                    "user": "user_id",
                    "item": "item_id",
                    "timestamp": "timestamp",
                    "rating": "rating",
                },
            }
        },
        "split": {"method": "global_temporal", "cutoff": (BASE + dt.timedelta(days=4)).isoformat()},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": [2, 5],
            "filter_seen": True,
            "baseline": "popularity",
            "min_users": 0,
            "segments": ["warm", "cold"],
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "oracle", "kind": "oracle"},
        ],
    }


def write_config(config: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def external_model(path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "name": "ext",
        "kind": "external",
        "path": str(path),
        "format": "parquet",
        "columns": {"user": "user_id", "item": "item_id", "score": "score"},
        **extra,
    }


# ---------------------------------------------------------------------------------------------
# output snapshots


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder (None) under ``root``, hidden ones included."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def run_dates(root: Path) -> set[str]:
    return {p.name for p in root.glob("*/run_date=*")}


@pytest.fixture(autouse=True)
def _restore_sql_conf(spark):
    with kept_sql_conf(spark):
        yield


@pytest.fixture(scope="module")
def earlier_report(spark, tmp_path_factory) -> Path:
    """A report committed by a valid run for EARLIER_DATE (the pre-existing state)."""
    tmp = tmp_path_factory.mktemp("earlier")
    interactions = write_parquet(interactions_frame(), tmp / "interactions.parquet")
    output = tmp / "reports"
    config = base_config(tmp, interactions, output)
    config["run"]["date"] = EARLIER_DATE
    with kept_sql_conf(spark):
        status = main(["evaluate", "--config", str(write_config(config, tmp / "ok.yaml"))])
    assert status == 0, "the valid base config must succeed, or no bad-input case means anything"
    assert run_dates(output) == {f"run_date={EARLIER_DATE}"}
    return output


class Case:
    """One bad run: inputs under tmp_path, an output folder holding the earlier report."""

    def __init__(self, tmp_path: Path, earlier_report: Path) -> None:
        self.tmp = tmp_path
        self.interactions = write_parquet(interactions_frame(), tmp_path / "interactions.parquet")
        self.output = tmp_path / "reports"
        shutil.copytree(earlier_report, self.output)
        self.config = base_config(tmp_path, self.interactions, self.output)
        self.before = snapshot(self.output)

    def run(self, capsys: pytest.CaptureFixture[str], *overrides: str) -> tuple[int, str]:
        path = write_config(self.config, self.tmp / "job.yaml")
        argv = ["evaluate", "--config", str(path)]
        for override in overrides:
            argv += ["--set", override]
        capsys.readouterr()
        status = main(argv)
        err = capsys.readouterr().err
        return status, err

    def assert_rejected(self, status: int, err: str, *names: str) -> None:
        """Exit 2, a message naming each of ``names``, and the output folder untouched."""
        assert status == 2, f"expected exit status 2 (bad input), got {status}; stderr:\n{err}"
        assert err.startswith("error: "), err
        assert "Traceback" not in err, err
        for name in names:
            assert name in err, f"the message should name {name!r}:\n{err}"
        assert run_dates(self.output) == {f"run_date={EARLIER_DATE}"}
        assert snapshot(self.output) == self.before, "the output folder changed"


@pytest.fixture
def case(tmp_path: Path, earlier_report: Path) -> Case:
    return Case(tmp_path, earlier_report)


# ---------------------------------------------------------------------------------------------
# interactions


def test_misnamed_interaction_column(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    case.config["data"]["interactions"]["columns"]["user"] = "userId"
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "'userId'", "data.interactions.columns.user")


def test_missing_interaction_column(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    write_parquet(interactions_frame().drop(columns=["rating"]), case.interactions)
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "'rating'", "data.interactions.columns.rating")


def test_null_user_ids(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    df = interactions_frame()
    df["user_id"] = df["user_id"].astype("Int64")
    df.loc[[3, 17], "user_id"] = pd.NA
    write_parquet(df, case.interactions)
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "data.interactions", "user_id", "null", "2 rows")


def test_nan_rating(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    df = interactions_frame()
    df.loc[5, "rating"] = math.nan
    write_parquet(df, case.interactions)
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "data.interactions", "rating", "NaN", "1 rows")


# ---------------------------------------------------------------------------------------------
# external model


@pytest.fixture
def ext_case(case: Case) -> Case:
    case.config["models"].append(external_model(case.tmp / "recs.parquet"))
    return case


def test_external_model_is_valid(ext_case: Case, spark) -> None:
    """Control for the external-model cases: the unbroken recommendations pass validation."""
    write_parquet(recommendations_frame(), ext_case.tmp / "recs.parquet")
    config = validate_config(ext_case.config)
    interactions = load_interactions(spark, config.data.interactions)
    try:
        recs = load_external(spark, config.models[-1], interactions=interactions)
        assert recs.count() == len(recommendations_frame())
    finally:
        interactions.unpersist()


def test_duplicate_recommendation_rows(ext_case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    recs = recommendations_frame()
    duplicate = recs[(recs.user_id == 1) & (recs.item_id == 102)].assign(score=0.5)
    write_parquet(pd.concat([recs, duplicate]), ext_case.tmp / "recs.parquet")
    status, err = ext_case.run(capsys)
    ext_case.assert_rejected(status, err, "models.ext", "same (user, item)", "(1, 102)")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_score(ext_case: Case, capsys: pytest.CaptureFixture[str], bad: float) -> None:
    recs = recommendations_frame()
    recs.loc[7, "score"] = bad
    write_parquet(recs, ext_case.tmp / "recs.parquet")
    status, err = ext_case.run(capsys)
    ext_case.assert_rejected(status, err, "models.ext", "score", "NaN or infinite", "1 rows")


# ---------------------------------------------------------------------------------------------
# split and relevance


def test_cutoff_before_the_data_empty_train(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = case.run(capsys, "split.cutoff=2019-06-01T00:00:00Z")
    case.assert_rejected(status, err, "split.cutoff", "outside the data")


def test_cutoff_after_the_data_empty_test(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = case.run(capsys, "split.cutoff=2021-01-01T00:00:00Z")
    case.assert_rejected(status, err, "split.cutoff", "outside the data")


def test_cutoff_at_the_first_timestamp_empty_train(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """train is timestamp < cutoff: a cut-off equal to the first timestamp leaves it empty."""
    status, err = case.run(capsys, f"split.cutoff={FIRST_TS}")
    case.assert_rejected(status, err, "split.cutoff")


def test_threshold_so_high_no_user_is_relevant(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = case.run(capsys, "relevance.threshold=6.0")
    case.assert_rejected(status, err, "relevance", "relevance.threshold")


# ---------------------------------------------------------------------------------------------
# configuration


def test_unknown_config_key(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    case.config["evaluation"]["filter_seeen"] = True
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "evaluation.filter_seeen", "unknown key")


def test_unknown_top_level_section(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = case.run(capsys, "evalution.k=[5]")
    case.assert_rejected(status, err, "evalution", "unknown key")


def test_wrong_type_for_k(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = case.run(capsys, "evaluation.k=ten")
    case.assert_rejected(status, err, "evaluation.k")


def test_wrong_type_for_k_element(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    case.config["evaluation"]["k"] = [5, "ten"]
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "evaluation.k.1")


def test_unknown_model_kind(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    case.config["models"].append({"name": "deep", "kind": "neural"})
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "models.2", "'neural'", "kind")


def test_unknown_segment_name(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    case.config["evaluation"]["segments"] = ["warm", "lukewarm"]
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "evaluation.segments.1", "'warm'")


def test_unknown_metric_name(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    case.config["evaluation"]["metrics"] = ["ndcg", "ndgc"]
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "evaluation.metrics.1", "'ndcg'")


def test_unknown_relevance_kind(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = case.run(capsys, "relevance.kind=binary")
    case.assert_rejected(status, err, "relevance.kind")


# ---------------------------------------------------------------------------------------------
# input paths and formats


def test_missing_input_path(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    missing = case.tmp / "nowhere" / "ratings.parquet"
    case.config["data"]["interactions"]["path"] = str(missing)
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "data.interactions.path", str(missing), "does not exist")


def test_missing_external_model_path(ext_case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = ext_case.run(capsys)  # recs.parquet was never written
    ext_case.assert_rejected(status, err, "models.2.path", "ext", "does not exist")


def test_unreadable_input_not_parquet(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    """A path that exists but is not a Parquet file: a bad input, not a crash."""
    case.interactions.write_bytes(b"user_id,item_id\n1,2\n")
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "data.interactions", str(case.interactions))


def test_empty_input_folder(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    folder = case.tmp / "empty"
    folder.mkdir()
    case.config["data"]["interactions"]["path"] = str(folder)
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "data.interactions")


def test_csv_column_names_count_mismatch(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    csv = case.tmp / "u.data"
    interactions_frame().to_csv(csv, sep="\t", header=False, index=False)
    case.config["data"]["interactions"].update(
        path=str(csv),
        format="csv",
        header=False,
        delimiter="\t",
        column_names=["user_id", "item_id", "timestamp"],
    )
    status, err = case.run(capsys)
    case.assert_rejected(
        status, err, "data.interactions.column_names", "3 names given", "4 columns"
    )


def test_csv_wrong_delimiter(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    """A tab-separated file read with the default ',' is one column: the names count is off."""
    csv = case.tmp / "u.data"
    interactions_frame().to_csv(csv, sep="\t", header=False, index=False)
    case.config["data"]["interactions"].update(
        path=str(csv),
        format="csv",
        header=False,
        column_names=["user_id", "item_id", "timestamp", "rating"],
    )
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "data.interactions.column_names", "1 columns", "','")


def test_csv_ragged_row(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    """A CSV row with fewer fields than the header is bad input, not a crash."""
    csv = case.tmp / "ratings.csv"
    text = interactions_frame().to_csv(index=False)
    lines = text.splitlines()
    lines[4] = ",".join(lines[4].split(",")[:2])  # data row 4 keeps only user and item
    csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    case.config["data"]["interactions"].update(path=str(csv), format="csv")
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "data.interactions", str(csv))


def test_unparseable_timestamps(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    """ISO-8601 text timestamps are accepted; one that is not a time is a bad input."""
    df = interactions_frame()
    df["timestamp"] = [
        dt.datetime.fromtimestamp(ts, tz=dt.UTC).isoformat() for ts in df["timestamp"]
    ]
    df.loc[2, "timestamp"] = "yesterday"
    write_parquet(df, case.interactions)
    status, err = case.run(capsys)
    case.assert_rejected(status, err, "data.interactions", "timestamp", "unparseable", "1 rows")
