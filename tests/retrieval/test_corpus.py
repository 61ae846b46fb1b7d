"""Corpora of the built-in retrievers: JSONL and folders, revisions, and errors with file:line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.errors import SetError
from evalkit.sets.corpus import load_corpus


def jsonl(*records: Any) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in records)


def write_set(write_file: Any, corpus: str = "corpus/docs.jsonl", expected: str = "[apple]") -> Path:
    return write_file(
        "sets/fruit.yaml",
        f"""
        id: fruit.docs
        name: Fruit
        description: Corpus tests.
        corpus: {corpus}
        questions:
          - {{id: pie, question: apple pie recipe, form: match, expected: {expected}}}
          - {{id: bread, question: banana bread, form: gap, expected: [banana]}}
        """,
    )


def stored_runs(db: Path) -> int:
    if not db.exists():
        return 0
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("select count(*) from runs").fetchone()[0]
    finally:
        con.close()


# ---------------------------------------------------------------- JSONL


def test_jsonl_corpus_keeps_documents_in_order_with_titles(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        jsonl({"id": "b", "text": "Zweites"}, "", {"id": "a", "text": "Straße", "title": "Über"}), encoding="utf-8"
    )
    corpus = load_corpus(path)
    assert [(d.id, d.text, d.title) for d in corpus.documents] == [("b", "Zweites", None), ("a", "Straße", "Über")]
    assert corpus.ids == frozenset({"a", "b"})
    assert corpus.revision.startswith("sha256:")


def test_revision_follows_the_content(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(jsonl({"id": "a", "text": "one"}, {"id": "b", "text": "two"}), encoding="utf-8")
    first = load_corpus(path).revision
    assert load_corpus(path).revision == first
    path.write_text(jsonl({"id": "a", "text": "one"}, {"id": "b", "text": "two!"}), encoding="utf-8")
    changed_text = load_corpus(path).revision
    path.write_text(jsonl({"id": "a", "text": "one"}, {"id": "b", "text": "two", "title": "T"}), encoding="utf-8")
    changed_title = load_corpus(path).revision
    assert len({first, changed_text, changed_title}) == 3


def test_duplicate_document_id_names_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(jsonl({"id": "a", "text": "x"}, "", {"id": "b", "text": "y"}, {"id": "a", "text": "z"}))
    with pytest.raises(SetError) as info:
        load_corpus(path)
    assert [str(i) for i in info.value.issues] == [f"{path}:4:1: id: duplicate document id 'a' (first at line 1)"]
    assert str(info.value) == f"{path}:4:1: id: duplicate document id 'a' (first at line 1)"


def test_malformed_lines_are_reported_with_their_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        jsonl(
            {"id": "ok", "text": "fine"},
            "not json",
            "[1, 2]",
            {"text": "no id"},
            {"id": "  ", "text": "blank id"},
            {"id": "n", "text": 5},
            {"id": "t", "text": "x", "title": 5},
            '{"id": "cut", "text": "trunc',
            "[" * 100_000 + "]" * 100_000,
        )
    )
    with pytest.raises(SetError) as info:
        load_corpus(path)
    issues = info.value.issues
    assert [(i.file, i.line) for i in issues] == [(str(path), n) for n in range(2, 10)]
    messages = [i.message for i in issues]
    assert messages[0].startswith("not a JSON object (")
    assert messages[1:6] == [
        "expected a JSON object {id, text, title?} per line",
        "missing string field 'id'",
        "missing string field 'id'",
        "missing string field 'text'",
        "'title' must be a string",
    ]
    assert messages[6].startswith("not a JSON object (")
    assert messages[7] == "JSON nested too deeply to read; flatten it"
    assert str(info.value).startswith(f"{path}:2:1: not a JSON object (")
    assert str(info.value).endswith(f"(and 7 more; run `evalkit validate {path}` to list them)")


def test_missing_corpus_points_at_the_corpus_line_of_the_set(cli: Any, write_file: Any, db_file: Path) -> None:
    write_set(write_file, corpus="corpus/missing.jsonl")
    result = cli("retrieval", "sets/fruit.yaml", "--retriever", "lexical")
    assert result.exit_code == 2
    assert (
        result.stderr
        == "Error: sets/fruit.yaml:4:1: corpus: corpus sets/corpus/missing.jsonl not found; check the path\n"
    )
    assert result.stdout == ""
    assert stored_runs(db_file) == 0


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            [{"id": "apple", "text": "apple pie"}, {"id": "apple", "text": "again"}],
            "Error: sets/corpus/docs.jsonl:2:1: id: duplicate document id 'apple' (first at line 1)\n",
        ),
        (
            [{"id": "apple", "text": "apple pie"}, "{oops", {"id": "banana", "text": "banana"}],
            "Error: sets/corpus/docs.jsonl:2:2: not a JSON object (Expecting property name enclosed in double quotes)\n",
        ),
    ],
    ids=["duplicate-id", "malformed-line"],
)
def test_cli_corpus_errors_exit_2_and_store_nothing(
    cli: Any, write_file: Any, db_file: Path, lines: list[Any], message: str
) -> None:
    write_set(write_file)
    write_file("sets/corpus/docs.jsonl", jsonl(*lines))
    result = cli("retrieval", "sets/fruit.yaml", "--retriever", "lexical", "--format", "json")
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message)
    assert stored_runs(db_file) == 0


def test_validate_lists_the_corpus_errors_it_is_pointed_to(cli: Any, write_file: Any) -> None:
    write_set(write_file)
    write_file("sets/corpus/docs.jsonl", jsonl({"id": "apple", "text": "a"}, "nope", {"id": "apple", "text": "b"}))
    run = cli("retrieval", "sets/fruit.yaml", "--retriever", "lexical")
    assert run.exit_code == 2
    assert "run `evalkit validate sets/corpus/docs.jsonl` to list them" in run.stderr
    result = cli("validate", "sets/fruit.yaml")
    assert result.exit_code == 2
    assert "sets/corpus/docs.jsonl:2:1: not a JSON object" in result.stderr
    assert "sets/corpus/docs.jsonl:3:1: id: duplicate document id 'apple' (first at line 1)" in result.stderr


# ---------------------------------------------------------------- folders


def test_folder_corpus_ids_are_relative_paths(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    files = {
        "intro.md": "# Getting started\n\nInstall it first.",
        "guide/usage.txt": "Run the tool.",
        "guide/deep/faq.MD": "Questions.",
        "notes.rst": "not a corpus file",
        "data.json": "{}",
        ".hidden/secret.md": "# Hidden",
        "guide/.draft.md": "draft",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    corpus = load_corpus(root)
    assert sorted(corpus.ids) == ["guide/deep/faq.MD", "guide/usage.txt", "intro.md"]
    by_id = {d.id: d for d in corpus.documents}
    assert by_id["intro.md"].title == "Getting started"
    assert by_id["intro.md"].text == files["intro.md"]
    assert by_id["guide/usage.txt"].title is None
    assert load_corpus(root).revision == corpus.revision
    (root / "guide/usage.txt").write_text("Run the tool twice.", encoding="utf-8")
    assert load_corpus(root).revision != corpus.revision


def test_folder_corpus_end_to_end(cli: Any, write_file: Any) -> None:
    write_set(write_file, corpus="docs", expected="[recipes/apple.md]")
    write_file("sets/docs/recipes/apple.md", "# Apple pie\n\nA recipe for apple pie.\n")
    write_file("sets/docs/banana.txt", "How to bake banana bread.\n")
    result = cli("retrieval", "sets/fruit.yaml", "--retriever", "lexical", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["items"][0]["retrieved"][0] == "recipes/apple.md"
    assert (doc["top1_hit_rate"], doc["top3_hit_rate"]) == (0.5, 0.5)  # 'banana' is not 'banana.txt'
    assert result.stderr == "Warning: sets/fruit.yaml: expected ids not in the corpus sets/docs: banana\n"


# ---------------------------------------------------------------- expected ids missing from the corpus


def test_expected_ids_missing_from_the_corpus_are_a_warning(cli: Any, write_file: Any) -> None:
    write_set(write_file, expected="[apple, ghost-2, ghost-1]")
    write_file(
        "sets/corpus/docs.jsonl",
        jsonl({"id": "apple", "text": "apple pie recipe"}, {"id": "banana", "text": "banana bread"}),
    )
    result = cli("retrieval", "sets/fruit.yaml", "--retriever", "lexical", "--format", "json")
    assert result.exit_code == 0
    assert (
        result.stderr
        == "Warning: sets/fruit.yaml: expected ids not in the corpus sets/corpus/docs.jsonl: ghost-1, ghost-2\n"
    )
    assert json.loads(result.stdout)["top1_hit_rate"] == 1.0  # stdout carries only the JSON


def test_no_warning_when_every_expected_id_exists(cli: Any, write_file: Any) -> None:
    write_set(write_file)
    write_file(
        "sets/corpus/docs.jsonl",
        jsonl({"id": "apple", "text": "apple pie recipe"}, {"id": "banana", "text": "banana bread"}),
    )
    result = cli("retrieval", "sets/fruit.yaml", "--retriever", "lexical", "--format", "json")
    assert (result.exit_code, result.stderr) == (0, "")


def test_long_missing_list_is_clipped_with_a_count(cli: Any, write_file: Any) -> None:
    ghosts = ", ".join(f"g{i:02d}" for i in range(12))
    write_set(write_file, expected=f"[{ghosts}]")
    write_file("sets/corpus/docs.jsonl", jsonl({"id": "apple", "text": "apple"}, {"id": "banana", "text": "banana"}))
    result = cli("retrieval", "sets/fruit.yaml", "--retriever", "lexical", "--format", "json")
    assert result.exit_code == 0
    shown = ", ".join(f"g{i:02d}" for i in range(10))
    assert result.stderr == (
        f"Warning: sets/fruit.yaml: expected ids not in the corpus sets/corpus/docs.jsonl: {shown}, ... (12 in all)\n"
    )
