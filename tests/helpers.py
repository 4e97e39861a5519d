"""Helpers shared by the test modules (tests/ is on sys.path through pyproject's
``[tool.pytest.ini_options] pythonpath``): paths, the shared session's SQL options, crafted
inputs, and the demo job run as a user runs it. Fixtures live in tests/conftest.py."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import reference
import yaml
from storage import ReportRoot

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RECEVAL_SHARED_DATA", REPO.parent / "shared" / "data"))
VENV_BIN = Path(sys.executable).parent


# ---------------------------------------------------------------------------------------------
# the shared in-process session


@contextlib.contextmanager
def kept_sql_conf(spark, keys: Iterable[str] | None = None):
    """Put back (or unset) the runtime SQL options ``keys`` of the shared session after the
    block; by default those a job run in this process sets (receval_spark.spark.DEFAULT_CONF's
    and the configs' modifiable spark.sql.* options)."""
    from receval_spark.spark import DEFAULT_CONF

    if keys is None:
        keys = [
            k for k in DEFAULT_CONF if k.startswith("spark.sql.") and spark.conf.isModifiable(k)
        ]
    saved = {key: spark.conf.get(key, None) for key in keys}
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


# Spark's expressions interpreted (its test-only factoryMode), or generated as Java and compiled
# as in users' sessions: most tests' jobs are tiny, where compiling is most of the cost
# (conftest.py, SHORT_LIVED_JVM); the ml-100k jobs run generated code (sql_conf(spark, GENERATED)).
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
GENERATED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
# INTERPRETED as JVM options, which Spark reads as settings of the session the JVM starts
INTERPRETED_OPTIONS = [f"-D{k}={v}" for k, v in INTERPRETED.items()]
# The JVMs the tests start for one small job compile with C1 only and interpret (conftest.py)
SHORT_LIVED_JVM = " ".join(["-XX:TieredStopAtLevel=1", *INTERPRETED_OPTIONS])


@contextlib.contextmanager
def sql_conf(spark, settings: dict[str, str]):
    """The runtime SQL ``settings`` on the shared session inside the block (kept_sql_conf)."""
    with kept_sql_conf(spark, settings):
        for key, value in settings.items():
            spark.conf.set(key, value)
        yield


@contextlib.contextmanager
def one_als_fit_per_history(fit_model):
    """Within the block, the ALS fits of ``fit_model`` (the tests' import of it) are memoised
    by (history DataFrame, fit parameters): a test that fits the same seeded ALS on the same
    history for two configurations (e.g. ``fallback: none`` and ``popularity``, which wrap the
    fit differently) runs the fit's Spark jobs once; everything else of fit_model runs as
    always. Fails loudly (KeyError) if fit_model no longer fits ALS through ``fit_als``."""
    namespace = fit_model.__globals__
    fit_als = namespace["fit_als"]
    fits: dict[tuple, tuple] = {}

    def fit_once(history, **params):
        key = (id(history), tuple(sorted(params.items())))
        if key not in fits:  # the history is kept with its fit: its id stays unique
            fits[key] = (history, fit_als(history, **params))
        return fits[key][1]

    namespace["fit_als"] = fit_once
    try:
        yield
    finally:
        namespace["fit_als"] = fit_als


# ---------------------------------------------------------------------------------------------
# crafted inputs

# The `spark.conf` of jobs on tiny inputs run in-process: one shuffle partition and no AQE
# re-planning cut a run's Spark work by about a third (both are put back by kept_sql_conf).
# Partitioning is the subject of other tests (test_properties, test_aggregate, the local[1],
# spark-submit and cluster runs of the demo).
TINY_SPARK_CONF = {"spark.sql.shuffle.partitions": 1, "spark.sql.adaptive.enabled": False}

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
DAY = 86_400


def at(day: float) -> dt.datetime:
    return T0 + dt.timedelta(days=day)


def crafted_log(*, reconsumed: bool) -> pd.DataFrame:
    """Users 1-4: 3 train interactions (days 0-2) and one relevant test item (day 5);
    users 5, 6: only a test interaction (cold). With ``reconsumed``, user 1's test item is
    one they already rated in train (re-consumption)."""
    rows = []
    for user in range(1, 5):
        rows += [(user, 10 * user + j, int(T0.timestamp()) + j * DAY, 3.0) for j in range(3)]
        test_item = 10 * user if (reconsumed and user == 1) else 100 + user
        rows.append((user, test_item, int(T0.timestamp()) + 5 * DAY, 5.0))
    rows += [(user, 100 + user, int(T0.timestamp()) + 6 * DAY, 5.0) for user in (5, 6)]
    return pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp", "rating"])


def crafted_job_config(
    tmp: Path, log: pd.DataFrame, models: list[dict[str, Any]]
) -> dict[str, Any]:
    """A job on ``log`` (written to ``tmp/log.parquet``), split at day 4, reports under
    ``tmp/reports``, k = 2, ndcg and recall, segments warm and cold, no bootstrap."""
    path = tmp / "log.parquet"
    log.to_parquet(path, index=False)
    return {
        "run": {"name": "checks", "date": "2024-02-01"},
        "spark": {"master": "local[2]", "conf": dict(TINY_SPARK_CONF)},
        "output": {"path": str(tmp / "reports")},
        "data": {
            "interactions": {
                "path": str(path),
                "columns": {
                    "user": "user_id",
                    "item": "item_id",
                    "timestamp": "timestamp",
                    "rating": "rating",
                },
            }
        },
        "split": {"method": "global_temporal", "cutoff": at(4).isoformat()},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": [2],
            "min_users": 0,
            "segments": ["warm", "cold"],
            "metrics": ["ndcg", "recall"],
            "bootstrap_samples": 0,
        },
        "models": models,
    }


