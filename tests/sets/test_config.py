"""evalkit.yaml: loading into records, discovery (cwd or an ancestor) and the --config / EVALKIT_CONFIG overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.config import Config, Cost, ProviderConfig, RetrieverConfig, db_path, find_config
from evalkit.errors import InputError
from evalkit.sets import load_config
from tests.conftest import REPO, write
from tests.fakeserver import FakeServer

VALID_CONFIG = REPO / "tests" / "data" / "valid" / "evalkit.yaml"
MINIMAL_SET = (REPO / "tests" / "data" / "valid" / "minimal.yml").read_text(encoding="utf-8")


def test_full_config_loads_with_paths_relative_to_the_file() -> None:
    root = VALID_CONFIG.parent
    assert load_config(VALID_CONFIG) == Config(
        path=VALID_CONFIG,
        db=Path(".evalkit/evalkit.duckdb"),
        sets=(root / "sets", root / "more-sets"),
        privacy="redacted",
        retention_days=30,
        cache=False,
        default_provider="local",
        decision_provider="judge",
        providers=(
            ProviderConfig(
                id="local",
                adapter="openai",
                base_url="http://127.0.0.1:8080/v1",
                model="qwen2.5-0.5b-instruct",
                api_key_env="OPENAI_API_KEY",
                priority=50,
                cost=Cost(input_per_mtok=0.15, output_per_mtok=0.60),
                max_concurrency=8,
                timeout_s=60.0,
                max_retries=4,
                fallback="cpu",
            ),
            ProviderConfig(
                id="judge", adapter="anthropic", model="claude-3-5-haiku-latest", api_key_env="ANTHROPIC_API_KEY"
            ),
            ProviderConfig(id="recorded", adapter="replay", path=root / "answers.jsonl"),
            ProviderConfig(id="cpu", adapter="local", model_path=root / "models/x.gguf", threads=2),
        ),
        retrievers=(
            RetrieverConfig(
                id="vector",
                kind="http",
                url="http://127.0.0.1:9000/search",
                provenance={
                    "corpus_revision": "docs-2026-11",
                    "model_revision": "e5-v2",
                    "chunking": "c512",
                    "pipeline": "hybrid-v3",
                },
                cwd=root,
            ),
            RetrieverConfig(id="mine", kind="command", command="python3 scripts/search.py", cwd=root),
            RetrieverConfig(id="bm25-de", kind="lexical", options={"language": "de"}, cwd=root),
        ),
    )


def test_empty_config_file_is_an_empty_config(isolated: Path) -> None:
    path = write(isolated / "evalkit.yaml", "# nothing configured yet\n")
    config = load_config()
    assert config == Config(path=path.resolve())
    assert config.set_dirs == (path.resolve().parent / "sets",)


def test_no_config_is_the_default_config(isolated: Path) -> None:
    assert find_config() is None
    config = load_config()
    assert config == Config()
    assert config.set_dirs == (isolated.resolve() / "sets",)


def test_config_is_found_in_the_working_folder_or_an_ancestor(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(isolated / "evalkit.yaml", "sets: [suites]\n")
    assert find_config() == path.resolve()
    deeper = isolated / "a" / "b"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    assert find_config() == path.resolve()
    assert load_config().sets == (isolated.resolve() / "suites",)
    nearer = write(isolated / "a" / "evalkit.yaml", "sets: [near]\n")
    assert find_config() == nearer.resolve()


def test_explicit_config_and_environment_win_over_discovery(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(isolated / "evalkit.yaml", "")
    env = write(isolated / "env" / "env.yaml", "")
    explicit = write(isolated / "explicit" / "explicit.yaml", "")
    monkeypatch.setenv("EVALKIT_CONFIG", str(env))
    assert find_config() == env
    assert find_config(str(explicit)) == explicit
    assert load_config(str(explicit)).path == explicit


@pytest.mark.parametrize(
    ("explicit", "env", "message"),
    [
        ("nope.yaml", None, "nope.yaml: config file not found (--config); check the path"),
        (None, "nope.yaml", "nope.yaml: config file not found (EVALKIT_CONFIG); check the path"),
    ],
)
def test_missing_named_config_is_an_input_error(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, explicit: str | None, env: str | None, message: str
) -> None:
    write(isolated / "evalkit.yaml", "")  # a discovered config must not hide the mistake
    if env:
        monkeypatch.setenv("EVALKIT_CONFIG", env)
    with pytest.raises(InputError) as caught:
        find_config(explicit)
    assert str(caught.value) == message
    assert caught.value.exit_code == 2


def test_db_path_precedence(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(VALID_CONFIG)
    monkeypatch.delenv("EVALKIT_DB")
    assert db_path(config) == VALID_CONFIG.parent / ".evalkit/evalkit.duckdb"
    assert db_path(Config()) == isolated.resolve() / ".evalkit/evalkit.duckdb"
    monkeypatch.setenv("EVALKIT_DB", "env.duckdb")
    assert db_path(config) == Path("env.duckdb")
    assert db_path(config, "cli.duckdb") == Path("cli.duckdb")


def fake_provider_config(server: FakeServer, extra: str = "") -> str:
    return (
        f"{extra}default_provider: fake\n"
        "providers:\n"
        "  - id: fake\n"
        "    adapter: openai\n"
        f"    base_url: {server.url}/v1\n"
        "    model: fake-alias\n"
    )


def test_run_from_a_subfolder_uses_the_ancestor_config(
    cli, isolated: Path, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(isolated / "evalkit.yaml", fake_provider_config(fake_llm, "sets: [suites]\n"))
    write(isolated / "suites" / "minimal.yml", MINIMAL_SET)
    deeper = isolated / "src" / "pkg"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    result = cli("run", "valid.minimal", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["set"] == "valid.minimal"
    assert fake_llm.calls == 1


def test_relative_paths_in_config_are_relative_to_the_config_file(cli, isolated: Path) -> None:
    write(
        isolated / "project" / "evalkit.yaml",
        """
        default_provider: recorded
        providers:
          - id: recorded
            adapter: replay
            path: answers.jsonl
        """,
    )
    write(isolated / "project" / "answers.jsonl", '{"id": "only", "response": "hi there", "model": "m1"}\n')
    write(isolated / "project" / "sets" / "minimal.yml", MINIMAL_SET)
    result = cli("run", "--config", "project/evalkit.yaml", "valid.minimal", "--format", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["set"], document["passed_count"]) == ("valid.minimal", 1)
    assert document["generator"] == {"provider": "recorded", "model": "replay", "reported_model": "m1"}


def write_configs(isolated: Path) -> None:
    """A broken config where discovery finds it, a good one elsewhere, a broken one for the environment."""
    write(isolated / "evalkit.yaml", "privacy: everything\n")
    write(isolated / "good" / "good.yaml", "privacy: full\n")
    write(isolated / "env" / "bad.yaml", "retention_days: 0\n")


def test_cli_config_option_overrides_discovery_and_environment(
    cli, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_configs(isolated)
    discovered = cli("validate")
    assert discovered.exit_code == 2
    assert "evalkit.yaml:1:10: privacy: 'everything' is not one of" in discovered.stderr
    chosen = cli("validate", "--config", "good/good.yaml")
    assert (chosen.exit_code, chosen.stdout) == (0, "1 file valid (0 sets)\n")
    monkeypatch.setenv("EVALKIT_CONFIG", "env/bad.yaml")
    from_env = cli("validate")
    assert from_env.exit_code == 2
    assert from_env.stderr.splitlines()[0] == "env/bad.yaml:1:17: retention_days: must be at least 1, got 0"
    overridden = cli("validate", "--config", "good/good.yaml")
    assert (overridden.exit_code, overridden.stdout) == (0, "1 file valid (0 sets)\n")


@pytest.mark.parametrize("command", ["run", "validate"])
def test_missing_config_option_exits_2(cli, isolated: Path, fake_llm: FakeServer, command: str) -> None:
    write(isolated / "evalkit.yaml", fake_provider_config(fake_llm))
    write(isolated / "sets" / "minimal.yml", MINIMAL_SET)
    args = ["run", "sets/minimal.yml"] if command == "run" else ["validate"]
    result = cli(*args, "--config", "nope.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["Error: nope.yaml: config file not found (--config); check the path"]
    assert fake_llm.calls == 0


def test_missing_environment_config_exits_2(cli, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(isolated / "sets" / "minimal.yml", MINIMAL_SET)
    monkeypatch.setenv("EVALKIT_CONFIG", "gone.yaml")
    result = cli("run", "sets/minimal.yml")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["Error: gone.yaml: config file not found (EVALKIT_CONFIG); check the path"]


def test_validate_with_paths_still_checks_the_named_config(cli, isolated: Path) -> None:
    write(isolated / "sets" / "minimal.yml", MINIMAL_SET)
    result = cli("validate", "--config", "nope.yaml", "sets")
    assert result.exit_code == 2
    assert "nope.yaml: config file not found (--config)" in result.stderr


def test_the_embeddings_instance_is_loaded(isolated: Path) -> None:
    write(
        isolated / "evalkit.yaml",
        """
        embeddings: {provider: emb}
        providers:
          - {id: gpt, adapter: openai, model: gpt-4o-mini}
          - {id: emb, adapter: openai, model: text-embedding-3-small}
          - {id: here, adapter: local}
        """,
    )
    assert load_config().embeddings_provider == "emb"
    write(isolated / "evalkit.yaml", "embeddings: {provider: here}\nproviders: [{id: here, adapter: local}]\n")
    assert load_config().embeddings_provider == "here"
    write(isolated / "evalkit.yaml", "providers: [{id: here, adapter: local}]\n")
    assert load_config().embeddings_provider is None
