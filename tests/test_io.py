"""Report commit protocol of ``receval_spark.io.write_reports`` and ``to_uri``.

A run date's partitions of every dataset are replaced together or not at all; other dates are
never touched; a crash after the commit marker is rolled forward by the next commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from receval_spark import io
from receval_spark.config import InteractionsSource
from receval_spark.io import read_table, to_uri, write_reports

D1, D2 = "2026-01-01", "2026-01-02"


def frame(spark: SparkSession, run_id: str, rows: int = 3) -> DataFrame:
    return spark.createDataFrame(
        [(run_id, i, float(i) / 2) for i in range(rows)], "run_id string, i int, value double"
    ).coalesce(1)


def tables(
    spark: SparkSession,
    run_id: str,
    datasets: tuple[str, ...] = ("metrics", "runs", "per_user"),
    rows: int = 3,
) -> dict[str, DataFrame]:
    return {name: frame(spark, run_id, rows) for name in datasets}


def partition(output: Path, dataset: str, date: str) -> Path:
    return output / dataset / f"run_date={date}"


def run_ids(output: Path, dataset: str, date: str) -> set[str]:
    """The run ids stored in one committed partition (read with pyarrow, not Spark)."""
    table = pq.read_table(partition(output, dataset, date))
    return set(table.column("run_id").to_pylist())


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder (None) under ``root``, hidden ones included."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def visible(snap: dict[str, bytes | None]) -> dict[str, bytes | None]:
    """The part of a snapshot that readers see: datasets, not ``_staging`` or ``_trash``."""
    return {k: v for k, v in snap.items() if not k.startswith("_")}


def of_date(snap: dict[str, bytes | None], date: str) -> dict[str, bytes | None]:
    return {k: v for k, v in snap.items() if f"run_date={date}" in k.split("/")[1:2]}


def leftovers(output: Path, run_id: str) -> list[Path]:
    return [p for p in (output / "_staging" / run_id, output / "_trash" / run_id) if p.exists()]


def test_commits_a_date(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    write_reports(tables(spark, "r1"), output_path=str(out), run_date=D1, run_id="r1")
    for name in ("metrics", "runs", "per_user"):
        assert run_ids(out, name, D1) == {"r1"}
        assert (partition(out, name, D1) / "_SUCCESS").exists()
        assert not (out / name / "run_date=D1").exists()
    assert not (out / "comparisons").exists()
    assert leftovers(out, "r1") == []
    # Spark readers discover the partition column and see nothing of the commit machinery.
    read = spark.read.parquet(to_uri(str(out / "metrics")))
    assert sorted(read.columns) == ["i", "run_date", "run_id", "value"]
    assert [str(r.run_date) for r in read.select("run_date").distinct().collect()] == [D1]
    assert read.count() == 3


def test_rewriting_a_date_replaces_it_and_leaves_other_dates(
    spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "reports"
    write_reports(tables(spark, "r1"), output_path=str(out), run_date=D1, run_id="r1")
    write_reports(tables(spark, "r2"), output_path=str(out), run_date=D2, run_id="r2")
    d1_before = of_date(snapshot(out), D1)
    assert d1_before

    write_reports(tables(spark, "r3", rows=5), output_path=str(out), run_date=D2, run_id="r3")

    for name in ("metrics", "runs", "per_user"):
        assert run_ids(out, name, D2) == {"r3"}
        assert pq.read_table(partition(out, name, D2)).num_rows == 5
    assert of_date(snapshot(out), D1) == d1_before
    assert leftovers(out, "r2") == leftovers(out, "r3") == []
    both = spark.read.parquet(to_uri(str(out / "metrics")))
    assert {(str(r.run_date), r.run_id) for r in both.select("run_date", "run_id").collect()} == {
        (D1, "r1"),
        (D2, "r3"),
    }


def test_dataset_not_written_again_is_removed_for_that_date(
    spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "reports"
    write_reports(tables(spark, "r1"), output_path=str(out), run_date=D1, run_id="r1")
    write_reports(tables(spark, "r2"), output_path=str(out), run_date=D2, run_id="r2")
    d1_before = of_date(snapshot(out), D1)

    write_reports(
        tables(spark, "r3", ("metrics", "runs")), output_path=str(out), run_date=D2, run_id="r3"
    )

    assert not partition(out, "per_user", D2).exists()
    assert run_ids(out, "metrics", D2) == run_ids(out, "runs", D2) == {"r3"}
    assert run_ids(out, "per_user", D1) == {"r1"}
    assert of_date(snapshot(out), D1) == d1_before


def test_failure_while_writing_changes_nothing(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    write_reports(tables(spark, "r1"), output_path=str(out), run_date=D1, run_id="r1")
    before = snapshot(out)

    @F.udf("double")
    def explode(value):
        raise RuntimeError("boom inside a Python UDF")

    failing = frame(spark, "r2").withColumn("value", explode("value"))
    # metrics is staged completely before runs fails: the partial staging must not survive.
    doomed = {"metrics": frame(spark, "r2"), "runs": failing, "per_user": frame(spark, "r2")}
    with pytest.raises(Exception, match="boom inside a Python UDF"):
        write_reports(doomed, output_path=str(out), run_date=D1, run_id="r2")

    assert snapshot(out) == before
    assert leftovers(out, "r2") == []
    for name in ("metrics", "runs", "per_user"):
        assert run_ids(out, name, D1) == {"r1"}


def test_failure_on_a_new_date_leaves_no_partition(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    write_reports(tables(spark, "r1"), output_path=str(out), run_date=D1, run_id="r1")
    before = snapshot(out)

    @F.udf("double")
    def explode(value):
        raise RuntimeError("boom")

    doomed = {"metrics": frame(spark, "r2"), "runs": frame(spark, "r2").select(explode("value"))}
    with pytest.raises(Exception, match="boom"):
        write_reports(doomed, output_path=str(out), run_date=D2, run_id="r2")

    assert snapshot(out) == before
    assert not list(out.glob(f"*/run_date={D2}"))


def test_unknown_dataset_is_refused_before_writing(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    with pytest.raises(ValueError, match="unknown report datasets"):
        write_reports(
            {"metrics": frame(spark, "r1"), "metricz": frame(spark, "r1")},
            output_path=str(out),
            run_date=D1,
            run_id="r1",
        )
    assert not out.exists() or visible(snapshot(out)) == {}


# ---------------------------------------------------------------------------------------------
# crash recovery


def stage(
    spark: SparkSession, out: Path, run_id: str, date: str, datasets: tuple[str, ...]
) -> Path:
    """Step 1 of the protocol by hand: every dataset written under _staging/<run_id>."""
    for name in datasets:  # URI built as write_reports does (Path.as_uri would escape '=')
        frame(spark, run_id).write.parquet(
            f"{to_uri(str(out))}/_staging/{run_id}/{name}/run_date={date}"
        )
    staging = out / "_staging" / run_id
    assert (staging / datasets[0] / f"run_date={date}" / "_SUCCESS").exists()
    return staging


def mark_committed(staging: Path, date: str, datasets: tuple[str, ...]) -> None:
    """Step 2 by hand: the marker that makes the staged run the winner."""
    manifest = {"run_date": date, "written": sorted(datasets)}
    (staging / io._MARKER).write_text(json.dumps(manifest), encoding="utf-8")


def test_crash_right_after_the_marker_is_rolled_forward(
    spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "reports"
    write_reports(tables(spark, "r1"), output_path=str(out), run_date=D1, run_id="r1")
    written = ("metrics", "runs")
    staging = stage(spark, out, "r2", D1, written)
    mark_committed(staging, D1, written)
    # the process died here: nothing promoted yet, readers still see r1
    assert run_ids(out, "metrics", D1) == {"r1"}

    write_reports(tables(spark, "r3"), output_path=str(out), run_date=D2, run_id="r3")

    assert run_ids(out, "metrics", D1) == run_ids(out, "runs", D1) == {"r2"}
    assert not partition(out, "per_user", D1).exists()  # not written by r2: removed with D1
    for name in ("metrics", "runs", "per_user"):
        assert run_ids(out, name, D2) == {"r3"}
    assert leftovers(out, "r2") == leftovers(out, "r3") == []


def test_crash_in_the_middle_of_promotion_is_rolled_forward(
    spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "reports"
    write_reports(tables(spark, "r1"), output_path=str(out), run_date=D1, run_id="r1")
    write_reports(tables(spark, "r1b"), output_path=str(out), run_date=D2, run_id="r1b")
    d2_before = of_date(snapshot(out), D2)
    written = ("metrics", "per_user", "runs")
    staging = stage(spark, out, "r2", D1, written)
    mark_committed(staging, D1, written)
    # step 3 got as far as promoting metrics (old one into the trash) before the crash
    trash = out / "_trash" / "r2" / "metrics"
    trash.mkdir(parents=True)
    partition(out, "metrics", D1).rename(trash / f"run_date={D1}")
    (staging / "metrics" / f"run_date={D1}").rename(partition(out, "metrics", D1))

    write_reports(tables(spark, "r3"), output_path=str(out), run_date="2026-01-03", run_id="r3")

    for name in written:
        assert run_ids(out, name, D1) == {"r2"}
        assert run_ids(out, name, "2026-01-03") == {"r3"}
    assert of_date(snapshot(out), D2) == d2_before
    assert leftovers(out, "r2") == leftovers(out, "r3") == []


def test_recovered_run_then_newer_run_for_the_same_date(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A committed-but-unfinished older run is finished first, then the newer run replaces it."""
    out = tmp_path / "reports"
    write_reports(tables(spark, "r1"), output_path=str(out), run_date=D1, run_id="r1")
    staging = stage(spark, out, "r2", D1, ("metrics", "runs", "per_user"))
    mark_committed(staging, D1, ("metrics", "runs", "per_user"))

    write_reports(
        tables(spark, "r3", ("metrics", "runs")), output_path=str(out), run_date=D1, run_id="r3"
    )

    assert run_ids(out, "metrics", D1) == run_ids(out, "runs", D1) == {"r3"}
    assert not partition(out, "per_user", D1).exists()
    assert leftovers(out, "r2") == leftovers(out, "r3") == []