@dataclass
class Nights:
    """A nightly job on the crafted log: popularity and an external model ``ext`` whose
    recommendations are a new file each night (as a nightly export), run through the CLI."""

    spark: Any
    raw: dict[str, Any]
    folder: Path

    @classmethod
    def crafted(cls, spark: Any, tmp: Path) -> Nights:
        raw = crafted_job_config(
            tmp,
            crafted_log(reconsumed=False),
            [
                {"name": "popularity", "kind": "popularity"},
                {"name": "ext", "kind": "external", "path": str(tmp / "recs.parquet")},
            ],
        )
        return cls(spark, raw, tmp)

    def run(self, date: str, recommendations: pd.DataFrame, *args: str) -> int:
        """The job for ``date`` with ``ext``'s lists ``recommendations``; its exit status."""
        from receval_spark.cli import main

        night = self.folder / f"recs-{date}.parquet"
        recommendations.to_parquet(night, index=False)
        self.raw["models"][1]["path"] = str(night)
        self.raw["run"]["date"] = date
        path = self.folder / "job.yaml"
        path.write_text(yaml.safe_dump(self.raw), encoding="utf-8")
        with kept_sql_conf(self.spark):
            return main(["evaluate", "--config", str(path), *args])


# ext recommends each user's relevant test item 100 + u (price u), then item 200 (price 10,
# provider p0); popularity only train items (price 1, provider p1), never relevant
SHOP_RECOMMENDATIONS = pd.DataFrame(  # margin: a per-(user, item) attribute of the model's rows
    [(u, 100 + u, 1.0, 0.25) for u in range(1, 7)] + [(u, 200, 0.5, 0.75) for u in range(1, 7)],
    columns=["user_id", "item_id", "score", "margin"],
)
ITEMS = pd.DataFrame(
    [(i, 1.0, "p1") for i in range(10, 43)]
    + [(100 + u, float(u), "p1") for u in range(1, 7)]
    + [(200, 10.0, "p0")],
    columns=["item_id", "price", "provider"],
)
TIERS = pd.DataFrame(
    [(1, "gold"), (2, "gold"), (3, "silver"), (4, "silver"), (5, "gold")],
    columns=["user_id", "tier"],
)


