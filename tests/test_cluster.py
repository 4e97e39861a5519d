"""The demo job on a real Spark standalone cluster, and the properties that make its numbers the
same wherever it runs: partitioning, parallelism, a lost worker, a small driver heap.

The cluster is started from the installed pyspark (``<pyspark>/bin/spark-class``): one master and
two workers with one core and 1 GB each, all on 127.0.0.1, in their own process groups, stopped
by process group in the fixture's teardown whatever happens. The reference is the same config run
by ``receval evaluate`` in local mode (the session's shared ``demo_runs``: local[*] on a 2-core
machine, shuffle partitions 4 as in conf/demo.yaml). Compared with it: local[1] with 1 shuffle
partition and a 512 MB driver (the ``python -m`` run of ``demo_runs``); the cluster with 32
shuffle partitions and a worker killed mid-job (one run for both: each cluster run is a
demo-sized job on two 1-core workers).

What "the same metrics" means: the same rows with bit-for-bit equal values, n_users, std and
interval bounds. Every sum of doubles in the job is order-independent
(``metrics/aggregate.py::exact_sum``), and everything seeded (the random model's draws, the
split, the bootstrap weights) is computed from hashes, not from partition-dependent streams.

How the package reaches the cluster, and what the executors need
-----------------------------------------------------------------
* A user's custom metric module (``SHOP_METRICS``) is shipped as a second ``--py-files`` zip:
  its pandas UDF calls a module-level helper, which cloudpickle pickles by reference, so
  executors import the module, from that zip.
* Of receval_spark, one pandas UDF and nothing else runs Python per row: ``applyInPandas`` with
  ``metrics/bootstrap_kernel.py::replicate_blocks_kernel`` (the bootstrap's replicated exposure
  blocks). The kernel module uses numpy, pandas and constants only and ``metrics/bootstrap.py``
  registers it with cloudpickle to be pickled by value, so executors run it without importing
  receval_spark. Everything else is a Spark SQL expression (the ``lambda``s in
  metrics/diversity.py, metrics/novelty.py, inputs.py and sessions/models.py build
  higher-order SQL functions, which run as JVM code); there are no RDD lambdas.
* Executors also start Python workers for ``spark.createDataFrame(list, schema)``
  (results.py and ranking/pipeline.py build the metrics, comparisons and runs tables on the
  driver): PySpark parallelizes the pickled rows and re-serializes them with a
  ``map(lambda x: x)``. Those workers unpickle plain tuples and import pyspark only.
* The proof, in ``test_demo_on_the_cluster_matches_local_mode_through_a_lost_worker``: the driver
  and the executors run Python through wrappers (``spark.pyspark.driver.python`` /
  ``spark.pyspark.python``) that hide this venv's *editable* install of receval_spark (which points
  into the repository) and log every receval_spark module each process imports, with the file it
  came from. The driver must import every module from the zip shipped with ``--py-files``; the
  executors must import none from anywhere but the shipped zip (today they import none at all; the
  log of Python worker starts shows they do start Python). spark-submit runs in a temporary folder
  with absolute paths, and the input CSVs are read from a copy outside the repository, so nothing
  on the cluster side touches the checkout.
* The shipped artefact is a plain zip of ``receval_spark/`` (modules, ``py.typed`` and the
  report templates; not ``data/``: the job reads its input from ``data.*.path``). ``pip wheel``
  is not used: this venv's setuptools has no ``bdist_wheel`` (no ``wheel`` package), and a build
  would write ``build/`` and egg-info into the checkout.
* The zip must work as it is: ``receval_spark/report/`` is a regular package and the report
  templates are read through importlib.resources (jinja2's PackageLoader finds no templates
  inside a zip); ``test_the_package_folder_imports_and_renders_from_a_zip`` checks both.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pyarrow.parquet as pq
import pyspark
import pytest
from helpers import (
    DATE_A,
    DATE_M,
    DEPLOYMENT_SETTINGS,
    REPO,
    DemoRuns,
    free_port,
    group_members,
    same_value,
    stop_group,
)
from helpers import explain as demo_explain

pytestmark = pytest.mark.integration

SPARK_HOME = Path(pyspark.__file__).resolve().parent
PYTHON = sys.executable
CONFIG = REPO / "conf" / "demo.yaml"  # absolute: spark-submit runs outside the repository
JOB = REPO / "jobs" / "evaluate.py"
DATA = REPO / "receval_spark" / "data" / "ml-latest-small"
DATE = DATE_A  # the date of the shared local demo run (demo_runs), the reference
COMMON = ["--set", f"run.date={DATE}", *DEPLOYMENT_SETTINGS]
APP_NAME = "receval:demo-ml-latest-small"
JOB_TIMEOUT = 1800  # seconds per job: the machine running the tests may be busy
START_TIMEOUT = 300
FAULT_LINES = re.compile(  # what the driver logs about a lost executor and the recovery
    r"Lost executor|Lost task|Executor lost|is now LOST|Shuffle files lost|FetchFailed|"
    r"Resubmitt|No more replicas|Missing an output location|Retrying"
)
KILL_AFTER = 40  # tasks the victim's executor finishes before the kill (hundreds in the job)

T = TypeVar("T")
Metrics = dict[tuple, tuple]


# ---------------------------------------------------------------------------------------------
# metrics


def read_metrics(output: Path, date: str = DATE) -> Metrics:
    """(model, segment, protocol, metric, k) -> (value, n_users, std, ci_low, ci_high), read
    with pyarrow as a plain reader outside Spark does (superseded runs' folders hold no file)."""
    rows = pq.read_table(output / "metrics" / f"run_date={date}").to_pylist()
    return {
        (r["model"], r["segment"], r["protocol"], r["metric"], r["k"]): (
            r["value"],
            r["n_users"],
            r["std"],
            r["ci_low"],
            r["ci_high"],
        )
        for r in rows
    }


def assert_same_metrics(reference: Metrics, other: Metrics, what: str) -> str:
    """The same rows, and value, n_users, std, ci_low, ci_high bit-for-bit equal."""
    assert reference, "no reference metrics"
    assert other.keys() == reference.keys(), (
        f"{what}: rows differ: missing {sorted(reference.keys() - other.keys())[:5]}, "
        f"extra {sorted(other.keys() - reference.keys())[:5]}"
    )
    wrong = [
        (key, reference[key], other[key])
        for key in sorted(reference, key=repr)
        if not all(map(same_value, reference[key], other[key]))
    ]
    assert not wrong, f"{what}: {len(wrong)} of {len(reference)} metric rows differ: {wrong[:5]}"
    return f"{what}: all {len(reference)} metric rows bit-for-bit identical"


# ---------------------------------------------------------------------------------------------
# processes


def wait_until(
    probe: Callable[[], T | None],
    what: str,
    *,
    timeout: float = START_TIMEOUT,
    alive: tuple[subprocess.Popen, ...] = (),
    logs: tuple[Path, ...] = (),
) -> T:
    """Poll ``probe`` until it returns something truthy; fail if a process in ``alive`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = probe()
        if result:
            return result
        dead = [p.args for p in alive if p.poll() is not None]
        if dead:
            break
        time.sleep(1)
    tails = "\n".join(f"--- {log}\n{tail(log)}" for log in logs)
    pytest.fail(f"timed out or a process exited waiting for {what}; exited: {dead}\n{tails}")


def tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no file)"


def job_env() -> dict[str, str]:
    """The environment of spark-submit: loopback only, and no PYSPARK_*PYTHON from the test
    process (the runs choose their interpreters with spark.pyspark.*python)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    }
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1")
    return env


