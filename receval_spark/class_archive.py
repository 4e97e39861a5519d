"""A class-data-sharing archive for the driver JVM a job starts on this machine.

A new JVM loads and verifies Spark's classes, about 28,000 of them, one by one. Mapped from an
archive of the classes an earlier run loaded, they cost MovieLens 100K's job as a process about
a fifth of its CPU and wall time (benchmarks/README.md). The first run for a Java, a Spark and a
class path has its JVM write the archive when it exits, after the job's output is complete
(Java's ``-XX:ArchiveClassesAtExit``, 10-20 s in the background), to a partial file. A later
run renames it into place once Java's log says it was written in full, and maps it from then on.
A partial archive is never mapped. A JVM whose class path does not match the archive runs
without it: Java checks that itself.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import pyspark

# Options that already choose an archive (the user's own, or the tests'): then none is added.
USER_CHOICE = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare", "AutoCreateSharedArchive")
# What Java logs (cds+dynamic, info) once it has written and closed a dynamic archive.
WRITTEN = b"Written dynamic archive"
# Java's notices about archives (a class path that does not match, classes it cannot archive)
# go to the job's stdout unless switched off; the writing JVM logs to its own file instead.
QUIET = "-Xlog:cds*=off -Xlog:class+path=off"
KEPT = 2  # archives kept per machine (other Spark or Java installations), most recent first
# Settings that change the driver's class path, so an archive of one does not fit another.
CLASS_PATH_SETTINGS = ("spark.driver.extraClassPath", "spark.jars", "spark.jars.packages")


def cache_folder() -> Path:
    """Where the archives live: ``$XDG_CACHE_HOME/receval_spark/jvm`` (``~/.cache`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "receval_spark" / "jvm"


def archive_key(settings: Mapping[str, str]) -> str:
    """What an archive fits, as Java checks it: the java pyspark launches, the Spark
    installation's jars (where they are, their sizes and times: Java runs without an archive
    whose class path has moved or changed, so another virtual environment or a reinstall gets
    an archive of its own), and the settings that extend the driver's class path."""
    home = os.environ.get("JAVA_HOME")
    java = Path(home, "bin", "java") if home else Path(shutil.which("java") or "java")
    jars = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent, "jars").resolve()
    parts = [
        pyspark.__version__,
        *(_stamp(path) for path in [java.resolve(), *sorted(jars.glob("*.jar"))]),
        *(f"{name}={settings.get(name, '')}" for name in CLASS_PATH_SETTINGS),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _stamp(path: Path) -> str:
    """A file's path, size and modification time (its path alone where it does not exist)."""
    try:
        stat = path.stat()
    except OSError:
        return str(path)
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def jvm_options(settings: Mapping[str, str], *, folder: Path | None = None) -> str:
    """The driver JVM's options for the archive: map it when it is complete; otherwise, unless
    another run's JVM is still writing it, write it at exit. Empty when the options in
    ``settings`` (``spark.driver.extraJavaOptions``), SPARK_SUBMIT_OPTS or JAVA_TOOL_OPTIONS
    already choose an archive, or when the cache folder cannot be used."""
    given = " ".join(
        [
            settings.get("spark.driver.extraJavaOptions", ""),
            os.environ.get("SPARK_SUBMIT_OPTS", ""),
            os.environ.get("JAVA_TOOL_OPTIONS", ""),
        ]
    )
    try:
        folder = folder or cache_folder()
    except (RuntimeError, KeyError):  # no home folder to find a cache in
        return ""
    if any(choice in given for choice in USER_CHOICE) or any(c.isspace() for c in str(folder)):
        return ""  # Spark splits the options at white space
    key = archive_key(settings)
    archive = folder / f"spark-{key}.jsa"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not archive.exists() and _settle(folder, key):
            return ""
        if archive.exists():
            os.utime(archive)  # most recently used: pruned last
            return mapping(archive)
        token = f"{os.getpid()}-{os.urandom(4).hex()}"
        partial = folder / f"spark-{key}.{token}.partial"
        log = folder / f"spark-{key}.{token}.jvm-%p.log"  # Java puts its pid for %p
        return f"-XX:ArchiveClassesAtExit={partial} {QUIET} -Xlog:cds+dynamic=info:file={log}"
    except OSError:
        return ""  # a read-only or full cache: the job runs without an archive


def mapping(archive: Path) -> str:
    """The JVM options that map ``archive``, without Java's notices (a JVM whose class path does
    not match it, or that starts before it exists, runs without it)."""
    return f"-XX:SharedArchiveFile={archive} {QUIET}"


def _settle(folder: Path, key: str) -> bool:
    """Settle earlier runs' writes of archives, of ``key`` or of another Java, Spark or class
    path: move those Java logged as written into place, delete those whose JVM ended before
    finishing, then keep the KEPT most recently used archives. True while a JVM that is still
    running may yet write the archive ``key``."""
    writing = False
    for log in sorted(folder.glob("spark-*.jvm-*.log")):
        name, _, pid = log.name.removesuffix(".log").partition(".jvm-")  # spark-<key>.<token>
        partial = folder / f"{name}.partial"
        if _written(log) and partial.exists():
            os.replace(partial, folder / f"{name.rpartition('.')[0]}.jsa")
        elif pid.isdigit() and _running(int(pid)):
            writing = writing or name.startswith(f"spark-{key}.")
            continue
        partial.unlink(missing_ok=True)
        log.unlink(missing_ok=True)
    _prune(folder)
    return writing


def _written(log: Path) -> bool:
    """Whether Java's log of a dump ends with its line for an archive written in full."""
    with log.open("rb") as lines:
        lines.seek(max(0, log.stat().st_size - 4096))
        return WRITTEN in lines.read()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _prune(folder: Path) -> None:
    """Keep the KEPT most recently used archives of this machine's Spark and Java installs."""
    archives = sorted(folder.glob("spark-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in archives[KEPT:]:
        stale.unlink(missing_ok=True)