def shop_job(tmp_path: Path) -> dict[str, Any]:
    """The crafted job with popularity and ``ext`` (SHOP_RECOMMENDATIONS, given as a DataFrame),
    item prices and providers as attributes, a shelf item-segment table, a tier user-segment
    table (user 6 has no tier) and the custom metrics of tests/custom_metrics.py
    (provider_share must be registered from Python), with a 50-replicate bootstrap."""
    raw = crafted_job_config(
        tmp_path,
        crafted_log(reconsumed=False),
        [
            {"name": "popularity", "kind": "popularity"},
            {"name": "ext", "kind": "external", "columns": {"attributes": ["margin"]}},
        ],
    )
    ITEMS.to_parquet(tmp_path / "items.parquet", index=False)
    TIERS.to_parquet(tmp_path / "tiers.parquet", index=False)
    raw["data"]["items"] = {
        "path": str(tmp_path / "items.parquet"),
        "columns": {"item": "item_id", "attributes": ["price", "provider"]},
    }
    shelves = pd.DataFrame([(101, "a"), (102, "a"), (103, "a")], columns=["item_id", "shelf"])
    shelves.to_parquet(tmp_path / "shelves.parquet", index=False)
    raw["evaluation"]["item_segments"] = {
        "path": str(tmp_path / "shelves.parquet"),
        "columns": {"item": "item_id", "segment": "shelf"},
    }
    raw["evaluation"]["user_segments"] = {
        "path": str(tmp_path / "tiers.parquet"),
        "columns": {"user": "user_id", "segment": "tier"},
    }
    raw["evaluation"]["custom_metrics"] = [
        {"name": "revenue_hit", "path": "custom_metrics:revenue_hit"},
        {"name": "margin", "path": "custom_metrics:mean_margin"},
        {"name": "provider_share"},
        {"name": "provider_exposure", "path": "custom_metrics:provider_exposure", "scope": "group"},
    ]
    raw["evaluation"]["bootstrap_samples"] = 50
    return raw


def diginetica_clicks(path: Path | str) -> dict:
    """The ``data`` block of a session job reading a DIGINETICA-layout click log at ``path``
    (``;``-separated CSV: session_id, item_id, eventdate, timeframe)."""
    return {
        "clicks": {
            "path": str(path),
            "format": "csv",
            "delimiter": ";",
            "columns": {
                "session": "session_id",
                "item": "item_id",
                "time": "eventdate",
                "order": "timeframe",
            },
        }
    }


# ---------------------------------------------------------------------------------------------
# MovieLens 100K (../shared/data/ml-100k): the one job of the parity modules

ML100K_COLUMNS = ["user_id", "item_id", "rating", "timestamp"]
ML100K_CUTOFF = dt.datetime(1998, 3, 1, tzinfo=dt.UTC)
ML100K_KS = (5, 10, 20)
ML100K_ITEM_FIXED = ["item_id", "title", "release_date", "video_release_date", "imdb_url"]
ACCURACY_METRICS = list(reference.METRICS)  # the accuracy metrics, in registry order
BEYOND_METRICS = [
    "coverage",
    "gini",
    "entropy",
    "aplt",
    "aclt",
    "novelty",
    "popularity_bias",
    "personalization",
    "personalization_jaccard",
    "ild_category",
    "category_coverage",
    "serendipity",
    "miscalibration",
    "awrf",
    "exposure_gap",
    "intersection",
    "agreement_rbo",
    "unexpectedness",
]
PERSONALIZATION_PAIRS = 60  # fewer than half the users, so the sample is a real one
SEED = 42


def external_score(users, items):
    """Deterministic, tie-rich score in {0, 0.001, ..., 0.999} of numpy arrays of ids: items
    i and i + 1000 always tie."""
    return ((users * 7919 + items * 104729) % 1000) / 1000.0


def ml100k_interactions(u_data: Path) -> dict[str, Any]:
    """The ``data.interactions`` block reading u.data (tab-separated, no header)."""
    return {
        "path": str(u_data),
        "format": "csv",
        "header": False,
        "delimiter": "\t",
        "column_names": ML100K_COLUMNS,
        "columns": {
            "user": "user_id",
            "item": "item_id",
            "timestamp": "timestamp",
            "rating": "rating",
        },
    }


def ml100k_genres(ml100k: Path) -> list[str]:
    lines = (ml100k / "u.genre").read_text(encoding="ISO-8859-1").splitlines()
    return [line.split("|")[0] for line in lines if line.strip()]