# ---------------------------------------------------------------------------------------------
# the cluster


@dataclass
class Cluster:
    root: Path
    master_port: int = field(default_factory=free_port)
    webui_port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def env(self) -> dict[str, str]:
        env = job_env()
        env.update(
            SPARK_WORKER_DIR=str(self.root / "work"),
            SPARK_LOG_DIR=str(self.root / "logs"),
            SPARK_DAEMON_MEMORY="512m",  # the master and worker JVMs themselves
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",  # no REST server on :6066
        )
        return env

    def spawn(self, name: str, *args: str) -> subprocess.Popen:
        with self.log(name).open("ab") as log:
            proc = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                cwd=self.root,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped as a whole
            )
        self.procs[name] = proc
        return proc

    def start_master(self) -> None:
        self.spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.master_port),
            "--webui-port",
            str(self.webui_port),
        )

    def start_worker(self, name: str) -> subprocess.Popen:
        work = self.root / name  # one work dir per worker: its executors' logs are found there
        work.mkdir(exist_ok=True)
        return self.spawn(
            name,
            "org.apache.spark.deploy.worker.Worker",
            self.url,
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            "1g",
            "--webui-port",
            str(free_port()),
            "--work-dir",
            str(work),
        )

    def state(self) -> dict | None:
        """The master's status JSON (web UI on 127.0.0.1), or None while it is not up."""
        try:
            url = f"http://127.0.0.1:{self.webui_port}/json/"
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.load(response)
        except (OSError, ValueError):  # not up yet, or still serving its start page
            return None

    def alive_workers(self) -> int:
        state = self.state() or {}
        return sum(w.get("state") == "ALIVE" for w in state.get("workers", []))

    def app(self) -> dict | None:
        """The latest running application of the demo job."""
        state = self.state() or {}
        apps = state.get("activeapps", [])
        ours = [a for a in apps if a.get("name") == APP_NAME]
        return max(ours, key=lambda a: a.get("starttime", 0)) if ours else None

    def executor_logs(self, worker: str, app_id: str) -> list[Path]:
        return sorted((self.root / worker / app_id).glob("*/stderr"))

    def stop(self) -> None:
        for proc in reversed(self.procs.values()):
            stop_group(proc)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and two 1-core, 1 GB workers from the installed pyspark."""
    cluster = Cluster(tmp_path_factory.mktemp("cluster"))
    (cluster.root / "logs").mkdir()
    try:
        cluster.start_master()
        cluster.start_worker("worker-1")
        cluster.start_worker("worker-2")
        wait_until(
            lambda: cluster.alive_workers() == 2,
            "two workers registered with the master",
            alive=tuple(cluster.procs.values()),
            logs=tuple(cluster.log(n) for n in cluster.procs),
        )
        yield cluster
    finally:
        cluster.stop()


# ---------------------------------------------------------------------------------------------
# the shipped package and the Python probes


def build_zip(target: Path) -> Path:
    """``receval_spark/`` as a zip for ``--py-files``: modules, py.typed, the log4j and report
    templates (not ``data/``), files only, without directory entries, as in a wheel."""
    package = REPO / "receval_spark"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*")):
            relative = path.relative_to(package)
            if "__pycache__" in relative.parts or relative.parts[0] in ("data",):
                continue
            if path.is_dir() or path.suffix in (".pyc", ".pyo"):
                continue
            archive.write(path, path.relative_to(REPO).as_posix())
    return target


SITECUSTOMIZE = '''\
"""Test probe: hide the editable install of receval_spark (it points into the repository) and
log each receval_spark module this process imports, with the file it comes from."""
import os
import sys
from importlib.machinery import PathFinder


def _editable(thing):
    return "__editable__" in (getattr(thing, "__module__", None) or "")


sys.meta_path[:] = [f for f in sys.meta_path if not _editable(f)]
sys.path_hooks[:] = [h for h in sys.path_hooks if not _editable(h)]
sys.path[:] = [p for p in sys.path if "__editable__" not in p]
sys.path_importer_cache.clear()


class _Recorder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name in ("receval_spark", "shop_metrics") or name.startswith("receval_spark."):
            spec = PathFinder.find_spec(name, path)
            origin = (spec.origin or list(spec.submodule_search_locations or [])) if spec else None
            with open(os.environ["RECEVAL_PROBE_IMPORTS"], "a") as log:
                log.write(f"{os.getpid()}\\t{name}\\t{origin}\\n")
        return None


sys.meta_path.insert(0, _Recorder)
'''


@dataclass
class Probes:
    """Python wrappers for the driver and the executors, and what they recorded."""

    root: Path

    def __post_init__(self) -> None:
        hide = self.root / "hide"
        hide.mkdir(parents=True)
        (hide / "sitecustomize.py").write_text(SITECUSTOMIZE)
        for role in ("driver", "executor"):
            script = self.python(role)
            script.write_text(
                "#!/bin/sh\n"
                f'echo "$$ $*" >> "{self.root}/{role}-starts.log"\n'
                f'export RECEVAL_PROBE_IMPORTS="{self.root}/{role}-imports.log"\n'
                f'export PYTHONPATH="{hide}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
                f'exec "{PYTHON}" "$@"\n'
            )
            script.chmod(0o755)

    def python(self, role: str) -> Path:
        return self.root / f"{role}-python"

    def starts(self, role: str) -> list[str]:
        log = self.root / f"{role}-starts.log"
        return log.read_text().splitlines() if log.exists() else []

    def imports(self, role: str) -> list[tuple[str, str]]:
        log = self.root / f"{role}-imports.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [tuple(line.split("\t")[1:3]) for line in lines]


# a user's own metric module, shipped with --py-files next to the package: cloudpickle ships
# the pandas UDF's function by value, but the module-level helper it calls by reference, so
# the executors must import the module, from the shipped zip
SHOP_METRICS = '''\
"""A team's own metrics (test_cluster.py ships this module to the cluster)."""
import numpy as np
import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import DoubleType


