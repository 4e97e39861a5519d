"""Config loading: YAML, --set overrides, path resolution, errors naming the key. No Spark."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from helpers import REPO
from pydantic import ValidationError

from receval_spark.config import (
    EmbeddingsConfig,
    EvaluationConfig,
    ExternalModel,
    GlobalTemporalSplit,
    JobConfig,
    LeaveLastNSplit,
    RandomModel,
    SessionEvaluation,
    SessionJobConfig,
    embedding_blocks,
    validate_config,
)
from receval_spark.config_files import load_config
from receval_spark.errors import ConfigError
from receval_spark.ranking.split import to_datetime

CONFIG = """\
data:
  interactions:
    path: data/ratings.csv
    format: csv
    columns: {user: userId, item: movieId, timestamp: timestamp, rating: rating}
split: {method: global_temporal, quantile: 0.8}
relevance: {kind: threshold, threshold: 4.0}
output: {path: out}
models:
  - {name: popularity, kind: popularity}
  - {name: random, kind: random, seed: 1}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """tmp_path/conf/job.yaml next to tmp_path/conf/data/ratings.csv; cwd is elsewhere."""
    conf = tmp_path / "conf"
    (conf / "data").mkdir(parents=True)
    (conf / "data" / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,2,4.0,3\n")
    return conf


def write(folder: Path, text: str, name: str = "job.yaml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def test_load_config_reads_yaml_and_resolves_relative_paths_against_its_folder(project, elsewhere):
    config = load_config(write(project, CONFIG))

    assert config.data.interactions.path == str((project / "data" / "ratings.csv").resolve())
    assert config.output.path == str((project / "out").resolve())
    assert config.data.interactions.format == "csv"
    assert config.data.interactions.columns.user == "userId"
    assert config.split == GlobalTemporalSplit(method="global_temporal", quantile=0.8)
    assert config.relevance.threshold == 4.0
    assert [m.name for m in config.models] == ["popularity", "random"]
    assert config.evaluation.k == [5, 10, 20]  # defaults
    assert config.evaluation.filter_seen is True


def test_parent_relative_paths_and_external_model_paths_resolve_against_the_file(
    project, elsewhere
):
    (project.parent / "recs").mkdir()
    text = CONFIG.replace("path: data/ratings.csv", "path: ../conf/data/ratings.csv") + (
        "  - {name: ext, kind: external, path: ../recs, columns: {score: null, rank: pos}}\n"
    )

    config = load_config(write(project, text))

    assert config.data.interactions.path == str((project / "data" / "ratings.csv").resolve())
    external = config.models[2]
    assert isinstance(external, ExternalModel)
    assert external.path == str((project.parent / "recs").resolve())
    assert external.columns.rank == "pos"


def test_set_overrides_dotted_keys_list_positions_and_yaml_values(project, elsewhere):
    config = load_config(
        write(project, CONFIG),
        [
            "evaluation.k=[20, 5, 10, 5]",
            "evaluation.filter_seen=false",
            "models.1.seed=7",
            "run.name=nightly",
            "run.date=2024-03-01",
        ],
    )

    assert config.evaluation.k == [5, 10, 20]  # sorted and unique
    assert config.evaluation.filter_seen is False
    assert isinstance(config.models[1], RandomModel)
    assert config.models[1].seed == 7
    assert config.run.name == "nightly"
    assert config.run.date == dt.date(2024, 3, 1)
    assert config.models[0].name == "popularity"  # untouched


def test_set_a_spark_option_whose_name_has_dots(project, elsewhere):
    # spark.conf holds flat option names ({spark.sql.shuffle.partitions: 8} in conf/demo.yaml);
    # docs/usage.md promises that --set overrides any key
    config = load_config(
        write(project, CONFIG + "spark: {conf: {spark.ui.enabled: false}}\n"),
        ["spark.conf.spark.sql.shuffle.partitions=16"],
    )

    assert config.spark.conf == {"spark.ui.enabled": False, "spark.sql.shuffle.partitions": 16}


def test_set_can_switch_the_split_method_and_cutoff(project, elsewhere):
    config = load_config(write(project, CONFIG), ["split.quantile=null", "split.cutoff=2020-01-01"])

    assert isinstance(config.split, GlobalTemporalSplit)
    assert config.split.quantile is None
    assert to_datetime(config.split.cutoff) == dt.datetime(2020, 1, 1, tzinfo=dt.UTC)

    other = load_config(write(project, CONFIG), ["split={method: leave_last_n, n: 2}"])
    assert other.split == LeaveLastNSplit(method="leave_last_n", n=2)


def test_set_relative_path_resolves_against_the_current_directory(project, elsewhere):
    (elsewhere / "local.csv").write_text("userId,movieId\n")

    config = load_config(write(project, CONFIG), ["data.interactions.path=local.csv"])

    assert config.data.interactions.path == str((elsewhere / "local.csv").resolve())


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("evaluation.kk=5", "evaluation.kk"),
        ("split.cutof=2020-01-01", "split.cutof"),
        ("models.0.seed=3", "models.0.seed"),  # popularity has no seed
        ("data.interactions.columns.ratng=stars", "data.interactions.columns.ratng"),
    ],
)
def test_unknown_key_is_a_config_error_naming_the_dotted_key(project, elsewhere, override, key):
    with pytest.raises(ConfigError) as info:
        load_config(write(project, CONFIG), [override])

    assert f"{key}: unknown key" in str(info.value)