def ml100k_external_recs(u_data: Path) -> pd.DataFrame:
    """Every (test user, catalogue item) pair of u.data (test: from ML100K_CUTOFF) with
    ``external_score``."""
    import numpy as np

    interactions = pd.read_csv(u_data, sep="\t", header=None, names=ML100K_COLUMNS)
    test = interactions[interactions["timestamp"] >= ML100K_CUTOFF.timestamp()]
    users = np.sort(test["user_id"].unique()).astype("int64")
    items = np.sort(interactions["item_id"].unique()).astype("int64")
    u, i = np.repeat(users, len(items)), np.tile(items, len(users))
    return pd.DataFrame({"user_id": u, "item_id": i, "score": external_score(u, i)})


def ml100k_job(ml100k: Path, output: Path, external: Path) -> dict[str, Any]:
    """The ml-100k job test_parity_ml100k.py and test_beyond_parity.py share (one run): global
    temporal split at ML100K_CUTOFF, relevance rating >= 4, k = 5, 10, 20, filter_seen,
    popularity (the baseline), seeded random, oracle and ``external`` (ml100k_external_recs,
    read from Parquet), every accuracy and beyond-accuracy metric of segment 'all' without
    bootstrap, genres from the 19 flag columns of u.item, per-user rows kept."""
    genres = ml100k_genres(ml100k)
    return {
        "run": {"name": "parity-ml100k"},
        "output": {"path": str(output), "per_user": True},
        "data": {
            "interactions": ml100k_interactions(ml100k / "u.data"),
            "items": {
                "path": str(ml100k / "u.item"),
                "format": "csv",
                "header": False,
                "delimiter": "|",
                "encoding": "ISO-8859-1",
                "column_names": ML100K_ITEM_FIXED + genres,
                "columns": {"item": "item_id", "category": genres},
            },
        },
        "split": {"method": "global_temporal", "cutoff": "1998-03-01T00:00:00Z"},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": list(ML100K_KS),
            "filter_seen": True,
            "baseline": "popularity",  # comparisons: test_statistics_ml100k
            "segments": [],  # only segment 'all' is compared; keep the Spark plan small
            "bootstrap_samples": 0,  # bootstrap spreads: tests/metrics/test_beyond.py
            "metrics": [*ACCURACY_METRICS, "auc", *BEYOND_METRICS],
            "embeddings": {"source": "none"},
            "personalization_pairs": PERSONALIZATION_PAIRS,
            "seed": SEED,
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "random", "kind": "random", "seed": 42},
            {"name": "oracle", "kind": "oracle"},
            {"name": "external", "kind": "external", "path": str(external)},
        ],
    }


# ---------------------------------------------------------------------------------------------
# reading reports


def read(spark, output: Path | str, dataset: str, date: str):
    """The committed rows of ``dataset`` for ``date`` (through the API, as users read them)."""
    from receval_spark import read_reports

    return read_reports(spark, str(output), dataset=dataset, dates=[date]).drop("run_date")


def metric_values(spark, output: Path, date: str, model: str | None = None) -> dict:
    """(model, segment, protocol, metric, k) -> (value, n_users, std, ci_low, ci_high)."""
    rows = read(spark, output, "metrics", date).collect()
    return {
        (r.model, r.segment, r.protocol, r.metric, r.k): (
            r.value,
            r.n_users,
            r.std,
            r.ci_low,
            r.ci_high,
        )
        for r in rows
        if model is None or r.model == model
    }


