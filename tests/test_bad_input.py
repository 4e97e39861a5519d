"""Bad configuration or bad input: exit status 2, one line on stderr naming the problem and the
fix, no stack trace, no report written or changed (CONTRACT.md, "Exit status").

``CASES`` is the table: each case breaks one thing in a valid job (a config key, a ``--set``,
an input file) and names what the message must contain. Every case runs the real command line
in-process (``receval_spark.cli.main``) against an output folder that already holds committed
reports for the run date and for an earlier date; the folder must be byte-for-byte identical
afterwards. Cases marked ``spark=False`` must fail before a Spark session is built (their
session builder fails the test); the others run on the session-scoped ``spark`` fixture.
In-process, Spark's own (JVM) log lines do not reach capsys; ``test_no_stack_trace_on_stderr``
runs one case as a user does, in a subprocess, and reads all of stderr (one line), and so does
one bad session job.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from helpers import TINY_SPARK_CONF, diginetica_clicks, explain, job_env, kept_sql_conf, run

from receval_spark.cache import releasing_cache
from receval_spark.cli import main
from receval_spark.config import validate_config
from receval_spark.sources import read_ranking_inputs

RUN_DATE = "2026-01-02"
EARLIER_DATE = "2026-01-01"
BASE = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
DAY = 86_400
N_USERS, PER_USER, N_ITEMS = 8, 6, 12
FIRST_TS = int(BASE.timestamp()) + 60  # user 1, day 0

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


def base_config(interactions: Path, output: Path) -> dict[str, Any]:
    """A valid, light config on the tiny log (a few metrics, no bootstrap, no ALS); each case
    breaks exactly one thing."""
    return {
        "run": {"name": "bad-input-test", "date": RUN_DATE},
        "spark": {"master": "local[2]", "conf": dict(TINY_SPARK_CONF)},
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
            "metrics": ["precision", "recall", "ndcg", "coverage"],
            "bootstrap_samples": 0,
            "embeddings": {"source": "none"},
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "oracle", "kind": "oracle"},
        ],
    }


def write_config(config: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def external_model(path: Path) -> dict[str, Any]:
    return {
        "name": "ext",
        "kind": "external",
        "path": str(path),
        "format": "parquet",
        "columns": {"user": "user_id", "item": "item_id", "score": "score"},
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


COMMITTED = {f"run_date={RUN_DATE}", f"run_date={EARLIER_DATE}"}


@pytest.fixture(scope="module")
def committed_reports(spark, tmp_path_factory) -> Path:
    """Reports committed by a valid run for RUN_DATE, then copied to EARLIER_DATE (every
    dataset's partition and the human report): the state a bad re-run must leave alone."""
    tmp = tmp_path_factory.mktemp("committed")
    interactions = write_parquet(interactions_frame(), tmp / "interactions.parquet")
    output = tmp / "reports"
    config = base_config(interactions, output)
    with kept_sql_conf(spark):
        status = main(["evaluate", "--config", str(write_config(config, tmp / "ok.yaml"))])
    assert status == 0, "the valid base config must succeed, or no bad-input case means anything"
    for partition in output.glob(f"*/run_date={RUN_DATE}"):
        shutil.copytree(partition, partition.with_name(f"run_date={EARLIER_DATE}"))
    shutil.copytree(output / "report" / RUN_DATE, output / "report" / EARLIER_DATE)
    assert run_dates(output) == COMMITTED
    return output


class Case:
    """One bad run: inputs under tmp_path, an output folder holding the committed reports."""

    def __init__(self, tmp_path: Path, committed: Path) -> None:
        self.tmp = tmp_path
        self.interactions = write_parquet(interactions_frame(), tmp_path / "interactions.parquet")
        self.output = tmp_path / "reports"
        shutil.copytree(committed, self.output)
        self.config: dict[str, Any] | None = base_config(self.interactions, self.output)
        self.config_path = tmp_path / "job.yaml"
        self.config_text: str | None = None  # written instead of the config when set
        self.before = snapshot(self.output)

    def use_interactions(self, df: pd.DataFrame) -> None:
        write_parquet(df, self.interactions)

    def add_external_model(self, recs: pd.DataFrame | None) -> Path:
        """Append the external model ``ext``; its recommendations file holds ``recs``."""
        path = self.tmp / "recs.parquet"
        if recs is not None:
            write_parquet(recs, path)
        self.config["models"].append(external_model(path))
        return path

    def use_csv(self, text: str | bytes, **options: Any) -> Path:
        csv = self.tmp / "ratings.csv"
        if isinstance(text, bytes):
            csv.write_bytes(text)
        else:
            csv.write_text(text, encoding="utf-8")
        self.config["data"]["interactions"].update(path=str(csv), format="csv", **options)
        return csv

    def run(self, capsys: pytest.CaptureFixture[str], overrides: list[str]) -> tuple[int, str]:
        if self.config_text is not None:
            self.config_path.write_text(self.config_text, encoding="utf-8")
        elif self.config is not None:
            write_config(self.config, self.config_path)
        argv = ["evaluate", "--config", str(self.config_path)]
        for override in overrides:
            argv += ["--set", override]
        capsys.readouterr()
        status = main(argv)
        return status, capsys.readouterr().err

    def assert_rejected(self, status: int, err: str, names: tuple[str, ...]) -> None:
        """Exit 2; one line ``error: ...`` naming each of ``names``; the output untouched."""
        assert status == 2, f"expected exit status 2 (bad input), got {status}; stderr:\n{err}"
        assert err.startswith("error: ") and err.endswith("\n"), err
        assert len(err.splitlines()) == 1, f"stderr must be one line:\n{err}"
        for name in names:
            assert name in err, f"the message should name {name!r}:\n{err}"
        assert run_dates(self.output) == COMMITTED
        assert snapshot(self.output) == self.before, "the output folder changed"


# ---------------------------------------------------------------------------------------------
# the table


@dataclass(frozen=True)
class Bad:
    """``breaks`` makes the valid job bad and returns its ``--set`` overrides; the one-line
    message must contain every string of ``names`` (what is wrong, where, and the fix)."""

    id: str
    breaks: Callable[[Case], list[str] | None]
    names: tuple[str, ...]
    spark: bool = True


def sets(*overrides: str) -> Callable[[Case], list[str]]:
    return lambda case: list(overrides)


def edits(change: Callable[[dict[str, Any]], Any]) -> Callable[[Case], None]:
    """Break the config file itself."""
    return lambda case: change(case.config) and None


def interactions_with(change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Case], None]:
    return lambda case: case.use_interactions(change(interactions_frame()))


