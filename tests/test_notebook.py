"""The notebooks run top to bottom in a real Jupyter kernel (this venv's interpreter):
explore_reports.ipynb on the reports of two nightly runs of a crafted log, the second one
regressed; evaluate_dataframes.ipynb on the shipped ml-latest-small, through the Python API."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import REPO, crafted_job_config, crafted_log, kept_sql_conf

from receval_spark.cli import EXIT_REGRESSED, main

nbclient = pytest.importorskip("nbclient", reason="nbclient missing: pip install -e '.[test]'")
nbformat = pytest.importorskip("nbformat", reason="nbformat missing: pip install -e '.[test]'")
pytest.importorskip("ipykernel", reason="ipykernel missing: pip install -e '.[test]'")
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402 (after the skips)
from jupyter_client.manager import KernelManager  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.notebook]

NOTEBOOK = REPO / "notebooks" / "explore_reports.ipynb"
DATES = ["2026-12-01", "2026-12-02"]
MODELS = {"popularity", "ext"}
DATAFRAMES_NOTEBOOK = REPO / "notebooks" / "evaluate_dataframes.ipynb"
NOTEBOOK_MODELS = ("genre_popularity", "als")  # the two models evaluate_dataframes makes


def nightly_reports(spark, tmp: Path) -> Path:
    """Two run dates. ``ext`` first recommends each warm user their test item, then one
    unknown item to everybody (an ndcg@10 drop the alert rule flags); each list also holds a
    train item the user has not seen, so ``ext`` has a coverage on both dates (a model whose
    lists hold no train item gets no coverage row)."""
    columns = ["user_id", "item_id", "score"]
    users = range(1, 5)
    other = {u: 10 * (u % 4 + 1) for u in users}  # another warm user's train item
    good = pd.DataFrame(
        [r for u in users for r in [(u, 100 + u, 1.0), (u, other[u], 0.5)]], columns=columns
    )
    bad = pd.DataFrame([r for u in users for r in [(u, 200, 1.0), (u, 20, 0.5)]], columns=columns)
    raw = crafted_job_config(
        tmp,
        crafted_log(reconsumed=False),
        [{"name": "popularity", "kind": "popularity"}, {"name": "ext", "kind": "external"}],
    )
    raw["evaluation"].update(
        k=[2, 10],
        metrics=["ndcg", "coverage"],
        segments=[],
        baseline=None,
        alerts=[{"metric": "ndcg", "k": 10, "max_relative_drop": 0.05, "window": 1}],
    )
    config = tmp / "job.yaml"
    statuses = []
    for date, recs in zip(DATES, [good, bad], strict=True):
        night = tmp / f"recs-{date}.parquet"
        recs.to_parquet(night, index=False)
        raw["models"][1]["path"] = str(night)
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")
        with kept_sql_conf(spark):
            statuses.append(
                main(["evaluate", "--config", str(config), "--set", f"run.date={date}"])
            )
    assert statuses == [0, EXIT_REGRESSED]
    return tmp / "reports"


def venv_kernel(tmp: Path) -> KernelManager:
    """A ``python3`` kernel pinned to this interpreter (sys.executable), whatever kernelspecs
    the user's Jupyter paths hold."""
    spec = tmp / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "receval venv", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel), encoding="utf-8")
    specs = KernelSpecManager(kernel_dirs=[str(spec.parent)])
    assert specs.get_kernel_spec("python3").argv[0] == sys.executable
    return KernelManager(kernel_name="python3", kernel_spec_manager=specs)


