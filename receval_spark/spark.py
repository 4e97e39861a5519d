"""The one place a SparkSession is built."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

from pyspark import SparkConf, SparkContext  # connect-ok: local JVM start only
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from receval_spark import class_archive
from receval_spark.config.common import SparkConfig
from receval_spark.errors import SetupError

# Defaults sized for the small-to-medium jobs this tool runs; the config's spark.conf wins.
# AQE coalesces shuffle partitions to the data, so a modest fixed count is safe on large jobs too.
DEFAULT_CONF: Mapping[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.shuffle.partitions": "16",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",  # progress bars garble the job's own output
    # AQE renders the whole plan (cached relations' plans included) as a string at every
    # update; the job's deep plans made that string alone exhaust a 2 GiB driver.
    "spark.sql.maxPlanStringLength": "1000000",
    # Compiled generated code is cached per source text, 100 classes by default: fewer than
    # one evaluation generates, so a second evaluation in the same session (a notebook, the
    # tests) compiled everything again. Janino compiling is a quarter of the JVM's time on
    # small data (JFR); with room for every class a repeated tiny job took 12.5 -> 7.6 s.
    "spark.sql.codegen.cache.maxEntries": "1000",
    # a cluster run's reliable checkpoints (receval_spark/cache.py) are deleted as soon as no
    # plan holds them, not only when the run ends
    "spark.cleaner.referenceTracking.cleanCheckpoints": "true",
    # PySpark records the Python call site of every DataFrame and Column call for the context of
    # Spark's error messages (pyspark.errors.utils._with_origin): five round trips to the JVM
    # and a walk of the stack per call, half of a small job's 16,800 py4j calls. The job's own
    # errors name the problem without it (benchmarks/README.md, "Issue 51, sixth session").
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


def under_spark_submit() -> bool:
    """True when this Python process was launched by spark-submit (it hands us its gateway)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


# Spark's default logging minus failed tasks' Java stack traces (a local session's driver JVM).
QUIET_LOG4J = Path(__file__).with_name("log4j2.properties")
# What the JVM itself (not log4j) prints on stderr at every start: Spark's launcher always adds
# --add-modules=jdk.incubator.vector, and Java warns about incubator modules without an option
# to turn it off. A quiet local session drops exactly these lines from the JVM's stderr.
JVM_STARTUP_NOISE = (b"WARNING: Using incubator modules: ",)
# The thread stack of a local session's JVM, whose threads run the tasks: ALS's lineage is
# deserialised recursively in a task thread, and the JVM's default 1 MB leaves it no margin
# (the demo's ALS overflowed it, killing the driver, once its frames were compiled by C1 only).
# Options the config gives in spark.driver.extraJavaOptions come after it and win.
LOCAL_THREAD_STACK = "-Xss8m"


def build_session(config: SparkConfig, *, app_name: str, quiet: bool = False) -> SparkSession:
    """Return the session the job runs on.

    Under spark-submit: the session spark-submit provides; its master is never overridden.
    With ``remote``: a Spark Connect client. Otherwise: a local session on ``config.master``,
    bound to 127.0.0.1 unless SPARK_LOCAL_IP says otherwise, with Python workers pinned to this
    interpreter so they see the same packages, an 8 MB thread stack (``LOCAL_THREAD_STACK``),
    if this process has no JVM yet and ``config.class_archive``, the class-data archive of
    :mod:`receval_spark.class_archive`, and, when ``quiet``, a log4j configuration
    without failed tasks' stack traces (``QUIET_LOG4J``) and, if this process has no JVM yet,
    without the JVM's own start-up warning (``JVM_STARTUP_NOISE``).
    """
    settings = {**DEFAULT_CONF, **{k: _text(v) for k, v in config.conf.items()}}
    if config.remote:
        builder = SparkSession.builder.remote(config.remote)
    elif under_spark_submit():
        builder = SparkSession.builder
    else:
        _require_java()
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a local job listens on loopback
        options = [LOCAL_THREAD_STACK, settings.get("spark.driver.extraJavaOptions", "")]
        if config.class_archive and SparkContext._gateway is None:  # connect-ok: no JVM yet
            options.append(class_archive.jvm_options(settings))
        if quiet:
            options.append(f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}")
        settings["spark.driver.extraJavaOptions"] = " ".join(o for o in options if o)
        builder = SparkSession.builder.master(config.master)
        if quiet and SparkContext._gateway is None:  # connect-ok: local only, no JVM yet
            _start_quiet_context(settings, master=config.master, app_name=app_name)
    builder = builder.appName(app_name)
    if config.remote:
        session = builder.getOrCreate()
        for key, value in settings.items():
            arrow = key.startswith("spark.sql.execution.arrow")
            # static settings (e.g. the catalog implementation) are the server's own
            if key.startswith("spark.sql.") and not arrow and session.conf.isModifiable(key):
                session.conf.set(key, value)
        return session
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    for key, value in settings.items():
        if key.startswith("spark.sql.") and session.conf.isModifiable(key):
            session.conf.set(key, value)  # runtime SQL settings also apply to a reused session
    return session


def classic_context(spark: SparkSession) -> SparkContext | None:  # connect-ok: None there
    """The SparkContext of a classic session; None over Spark Connect (no SparkContext)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return None
    return spark.sparkContext  # connect-ok: guarded above (classic sessions only)


def _start_quiet_context(settings: Mapping[str, str], *, master: str, app_name: str) -> None:
    """Start the local driver JVM with its stderr piped through :func:`forward_stderr` (which
    drops ``JVM_STARTUP_NOISE``) and make it the active SparkContext, which the session
    builder then reuses. pyspark's ``launch_gateway(popen_kwargs=...)`` is the hook for this."""
    conf = SparkConf().setMaster(master).setAppName(app_name).setAll(list(settings.items()))
    gateway = launch_gateway(  # type: ignore[no-untyped-call]  # pyspark leaves it untyped
        conf, popen_kwargs={"stderr": subprocess.PIPE}
    )
    forward_stderr(gateway.proc.stderr, sys.stderr, drop=JVM_STARTUP_NOISE)
    SparkContext(conf=conf, gateway=gateway)  # connect-ok: the local driver it started


def forward_stderr(
    source: IO[bytes], target: IO[str], *, drop: Iterable[bytes]
) -> threading.Thread:
    """Copy ``source`` to ``target`` line by line on a daemon thread, except lines starting
    with one of ``drop``; the thread ends at the end of ``source`` (the JVM exited)."""
    prefixes = tuple(drop)

    def copy() -> None:
        for line in iter(source.readline, b""):
            if not line.startswith(prefixes):
                target.write(line.decode(errors="replace"))
                target.flush()

    thread = threading.Thread(target=copy, name="jvm-stderr", daemon=True)
    thread.start()
    return thread


def _text(value: str | float | bool) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _require_java() -> None:
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return
    raise SetupError(
        "Java was not found: local Spark needs Java 17 or newer. Install it "
        "(e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME, "
        "or point spark.remote at a Spark Connect server."
    )