def test_unknown_key_in_the_file_is_named_too(project, elsewhere):
    text = CONFIG + "evaluation: {k: [5], min_user: 3}\n"

    with pytest.raises(ConfigError, match=r"evaluation\.min_user: unknown key"):
        load_config(write(project, text))


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["evaluation.min_users=many"], "evaluation.min_users"),
        (["models.1.seed=abc"], "models.1.seed"),
        (["evaluation.k=[5, ten]"], "evaluation.k.1"),
        (["evaluation.k=[]"], "evaluation.k"),
        (["evaluation.k=[10, 0]"], "evaluation.k.1"),
        (["split.quantile=1.5"], "split.quantile"),
        (["relevance.kind=binary"], "relevance.kind"),
        # union-typed keys: the message must name the key, not the union member tried
        (["split.quantile=null", "split.cutoff=yesterday"], "split.cutoff"),
        (["spark.conf={spark.ui.enabled: [1]}"], "spark.conf.spark.ui.enabled"),
    ],
)
def test_wrong_type_is_a_config_error_naming_the_key(project, elsewhere, overrides, key):
    with pytest.raises(ConfigError) as info:
        load_config(write(project, CONFIG), overrides)

    problems = str(info.value).splitlines()[1:]
    assert problems
    assert all(line.strip().startswith(f"{key}: ") for line in problems), problems


def test_missing_input_file_is_a_config_error_naming_data_interactions_path(project, elsewhere):
    text = CONFIG.replace("data/ratings.csv", "data/absent.csv")

    with pytest.raises(ConfigError, match=r"data\.interactions\.path: .*absent\.csv does not"):
        load_config(write(project, text))


def test_missing_input_path_key_is_a_config_error_naming_data_interactions_path(project, elsewhere):
    text = CONFIG.replace("    path: data/ratings.csv\n", "")

    with pytest.raises(ConfigError, match=r"data\.interactions\.path: required key is missing"):
        load_config(write(project, text))


def test_remote_input_paths_are_neither_resolved_nor_checked(project, elsewhere):
    config = load_config(
        write(project, CONFIG), ["data.interactions.path=s3a://bucket/ratings.parquet"]
    )

    assert config.data.interactions.path == "s3a://bucket/ratings.parquet"