def test_uncommitted_staging_is_never_promoted(spark: SparkSession, tmp_path: Path) -> None:
    """A run that died before the marker leaves only an ignored _staging folder."""
    out = tmp_path / "reports"
    write_reports(tables(spark, "r1"), output_path=str(out), run_date=D1, run_id="r1")
    stage(spark, out, "r0", D1, ("metrics", "runs"))  # no marker
    d1_before = of_date(snapshot(out), D1)

    write_reports(tables(spark, "r3"), output_path=str(out), run_date=D2, run_id="r3")

    assert of_date(snapshot(out), D1) == d1_before
    assert run_ids(out, "metrics", D1) == {"r1"}
    read = spark.read.parquet(to_uri(str(out / "metrics")))
    assert {r.run_id for r in read.select("run_id").distinct().collect()} == {"r1", "r3"}


# ---------------------------------------------------------------------------------------------
# paths


def test_to_uri_local_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert to_uri("/data/ratings.parquet") == "file:///data/ratings.parquet"
    assert to_uri("reports") == (tmp_path / "reports").as_uri()
    assert to_uri("./a/../b") == (tmp_path / "b").as_uri()
    assert to_uri("file:///data/x") == "file:///data/x"
    assert to_uri("s3a://bucket/reports/") == "s3a://bucket/reports/"
    assert to_uri("hdfs://nn:8020/r") == "hdfs://nn:8020/r"