def same_value(a: object, b: object) -> bool:
    """Bit-for-bit equal values of the same type (NaN equals NaN): how runs of the same input
    under different partitionings, parallelism or deployments must compare."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------------------------------------
# processes

TIMEOUT = 900  # seconds per subprocess: each starts its own JVM on a possibly busy machine


def job_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=REPO, env=env or job_env(), capture_output=True, text=True, timeout=TIMEOUT
    )


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"


# The kernel's ephemeral ports (what binding port 0 gets), and where the tests' own start.
EPHEMERAL_PORTS = tuple(
    int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
)
PRIVATE_PORTS_FROM = 10_000


GIVEN_PORTS: set[int] = set()  # what free_port returned in this process


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, taken below the kernel's range of
    ephemeral ports (EPHEMERAL_PORTS), and never one this process was given before. A port from
    that range could be taken, before the server it is picked for binds it, by anything binding
    port 0: Spark's own driver and block manager (the Thrift Server's once took the Thrift port
    picked for it, and beeline reached it). Two picks before either server binds could be the
    same port: a standalone master once got its RPC and web UI on one port (the test polled the
    web UI and reached the RPC server, "Too large frame")."""
    pick = random.SystemRandom()
    for _ in range(100):
        port = pick.randrange(PRIVATE_PORTS_FROM, EPHEMERAL_PORTS[0])
        if port in GIVEN_PORTS:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        GIVEN_PORTS.add(port)
        return port
    raise RuntimeError(f"no free port in [{PRIVATE_PORTS_FROM}, {EPHEMERAL_PORTS[0]})")


def port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def start_evaluate(config: Path, **popen: Any) -> subprocess.Popen[Any]:
    """``python -m receval_spark evaluate --config config`` started in its own process (the
    job's environment, from the repository), ``popen`` passed to ``subprocess.Popen``."""
    return subprocess.Popen(
        [sys.executable, "-m", "receval_spark", "evaluate", "--config", str(config)],
        cwd=REPO,
        env=job_env(),
        **popen,
    )


def kill_at_event(config: Path, root: ReportRoot, kind: str, *, timeout: float = 600) -> str:
    """Start ``receval evaluate --config config`` and SIGKILL its process group as soon as a
    new ``kind`` event (begin, commit, ...) has its file in the commit log of the output root
    ``root``; return that event's folder name."""
    log = "_commits/events/"

    def events() -> set[str]:
        names = (n.removeprefix(log).split("/", 1) for n in root.names(log))
        return {
            name
            for name, *file in names
            if name.endswith(f".{kind}") and file and file[0].startswith("part-")
        }

    known = events()
    new: set[str] = set()

    def appeared() -> bool:
        new.update(events() - known)
        return bool(new)

    kill_when(config, appeared, timeout=timeout, what=f"its {kind} event was seen")
    return new.pop()


def kill_when(
    config: Path,
    happened: Callable[[], bool],
    *,
    timeout: float = 600,
    what: str = "it was to be killed",
) -> None:
    """Run ``receval evaluate --config config`` as a process and SIGKILL its process group as
    soon as ``happened()``. Between two looks it waits four times as long as the look took, at
    least 10 ms: listing a bucket costs this process ~18 ms of CPU (boto3 and moto's server),
    a local folder ~1 ms, so watching takes at most a fifth of a core from the job watched and
    from the other test worker (at 10 ms on a bucket it took two thirds of one)."""
    proc = start_evaluate(
        config, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            began = time.monotonic()
            if happened():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
                return
            time.sleep(max(0.01, 4 * (time.monotonic() - began)))
        raise AssertionError(f"the job ended (exit {proc.poll()}) before {what}")
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen) -> None:
    """Stop a process started with start_new_session=True and everything in its process group
    (a worker's executors and their Python workers): SIGTERM, then SIGKILL."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(20)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # members left behind by a leader that exited


def group_members(pgid: int) -> dict[int, str]:
    """pid -> command line of the live processes in process group ``pgid``."""
    members = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ProcessLookupError):
            continue
        members[int(entry.name)] = cmdline
    return members


def run_watching_the_driver_jvm(
    argv: list[str], tmp: Path, *, timeout: float = TIMEOUT
) -> tuple[subprocess.CompletedProcess[str], list[str] | None]:
    """Run ``argv`` (a job that starts its own local Spark) in its own process group, reading
    the command line of the driver JVM PySpark starts from /proc while it runs; stopped by
    process group whatever happens. (process, the JVM's argv or None if it was not seen)."""
    out, err = tmp / "stdout.txt", tmp / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            argv, cwd=REPO, env=job_env(), stdout=stdout, stderr=stderr, start_new_session=True
        )
    jvm = None
    try:
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if jvm is None:  # spark-class (bash) runs the launcher (java), then execs the JVM
                jvm = next(
                    (
                        c
                        for c in (c.split() for c in group_members(proc.pid).values())
                        if c  # a zombie has an empty command line
                        and c[0].endswith("java")
                        and "org.apache.spark.deploy.SparkSubmit" in c
                        and "org.apache.spark.launcher.Main" not in c
                    ),
                    None,
                )
            time.sleep(1)
        returncode = proc.poll()
    finally:
        stop_group(proc)
    stderr_text = err.read_text()
    if returncode is None:  # timed out: stopped above
        returncode = -signal.SIGKILL
        stderr_text += f"\n(the test stopped it after {timeout} s)\n"
    return subprocess.CompletedProcess(argv, returncode, out.read_text(), stderr_text), jvm