def log_discount(ranks):
    return 1.0 / np.log2(ranks + 1.0)


@pandas_udf(DoubleType())  # a type object: the module is imported before any session exists
def discount(ranks: pd.Series) -> pd.Series:
    return log_discount(ranks.astype("float64"))


def discounted_hits(lists):
    """Sum over the relevant list items of 1 / log2(rank + 1), divided by k."""
    hits = F.sum(F.when(F.col("relevant"), discount(F.col("rank"))).otherwise(F.lit(0.0)))
    return hits / F.first("k")
'''
CUSTOM_METRIC = (
    "evaluation.custom_metrics=[{name: discounted_hits, path: 'shop_metrics:discounted_hits'}]"
)


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> tuple[Path, Path]:
    """(zips for --py-files: the package and the user's metric module, folder holding a copy
    of the input data): nothing the cluster side reads is inside the repository."""
    root = tmp_path_factory.mktemp("shipped")
    data = root / "storage"
    data.mkdir()
    for name in ("ratings.csv", "movies.csv"):
        shutil.copy(DATA / name, data / name)
    with zipfile.ZipFile(root / "shop_metrics.zip", "w") as archive:
        archive.writestr("shop_metrics.py", SHOP_METRICS)
    package = build_zip(root / "receval_spark.zip")
    return Path(f"{package},{root / 'shop_metrics.zip'}"), data


def submit_command(cluster: Cluster, package: Path, data: Path, probes: Probes, output: Path | str):
    return [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--master",
        cluster.url,
        "--driver-memory",
        "1g",
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        f"spark.pyspark.driver.python={probes.python('driver')}",
        "--conf",
        f"spark.pyspark.python={probes.python('executor')}",
        "--py-files",
        str(package),
        str(JOB),
        "--config",
        str(CONFIG),
        *COMMON,
        "--set",
        f"output.path={output}",
        "--set",
        f"data.interactions.path={data / 'ratings.csv'}",
        "--set",
        f"data.items.path={data / 'movies.csv'}",
    ]


def checkpointed(folder: Path) -> list[Path]:
    """The data files of the reliable checkpoints under ``folder`` (the run's checkpoint
    directory: one subfolder per application, in it one ``rdd-N`` folder per checkpoint)."""
    if not folder.exists():
        return []
    return [p for p in folder.glob("*/rdd-*/*") if p.is_file() and not p.name.startswith(".")]


def finished_tasks(logs: list[Path]) -> int:
    return sum(log.read_text(errors="replace").count("Finished task") for log in logs)


# ---------------------------------------------------------------------------------------------
# the local reference run


@pytest.fixture(scope="module")
def local_metrics(demo_runs: DemoRuns) -> Metrics:
    """The demo config in local mode (``receval evaluate``, local[*] on this machine, shuffle
    partitions 4 as in conf/demo.yaml), from the session's shared demo runs."""
    assert demo_runs.first.returncode == 0, demo_explain(demo_runs.first)
    return read_metrics(demo_runs.after_first)


def explain(returncode: int | None, out: str, err: str) -> str:
    return f"exit {returncode}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-8000:]}"


# ---------------------------------------------------------------------------------------------
# tests


def test_the_package_folder_imports_and_renders_from_a_zip(tmp_path: Path) -> None:
    """What --py-files needs: the package as it is, zipped, imports and renders the report
    templates in a Python that cannot see the repository (no Spark involved)."""
    package = build_zip(tmp_path / "receval_spark.zip")
    probes = Probes(tmp_path / "probes")
    check = (
        "import receval_spark.cli, receval_spark.ranking.pipeline\n"
        "from receval_spark.report import render\n"
        "assert '<html' in render._template_source('report.html.j2')\n"
        "assert render._template_source('report.md.j2')\n"
        "print(render.__file__)\n"
    )
    env = job_env()
    env["PYTHONPATH"] = str(package)
    proc = subprocess.run(
        [str(probes.python("driver")), "-c", check],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, explain(proc.returncode, proc.stdout, proc.stderr)
    assert "receval_spark.zip/receval_spark/report/render.py" in proc.stdout, proc.stdout
    origins = [origin for _, origin in probes.imports("driver")]
    assert not [o for o in origins if str(REPO) in o], origins  # the probe hides the checkout


def test_local_1_with_one_shuffle_partition_gives_the_same_metrics(
    local_metrics: Metrics, demo_runs: DemoRuns
) -> None:
    """local[1] with 1 shuffle partition against local[2] with 4: the same metrics, bit for bit,
    including the seeded random model and the Poisson-bootstrap intervals (bootstrap_samples
    100, the default). The cluster run below uses 32 shuffle partitions."""
    assert demo_runs.by_module.returncode == 0, demo_explain(demo_runs.by_module)
    bootstrapped = [k for k, row in local_metrics.items() if k[3] == "coverage" and row[3]]
    assert bootstrapped, "expected bootstrap intervals for coverage"
    assert any(key[0] == "random" for key in local_metrics)
    summary = assert_same_metrics(
        local_metrics,
        read_metrics(demo_runs.after_first, DATE_M),
        "local[1], 1 shuffle partition vs local[2], 4",
    )
    print(f"\n{summary}")


def test_the_job_runs_with_a_512_mb_driver(demo_runs: DemoRuns) -> None:
    """``spark.conf.spark.driver.memory: 512m`` (here with --set) sizes the driver heap of a
    job that starts its own local Spark: the job applies it before PySpark launches the JVM,
    whose command line carries -Xmx512m. (Under spark-submit the driver JVM is already running
    when the job reads its config; there only ``spark-submit --driver-memory 512m`` works.)"""
    run, jvm = demo_runs.by_module, demo_runs.by_module_jvm
    assert run.returncode == 0, demo_explain(run)
    assert f"({DATE_M})" in run.stdout, run.stdout
    assert jvm is not None, "the driver JVM was not seen"
    assert "org.apache.spark.deploy.SparkSubmit" in jvm, jvm
    assert [arg for arg in jvm if arg.startswith("-Xmx")] == ["-Xmx512m"], jvm
    assert [arg for arg in jvm if arg.startswith("-Xss")] == ["-Xss8m"], jvm  # LOCAL_THREAD_STACK


@pytest.mark.cluster
def test_demo_on_the_cluster_matches_local_mode_through_a_lost_worker(
    cluster: Cluster,
    shipped: tuple[Path, Path],
    local_metrics: Metrics,
    tmp_path: Path,
    viewfs_mount: tuple[str, Path],
) -> None:
    """spark-submit to the standalone master from a folder outside the repository, the package
    shipped as a zip with --py-files, 32 shuffle partitions, the reports written through
    ``viewfs://`` (a Hadoop filesystem only the JVMs can open); once worker-2's executor has
    finished tasks of the job, SIGKILL worker-2's whole process group (the Worker JVM, its
    executor JVM and that executor's Python workers): Spark loses the executor, re-runs its
    tasks and recomputes its shuffle output on worker-1. The job exits 0 with the same metrics
    as local mode, executors ran tasks on both workers, and no process imports receval_spark
    from the checkout (module docstring). One cluster run proves both: a second, fault-free
    one would cost another demo-sized job on two 1-core workers."""
    package, data = shipped
    victim_name = "worker-2"
    victim = cluster.procs[victim_name]
    probes = Probes(tmp_path / "probes")
    folder = f"cluster-{tmp_path.name}"  # viewfs://receval/lake/X is viewfs_mount's folder/X
    output = f"viewfs://receval/lake/{folder}"
    checkpoints = viewfs_mount[1] / folder / "_checkpoints"  # receval_spark/run.py
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    command = [
        *submit_command(cluster, package, data, probes, output),
        "--set",
        CUSTOM_METRIC,
        "--set",
        "spark.conf.spark.sql.shuffle.partitions=32",
        "--set",
        f"spark.conf.{viewfs_mount[0]}",
    ]
    started = time.monotonic()
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            command,
            cwd=tmp_path,
            env=job_env(),
            stdout=stdout,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
    try:
        app = wait_until(
            lambda: cluster.app(),
            "the app to start",
            timeout=JOB_TIMEOUT,
            alive=(proc,),
            logs=(err,),
        )
        wait_until(
            lambda: (
                finished_tasks(cluster.executor_logs(victim_name, app["id"])) >= KILL_AFTER
                and checkpointed(checkpoints)
            ),
            f"{victim_name}'s executor to finish {KILL_AFTER} tasks and a checkpoint to be written",
            timeout=JOB_TIMEOUT,
            alive=(proc,),
            logs=(err,),
        )
        done_before_kill = finished_tasks(cluster.executor_logs(victim_name, app["id"]))
        written_before_kill = checkpointed(checkpoints)
        members = group_members(victim.pid)
        executors = [pid for pid, cmd in members.items() if "CoarseGrainedExecutorBackend" in cmd]
        assert executors, f"no executor in {victim_name}'s process group: {members}"
        killed_after = time.monotonic() - started
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(30)
        returncode = proc.wait(JOB_TIMEOUT)
    finally:
        stop_group(proc)
    seconds = time.monotonic() - started
    stdout_text, stderr_text = out.read_text(), err.read_text()
    assert returncode == 0, explain(returncode, stdout_text, stderr_text)
    assert f"({DATE})" in stdout_text, stdout_text

    per_worker = {
        worker: finished_tasks(cluster.executor_logs(worker, app["id"]))
        for worker in ("worker-1", "worker-2")
    }
    assert all(per_worker.values()), f"tasks finished per worker: {per_worker}"
    # the intermediates were reliable checkpoints on the shared filesystem, which the lost
    # executor could not take with it; the run deleted their files when it ended
    assert written_before_kill, "no reliable checkpoint was written before the kill"
    apps = sorted(p.name for p in checkpoints.iterdir())
    assert len(apps) == 1, f"one application's checkpoint folder expected: {apps}"
    assert not checkpointed(checkpoints), f"checkpoint files left: {checkpointed(checkpoints)[:5]}"
    assert not set(executors) & set(group_members(victim.pid)), "the executor survived the kill"
    faults = [line for line in stderr_text.splitlines() if FAULT_LINES.search(line)]
    assert any("Lost executor" in line or "ExecutorLost" in line for line in faults), (
        "the driver never reported the lost executor:\n" + stderr_text[-6000:]
    )

    driver = probes.imports("driver")
    assert {"receval_spark", "receval_spark.cli", "receval_spark.report.render"} <= {
        name for name, _ in driver
    }, driver
    outside = [
        (n, o)
        for n, o in driver
        if "receval_spark.zip/receval_spark/" not in o and n != "shop_metrics"
    ]
    assert not outside, f"driver imports not from the shipped zip: {outside}"
    executor = probes.imports("executor")
    outside = [
        (n, o)
        for n, o in executor
        if "receval_spark.zip/receval_spark/" not in o and n != "shop_metrics"
    ]
    assert not outside, f"executor imports not from the shipped zip: {outside}"
    # the user's metric module: imported by the driver and by executors, from its shipped zip
    for role, imports in (("driver", driver), ("executor", executor)):
        shop = {o for n, o in imports if n == "shop_metrics"}
        assert shop and all("shop_metrics.zip/shop_metrics.py" in o for o in shop), (role, shop)

    # how to render the page (spark-submit merges the Python driver's stderr into stdout)
    assert "receval report --reports viewfs://" in stdout_text, stdout_text
    metrics = read_metrics(viewfs_mount[1] / folder)
    custom = {key: row for key, row in metrics.items() if key[3] == "discounted_hits"}
    assert {(m, k) for m, s, _, _, k in custom if s == "all"} == {
        (m, k) for m in ("popularity", "random", "oracle") for k in (5, 10, 20)
    }, sorted(custom)
    assert all(0.0 <= row[0] <= 1.0 for row in custom.values()), custom
    oracle, popularity = (
        custom[(m, "all", "full", "discounted_hits", 10)][0] for m in ("oracle", "popularity")
    )
    assert oracle > popularity, (oracle, popularity)
    summary = assert_same_metrics(
        local_metrics,
        {key: row for key, row in metrics.items() if key not in custom},
        "cluster (viewfs, 32 shuffle partitions, a worker killed) vs local[2], 4",
    )
    (tmp_path / "faults.txt").write_text("\n".join(faults))
    master_log = tail(cluster.log("master"), 20000)
    print(
        f"\n{summary}\nkilled {victim_name} (pgid {victim.pid}, executor pids {executors}) "
        f"{killed_after:.0f} s into the job after its executor finished {done_before_kill} "
        f"tasks and {len(written_before_kill)} checkpoint files were written; job finished "
        f"after {seconds:.0f} s; tasks finished per worker {per_worker}; "
        f"Python worker starts on executors: {len(probes.starts('executor'))}; receval_spark "
        f"modules imported by executors: {len(executor)}, by the driver: {len(driver)} "
        f"(all from the shipped zip)\ndriver fault lines ({len(faults)}):\n"
        + "\n".join(faults[:40])
        + "\nmaster:\n"
        + "\n".join(
            line for line in master_log.splitlines() if re.search(r"[Ww]orker|LOST|lost", line)
        )[-3000:]
    )