def recommendations_with(change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Case], None]:
    return lambda case: case.add_external_model(change(recommendations_frame())) and None


def nulls(column: str, rows: list[int]) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def change(df: pd.DataFrame) -> pd.DataFrame:
        df[column] = df[column].astype("Int64")
        df.loc[rows, column] = pd.NA
        return df

    return change


def setting(column: str, row: int, value: Any, dtype: str | None = None):
    def change(df: pd.DataFrame) -> pd.DataFrame:
        if dtype is not None:
            df[column] = df[column].astype(dtype)
        df.loc[row, column] = value
        return df

    return change


def string_ids(column: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    return lambda df: df.assign(**{column: "u" + df[column].astype(str)})


def duplicated_recommendation(df: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([df, df[(df.user_id == 1) & (df.item_id == 102)].assign(score=0.5)])


def iso_timestamps_with_one_bad(df: pd.DataFrame) -> pd.DataFrame:
    """ISO-8601 text timestamps are accepted; one that is not a time is a bad input."""
    df["timestamp"] = [dt.datetime.fromtimestamp(t, tz=dt.UTC).isoformat() for t in df.timestamp]
    df.loc[2, "timestamp"] = "yesterday"
    return df


def ranked_recommendations(*bad: tuple[int, int]) -> Callable[[Case], None]:
    """The external model as ranks 1..5 (no score column), with (row, rank) changes ``bad``."""

    def change(case: Case) -> None:
        recs = recommendations_frame().drop(columns=["score"])
        recs["rank"] = recs.groupby("user_id").cumcount() + 1
        for row, rank in bad:
            recs.loc[row, "rank"] = rank
        case.add_external_model(recs)
        case.config["models"][-1]["columns"].update(score=None, rank="rank")

    return change


def integer_categories(case: Case) -> None:
    """Item metadata whose category column holds integer ids (neither text nor arrays)."""
    items = pd.DataFrame({"item_id": range(100, 100 + N_ITEMS), "genre": range(N_ITEMS)})
    path = write_parquet(items, case.tmp / "items.parquet")
    columns = {"item": "item_id", "category": "genre"}
    case.config["data"]["items"] = {"path": str(path), "columns": columns}


def numeric_recommendations_for_string_item_ids(case: Case) -> None:
    case.use_interactions(string_ids("item_id")(interactions_frame()))
    case.add_external_model(recommendations_frame())


def given_pair_with_string_test_ids(case: Case) -> None:
    """The log's first four days as data.train, the rest as data.test with string user ids."""
    log = interactions_frame()
    cut = FIRST_TS - 60 + 4 * DAY
    train = write_parquet(log[log.timestamp < cut], case.tmp / "train.parquet")
    test = log[log.timestamp >= cut].assign(user_id=lambda d: d.user_id.astype(str))
    test_path = write_parquet(test, case.tmp / "test.parquet")
    assert case.config is not None
    data = case.config["data"]
    source = data.pop("interactions")
    data["train"], data["test"] = {**source, "path": str(train)}, {**source, "path": str(test_path)}
    case.config["split"] = {"method": "given"}


def missing_config_file(case: Case) -> None:
    case.config, case.config_path = None, case.tmp / "nowhere.yaml"


def config_text(text: str) -> Callable[[Case], None]:
    def change(case: Case) -> None:
        case.config_text = text

    return change


def locked_input_folder(case: Case) -> None:
    folder = case.tmp / "locked"
    folder.mkdir()
    write_parquet(interactions_frame(), folder / "part-0.parquet")
    folder.chmod(0)
    case.config["data"]["interactions"]["path"] = str(folder)


def output_is_a_file(case: Case) -> None:
    target = case.tmp / "reports.txt"
    target.write_text("not a folder\n", encoding="utf-8")
    case.config["output"]["path"] = str(target)


def tab_separated(case: Case, names: list[str], **options: Any) -> None:
    case.use_csv(
        interactions_frame().to_csv(sep="\t", header=False, index=False),
        header=False,
        column_names=names,
        **options,
    )


def ragged_csv(case: Case) -> None:
    """A CSV row with fewer fields than the header."""
    lines = interactions_frame().to_csv(index=False).splitlines()
    lines[4] = ",".join(lines[4].split(",")[:2])  # data row 4 keeps only user and item
    case.use_csv("\n".join(lines) + "\n")


def empty_folder(case: Case) -> None:
    (case.tmp / "empty").mkdir()
    case.config["data"]["interactions"]["path"] = str(case.tmp / "empty")


def zero_byte_parquet(case: Case) -> None:
    case.interactions.write_bytes(b"")


INTERACTIONS_FIX = "clean or drop those rows before evaluating"
MODEL_FIX = "fix the model's output before evaluating it"
READ_FIX = "Check data.interactions.path, .format, .options, .where and the CSV options"

CASES = [
    # --- the configuration (no Spark) ----------------------------------------------------------
    Bad(
        "config_file_missing",
        missing_config_file,
        ("--config", "nowhere.yaml", "cannot read"),
        spark=False,
    ),
    Bad(
        "config_not_yaml",
        config_text("data: [\n"),
        ("--config", "job.yaml", "is not valid YAML"),
        spark=False,
    ),
    Bad(
        "config_impossible_date",
        config_text("run: {date: 2026-13-45}\n"),
        ("--config", "is not valid YAML", "month must be in 1..12"),
        spark=False,
    ),
    Bad(
        "unknown_key_in_file",
        edits(lambda c: c["evaluation"].update(filter_seeen=True)),
        ("evaluation.filter_seeen", "unknown key", "check its spelling"),
        spark=False,
    ),
    Bad(
        "unknown_section",
        sets("evalution.k=[5]"),
        ("evalution", "unknown key", "check its spelling"),
        spark=False,
    ),
    Bad(
        "set_misspelt_key",
        sets("evaluation.kk=3"),
        ("evaluation.kk", "unknown key", "check its spelling"),
        spark=False,
    ),
    Bad(
        "set_unknown_dotted_key",
        sets("nosuch.key=1"),
        ("nosuch", "unknown key", "check its spelling"),
        spark=False,
    ),
    Bad(
        "set_without_value",
        sets("evaluation.k"),
        ("--set 'evaluation.k'", "expected KEY=VALUE", "e.g. --set evaluation.k=[5,10]"),
        spark=False,
    ),
    Bad(
        "set_list_position_out_of_range",
        sets("models.7.name=x"),
        ("--set models.7", "'7' is not a position in a list of 2"),
        spark=False,
    ),
    Bad(
        "set_impossible_date",
        sets("run.date=2026-13-45"),
        ("--set run.date", "not valid YAML", "month must be in 1..12"),
        spark=False,
    ),
    Bad(
        "k_not_a_number",
        sets("evaluation.k=ten"),
        ("evaluation.k", "should be a valid list"),
        spark=False,
    ),
    Bad(
        "k_element_not_a_number",
        edits(lambda c: c["evaluation"].update(k=[5, "ten"])),
        ("evaluation.k.1", "should be a valid integer"),
        spark=False,
    ),
    Bad(
        "k_zero",
        sets("evaluation.k=[0]"),
        ("evaluation.k.0", "should be greater than or equal to 1"),
        spark=False,
    ),
    Bad(
        "k_negative",
        sets("evaluation.k=[5, -1]"),
        ("evaluation.k.1", "should be greater than or equal to 1"),
        spark=False,
    ),
    Bad(
        "k_huge",
        sets("evaluation.k=[100000]"),
        ("evaluation.k.0", "should be less than or equal to 1000"),
        spark=False,
    ),
    Bad(
        "alert_on_a_k_not_computed",
        sets("evaluation.alerts=[{metric: ndcg, k: 7}]"),
        ("evaluation.alerts.0", "k 7 is not one of evaluation.k"),
        spark=False,
    ),
    Bad(
        "alert_on_a_metric_not_computed",
        sets("evaluation.metrics=[ndcg]", "evaluation.alerts=[{metric: recall}]"),
        ("evaluation.alerts.0", "metric 'recall' is not computed by this run"),
        spark=False,
    ),
    Bad(
        "alert_on_a_segment_not_computed",
        sets("evaluation.alerts=[{metric: coverage, k: 5, segment: items=head}]"),
        ("evaluation.alerts.0", "segment 'items=head' is not computed for coverage"),
        spark=False,
    ),
    Bad(
        "custom_metric_module_missing",
        sets("evaluation.custom_metrics=[{name: rev, path: 'no_such_module:rev'}]"),
        ("evaluation.custom_metrics.0", "module 'no_such_module' cannot be imported"),
        spark=False,
    ),
    Bad(
        "custom_metric_function_missing",
        sets("evaluation.custom_metrics=[{name: rev, path: 'custom_metrics:nothing'}]"),
        ("evaluation.custom_metrics.0", "has no function 'nothing'"),
        spark=False,
    ),
    Bad(
        "custom_metric_path_without_function",
        sets("evaluation.custom_metrics=[{name: rev, path: custom_metrics}]"),
        ("evaluation.custom_metrics.0", "write it as package.module:function"),
        spark=False,
    ),
    Bad(
        "custom_metric_wrong_signature",
        sets("evaluation.custom_metrics=[{name: two, path: 'custom_metrics:two_arguments'}]"),
        ("evaluation.custom_metrics.0", "takes (lists, other)", "must take one argument"),
        spark=False,
    ),
    Bad(
        "custom_metric_named_like_a_built_in",
        sets("evaluation.custom_metrics=[{name: ndcg, path: 'custom_metrics:revenue_hit'}]"),
        ("evaluation.custom_metrics.0", "'ndcg' is the name of a built-in metric"),
        spark=False,
    ),
    Bad(
        "custom_metric_not_registered",
        sets("evaluation.custom_metrics=[{name: nowhere}]"),
        ("evaluation.custom_metrics.0", "'nowhere' is not registered", "register_metric"),
        spark=False,
    ),
    Bad(
        "custom_metric_repeated",
        sets(
            "evaluation.custom_metrics=[{name: r, path: 'custom_metrics:revenue_hit'}, "
            "{name: r, path: 'custom_metrics:mean_rank'}]"
        ),
        ("evaluation.custom_metrics.0", "'r' is repeated"),
        spark=False,
    ),
    Bad(
        "custom_metric_empty_bounds",
        sets(
            "evaluation.custom_metrics=[{name: r, path: 'custom_metrics:revenue_hit', "
            "bounds: [1, 0]}]"
        ),
        ("evaluation.custom_metrics.0", "bounds [1.0, 0.0] of 'r' are empty"),
        spark=False,
    ),
    Bad(
        "model_attribute_named_like_an_item_attribute",
        edits(
            lambda c: (
                c["data"].update(
                    items={"path": "items.parquet", "columns": {"attributes": ["price"]}}
                ),
                c["models"].append(
                    {
                        "name": "ext",
                        "kind": "external",
                        "path": "recs.parquet",
                        "columns": {"attributes": ["price"]},
                    }
                ),
            )
        ),
        ("models.ext.columns.attributes", "['price'] also name item attributes"),
        spark=False,
    ),
    Bad(
        "item_attribute_named_like_a_table_column",
        edits(
            lambda c: c["data"].update(
                items={"path": "items.parquet", "columns": {"attributes": ["relevant"]}}
            )
        ),
        ("data.items.columns.attributes", "clash: ['relevant']"),
        spark=False,
    ),
    Bad(
        "alert_on_a_custom_metric_not_configured",
        sets("evaluation.alerts=[{metric: revenue_hit, k: 5}]"),
        ("evaluation.alerts.0", "metric 'revenue_hit' is not computed by this run"),
        spark=False,
    ),
    Bad(
        "user_segments_column_missing",
        edits(
            lambda c: c["evaluation"].update(
                user_segments={
                    "path": c["data"]["interactions"]["path"],
                    "columns": {"user": "user_id", "segment": "tier"},
                }
            )
        ),
        ("evaluation.user_segments", "column 'tier' (mapped as segment) is missing"),
    ),
    Bad(
        "alert_against_a_window_without_a_test",
        sets("evaluation.alerts=[{metric: ndcg, k: 5, against: window}]"),
        ("evaluation.alerts.0.against", "set significance"),
        spark=False,
    ),
    Bad(
        "sequential_alert_without_a_start",
        sets("evaluation.alerts=[{metric: ndcg, k: 5, significance: sequential}]"),
        ("evaluation.alerts.0.start", "a sequential rule needs its first night"),
        spark=False,
    ),
    Bad(
        "sequential_alert_misspelt",
        sets("evaluation.alerts=[{metric: ndcg, k: 5, significance: sequentail}]"),
        ("evaluation.alerts.0.significance", "sequential"),
        spark=False,
    ),
    Bad(
        "quantile_not_a_number",
        sets("split.quantile=abc"),
        ("split.quantile", "should be a valid number"),
        spark=False,
    ),
    Bad(
        "cutoff_and_quantile",
        sets("split.quantile=0.8"),
        ("split", "give exactly one of split.cutoff or split.quantile"),
        spark=False,
    ),
    Bad(
        "unknown_split_method",
        sets("split.method=random"),
        ("split.method", "'random'", "use one of", "'global_temporal'"),
        spark=False,
    ),
    Bad(
        "unknown_metric",
        edits(lambda c: c["evaluation"].update(metrics=["ndcg", "ndgc"])),
        ("evaluation.metrics.1", "'ndgc'", "use one of", "'ndcg'"),
        spark=False,
    ),
    Bad(
        "unknown_segment",
        edits(lambda c: c["evaluation"].update(segments=["warm", "lukewarm"])),
        ("evaluation.segments.1", "'warm'"),
        spark=False,
    ),
    Bad(
        "unknown_model_kind",
        edits(lambda c: c["models"].append({"name": "deep", "kind": "neural"})),
        ("models.2.kind", "'neural'", "use one of", "'external'"),
        spark=False,
    ),
    Bad(
        "unknown_relevance_kind",
        sets("relevance.kind=binary"),
        ("relevance.kind", "'implicit', 'threshold' or 'graded'"),
        spark=False,
    ),
    Bad(
        "graded_without_threshold_or_grades",
        sets("relevance.kind=graded", "relevance.threshold=null"),
        ("relevance", "relevance.kind=graded needs relevance.threshold", "relevance.grades"),
        spark=False,
    ),
    Bad(
        "remote_not_a_connect_url",
        sets("spark.remote=http://127.0.0.1:15002"),
        ("spark.remote", "is not a Spark Connect URL", "sc://HOST:PORT"),
        spark=False,
    ),
    Bad(
        "baseline_not_a_model",
        sets("evaluation.baseline=ext"),
        ("evaluation.baseline", "'ext' is not a configured model", "use one of"),
        spark=False,
    ),
    Bad(
        "duplicate_model_names",
        edits(lambda c: c["models"].append({"name": "oracle", "kind": "random"})),
        ("models", "must be unique", "'oracle'"),
        spark=False,
    ),
    Bad(
        "missing_input_path",
        sets("data.interactions.path=nowhere/ratings.parquet"),
        ("data.interactions.path", "nowhere/ratings.parquet", "does not exist", "point it at"),
        spark=False,
    ),
    Bad(
        "missing_external_model_path",
        lambda case: case.add_external_model(None) and None,  # recs.parquet is never written
        ("models.2.path", "ext", "does not exist", "point it at"),
        spark=False,
    ),
    Bad(
        "unreadable_input_folder",
        locked_input_folder,
        ("data.interactions.path", "locked", "is not readable", "fix its permissions"),
        spark=False,
    ),
    Bad(
        "path_with_nul",
        sets('data.interactions.path="ratings\\0.parquet"'),
        ("data.interactions.path", "NUL character"),
        spark=False,
    ),
    Bad(
        "output_path_is_a_file",
        output_is_a_file,
        ("output.path", "reports.txt is a file, not a folder", "point output.path at a folder"),
        spark=False,
    ),
    # --- the interaction log -------------------------------------------------------------------
    Bad(
        "misnamed_interaction_column",
        edits(lambda c: c["data"]["interactions"]["columns"].update(user="userId")),
        ("'userId'", "is missing", "Fix data.interactions.columns.user"),
    ),
    Bad(
        "missing_interaction_column",
        interactions_with(lambda df: df.drop(columns=["rating"])),
        ("'rating'", "is missing", "Fix data.interactions.columns.rating"),
    ),
    Bad(
        "id_column_of_doubles",
        interactions_with(lambda df: df.assign(item_id=df.item_id.astype(float))),
        ("data.interactions", "'item_id'", "type double", "integers or strings"),
    ),
    Bad(
        "null_user_ids",
        interactions_with(nulls("user_id", [3, 17])),
        ("data.interactions", "user_id (user id) has null values (2 rows)", INTERACTIONS_FIX),
    ),
    Bad(
        "null_item_ids",
        interactions_with(nulls("item_id", [5])),
        ("data.interactions", "item_id (item id) has null values (1 rows)", INTERACTIONS_FIX),
    ),
    Bad(
        "nan_rating",
        interactions_with(setting("rating", 5, math.nan)),
        ("data.interactions", "rating", "NaN", "(1 rows)", INTERACTIONS_FIX),
    ),
    Bad(
        "infinite_rating",
        interactions_with(setting("rating", 5, math.inf)),
        ("data.interactions", "rating", "infinite", "(1 rows)", INTERACTIONS_FIX),
    ),
    Bad(
        "text_rating",
        interactions_with(setting("rating", 3, "five", dtype="str")),
        ("data.interactions", "rating", "non-numeric", "(1 rows)", INTERACTIONS_FIX),
    ),
    Bad(
        "nan_timestamp",
        interactions_with(setting("timestamp", 4, math.nan, dtype="float")),
        ("data.interactions", "timestamp", "unparseable", "(1 rows)", INTERACTIONS_FIX),
    ),
    Bad(
        "unparseable_timestamp",
        interactions_with(iso_timestamps_with_one_bad),
        ("data.interactions", "timestamp", "unparseable", "(1 rows)", INTERACTIONS_FIX),
    ),
    Bad(
        "millisecond_timestamps_without_the_unit",
        interactions_with(lambda df: df.assign(timestamp=df.timestamp * 1000)),
        (
            "data.interactions: column 'timestamp'",
            f"from {FIRST_TS * 1000} to ",
            "not between 1900 and 2200",
            "set data.interactions.timestamp_unit: ms",
        ),
    ),
    Bad(
        "second_timestamps_read_as_milliseconds",
        sets("data.interactions.timestamp_unit=ms"),
        (
            "data.interactions: column 'timestamp'",
            f"from {FIRST_TS} to ",
            "within the first 84 days of 1970",
            "set data.interactions.timestamp_unit: s",
        ),
    ),
    # --- files and formats ---------------------------------------------------------------------
    Bad(
        "not_parquet",
        lambda case: case.interactions.write_bytes(b"user_id,item_id\n1,2\n") and None,
        ("data.interactions", "interactions.parquet", "as parquet", "not a Parquet file", READ_FIX),
    ),
    Bad(
        "zero_byte_parquet",
        zero_byte_parquet,
        ("data.interactions", "interactions.parquet", "as parquet", READ_FIX),
    ),
    Bad(
        "zero_byte_csv",
        lambda case: case.use_csv(b"") and None,
        ("data.interactions", "ratings.csv", "has no columns", "point data.interactions.path"),
    ),
    Bad(
        "csv_header_only",
        lambda case: case.use_csv("user_id,item_id,timestamp,rating\n") and None,
        ("data.interactions", "has no rows", "point data.interactions.path"),
    ),
    Bad(
        "empty_input_folder",
        empty_folder,
        ("data.interactions", "empty", "as parquet", READ_FIX),
    ),
    Bad(
        "csv_column_names_count_mismatch",
        lambda case: tab_separated(case, ["user_id", "item_id", "timestamp"], delimiter="\t"),
        ("data.interactions.column_names", "3 names given", "4 columns", "one name a column"),
    ),
    Bad(
        "csv_wrong_delimiter",
        lambda case: tab_separated(case, ["user_id", "item_id", "timestamp", "rating"]),
        ("data.interactions.column_names", "1 columns", "(delimiter ',')", "one name a column"),
    ),
    Bad(
        "csv_without_a_header_row",
        lambda case: case.use_csv(interactions_frame().to_csv(index=False, header=False)) and None,
        (
            "data.interactions: column 'user_id' (mapped as user) is missing",
            "look like a first row of data ('1')",
            "set data.interactions.header: false and data.interactions.column_names: [...]",
            "(4 names, in file order)",
        ),
    ),
    Bad(
        "csv_ragged_row",
        ragged_csv,
        ("data.interactions", "ratings.csv", "Malformed CSV record", READ_FIX),
    ),
    # --- item metadata -------------------------------------------------------------------------
    Bad(
        "category_column_of_integers",
        integer_categories,
        (
            "data.items: column 'genre' (category) holds bigint values, not strings or arrays",
            'set data.items.category_separator (e.g. "|": each value is then one category)',
            "for a 0/1 flag column list it: data.items.columns.category: [genre]",
        ),
    ),
    # --- an external model's recommendations ---------------------------------------------------
    Bad(
        "duplicate_recommendation_rows",
        recommendations_with(duplicated_recommendation),
        ("models.ext", "same (user, item)", "(1, 102)", "keep one row per (user, item)"),
    ),
    Bad(
        "nan_score",
        recommendations_with(setting("score", 7, math.nan)),
        ("models.ext", "score", "NaN or infinite", "(1 rows)", MODEL_FIX),
    ),
    Bad(
        "infinite_score",
        recommendations_with(setting("score", 7, math.inf)),
        ("models.ext", "score", "NaN or infinite", "(1 rows)", MODEL_FIX),
    ),
    Bad(
        "negative_infinite_score",
        recommendations_with(setting("score", 7, -math.inf)),
        ("models.ext", "score", "NaN or infinite", "(1 rows)", MODEL_FIX),
    ),
    Bad(
        "ranks_from_zero",
        ranked_recommendations(*[(5 * user, 0) for user in range(N_USERS)]),
        (
            "models.ext: column 'rank' (rank) has values below 1 (8 rows, the smallest 0)",
            "ranks count from 1 (the best): add 1 to 0-based ranks",
            "models.ext.columns.score",
        ),
    ),
    Bad(
        "negative_rank",
        ranked_recommendations((7, -2)),
        ("models.ext", "'rank' (rank) has values below 1 (1 rows, the smallest -2)"),
    ),
    Bad(
        "string_user_ids_for_a_numeric_log",
        recommendations_with(string_ids("user_id")),
        ("models.ext", "user_id", "another type than the log's user ids", "(40 rows)", MODEL_FIX),
    ),
    Bad(
        "numeric_item_ids_for_a_string_log",
        numeric_recommendations_for_string_item_ids,
        ("models.ext", "'item_id'", "has type bigint", "log's item ids are string", "exactly as"),
    ),
    # --- split and relevance -------------------------------------------------------------------
    Bad(
        "cutoff_before_the_first_event",
        sets("split.cutoff=2019-06-01T00:00:00Z"),
        ("split.cutoff", "outside the data", "choose a cut-off strictly after the first"),
    ),
    Bad(
        "cutoff_at_the_first_event",
        sets(f"split.cutoff={FIRST_TS}"),  # train is timestamp < cutoff: empty
        ("split.cutoff", "outside the data", "choose a cut-off strictly after the first"),
    ),
    Bad(
        "cutoff_after_the_last_event",
        sets("split.cutoff=2021-01-01T00:00:00Z"),
        ("split.cutoff", "outside the data", "at or before the last timestamp"),
    ),
    Bad(
        "no_relevant_test_interaction",
        sets("relevance.threshold=6.0"),
        ("relevance", "no test interaction is relevant", "lower relevance.threshold"),
    ),
    # --- the input door (docs/configuration.md#input-tables) ------------------------------------
    Bad(
        "format_without_its_package",
        sets("data.interactions.format=avro"),
        ("data.interactions.format", "'avro'", "spark-avro", "spark.jars.packages"),
    ),
    Bad(
        "where_on_an_unknown_column",
        sets("data.interactions.where=nosuch > 1"),
        ("data.interactions.where", "nosuch", "write a SQL predicate"),
    ),
    Bad(
        "catalog_table_missing",
        edits(
            lambda c: (
                c["data"]["interactions"].update(table="lake.nope")
                or [c["data"]["interactions"].pop(key) for key in ("path", "format")]
            )
        ),
        ("data.interactions.table", "'lake.nope'", "no table"),
    ),
    Bad(
        "path_and_table",
        sets("data.interactions.table=lake.events"),
        ("data.interactions", "give path or table, not both"),
        spark=False,
    ),
    Bad(
        "given_split_without_test",
        sets("split={method: given}"),
        ("split.method: given needs data.test", "test=df"),
        spark=False,
    ),
    Bad(
        "train_and_test_without_the_given_split",
        edits(lambda c: c["data"].update(test=dict(c["data"]["interactions"]))),
        ("data.train and data.test are read by split.method: given", "global_temporal"),
        spark=False,
    ),
    Bad(
        "given_pair_with_different_id_types",
        given_pair_with_string_test_ids,
        ("data.test.columns.user", "string in data.test", "same id types"),
    ),
]


def _root_reads_anything(case: Bad) -> bool:
    return case.id == "unreadable_input_folder" and os.geteuid() == 0


@pytest.mark.parametrize("bad", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_exit_2_one_line_and_changes_nothing(
    bad: Bad,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    committed_reports: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if _root_reads_anything(bad):
        pytest.skip("running as root: chmod 000 does not stop root from reading the folder")
    case = Case(tmp_path, committed_reports)
    overrides = bad.breaks(case) or []
    if bad.spark:
        with kept_sql_conf(request.getfixturevalue("spark")):
            status, err = case.run(capsys, overrides)
    else:
        monkeypatch.setattr(
            "receval_spark.spark.build_session",
            lambda *a, **k: pytest.fail("a configuration case must fail before Spark starts"),
        )
        status, err = case.run(capsys, overrides)
    case.assert_rejected(status, err, bad.names)


def test_the_table_covers_enough_cases() -> None:
    assert len(CASES) >= 25
    assert len({case.id for case in CASES}) == len(CASES)


def test_external_model_is_valid(tmp_path: Path, committed_reports: Path, spark) -> None:
    """Control for the external-model cases: the unbroken recommendations pass validation."""
    case = Case(tmp_path, committed_reports)
    case.add_external_model(recommendations_frame())
    config = validate_config(case.config)
    with kept_sql_conf(spark), releasing_cache():
        recs = read_ranking_inputs(spark, config).recommendations[config.models[-1].name]
        assert recs.count() == len(recommendations_frame())


# ---------------------------------------------------------------------------------------------
# --verbose, unexpected failures, and what a user's terminal shows


@pytest.mark.parametrize(
    "where", [["--verbose", "evaluate"], ["evaluate", "-v"]], ids=["before", "after_command"]
)
def test_verbose_adds_the_stack_trace_before_the_error_line(
    where: list[str],
    tmp_path: Path,
    committed_reports: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = Case(tmp_path, committed_reports)
    config = write_config(case.config, case.config_path)
    capsys.readouterr()
    status = main([*where, "--config", str(config), "--set", "evaluation.k=ten"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("Traceback (most recent call last):"), err
    assert "ConfigError" in err
    assert err.splitlines()[-1].startswith("error: invalid configuration: evaluation.k: "), err


def test_an_unexpected_failure_is_one_line_by_default_and_a_trace_with_verbose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk on fire\nsecond line of the message")

    monkeypatch.setattr("receval_spark.cli.load_config", crash)
    argv = ["evaluate", "--config", str(tmp_path / "job.yaml")]
    capsys.readouterr()
    assert main(argv) == 1
    assert capsys.readouterr().err == (
        "error: RuntimeError: disk on fire (run with --verbose for the stack trace); "
        "no report was written or changed.\n"
    )
    assert main(["-v", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):"), err
    assert "RuntimeError: disk on fire\nsecond line of the message" in err
    assert err.splitlines()[-1] == (
        "error: the job failed (see above); no report was written or changed."
    )


STACK_TRACE = re.compile(r"Traceback \(most recent|^\s+at [\w$.<>/]+\(|^Caused by: ", re.M)


@pytest.mark.integration
@pytest.mark.deployment
def test_the_summary_json_of_a_rejected_job_names_the_error(tmp_path: Path, capsys) -> None:
    """--summary-json is written for a job that never started too: exit status 2, the error
    line, no run."""
    summary_path = tmp_path / "summary.json"
    missing = tmp_path / "missing.yaml"

    status = main(["evaluate", "--config", str(missing), "--summary-json", str(summary_path)])

    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1, err
    summary = json.loads(summary_path.read_text())
    assert summary == {"exit_status": 2, "run_status": "error", "error": err[len("error: ") : -1]}
    # --json (before or after the command): the same document on stdout, nothing else there
    for argv in (["--json", "evaluate", "--config", str(missing)], ["evaluate", "--json"]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert "rror: " in err and json.loads(out)["exit_status"] == 2, (out, err)


def test_no_stack_trace_on_stderr(tmp_path: Path, committed_reports: Path) -> None:
    """The CLI in its own process (and JVM) on a file Spark fails to read in a task: stderr is
    exactly the one error line (no Java or Python stack trace, and none of the JVM's or
    Hadoop's start-up warnings)."""
    case = Case(tmp_path, committed_reports)
    case.interactions.write_bytes(b"user_id,item_id\n1,2\n")
    config = write_config(case.config, case.config_path)
    proc = run([sys.executable, "-m", "receval_spark", "evaluate", "--config", str(config)])
    assert proc.returncode == 2, explain(proc)
    assert not STACK_TRACE.search(proc.stderr), explain(proc)
    assert len(proc.stderr.splitlines()) == 1, explain(proc)
    assert proc.stderr.startswith("error: data.interactions"), explain(proc)
    assert "not a Parquet file" in proc.stderr
    assert snapshot(case.output) == case.before


@pytest.mark.integration
@pytest.mark.deployment
def test_a_bad_session_job_prints_exactly_one_stderr_line(tmp_path: Path) -> None:
    """``receval sessions`` in its own process on a click log whose time split leaves no
    train session: one ``error:`` line on stderr and nothing else, nothing written."""
    clicks = tmp_path / "clicks.csv"
    rows = [
        (s, 1 + (s + j) % 6, f"2024-01-{1 + s // 6:02d}", j) for s in range(30) for j in range(3)
    ]
    pd.DataFrame(rows, columns=["session_id", "item_id", "eventdate", "timeframe"]).to_csv(
        clicks, sep=";", index=False
    )
    config = {
        "run": {"name": "bad-sessions", "date": RUN_DATE},
        "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": 2}},
        "output": {"path": str(tmp_path / "reports")},
        "data": diginetica_clicks(clicks),
        "preprocessing": {"test_days": 400},  # longer than the log: train is empty
        "models": [{"name": "pop", "kind": "pop"}],
    }
    path = write_config(config, tmp_path / "sessions.yaml")
    proc = run([sys.executable, "-m", "receval_spark", "sessions", "--config", str(path)])
    assert proc.returncode == 2, explain(proc)
    assert len(proc.stderr.splitlines()) == 1, explain(proc)
    assert proc.stderr.startswith("error: preprocessing: the train part is empty"), explain(proc)
    assert not (tmp_path / "reports").exists()


def test_a_click_log_in_milliseconds_without_the_unit_is_exit_2(
    tmp_path: Path, spark, capsys: pytest.CaptureFixture[str]
) -> None:
    """``receval sessions`` on a click log of epoch milliseconds read in the default unit
    (seconds): exit 2 before any preprocessing, one line naming the column, its values and
    the key to set; nothing written."""
    start = int(BASE.timestamp()) * 1000
    rows = [
        (s, 1 + (s + j) % 6, start + (s * 3600 + j * 60) * 1000) for s in range(9) for j in (0, 1)
    ]
    clicks = write_parquet(pd.DataFrame(rows, columns=["sid", "iid", "ts"]), tmp_path / "c.parquet")
    columns = {"session": "sid", "item": "iid", "time": "ts"}
    config = {
        "run": {"name": "ms-sessions", "date": RUN_DATE},
        "spark": {"master": "local[2]", "conf": dict(TINY_SPARK_CONF)},
        "output": {"path": str(tmp_path / "reports")},
        "data": {"clicks": {"path": str(clicks), "columns": columns}},
        "models": [{"name": "pop", "kind": "pop"}],
    }
    path = write_config(config, tmp_path / "sessions.yaml")
    capsys.readouterr()
    with kept_sql_conf(spark):
        status = main(["sessions", "--config", str(path)])
    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: data.clicks: column 'ts' (time) holds values from {start} to ")
    assert err.endswith(
        "; they look like epoch milliseconds: set data.clicks.timestamp_unit: ms.\n"
    )
    assert not (tmp_path / "reports").exists()


def test_a_metric_module_needing_a_session_at_import_is_named(tmp_path: Path) -> None:
    """A fresh process (no SparkContext yet, as in a scheduled job) importing a metric module
    whose module-level pandas_udf takes a DDL string: exit 2, one line naming the module and
    the fix, before Spark starts."""
    config_path = tmp_path / "job.yaml"
    config = base_config(tmp_path / "log.parquet", tmp_path / "reports")
    config["evaluation"]["custom_metrics"] = [{"name": "rev", "path": "broken_metrics:discount"}]
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {**job_env(), "PYTHONPATH": str(Path(__file__).parent)}
    proc = run(
        [sys.executable, "-m", "receval_spark", "evaluate", "--config", str(config_path)], env
    )
    assert proc.returncode == 2, explain(proc)
    assert len(proc.stderr.splitlines()) == 1, explain(proc)
    assert "importing module 'broken_metrics' failed" in proc.stderr, explain(proc)
    assert "give pandas_udf a DataType object" in proc.stderr, explain(proc)