# ---------------------------------------------------------------------------------------------
# the demo job (conf/demo.yaml, ml-latest-small) as users run it, shared by the deployment
# tests through the session-scoped ``demo_runs`` fixture (tests/conftest.py)

DATE_M, DATE_A = "2026-01-01", "2026-01-02"  # python -m run, then receval, then spark-submit
# The deployment tests (launchers, re-runs, local[1], cluster, Connect) run the demo with its
# baselines only: they check how the job runs, not the candidate models, whose fitting would
# multiply the suite's time; the shipped demo as a whole runs once (test_cli_end_to_end.py).
DEPLOYMENT_SETTINGS = [
    "--set",
    "evaluation.embeddings.source=none",  # ALS is covered by test_als.py
    "--set",
    "models=[{name: popularity, kind: popularity}, {name: random, kind: random, seed: 7}, "
    "{name: oracle, kind: oracle}]",
    "--set",
    "evaluation.protocol=full",
]
# The python -m run: one core, one shuffle partition (conf/demo.yaml has 4) and a 512 MB
# driver heap (the demo's is 2 GB), set as a user sets them for a job starting its own Spark.
SMALL_LOCAL = [
    "--set",
    "spark.master=local[1]",
    "--set",
    "spark.conf.spark.driver.memory=512m",
    "--set",
    "spark.conf.spark.sql.shuffle.partitions=1",
]


