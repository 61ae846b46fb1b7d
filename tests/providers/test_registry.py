"""The registry of provider adapters: the built-ins are the config schema's enum, and a plugin's
adapter (entry point group ``evalkit.providers``) is found, configured with its own keys, called,
and held to the Provider protocol; a broken one is one error line at its ``adapter:``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit import plugins
from evalkit.config import ProviderConfig
from evalkit.providers import build_provider, default_alias, endpoint_identity, registry
from evalkit.records import CompletionRequest, Message
from evalkit.sets.configfile import load_config
from evalkit.sets.validation import load_schema
from tests.conftest import write
from tests.test_plugins import PluginSite, plugin_site

BUILT_IN = ["openai", "anthropic", "replay", "local", "http", "python", "command"]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PluginSite]:
    yield from plugin_site(tmp_path, monkeypatch)


def test_the_config_schema_enum_is_the_registered_built_ins() -> None:
    enum = load_schema("config")["$defs"]["provider"]["properties"]["adapter"]["enum"]
    built_in = [a.name for a in registry.adapters() if a.origin == "evalkit"]
    assert enum == built_in == BUILT_IN


def test_an_adapter_is_registered_once() -> None:
    openai = registry.get("openai")
    assert openai is not None
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("openai", build=openai.build, description="again")


def test_a_plugin_adapter_gets_its_own_keys_and_answers(site: PluginSite, isolated: Path) -> None:
    site.demo()
    write(
        isolated / "evalkit.yaml",
        """
        providers:
          - id: shouter
            adapter: echo
            priority: 7
            cost: {input_per_mtok: 1, output_per_mtok: 2}
            prefix: "SAYS: "
            base_url: not a url, and the plugin's business
        """,
    )
    config = load_config().provider("shouter")
    assert config.options == {"id": "shouter", "prefix": "SAYS: ", "base_url": "not a url, and the plugin's business"}
    assert (config.priority, config.cost is not None, config.base_url) == (7, True, None)  # evalkit's keys are its own
    assert config.where == f"{isolated / 'evalkit.yaml'}:3:14"
    assert default_alias(config) == "echo"  # no model: the adapter's name
    assert endpoint_identity(config).startswith("plugin echo evalkit-demo-plugin 0.1.0 sha256:")
    provider = build_provider(config)
    assert (provider.instance_id, provider.adapter) == ("shouter", "echo")
    request = CompletionRequest(messages=(Message("user", "hi"),), model="echo")
    completion = asyncio.run(provider.complete(request))
    assert completion.text == "SAYS: hi"
    assert (completion.serving.provider, completion.serving.reported_model, completion.adapter) == (
        "shouter",
        "echo-1",
        "echo",
    )
    echo = registry.get("echo")
    assert echo is not None
    assert echo.origin == "evalkit-demo-plugin 0.1.0"


def test_extra_keys_are_only_for_a_plugin_adapter(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.demo()
    write(
        isolated / "evalkit.yaml",
        """
        providers:
          - {id: p, adapter: echo, prefix: ">", anything: [1, 2]}
          - {id: o, adapter: openai, model: m, prefix: ">"}
          - {id: q, adapter: echo, prefix: ">", priority: high}
          - {id: r, adapter: echo, prefix: ">", api_key: sk-secret}
        """,
    )
    result = cli("validate", "evalkit.yaml")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("evalkit.yaml:3:40: providers[1].prefix: unknown key 'prefix' (expected one of: ")
    assert lines[1:] == [
        "evalkit.yaml:4:51: providers[2].priority: expected an integer, got the string 'high'",
        "evalkit.yaml:5:50: providers[3].api_key: API keys are never written in evalkit.yaml; put the key in an "
        "environment variable and name it with api_key_env",
        "3 errors in 1 file",
    ]
    assert "sk-secret" not in result.stderr


def test_an_unknown_adapter_lists_the_installed_plugins(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.demo()
    write(isolated / "evalkit.yaml", "providers:\n  - {id: p, adapter: ecko}\n")
    result = cli("validate", "evalkit.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        "evalkit.yaml:2:22: providers[0].adapter: 'ecko' is not one of: openai, anthropic, replay, local, http, python, command, echo; "
        "did you mean 'echo'?"
    )
    assert "evalkit_demo_plugin" not in __import__("sys").modules  # named by nobody: never imported


def test_a_plugin_that_fails_on_import_is_one_line_at_its_adapter(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.broken()
    write(isolated / "evalkit.yaml", "providers:\n  - {id: p, adapter: brokenllm}\n  - {id: q, adapter: brokenllm}\n")
    write(isolated / "s.yaml", "id: s\nname: S\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: hi}]}\n")
    result = cli("run", "s.yaml", "--provider", "q")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"Error: {isolated / 'evalkit.yaml'}:2:22: providers[0].adapter: plugin 'brokenllm' (evalkit.providers, from "
        "evalkit-broken-plugin 0.2.0, evalkit_broken_plugin:Provider) cannot be loaded: RuntimeError: broken on purpose"
    ]
    write(isolated / "evalkit.yaml", "providers:\n  - {id: p, adapter: replay, path: answers.jsonl}\n")
    write(isolated / "answers.jsonl", '{"id": "a", "response": "hi", "model": "m"}\n')
    assert cli("run", "s.yaml").exit_code == 0  # a config that does not name it: unaffected


def test_a_class_without_from_config_is_one_line(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.demo()
    site.add("evalkit-nofactory", {}, {"evalkit.providers": {"bare": "evalkit_demo_plugin:NoFactory"}})
    write(isolated / "evalkit.yaml", "providers:\n  - {id: p, adapter: bare}\n")
    result = cli("validate", "evalkit.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "evalkit.yaml:2:22: providers[0].adapter: plugin 'bare' (evalkit.providers, from evalkit-nofactory 0.1.0, "
        "evalkit_demo_plugin:NoFactory) cannot be used: it is the class NoFactory without a from_config(options) method",
        "1 error in 1 file",
    ]


def test_from_config_raising_is_exit_2_at_the_adapter_before_anything_runs(
    site: PluginSite, isolated: Path, db_file: Path, cli: Any
) -> None:
    site.demo()
    write(isolated / "evalkit.yaml", "providers:\n  - id: p\n    adapter: echo\n")
    write(isolated / "s.yaml", "id: s\nname: S\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: hi}]}\n")
    result = cli("run", "s.yaml")
    assert result.exit_code == 2
    assert not db_file.exists()  # planned, refused: nothing opened, nothing stored
    assert result.stderr.splitlines() == [
        f"Error: {isolated / 'evalkit.yaml'}:3:14: provider 'p': plugin adapter 'echo' (evalkit-demo-plugin 0.1.0): "
        "from_config failed: ValueError: the echo adapter needs prefix:"
    ]


def test_a_plugin_exception_is_the_item_error(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.demo()
    write(isolated / "evalkit.yaml", "providers:\n  - {id: p, adapter: echo, prefix: ''}\n")
    write(
        isolated / "s.yaml",
        "id: s\nname: S\nprompts:\n  - {id: a, prompt: explode, assertions: [{contains: x}]}\n"
        "  - {id: b, prompt: fine, assertions: [{contains: fine}]}\n",
    )
    result = cli("run", "s.yaml", "--format", "json")
    assert result.exit_code == 3  # items errored
    items = {i["id"]: i for i in json.loads(result.stdout)["items"]}
    assert items["a"]["error"] == (
        "provider 'p' (plugin adapter 'echo' (evalkit-demo-plugin 0.1.0)): RuntimeError: the echo exploded"
    )
    assert items["b"]["passed"] is True


def test_entry_points_are_read_only_for_an_adapter_not_built_in(site: PluginSite, isolated: Path) -> None:
    site.broken()
    write(isolated / "evalkit.yaml", "providers:\n  - {id: o, adapter: openai, model: m}\n")
    plugins.installed.cache_clear()
    assert load_config().provider("o").adapter == "openai"
    assert plugins.installed.cache_info().currsize == 0
    write(isolated / "evalkit.yaml", "providers:\n  - {id: e, adapter: echo}\n")
    with pytest.raises(Exception, match="is not one of"):
        load_config()
    assert plugins.installed.cache_info().currsize == 1


def test_an_api_built_config_of_an_unknown_adapter_is_an_input_error() -> None:
    from evalkit.errors import InputError

    with pytest.raises(InputError, match=r"^provider 'x': unknown adapter 'nope' \(known: openai, anthropic, replay"):
        build_provider(ProviderConfig("x", "nope"))