def run_notebook(path: Path, tmp: Path, monkeypatch, *, cwd: Path, env: dict[str, str]) -> dict:
    """Execute the notebook at ``path`` top to bottom in ``venv_kernel``, with ``cwd`` as its
    working folder and ``env`` added to the kernel's environment; its code cells by tag.
    Fails on a stored output, a cell that did not run, or an error."""
    kernel_env = {
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "IPYTHONDIR": str(tmp / "ipython"),
        "MPLBACKEND": "Agg",
        **env,
    }
    for key, value in kernel_env.items():
        monkeypatch.setenv(key, value)  # the kernel inherits os.environ

    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "stored outputs"
    client = nbclient.NotebookClient(
        nb,
        km=venv_kernel(tmp),
        timeout=600,
        startup_timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "a cell did not run"
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    return {tag: c for c in code for tag in c.metadata.get("tags", [])}


def text_of(cell) -> str:
    """Everything a cell printed or displayed, as text (plain and HTML)."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("display_data", "execute_result"):
            parts += [out.data.get("text/plain", ""), out.data.get("text/html", "")]
    return "\n".join(parts)


def test_the_notebook_explores_two_nightly_runs(spark, tmp_path, monkeypatch):
    reports = nightly_reports(spark, tmp_path)
    cell = run_notebook(
        NOTEBOOK, tmp_path, monkeypatch, cwd=REPO, env={"RECEVAL_REPORTS": str(reports)}
    )

    setup = text_of(cell["setup"])
    assert f"python  {sys.executable}" in setup
    assert f"reports {reports.resolve()}" in setup

    runs = text_of(cell["runs"])
    assert all(d in runs for d in DATES)
    assert "succeeded" in runs and "regressed" in runs
    assert "regression: ndcg@10 of ext on all" in runs

    assert f"date {DATES[-1]}, k = 10 (of [2, 10]), protocol full" in text_of(cell["choose"])
    pivot = text_of(cell["pivot"])
    assert all(m in pivot for m in MODELS)
    assert "ndcg" in pivot and "coverage" in pivot and "NaN" not in pivot

    plot = cell["plot"]
    assert any("image/png" in o.get("data", {}) for o in plot.outputs), "no figure"
    assert f"plotted {len(DATES)} run dates, {len(MODELS)} models" in text_of(plot)


def test_the_notebook_evaluates_two_models_given_as_dataframes(tmp_path, monkeypatch):
    """evaluate_dataframes.ipynb makes two models' lists in memory, evaluates them with
    rv.evaluate against the popularity baseline, and writes nothing but the summary and the
    figure it is asked for ($RECEVAL_NOTEBOOK_OUT)."""
    cwd, out = tmp_path / "cwd", tmp_path / "out"
    cwd.mkdir()
    cell = run_notebook(
        DATAFRAMES_NOTEBOOK, tmp_path, monkeypatch, cwd=cwd, env={"RECEVAL_NOTEBOOK_OUT": str(out)}
    )
    assert f"from {REPO / 'receval_spark'}" in text_of(cell["setup"])  # this checkout's package
    assert list(cwd.iterdir()) == []  # no reports/, spark-warehouse/ or derby.log
    assert sorted(p.name for p in out.iterdir()) == ["ndcg_by_k.png", "summary.json"]
    assert (out / "ndcg_by_k.png").read_bytes().startswith(b"\x89PNG")
    assert any("image/png" in o.get("data", {}) for o in cell["plot"].outputs), "no figure"

    saved = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert saved["passed"] is True
    # the evaluation's cut-off is the one the notebook trained its models before
    cutoff = dt.datetime.fromtimestamp(saved["cutoff"], dt.UTC)
    assert dt.datetime.fromisoformat(saved["split_cutoff"]) == cutoff
    at_10 = saved["metrics_at_10"]
    assert set(at_10) == {"popularity", *NOTEBOOK_MODELS}
    summary = text_of(cell["summary"])
    for model, values in at_10.items():
        assert 0 <= values["ndcg"] <= 1 and 0 < values["coverage"] <= 1, model
        assert model in summary
    comparisons = {(c["model"], c["segment"], c["metric"]): c for c in saved["comparisons_at_10"]}
    for model in NOTEBOOK_MODELS:
        for segment in ("all", "warm", "cold"):
            diff = comparisons[(model, segment, "ndcg")]
            assert diff["baseline"] == "popularity" and diff["n_users"] > 0
            assert diff["ci_low"] <= diff["mean_diff"] <= diff["ci_high"], (model, segment)
        overall = comparisons[(model, "all", "ndcg")]
        assert overall["n_users"] == saved["n_users"]
        # paired over the same users: the mean difference is the difference of the means
        assert overall["mean_diff"] == pytest.approx(
            at_10[model]["ndcg"] - at_10["popularity"]["ndcg"], abs=1e-9
        )
        # users new in the test period get the popular movies from both models
        assert comparisons[(model, "cold", "ndcg")]["mean_diff"] == pytest.approx(0, abs=1e-12)