def test_write_reports_to_a_relative_path(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_reports(tables(spark, "r1"), output_path="reports", run_date=D1, run_id="r1")
    assert run_ids(tmp_path / "reports", "metrics", D1) == {"r1"}


def test_write_reports_to_a_file_uri(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    write_reports(tables(spark, "r1"), output_path=out.as_uri(), run_date=D1, run_id="r1")
    assert run_ids(out, "metrics", D1) == {"r1"}


def test_write_reports_to_a_path_with_a_space(spark: SparkSession, tmp_path: Path) -> None:
    """Spark and pyarrow must agree on the folder: no literal '%20' directory."""
    out = tmp_path / "my reports"
    write_reports(tables(spark, "r1"), output_path=str(out), run_date=D1, run_id="r1")
    assert run_ids(out, "metrics", D1) == {"r1"}
    assert not (tmp_path / "my%20reports").exists()


@pytest.mark.parametrize("folder", ["my data", "run=1", "café"])
def test_read_table_path_with_special_characters(
    spark: SparkSession, tmp_path: Path, folder: str
) -> None:
    """A local input path is read as written, whatever characters its folders hold."""
    path = tmp_path / folder / "interactions.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"user_id": [1, 2], "item_id": [10, 20]}), path)
    source = InteractionsSource(path=str(path))
    df = read_table(spark, source, key="data.interactions")
    assert sorted(df.columns) == ["item_id", "user_id"]
    assert df.count() == 2