def snapshot(root: Path, date: str) -> dict[str, bytes | None]:
    """Files (bytes) and folders (None) of every dataset's partition for ``date``."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for part in sorted(root.glob(f"*/run_date={date}"))
        for p in [part, *sorted(part.rglob("*"))]
    }


def spark_submit() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-submit"


@dataclass
class DemoRuns:
    output: Path
    after_first: Path  # copy of the output after the receval run (before the re-run)
    by_module: subprocess.CompletedProcess[str]  # python -m, DATE_M, local[1], 512 MB
    by_module_jvm: list[str] | None  # the command line of by_module's driver JVM
    first: subprocess.CompletedProcess[str]  # receval, DATE_A: the reference run
    again: subprocess.CompletedProcess[str]  # spark-submit jobs/evaluate.py, DATE_A again
    date_m_before_rerun: dict[str, bytes | None]


def run_demo(tmp: Path) -> DemoRuns:
    """conf/demo.yaml three times into one output folder under ``tmp``, each time by another
    launcher: ``python -m receval_spark`` for DATE_M on local[1] with one shuffle partition
    and a 512 MB driver (SMALL_LOCAL), then ``receval`` for DATE_A as configured (local[*],
    4 shuffle partitions), then DATE_A again by ``spark-submit --master local[2]
    jobs/evaluate.py``."""
    output = tmp / "reports"
    settings = [*DEPLOYMENT_SETTINGS, "--set", f"output.path={output}"]

    def evaluate(date: str) -> list[str]:
        return ["--config", "conf/demo.yaml", "--set", f"run.date={date}", *settings]

    watched = tmp / "by_module"
    watched.mkdir()
    by_module, jvm = run_watching_the_driver_jvm(
        [sys.executable, "-m", "receval_spark", "evaluate", *evaluate(DATE_M), *SMALL_LOCAL],
        watched,
    )
    first = run([str(VENV_BIN / "receval"), "evaluate", *evaluate(DATE_A)])
    after_first = tmp / "after_first"
    if output.exists():
        shutil.copytree(output, after_first)
    date_m_before_rerun = snapshot(output, DATE_M)
    submit = [str(spark_submit()), "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    again = run([*submit, "jobs/evaluate.py", *evaluate(DATE_A)])
    return DemoRuns(output, after_first, by_module, jvm, first, again, date_m_before_rerun)


@dataclass
class ShippedDemo:
    output: Path
    proc: subprocess.CompletedProcess[str]  # receval evaluate, DATE_A, conf/demo.yaml as shipped


def run_shipped_demo(tmp: Path) -> ShippedDemo:
    """conf/demo.yaml exactly as `make demo` runs it (every model it names, both protocols), by
    ``receval evaluate`` for DATE_A into ``tmp/reports``."""
    output = tmp / "reports"
    settings = ["--set", f"output.path={output}", "--set", f"run.date={DATE_A}"]
    # Spark's generated code, as `make demo` runs it, not the tests' interpreted expressions: the
    # demo's ALS and item-kNN are compute. The tests' C1-only compiler stays: the JVM's default
    # C2 finishes sooner alone (113.8 s vs 120.1 s) but costs more CPU (207 vs 175 s), which the
    # other test worker pays on two cores (2026-12-07). The tests' class archive stays too, as
    # `make demo` maps its own from its second run on (receval_spark/class_archive.py)
    env = job_env()
    kept = [o for o in env.get("SPARK_SUBMIT_OPTS", "").split() if o not in INTERPRETED_OPTIONS]
    env["SPARK_SUBMIT_OPTS"] = " ".join(kept)
    proc = run(
        [str(VENV_BIN / "receval"), "evaluate", "--config", "conf/demo.yaml", *settings], env=env
    )
    return ShippedDemo(output, proc)


def beyond_metric(
    lists: Any,
    metric: str,
    *,
    ks: list[int] | None = None,
    catalogue: Any = None,
    totals: Any = None,
    truth: Any = None,
    expected: Any = None,
    **metadata: Any,
) -> Any:
    """(user_id, k, metric, value) of one per-user beyond-accuracy metric (``per_user_beyond``)
    of (user_id, item_id, rank) rankings at ``ks``, or, without ``ks``, of (user_id, k,
    item_id) lists at one k (all of rank 1: every item of such a list counts at its k, even
    beyond k items).
    The catalogue defaults to the lists' own items, Rel(u) and the expected items to none,
    ``metadata`` is ``categories`` and/or ``units``."""
    from pyspark.sql import functions as F

    from receval_spark.metrics.lists import BeyondInputs, catalogue_totals, item_statistics
    from receval_spark.metrics.per_user import per_user_beyond

    spark = lists.sparkSession
    if ks is None:
        ks = [r.k for r in lists.select("k").distinct().collect()]
        assert len(ks) == 1, "lists at one k, or rankings with ks"
        lists = lists.withColumn("rank", F.lit(1)).drop("k")
    history = lists.select("user_id", "item_id")
    catalogue = catalogue if catalogue is not None else item_statistics(history)
    inputs = BeyondInputs(
        catalogue=catalogue,
        totals=totals if totals is not None else catalogue_totals(history, catalogue),
        truth=truth
        if truth is not None
        else spark.createDataFrame([], "user_id int, item_id int, grade double"),
        expected=expected
        if expected is not None
        else spark.createDataFrame([], "user_id int, item_id int, rank int"),
        **metadata,
    )
    return per_user_beyond(lists, inputs, ks=ks, metrics=[metric])


def tied_item_pairs() -> list[tuple[int, int]]:
    """Item-kNN's generated history (user, item): 60 users of 1-12 of 40 items, popular
    items more often: many equal counts and cosines."""
    rng = np.random.default_rng(3)
    weights = 1 / np.arange(1, 41)
    pairs = []
    for user in range(60):
        chosen = rng.choice(
            40, size=int(rng.integers(1, 13)), replace=False, p=weights / weights.sum()
        )
        pairs += [(user, int(item) * 7) for item in chosen]  # ids not 0..n-1
    return pairs