@pytest.mark.parametrize(
    "overrides",
    [
        ["split.cutoff=2020-01-01"],  # both cutoff and quantile
        ["split.quantile=null"],  # neither
    ],
)
def test_exactly_one_of_cutoff_or_quantile(project, elsewhere, overrides):
    with pytest.raises(ConfigError) as info:
        load_config(write(project, CONFIG), overrides)

    assert "split: give exactly one of split.cutoff or split.quantile" in str(info.value)


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("evaluation.k", "expected KEY=VALUE"),
        ("models.5.seed=1", "'5' is not a position in a list of 2"),
        ("evaluation.k=[5, 10", "value is not valid YAML"),
    ],
)
def test_malformed_overrides_are_config_errors(project, elsewhere, override, fragment):
    with pytest.raises(ConfigError) as info:
        load_config(write(project, CONFIG), [override])

    assert fragment in str(info.value)


def test_unreadable_or_non_mapping_config_files_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(write(tmp_path, "- just\n- a list\n"))


SHARED = REPO.parent / "shared" / "data"


@pytest.mark.parametrize(
    ("name", "schema"),
    [
        ("demo.yaml", JobConfig),
        ("nightly.yaml", JobConfig),
        ("backtest.yaml", JobConfig),
        ("diginetica-sample.yaml", SessionJobConfig),
        ("yoochoose-100k.yaml", SessionJobConfig),
    ],
)
def test_shipped_configs_validate(name, schema):
    """(movielens-100k.yaml needs data.interactions.path from --set: ml-100k is not shipped.)"""
    if "../../shared/data" in (REPO / "conf" / name).read_text() and not SHARED.exists():
        pytest.skip(f"conf/{name} reads ../shared/data, which is absent here")
    config = load_config(REPO / "conf" / name, ["run.date=2026-11-29"], schema=schema)
    assert config.run.date == dt.date(2026, 11, 29)


def test_the_nightly_config_alerts_on_the_headline_metrics():
    config = load_config(REPO / "conf" / "nightly.yaml")
    rules = {(r.metric, r.k): r for r in config.evaluation.alerts}
    assert rules[("ndcg", 10)].max_relative_drop == 0.05 and rules[("ndcg", 10)].window == 7
    assert config.output.lists and rules[("stability_rbo", 10)].segment == "idle"
    assert config.run.date is None  # the scheduler passes run.date


IMPRESSIONS = """\
  impressions:
    path: data/impressions.parquet
    columns: {user: uid, item: iid, position: slot, reward: clicked, propensity: p}
"""


def impressions_config() -> str:
    """CONFIG with data.impressions (after data.interactions)."""
    return CONFIG.replace("split:", IMPRESSIONS + "split:", 1)


@pytest.fixture
def impressions_file(project: Path) -> Path:
    path = project / "data" / "impressions.parquet"
    path.write_bytes(b"")  # existence is checked here; Spark reads it later
    return path


def test_impressions_resolve_like_the_other_inputs_and_off_policy_defaults_apply(
    project, elsewhere, impressions_file
):
    text = impressions_config()
    config = load_config(write(project, text))

    impressions = config.data.impressions
    assert impressions.path == str(impressions_file.resolve())
    assert impressions.format == "parquet"
    assert impressions.columns.model_dump() == {
        "user": "uid",
        "item": "iid",
        "position": "slot",
        "reward": "clicked",
        "propensity": "p",
    }
    assert config.evaluation.off_policy is None  # the section is optional ...
    assert config.off_policy_settings.clip == 10.0  # ... and its defaults apply
    clipped = load_config(write(project, text), ["evaluation.off_policy={clip: 3}"])
    assert clipped.off_policy_settings.clip == 3.0
    assert load_config(write(project, CONFIG)).off_policy_settings is None


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["evaluation.off_policy.clip=0"], "evaluation.off_policy.clip: Input should be greater"),
        (["evaluation.off_policy.clip=-1"], "evaluation.off_policy.clip: Input should be greater"),
        (["evaluation.off_policy.clip=.nan"], "evaluation.off_policy.clip: Input should be a fin"),
        (["evaluation.off_policy.clipp=2"], "evaluation.off_policy.clipp: unknown key"),
        (["data.impressions.columns.rewards=r"], "data.impressions.columns.rewards: unknown key"),
        (["models.1.name=logging"], "'logging' names the logging policy"),
        (["data.impressions=null", "evaluation.off_policy={clip: 2}"], "needs data.impressions"),
        (["data.impressions.path=absent.parquet"], "absent.parquet does not exist"),
    ],
)
def test_bad_off_policy_settings_are_config_errors(
    project, elsewhere, impressions_file, overrides, fragment
):
    with pytest.raises(ConfigError) as info:
        load_config(write(project, impressions_config()), overrides)

    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("split", "segments"),
    [
        ("{method: global_temporal, quantile: 0.8}", ["warm", "cold"]),
        ("{method: user_holdout}", ["warm", "cold"]),
        ("{method: user_random, fraction: 0.5}", ["warm", "cold"]),
        ("{method: leave_last_n, n: 1}", []),  # every test user keeps train rows
    ],
)
def test_segments_default_to_warm_and_cold_where_test_users_can_be_new(
    project, elsewhere, split, segments
):
    config = load_config(write(project, CONFIG), [f"split={split}"])
    assert config.evaluation.segments == segments
    explicit = load_config(
        write(project, CONFIG), [f"split={split}", "evaluation.segments=[warm, activity]"]
    )
    assert explicit.evaluation.segments == ["warm", "activity"]


