"""`evalkit models`: the configured instances ranked by measured quality (README "JSON output", docs/contract.md "Model ranking")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.records import ServingRecord
from evalkit.store import Store, save_run
from tests.cli.test_progress_ci import ONE
from tests.factories import run_of


@pytest.fixture
def history(ranked_instances: Path, db_file: Path) -> None:
    """alpha 0.75 over two sets; beta (same alias, another instance) a measured 0; gamma unknown."""
    alpha, beta = ServingRecord("alpha", "shared", "model-a"), ServingRecord("beta", "shared", "model-b")
    with Store.open(db_file) as store:
        for run in (
            run_of(2, 2, set_id="q.one", serving=alpha, started_at="2026-11-01T10:00:00+00:00"),
            run_of(1, 2, set_id="q.one", serving=alpha, started_at="2026-11-02T10:00:00+00:00"),
            run_of(4, 4, set_id="q.two", serving=alpha, started_at="2026-11-02T10:00:00+00:00"),
            run_of(0, 3, set_id="q.one", serving=beta, started_at="2026-11-03T10:00:00+00:00"),
        ):
            save_run(store, run, "metadata", "test")


def table_rows(stdout: str) -> list[list[str]]:
    """The body rows of a rich table (cells split on the column rule)."""
    return [[cell.strip() for cell in line.split("│")] for line in stdout.splitlines() if "│" in line]


def models_json(cli: Any, *args: str) -> dict[str, Any]:
    result = cli("models", "--format", "json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_json_lists_every_field_in_rank_order(cli: Any, history: None) -> None:
    doc = models_json(cli, "--policy", "quality")
    assert doc == {
        "policy": "quality",
        "models": [
            {
                "rank": 1,
                "provider": "alpha",
                "model": "shared",
                "priority": 10,
                "quality": 0.75,
                "sets": 2,
                "cost": {"input_per_mtok": 3.0, "output_per_mtok": 6.0},
            },
            {
                "rank": 2,
                "provider": "beta",
                "model": "shared",
                "priority": 20,
                "quality": 0.0,
                "sets": 1,
                "cost": {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
            },
            {
                "rank": 3,
                "provider": "gamma",
                "model": "other",
                "priority": 30,
                "quality": None,
                "sets": 0,
                "cost": None,
            },
        ],
    }


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("priority", ["gamma", "beta", "alpha"]),
        ("quality", ["alpha", "beta", "gamma"]),
        # alpha (0.75 + 0) / 2, beta (0 + 0.5) / 2, gamma (unknown 0.5 + 1) / 2
        ("balanced", ["gamma", "alpha", "beta"]),
        ("economy", ["beta", "alpha", "gamma"]),
    ],
)
def test_each_policy_orders_the_instances(cli: Any, history: None, policy: str, expected: list[str]) -> None:
    doc = models_json(cli, "--policy", policy)
    assert doc["policy"] == policy
    assert [m["provider"] for m in doc["models"]] == expected
    assert [m["rank"] for m in doc["models"]] == [1, 2, 3]


def test_priority_is_the_default_policy(cli: Any, history: None) -> None:
    doc = models_json(cli)
    assert doc["policy"] == "priority"
    assert [m["provider"] for m in doc["models"]] == ["gamma", "beta", "alpha"]


def test_min_quality_drops_instances_below_it_and_without_data(cli: Any, history: None) -> None:
    assert [m["provider"] for m in models_json(cli, "--min-quality", "0")["models"]] == ["beta", "alpha"]
    assert [m["provider"] for m in models_json(cli, "--min-quality", "0.75")["models"]] == ["alpha"]
    assert models_json(cli, "--min-quality", "0.9")["models"] == []


def test_table_shows_quality_unknown_and_cost(cli: Any, history: None) -> None:
    result = cli("models", "--policy", "quality")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].strip() == "Models by quality"
    assert table_rows(result.stdout) == [
        ["1", "alpha", "shared", "10", "0.750", "2", "$3 / $6"],
        ["2", "beta", "shared", "20", "0.000", "1", "$0.15 / $0.6"],
        ["3", "gamma", "other", "30", "unknown", "0", "—"],
    ]


def test_table_when_nothing_is_left_to_rank(cli: Any, history: None) -> None:
    result = cli("models", "--min-quality", "1")
    assert result.exit_code == 0
    assert result.stdout.strip() == "No provider instances to rank (none configured, or none above --min-quality)."


def test_without_a_database_every_quality_is_unknown(cli: Any, ranked_instances: Path, db_file: Path) -> None:
    doc = models_json(cli, "--policy", "quality")
    assert [(m["provider"], m["quality"], m["sets"]) for m in doc["models"]] == [
        ("gamma", None, 0),
        ("beta", None, 0),
        ("alpha", None, 0),
    ]
    assert not db_file.exists()


def test_db_option_chooses_the_history(cli: Any, history: None, db_file: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.duckdb"
    assert [m["quality"] for m in models_json(cli, "--policy", "quality", "--db", str(other))["models"]] == [
        None,
        None,
        None,
    ]
    assert models_json(cli, "--policy", "quality", "--db", str(db_file))["models"][0]["quality"] == 0.75


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--policy", "cheapest"), "Invalid value for '--policy'"),
        (("--min-quality", "1.5"), "Invalid value for '--min-quality'"),
        (("--min-quality", "-0.1"), "Invalid value for '--min-quality'"),
        (("--min-quality", "typo"), "Invalid value for '--min-quality'"),
        (("--format", "markdown"), "Invalid value for '--format'"),
    ],
)
def test_invalid_options_exit_2(cli: Any, ranked_instances: Path, args: tuple[str, ...], message: str) -> None:
    result = cli("models", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_min_quality_nan_is_refused(cli: Any, history: None) -> None:
    result = cli("models", "--min-quality", "nan")
    assert result.exit_code == 2
    assert "--min-quality" in result.stderr
    assert result.stdout == ""


def test_min_quality_keeps_an_instance_exactly_at_the_threshold(
    cli: Any, ranked_instances: Path, db_file: Path
) -> None:
    alpha = ServingRecord("alpha", "shared", "model-a")
    with Store.open(db_file) as store:
        for set_id in ("q.one", "q.two", "q.three"):
            save_run(store, run_of(7, 10, set_id=set_id, serving=alpha), "metadata", "test")
    result = cli("models", "--min-quality", "0.7", "--format", "json")
    assert result.exit_code == 0, result.stderr
    models = json.loads(result.stdout)["models"]
    assert [m["provider"] for m in models] == ["alpha"]


# --- without a config: the implicit local instance -------------------------------------------------


def test_models_without_a_config_ranks_the_implicit_local_instance_it_has_runs_of(
    cli: Any, local_model: None, write_file: Any
) -> None:
    assert "No provider instances to rank" in cli("models").stdout
    from evalkit.config import ProviderConfig
    from evalkit.providers import default_alias

    alias = default_alias(ProviderConfig(id="local", adapter="local"))  # what the implicit instance sends
    # runs stored under the implicit instance's id and alias (answers recorded from it)
    write_file("evalkit.yaml", f"providers: [{{id: local, adapter: replay, path: answers.jsonl, model: {alias}}}]\n")
    write_file("answers.jsonl", '{"id": "greet", "response": "echo", "model": "SmolLM2"}\n')
    write_file("sets/one.yaml", ONE)
    assert cli("run", "sets/one.yaml").exit_code == 0
    Path("evalkit.yaml").unlink()
    result = cli("models", "--format", "json")
    assert result.exit_code == 0, result.stderr
    models = json.loads(result.stdout)["models"]
    assert [(m["provider"], m["model"], m["quality"], m["sets"]) for m in models] == [("local", alias, 1.0, 1)]
    table = cli("models")
    assert "No provider instances to rank" not in table.stdout
    assert "local" in table.stdout
