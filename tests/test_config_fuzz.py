"""Fuzzing the configuration: any value at any key (known or not) either validates or fails
with a ConfigError; through the command line such a failure is exit status 2 and one line on
stderr. No Spark: a run whose config validates never reaches the command line here, and the
command line's session builder is replaced by one that fails the test."""

from __future__ import annotations

import contextlib
import copy
import io
import math
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from receval_spark.cli import main
from receval_spark.config import JobConfig, validate_config
from receval_spark.config_files import load_config
from receval_spark.errors import ConfigError

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def base_config(folder: Path) -> dict[str, Any]:
    """A valid config that sets every section, so every key has a valid neighbourhood."""
    return {
        "run": {"name": "fuzz", "date": "2026-01-02"},
        "spark": {"master": "local[1]", "conf": {"spark.sql.shuffle.partitions": 2}},
        "output": {"path": str(folder / "reports"), "per_user": False},
        "data": {
            "interactions": {
                "path": str(folder / "ratings.csv"),
                "format": "csv",
                "columns": {"user": "u", "item": "i", "timestamp": "t", "rating": "r"},
            },
            "items": {
                "path": str(folder / "items.csv"),
                "format": "csv",
                "columns": {"item": "i", "category": "genres"},
                "category_separator": "|",
            },
            "impressions": {
                "path": str(folder / "impressions.parquet"),
                "columns": {"user": "u", "item": "i", "position": "pos", "propensity": "p"},
            },
        },
        "split": {"method": "global_temporal", "quantile": 0.8},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": [5, 10],
            "metrics": ["ndcg", "recall", "coverage"],
            "alerts": [{"metric": "ndcg", "k": 10}],
            "off_policy": {"clip": 5.0},
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "random", "kind": "random", "seed": 1},
            {"name": "ext", "kind": "external", "path": str(folder / "recs.parquet")},
        ],
    }


def dotted_keys(node: Any, prefix: str = "") -> dict[str, Any]:
    """Every dotted key of a validated config dump (sections and list positions included) with
    its value."""
    keys = {prefix: node} if prefix else {}
    children: list[tuple[str, Any]] = []
    if isinstance(node, dict):
        children = [(str(k), v) for k, v in node.items()]
    elif isinstance(node, list):
        children = [(str(i), v) for i, v in enumerate(node)]
    for name, child in children:
        keys.update(dotted_keys(child, f"{prefix}.{name}" if prefix else name))
    return keys


def put(raw: dict[str, Any], key: str, value: Any) -> bool:
    """Set a dotted key as ``--set`` does; False when a parent is neither a section nor a list,
    or a list position is out of range."""
    *parents, last = key.split(".")
    node: Any = raw
    for part in parents:
        if not _has_slot(node, part):
            return False
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if not _has_slot(node, last):
        return False
    node[int(last) if isinstance(node, list) else last] = value
    return True


def _has_slot(node: Any, part: str) -> bool:
    if isinstance(node, list):
        return part.isdigit() and int(part) < len(node)
    return isinstance(node, dict)


DEFAULTS = dotted_keys(validate_config(base_config(Path("/nonexistent"))).model_dump(mode="json"))
KNOWN_KEYS = sorted(DEFAULTS)
SECTIONS = sorted(key for key, value in DEFAULTS.items() if isinstance(value, dict | list))
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=10)
KEYS = st.one_of(
    st.sampled_from(KNOWN_KEYS),
    st.sampled_from(SECTIONS),
    st.builds(lambda key, name: f"{key}.{name}", st.sampled_from(KNOWN_KEYS), NAME),  # unknown
    NAME,  # an unknown section
)
TRICKY_YAML = [  # texts that YAML parses into surprises, or not at all
    "2026-13-45",
    "!!timestamp 2026-02-30",
    "[",
    "{a: 1",
    "*undefined",
    "&a [*a]",
    "!!binary x",
    "!!python/name:os.system",
    "1e400",
    "-.inf",
    ".nan",
    "~",
    "'",
    '"a\\0b"',
    "[[[[[]]]]]",
    "{k: [1, {x: y}]}",
    "0x1F",
    "yes",
    "1_000",
    "? x",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, -1, 1, 1001, 10**18, -(10**18)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.5, 1.5]),
    st.text(max_size=20),
    st.sampled_from(["", " ", "ten", "abc", "null", "2026-13-45", "1998-03-01", "s3a://b/k"]),
    st.dates(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAME, inner, max_size=3),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Holds the config's input files (their contents do not matter: nothing reads them)."""
    folder = tmp_path_factory.mktemp("fuzz")
    for name in ("ratings.csv", "items.csv", "recs.parquet", "impressions.parquet"):
        (folder / name).write_text("x\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def config_file(folder: Path) -> Path:
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(base_config(folder)), encoding="utf-8")
    return path


def as_yaml(value: Any) -> str:
    """The value as the one-line YAML text of a ``--set``."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**9).removesuffix("\n...\n")


def run_cli(argv: list[str]) -> tuple[int, str]:
    """The command line in-process; a session start fails the run (exit 1, named)."""
    err = io.StringIO()
    no_spark = mock.patch(
        "receval_spark.spark.build_session",
        side_effect=AssertionError("the fuzz must not start Spark"),
    )
    with no_spark, contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(argv)
    return status, err.getvalue()


@FUZZ
@given(key=KEYS, value=VALUES)
def test_any_value_at_any_key_validates_or_is_a_config_error(folder: Path, key: str, value: Any):
    raw = base_config(folder)
    if not put(raw, key, copy.deepcopy(value)):
        return
    try:
        config = validate_config(raw)
    except ConfigError as exc:
        assert str(exc).startswith("invalid configuration:"), exc
    else:
        assert isinstance(config, JobConfig)


@FUZZ
@given(
    key=KEYS,
    text=st.one_of(VALUES.map(as_yaml), st.text(max_size=30), st.sampled_from(TRICKY_YAML)),
)
def test_a_bad_set_is_exit_status_2_and_one_line(config_file: Path, key: str, text: str):
    override = f"{key}={text}"
    try:
        config = load_config(config_file, [override])
    except ConfigError:
        status, err = run_cli(["evaluate", "--config", str(config_file), "--set", override])
        assert status == 2, err
        assert err.startswith("error: ") and err.endswith("\n"), err
        assert len(err.splitlines()) == 1, err
    else:
        assert isinstance(config, JobConfig)
