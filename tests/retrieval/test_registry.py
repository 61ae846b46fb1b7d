"""The registry of retriever kinds: the built-ins are the config schema's enum, and a plugin's
kind (entry point group ``evalkit.retrievers``) is found, configured with its own keys, used by
``evalkit retrieval`` and held to the Retriever protocol."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit.retrieval import registry
from evalkit.sets.configfile import load_config
from evalkit.sets.validation import load_schema
from tests.conftest import write
from tests.test_plugins import QUESTIONS, PluginSite, plugin_site

KEYWORD = """
retrievers:
  - id: kw
    kind: keyword
    documents: {doc-cats: cats purr and sleep, doc-dogs: dogs bark loudly}
    provenance: {corpus_revision: demo-1, chunking: none}
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PluginSite]:
    yield from plugin_site(tmp_path, monkeypatch)


def test_the_config_schema_enum_is_the_registered_built_ins() -> None:
    enum = load_schema("config")["$defs"]["retriever"]["properties"]["kind"]["enum"]
    built_in = [k.name for k in registry.kinds() if k.origin == "evalkit"]
    assert enum == built_in == ["http", "command", "lexical"]


def test_a_kind_is_registered_once() -> None:
    http = registry.get("http")
    assert http is not None
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("http", build=http.build, description="again")


def test_a_plugin_kind_gets_its_own_keys_and_is_used(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.demo()
    write(isolated / "evalkit.yaml", KEYWORD)
    write(isolated / "questions.yaml", QUESTIONS)
    config = load_config().retriever("kw")
    assert config.options == {
        "id": "kw",
        "documents": {"doc-cats": "cats purr and sleep", "doc-dogs": "dogs bark loudly"},
    }
    assert config.provenance == {"corpus_revision": "demo-1", "chunking": "none"}  # evalkit's, declared as for any kind
    result = cli("retrieval", "questions.yaml", "--retriever", "kw", "--format", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["top1_hit_rate"] == pytest.approx(2 / 3)
    assert document["provenance"] == {
        "corpus_revision": "demo-1",
        "model_revision": None,
        "chunking": "none",
        "pipeline": "keyword-v1",  # returned by the plugin with each ranking
    }


def test_extra_keys_are_only_for_a_plugin_kind(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.demo()
    write(isolated / "evalkit.yaml", KEYWORD + "  - {id: h, kind: http, url: 'http://127.0.0.1:9/', documents: {}}\n")
    result = cli("validate", "evalkit.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0].startswith(
        "evalkit.yaml:6:53: retrievers[1].documents: unknown key 'documents' (expected one of: "
    )
    assert result.stderr.splitlines()[1] == "1 error in 1 file"


def test_a_plugin_exception_is_the_question_error(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.demo()
    write(isolated / "evalkit.yaml", KEYWORD)
    write(
        isolated / "questions.yaml",
        "id: q\nname: Q\nquestions:\n  - {id: boom, question: explode now, form: gap, expected: [doc-cats]}\n"
        "  - {id: ok, question: cats, form: match, expected: [doc-cats]}\n",
    )
    result = cli("retrieval", "questions.yaml", "--retriever", "kw", "--format", "json")
    assert result.exit_code == 3, result.stderr  # a question errored
    items = {i["id"]: i for i in json.loads(result.stdout)["items"]}
    assert items["boom"]["error"] == (
        "retriever 'kw' (plugin retriever kind 'keyword' (evalkit-demo-plugin 0.1.0)): KeyError: 'no index'"
    )
    assert items["ok"]["top1_hit"] is True


def test_from_config_raising_is_exit_2_at_the_kind(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.demo()
    write(isolated / "evalkit.yaml", "retrievers:\n  - id: kw\n    kind: keyword\n")
    write(isolated / "questions.yaml", QUESTIONS)
    result = cli("retrieval", "questions.yaml", "--retriever", "kw")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"Error: {isolated / 'evalkit.yaml'}:3:11: retriever 'kw': plugin retriever kind 'keyword' "
        "(evalkit-demo-plugin 0.1.0): from_config failed: KeyError: 'documents'"
    ]


def test_a_broken_kind_is_one_line_and_lexical_still_works(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.add(
        "evalkit-broken-kind",
        {"evalkit_broken_kind": "import not_a_module_anywhere\n"},
        {"evalkit.retrievers": {"vector": "evalkit_broken_kind:Vector"}},
    )
    write(isolated / "evalkit.yaml", "retrievers:\n  - {id: v, kind: vector}\n")
    result = cli("validate", "evalkit.yaml")
    assert result.stderr.splitlines() == [
        "evalkit.yaml:2:19: retrievers[0].kind: plugin 'vector' (evalkit.retrievers, from evalkit-broken-kind 0.1.0, "
        "evalkit_broken_kind:Vector) cannot be loaded: ModuleNotFoundError: No module named 'not_a_module_anywhere'",
        "1 error in 1 file",
    ]
    (isolated / "evalkit.yaml").unlink()
    write(isolated / "corpus.jsonl", '{"id": "doc-cats", "text": "cats purr"}\n')
    write(isolated / "questions.yaml", "corpus: corpus.jsonl\n" + QUESTIONS.lstrip("\n"))
    assert cli("retrieval", "questions.yaml").exit_code == 0  # without the plugin named: unaffected
