"""The environment of the Delta Lake and Apache Iceberg tests (tests/lake/; docs/tables.md,
Versions): no Delta or Iceberg release runs on pyspark 4.3 yet, so they run in a second virtual
environment, ``.venv-lake``, on pyspark 4.1 (inside the project's range) with the jars built
for Spark 4.1 and Scala 2.13.

``python tests/lake_env.py`` (``make lake``, run by ``make test-all``; ``make demo`` needs none
of it) builds ``.venv-lake`` (the pins below, the project's dependencies, the project linked by
a ``.pth`` file) unless it holds them already, and fetches the three jars once with Maven into
``$RECEVAL_JARS`` (default ``~/.cache/receval_spark/jars``), outside the repository; nothing is
fetched again when they are there. ``python tests/lake_env.py test`` then runs tests/lake in
that environment. Where PyPI or Maven Central cannot be reached it says why and the tests skip
with that reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PYSPARK = "4.1.4"
DELTA = "4.3.1"  # io.delta:delta-spark_2.13, built against Spark 4.1.0
ICEBERG = "1.12.0"  # org.apache.iceberg:iceberg-spark-runtime-4.1_2.13
ARTIFACTS = (
    ("io.delta", "delta-spark_2.13", DELTA),
    ("io.delta", "delta-storage", DELTA),
    ("org.apache.iceberg", "iceberg-spark-runtime-4.1_2.13", ICEBERG),
)
REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv-lake"
STAMP = VENV / "receval-lake.txt"  # written last: the pins the environment holds
PACKAGES = (f"pyspark=={PYSPARK}", "pandas>=2.2,<3", "pyarrow>=15", "pytest>=8")
CACHE = Path(os.environ.get("RECEVAL_JARS", Path.home() / ".cache" / "receval_spark" / "jars"))
FOLDER = CACHE / f"lake-delta-{DELTA}-iceberg-{ICEBERG}"
NOTE = CACHE / f"{FOLDER.name}.unavailable"
COPY = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
TIMEOUT = 1800
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>receval</groupId><artifactId>lake-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>{}</dependencies>
</project>
"""


def jars() -> list[Path] | str:
    """The cached jars, or why there are none (the reason the tests skip with)."""
    found = [FOLDER / f"{artifact}-{version}.jar" for _, artifact, version in ARTIFACTS]
    if all(jar.exists() for jar in found):
        return found
    why = NOTE.read_text(encoding="utf-8").strip() if NOTE.exists() else "not fetched yet"
    return f"no Delta/Iceberg jars in {FOLDER} ({why}); `make lake` fetches them"


def lake_conf(jar_files: list[Path], warehouse: Path) -> dict[str, str]:
    """Delta (path tables, the session catalog) and an Iceberg Hadoop catalog ``lake`` on
    ``warehouse``: the Spark settings of the lake tests' session, of the jobs they start as
    processes and of the job that builds their JVMs' class archive (tests/jvm_archive.py)."""
    from receval_spark.tables import DELTA_EXTENSION, ICEBERG_EXTENSION

    return {
        **class_path_settings(jar_files),
        "spark.sql.extensions": f"{DELTA_EXTENSION},{ICEBERG_EXTENSION}",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "hadoop",
        "spark.sql.catalog.lake.warehouse": warehouse.as_uri(),
        "spark.databricks.delta.snapshotPartitions": "1",  # tiny logs: one task, not 50
        "spark.sql.shuffle.partitions": "1",
        "spark.sql.adaptive.enabled": "false",
        "spark.ui.enabled": "false",
    }


def class_path_settings(jar_files: list[Path]) -> dict[str, str]:
    """The settings of :func:`lake_conf` that extend the driver's class path (what keys a class
    archive, receval_spark.class_archive.archive_key)."""
    return {"spark.jars": ",".join(str(jar) for jar in jar_files)}


def fetch_jars() -> None:
    """The three jars (no transitive ones: Spark has the rest) from Maven Central."""
    if isinstance(jars(), list):
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Maven is not installed (apt-get install maven)")
    dependency = (
        "<dependency><groupId>{}</groupId><artifactId>{}</artifactId>"
        "<version>{}</version></dependency>"
    )
    with tempfile.TemporaryDirectory(prefix="receval-lake-jars-") as work:
        pom = POM.format("".join(dependency.format(*a) for a in ARTIFACTS))
        (Path(work) / "pom.xml").write_text(pom, encoding="utf-8")
        partial = Path(work) / "jars"
        proc = subprocess.run(
            [mvn, "--batch-mode", "--quiet", COPY, "-DexcludeTransitive=true",
             f"-DoutputDirectory={partial}"],
            cwd=work, capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            errors = [line for line in proc.stdout.splitlines() if "ERROR" in line]
            raise RuntimeError(f"Maven could not fetch the Delta/Iceberg jars: {errors[:1]}")
        CACHE.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(FOLDER, ignore_errors=True)
        shutil.copytree(partial, FOLDER)


def requirements() -> list[str]:
    """The project's own dependencies (pyproject.toml) and the lake's pins."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [*project["dependencies"], *PACKAGES]


def build_venv() -> None:
    """``.venv-lake`` with the pins, the project's dependencies and the project itself, unless it
    has them. The project is linked by a ``.pth`` file (what an editable install amounts to)
    rather than built: a build writes ``receval_spark.egg-info`` into the source folder, which
    ``make setup`` builds at the same time under ``make -j2`` (``.ci/run``)."""
    needed = requirements()
    wanted = "\n".join(needed) + "\n"
    if STAMP.exists() and STAMP.read_text(encoding="utf-8") == wanted:
        return
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    # uv, as `make setup` installs (Makefile: UV, UV_CACHED): from its cache when that has
    # everything, else online (online, it builds pyspark's source archive anew every time)
    uv = str(VENV / "bin" / "uv")
    pip = [uv, "pip", "install", "--quiet", "--python", str(python)]
    _install([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "uv"])
    if _install([*pip, "--offline", *needed], check=False) != 0:
        _install([*pip, *needed])
        _install([uv, "cache", "prune", "--quiet"])  # the builds the online install superseded
    where = [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    site = Path(subprocess.run(where, capture_output=True, text=True, check=True).stdout.strip())
    (site / "receval_spark_repo.pth").write_text(f"{REPO}\n", encoding="utf-8")
    STAMP.write_text(wanted, encoding="utf-8")


def _install(command: list[str], *, check: bool = True) -> int:
    """Run an installer; its exit code, or (``check``) the error of a failed one."""
    proc = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"could not build {VENV}: {proc.stderr.strip()[-300:]}")
    return proc.returncode


def main(argv: list[str]) -> int:
    try:
        build_venv()
        fetch_jars()
        NOTE.unlink(missing_ok=True)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        CACHE.mkdir(parents=True, exist_ok=True)
        NOTE.write_text(f"{exc}\n", encoding="utf-8")
        print(f"Delta/Iceberg tests will be skipped: {exc}", file=sys.stderr)
        return 0
    print(f"lake environment: {VENV} (pyspark {PYSPARK}), jars in {FOLDER}")
    if argv[1:] == ["test"]:
        pytest = [str(VENV / "bin" / "python"), "-m", "pytest", "--confcutdir=tests/lake"]
        return subprocess.run(
            [*pytest, "-p", "no:cacheprovider", "tests/lake"], cwd=REPO
        ).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
