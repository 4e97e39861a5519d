"""The class-data-sharing archive of a job's driver JVM (receval_spark/class_archive.py): which
options a run gets for each state of the cache folder, and, end to end, a first run whose JVM
writes the archive at exit and a second run whose JVM loads Spark's classes from it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pyspark
import pytest
import yaml
from helpers import (
    SHORT_LIVED_JVM,
    VENV_BIN,
    crafted_job_config,
    crafted_log,
    explain,
    job_env,
    metric_values,
    run,
    same_value,
)

from receval_spark import class_archive
from receval_spark.class_archive import jvm_options

NO_OPTIONS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def no_given_archive(monkeypatch):
    """The tests' own SPARK_SUBMIT_OPTS name an archive (conftest.py); a user's need not."""
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)


def ended_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def a_write(folder: Path, *, pid: int, written: bool, key: str | None = None) -> tuple[Path, Path]:
    """What a run's JVM leaves when told to write the archive: the partial archive and Java's
    log, whose last line says the archive was written in full when ``written``."""
    key = key or class_archive.archive_key(NO_OPTIONS)
    partial = folder / f"spark-{key}.123-abcd.partial"
    log = folder / f"spark-{key}.123-abcd.jvm-{pid}.log"
    partial.write_bytes(b"classes")
    last = "Written dynamic archive 0x0 - 0x1 [984 bytes header, 7 bytes total]" if written else ""
    log.write_text(
        f"[0.1s][info][cds,dynamic] Archiving hidden X\n[0.2s][info][cds,dynamic] {last}\n"
    )
    return partial, log


def test_a_first_run_writes_the_archive_at_exit_to_a_partial_file(tmp_path):
    options = jvm_options(NO_OPTIONS, folder=tmp_path)
    key = class_archive.archive_key(NO_OPTIONS)
    assert options.startswith(f"-XX:ArchiveClassesAtExit={tmp_path}/spark-{key}.{os.getpid()}-")
    assert ".partial -Xlog:cds*=off -Xlog:class+path=off -Xlog:cds+dynamic=info:file=" in options
    assert options.endswith(".jvm-%p.log")


def test_a_write_java_logged_as_complete_is_moved_into_place_and_mapped(tmp_path):
    partial, log = a_write(tmp_path, pid=ended_pid(), written=True)
    archive = tmp_path / f"spark-{class_archive.archive_key(NO_OPTIONS)}.jsa"
    assert jvm_options(NO_OPTIONS, folder=tmp_path) == (
        f"-XX:SharedArchiveFile={archive} -Xlog:cds*=off -Xlog:class+path=off"
    )
    assert archive.read_bytes() == b"classes"
    assert not partial.exists() and not log.exists()


def test_while_a_jvm_may_still_write_it_a_run_neither_maps_nor_writes(tmp_path):
    partial, log = a_write(tmp_path, pid=os.getpid(), written=False)
    assert jvm_options(NO_OPTIONS, folder=tmp_path) == ""
    assert partial.exists() and log.exists()


def test_a_write_whose_jvm_ended_unfinished_is_deleted_and_written_again(tmp_path):
    partial, log = a_write(tmp_path, pid=ended_pid(), written=False)
    options = jvm_options(NO_OPTIONS, folder=tmp_path)
    assert not partial.exists() and not log.exists()
    assert options.startswith("-XX:ArchiveClassesAtExit=")
    assert not list(tmp_path.glob("*.jsa"))


def test_writes_for_another_java_or_spark_are_settled_too(tmp_path):
    """A pyspark upgraded right after a first run: the old write still finishes or goes."""
    done, done_log = a_write(tmp_path, pid=ended_pid(), written=True, key="0ld0ld0ld0ld0ld0")
    assert jvm_options(NO_OPTIONS, folder=tmp_path).startswith("-XX:ArchiveClassesAtExit=")
    assert (tmp_path / "spark-0ld0ld0ld0ld0ld0.jsa").read_bytes() == b"classes"
    assert not done.exists() and not done_log.exists()
    partial, log = a_write(tmp_path, pid=os.getpid(), written=False, key="0ther0ther0ther0")
    assert jvm_options(NO_OPTIONS, folder=tmp_path).startswith("-XX:ArchiveClassesAtExit=")
    assert partial.exists() and log.exists()  # still being written, by another Java or Spark


def test_the_most_recently_used_archives_are_kept(tmp_path):
    old = []
    for n in range(class_archive.KEPT):
        (tmp_path / f"spark-old{n}.jsa").write_bytes(b"x")
        os.utime(tmp_path / f"spark-old{n}.jsa", (1_000 + n, 1_000 + n))
        old.append(f"spark-old{n}.jsa")
    a_write(tmp_path, pid=ended_pid(), written=True)
    jvm_options(NO_OPTIONS, folder=tmp_path)
    kept = sorted(p.name for p in tmp_path.glob("*.jsa"))
    assert kept == sorted([f"spark-{class_archive.archive_key(NO_OPTIONS)}.jsa", *old[1:]])


@pytest.mark.parametrize(
    "where, given",
    [
        ("spark.driver.extraJavaOptions", "-Xss4m -XX:SharedArchiveFile=/opt/spark.jsa"),
        ("SPARK_SUBMIT_OPTS", "-XX:ArchiveClassesAtExit=/tmp/mine.jsa"),
        ("JAVA_TOOL_OPTIONS", "-Xshare:off"),
    ],
)
def test_an_archive_the_user_chose_wins(tmp_path, monkeypatch, where, given):
    settings = {where: given} if where.startswith("spark.") else NO_OPTIONS
    if not where.startswith("spark."):
        monkeypatch.setenv(where, given)
    assert jvm_options(settings, folder=tmp_path) == ""
    assert not list(tmp_path.iterdir())


def test_no_archive_where_the_options_cannot_name_the_folder(tmp_path):
    assert jvm_options(NO_OPTIONS, folder=tmp_path / "with space") == ""


def test_a_driver_class_path_of_its_own_gets_an_archive_of_its_own(monkeypatch, tmp_path):
    plain = class_archive.archive_key(NO_OPTIONS)
    assert class_archive.archive_key({"spark.jars": "/opt/extra.jar"}) != plain
    assert class_archive.archive_key({"spark.sql.shuffle.partitions": "8"}) == plain
    # the same jars in another place (another virtual environment): Java would refuse the
    # archive of the first, so the second gets its own
    (tmp_path / "jars").mkdir()
    for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar"):
        (tmp_path / "jars" / jar.name).symlink_to(jar)
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    elsewhere = class_archive.archive_key(NO_OPTIONS)
    assert elsewhere != plain
    # a jar replaced in place (a reinstall): a new archive too
    replaced = min((tmp_path / "jars").iterdir())
    replaced.unlink()
    replaced.write_bytes(b"jar")
    assert class_archive.archive_key(NO_OPTIONS) not in (plain, elsewhere)


def test_the_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert class_archive.cache_folder() == tmp_path / "receval_spark" / "jvm"


@pytest.mark.integration
@pytest.mark.deployment
def test_the_second_run_loads_sparks_classes_from_the_archive_the_first_wrote(spark, tmp_path):
    """``receval evaluate`` twice with an empty cache folder, as on a new machine: the first
    run's JVM writes the archive after the run (the run's output stays clean of Java's notices);
    the second run moves it into place and its JVM loads Spark's classes from it (Java's class
    loading log); both runs report the same metrics."""
    raw = crafted_job_config(
        tmp_path, crafted_log(reconsumed=False), [{"name": "popularity", "kind": "popularity"}]
    )
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    # the tests' JVM options without their own archive
    env = {
        **job_env(),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "SPARK_SUBMIT_OPTS": SHORT_LIVED_JVM,
    }
    folder = tmp_path / "cache" / "receval_spark" / "jvm"
    evaluate = [str(VENV_BIN / "receval"), "evaluate", "--config", str(config)]

    first = run([*evaluate, "--set", "run.date=2024-02-01"], env=env)
    assert first.returncode == 0, explain(first)
    assert "cds" not in first.stdout + first.stderr
    (log,) = folder.glob("spark-*.jvm-*.log")
    jvm = int(log.name.removesuffix(".log").rpartition(".jvm-")[2])
    deadline = time.monotonic() + 300
    while class_archive._running(jvm) and time.monotonic() < deadline:
        time.sleep(1)
    assert not class_archive._running(jvm), "the first run's JVM did not end"

    loading = tmp_path / "classes.log"
    second = run(
        [
            *evaluate,
            "--set",
            "run.date=2024-02-02",
            "--set",
            f"spark.conf.spark.driver.extraJavaOptions=-Xlog:class+load=info:file={loading}",
        ],
        env=env,
    )
    assert second.returncode == 0, explain(second)
    assert [p.suffix for p in folder.iterdir()] == [".jsa"]
    # Spark's own classes, as loaded from its jars or from the archive (not lambdas' hidden
    # classes, nor the code Spark generates at run time and compiles with Janino)
    loaded = [
        line.rpartition(" source: ")[2]
        for line in loading.read_text().splitlines()
        if " org.apache.spark." in line and "GeneratedClass" not in line
    ]
    from_jars = [source for source in loaded if source.endswith(".jar")]
    mapped = [source for source in loaded if source == "shared objects file (top)"]
    assert len(mapped) > 10 * len(from_jars), (len(mapped), len(from_jars))

    a = metric_values(spark, tmp_path / "reports", "2024-02-01")
    b = metric_values(spark, tmp_path / "reports", "2024-02-02")
    assert a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