def test_segments_default_also_for_a_config_built_in_python(project):
    raw = {
        "data": {"interactions": {"path": str(project / "data" / "ratings.csv")}},
        "split": LeaveLastNSplit(method="leave_last_n"),
        "evaluation": EvaluationConfig(k=[5]),
        "models": [{"name": "popularity", "kind": "popularity"}],
    }
    assert JobConfig.model_validate(raw).evaluation.segments == []
    raw["evaluation"] = EvaluationConfig(k=[5], segments=["cold"])
    assert JobConfig.model_validate(raw).evaluation.segments == ["cold"]
    raw["split"] = {"method": "global_temporal", "quantile": 0.5}
    raw["evaluation"] = EvaluationConfig(k=[5])
    assert JobConfig.model_validate(raw).evaluation.segments == ["warm", "cold"]


@pytest.mark.parametrize(
    ("blocks", "rows", "expected"),
    [
        ("auto", 0, 2),
        ("auto", 90_570, 2),
        ("auto", 400_001, 3),
        ("auto", 1_800_001, 10),
        ("auto", 20_000_000, 10),
        (7, 90_570, 7),
        (1, 20_000_000, 1),
    ],
)
def test_embedding_blocks_follow_the_history_unless_given(blocks, rows, expected):
    assert embedding_blocks(blocks, rows) == expected
    settings = EmbeddingsConfig() if blocks == "auto" else EmbeddingsConfig(blocks=blocks)
    assert settings.blocks == blocks


@pytest.mark.parametrize("section", [EvaluationConfig, SessionEvaluation])
def test_cut_offs_are_sorted_once_each_and_at_least_one(section):
    assert section(k=[20, 5, 10, 5]).k == [5, 10, 20]
    with pytest.raises(ValidationError, match="at least one cut-off"):
        section(k=[])


def test_both_protocols_name_the_epoch_unit_timestamp_unit_and_time_unit_still_reads():
    """``timestamp_unit`` is the key of data.interactions and of the click sources; the click
    sources' earlier ``time_unit`` is read as it (docs/configuration.md#timestamp-units)."""
    models = [{"name": "pop", "kind": "pop"}]
    for key in ("timestamp_unit", "time_unit"):
        job = validate_config(
            {"data": {"clicks": {"path": "c.csv", key: "ms"}}, "models": models},
            schema=SessionJobConfig,
        )
        assert job.data.clicks is not None and job.data.clicks.timestamp_unit == "ms"
    with pytest.raises(ConfigError, match=r"data\.clicks\.time_unit: unknown key"):
        validate_config(
            {"data": {"clicks": {"timestamp_unit": "ms", "time_unit": "s"}}, "models": models},
            schema=SessionJobConfig,
        )
