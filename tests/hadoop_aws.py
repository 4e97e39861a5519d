"""The jars that give Spark ``s3a://``: ``org.apache.hadoop:hadoop-aws`` of the Hadoop version
pyspark bundles (its ``hadoop-client-api`` jar says which) and what that artifact's pom names
for run time (the AWS SDK v2 ``bundle``, the analytics accelerator, wildfly-openssl), resolved
by Maven from Maven Central, so the versions are the pom's, never restated here.

``python tests/hadoop_aws.py`` (run by ``make test`` and ``make test-all``, not by ``make demo``)
fetches them once into ``$RECEVAL_JARS`` (default ``~/.cache/receval_spark/jars``), outside the
repository, and does nothing when they are there. Maven keeps its own copy in ``~/.m2``; the
cache holds hard links to it where it can (the SDK bundle alone is 686 MB). When Maven or Maven
Central cannot be reached it says so, writes the reason beside the cache and exits 0: the
``s3a`` tests then skip with that reason (tests/conftest.py, :func:`cached_jars`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyspark

CACHE = Path(os.environ.get("RECEVAL_JARS", Path.home() / ".cache" / "receval_spark" / "jars"))
MANIFEST = "jars.txt"  # written last: a folder with it holds every jar it names
MAVEN_TIMEOUT = 1800  # seconds; the SDK bundle is 686 MB
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>receval</groupId><artifactId>s3a-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.hadoop</groupId><artifactId>hadoop-aws</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def hadoop_version() -> str:
    """The Hadoop version of pyspark's bundled client jars (``hadoop-client-api-X.jar``)."""
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    if not jars:
        raise RuntimeError("pyspark ships no hadoop-client-api jar: which Hadoop does it use?")
    return jars[-1].name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def folder() -> Path:
    return CACHE / f"hadoop-aws-{hadoop_version()}"


def unavailable_note() -> Path:
    return CACHE / f"hadoop-aws-{hadoop_version()}.unavailable"


def cached_jars() -> list[Path] | str:
    """The cached jars, or why there are none (a reason a test can skip with)."""
    manifest = folder() / MANIFEST
    if manifest.exists():
        jars = [folder() / name for name in manifest.read_text(encoding="utf-8").split()]
        if all(jar.exists() for jar in jars):
            return jars
    why = "they have not been fetched"
    if unavailable_note().exists():
        why = unavailable_note().read_text(encoding="utf-8").strip()
    return (
        f"no hadoop-aws {hadoop_version()} jars in {folder()} ({why}); `python tests/hadoop_aws.py`"
        " (run by make test) fetches them from Maven Central"
    )


def resolve(version: str) -> list[Path]:
    """The run-time class path of hadoop-aws ``version`` in Maven's local repository, resolved
    (and downloaded) by Maven."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Maven is not installed (apt-get install maven)")
    with tempfile.TemporaryDirectory(prefix="receval-s3a-jars-") as work:
        (Path(work) / "pom.xml").write_text(POM.format(version=version), encoding="utf-8")
        classpath = Path(work) / "classpath.txt"
        proc = subprocess.run(
            [
                mvn,
                "--batch-mode",
                "--quiet",
                f"{DEPENDENCY_PLUGIN}:build-classpath",
                "-Dmdep.includeScope=runtime",
                f"-Dmdep.outputFile={classpath}",
            ],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=MAVEN_TIMEOUT,
        )
        if proc.returncode != 0 or not classpath.exists():
            errors = [line for line in proc.stdout.splitlines() if "ERROR" in line]
            raise RuntimeError(f"Maven could not resolve hadoop-aws {version}: {errors[:1]}")
        return [Path(p) for p in classpath.read_text(encoding="utf-8").split(os.pathsep) if p]


def fetch() -> list[Path]:
    """The cached jars, fetched first when they are not there (module doc)."""
    jars = cached_jars()
    if isinstance(jars, list):
        return jars
    resolved = resolve(hadoop_version())
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{folder().name}.", dir=CACHE))
    partial.chmod(0o755)
    for jar in resolved:
        try:
            os.link(jar, partial / jar.name)
        except OSError:  # another filesystem
            shutil.copy2(jar, partial / jar.name)
    (partial / MANIFEST).write_text("\n".join(j.name for j in resolved) + "\n", encoding="utf-8")
    shutil.rmtree(folder(), ignore_errors=True)
    partial.rename(folder())
    unavailable_note().unlink(missing_ok=True)
    return [folder() / jar.name for jar in resolved]


def main() -> int:
    try:
        jars = fetch()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        CACHE.mkdir(parents=True, exist_ok=True)
        unavailable_note().write_text(f"{exc}\n", encoding="utf-8")
        print(f"s3a tests will be skipped: {exc}", file=sys.stderr)
        return 0
    print(f"s3a jars: {', '.join(j.name for j in jars)} in {folder()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
