"""A class-data-sharing archive of the classes a small job's JVM loads, for the short-lived
JVMs the tests start (conftest.py, SHORT_LIVED_JVM). Java loads and verifies Spark's classes
anew in every JVM; mapped from an archive they cost a crafted job as a process 39 -> 27 CPU
seconds (benchmarks/README.md). Built once per Java and pyspark installation, in the
background by ``python tests/jvm_archive.py`` (a crafted job under ``-XX:ArchiveClassesAtExit``),
into ``$RECEVAL_JVM_ARCHIVES`` (default ``~/.cache/receval_spark/test-jvm``; not the folder of
the job's own archives, ``class_archive.cache_folder``, whose pruning keeps two) outside the
clone: a fresh clone at the same path whose venv links the same pyspark files from uv's cache
(Makefile: UV_CACHED) maps the archive an earlier clone built. A JVM started before it exists,
or one whose class path does not match it, runs without it, silently (``class_archive.mapping``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import yaml
from helpers import REPO, crafted_job_config, crafted_log, job_env, spark_submit

from receval_spark import class_archive

BUILDING_FOR = 900  # seconds after which a build that left its lock behind is presumed dead
WRITING = 180  # seconds a JVM may take to write the archive after its job ended (10-20 s seen)
KEPT_FOR = 7 * 86400  # seconds after which an archive of another installation is removed
FOLDER = Path(
    os.environ.get("RECEVAL_JVM_ARCHIVES", Path.home() / ".cache" / "receval_spark" / "test-jvm")
)


def archive_path(settings: Mapping[str, str] | None = None) -> Path:
    """The archive of this Java and pyspark installation (with the class path ``settings``,
    spark.jars for the lake tests), keyed as the job keys its own (what Java checks: the java
    binary, and the jars' place, size and time)."""
    return FOLDER / f"spark-{class_archive.archive_key(settings or {})}.jsa"


def jvm_options(archive: Path) -> str:
    """The options that map ``archive`` (ignored while it does not exist), or none when its
    path cannot be one word of SPARK_SUBMIT_OPTS."""
    return "" if " " in str(archive) else class_archive.mapping(archive)


def building(archive: Path) -> Path:
    """The lock file of a build of ``archive`` that is on (its mtime: when it started)."""
    return archive.with_suffix(".building")


def start_build(archive: Path, options: str, *, lake: bool = False) -> None:
    """Build ``archive`` (:func:`build`; ``lake``: of a lake job) in a background process
    unless it exists or another build is on."""
    lock = building(archive)
    archive.parent.mkdir(parents=True, exist_ok=True)
    if archive.exists() or (lock.exists() and time.time() - lock.stat().st_mtime < BUILDING_FOR):
        return
    lock.write_text(str(os.getpid()), encoding="utf-8")
    for stale in archive.parent.glob("spark-*.jsa"):  # ~190 MB each: other clones' and venvs'
        if time.time() - stale.stat().st_mtime > KEPT_FOR:
            stale.unlink(missing_ok=True)
    subprocess.Popen(
        [sys.executable, __file__, str(archive), options, *(["lake"] if lake else [])],
        cwd=REPO,
        env=job_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def build(archive: Path, options: str, *, lake: bool = False) -> None:
    """Run the crafted job (two models, a bootstrap, segments; ``lake``: with the lake tests'
    jars and settings, its reports a Delta table) as a process with ``options``, its JVM
    writing the classes it loaded at exit; the archive appears at once, complete (a JVM
    mapping a partly written archive crashes)."""
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    try:
        with tempfile.TemporaryDirectory(prefix="receval-jvm-archive-") as folder:
            raw = crafted_job_config(
                Path(folder),
                crafted_log(reconsumed=False),
                [
                    {"name": "popularity", "kind": "popularity"},
                    {"name": "random", "kind": "random"},
                ],
            )
            raw["evaluation"]["bootstrap_samples"] = 20
            if lake:
                from lake_env import jars, lake_conf

                raw["spark"]["conf"] = lake_conf(jars(), Path(folder) / "warehouse")
                raw["output"]["format"] = "delta"
            config = Path(folder) / "job.yaml"
            config.write_text(yaml.safe_dump(raw), encoding="utf-8")
            env = job_env()
            log = Path(folder) / "dump.log"
            dump = f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds+dynamic=info:file={log}"
            env["SPARK_SUBMIT_OPTS"] = f"{options} {dump}"
            # the lake's jars reach the driver's class path only when the job starts its JVM
            launcher = [sys.executable, "-m", "receval_spark", "evaluate"]
            if not lake:
                launcher = [str(spark_submit()), "jobs/evaluate.py"]
            done = subprocess.run(
                [*launcher, "--config", str(config)],
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=BUILDING_FOR,
            )
            if done.returncode == 0 and written(log):
                os.replace(partial, archive)
    finally:
        partial.unlink(missing_ok=True)
        building(archive).unlink(missing_ok=True)


def written(log: Path) -> bool:
    """Whether the JVM logged its archive as written in full, waiting up to WRITING seconds
    for it: ``python -m receval_spark`` ends before the JVM it started has written it."""
    deadline = time.monotonic() + WRITING
    while time.monotonic() < deadline:
        if log.exists() and class_archive._written(log):
            return True
        time.sleep(1)
    return False


if __name__ == "__main__":
    build(Path(sys.argv[1]), sys.argv[2], lake=sys.argv[3:] == ["lake"])
