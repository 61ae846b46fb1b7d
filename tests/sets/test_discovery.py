"""Which sets `evalkit run` loads: a file, a folder (every set in it) or a set id in the `sets:` folders."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit.errors import SetError
from evalkit.sets import resolve_sets, yaml_files
from tests.conftest import write
from tests.fakeserver import FakeServer


def prompt_set(set_id: str, *prompt_ids: str) -> str:
    prompts = "".join(f"  - {{id: {p}, prompt: Say {p}, assertions: [{{contains: {p}}}]}}\n" for p in prompt_ids)
    return f"id: {set_id}\nname: {set_id}\nprompts:\n{prompts}"


def question_set(set_id: str) -> str:
    return f"id: {set_id}\nname: {set_id}\nquestions:\n  - {{id: q, question: Where?, form: match, expected: [d1]}}\n"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    """One loopback server for the module (stopping one takes half a second)."""
    started = FakeServer().start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def fake_llm(server: FakeServer) -> FakeServer:
    server.requests.clear()
    return server


@pytest.fixture
def project(isolated: Path, fake_llm: FakeServer) -> Path:
    """evalkit.yaml with the fake provider and two set folders; sets in both, and one elsewhere."""
    write(
        isolated / "evalkit.yaml",
        f"""
        sets: [suites, more]
        default_provider: fake
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: fake-alias
        """,
    )
    write(isolated / "suites" / "a.yaml", prompt_set("demo.a", "one", "two"))
    write(isolated / "suites" / "nested" / "b.yml", prompt_set("demo.b", "three"))
    write(isolated / "more" / "q.yaml", question_set("demo.q"))
    write(isolated / "elsewhere" / "c.yaml", prompt_set("demo.c", "four"))
    return isolated


def run_json(cli: Any, *args: str) -> Any:
    result = cli("run", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_yaml_files_walks_folders_recursively_in_order(isolated: Path) -> None:
    for name in ("b.yaml", "a.yml", "sub/z.yaml", "sub/deeper/y.yml", ".hidden/x.yaml", "evalkit.yaml", "notes.txt"):
        write(isolated / "root" / name, "x: 1\n")
    write(isolated / "root" / "sub" / "evalkit.yaml", "x: 1\n")
    found = [p.relative_to(isolated / "root").as_posix() for p in yaml_files(isolated / "root")]
    assert found == ["a.yml", "b.yaml", "sub/z.yaml", "sub/deeper/y.yml"]


def test_yaml_files_follow_linked_folders_once_and_skip_hidden_files(isolated: Path) -> None:
    write(isolated / "shared" / "s.yaml", "x: 1\n")
    write(isolated / "root" / "a.yaml", "x: 1\n")
    write(isolated / "root" / ".draft.yaml", "x: 1\n")  # an editor's or a user's hidden file
    (isolated / "root" / "linked").symlink_to(isolated / "shared", target_is_directory=True)
    (isolated / "shared" / "loop").symlink_to(isolated / "root", target_is_directory=True)  # a cycle ends
    found = [p.relative_to(isolated / "root").as_posix() for p in yaml_files(isolated / "root")]
    assert found == ["a.yaml", "linked/s.yaml"]


def test_run_a_file(cli, project: Path, fake_llm: FakeServer) -> None:
    document = run_json(cli, "elsewhere/c.yaml")
    assert (document["set"], document["prompt_count"]) == ("demo.c", 1)
    assert fake_llm.calls == 1


def test_run_a_folder_runs_every_prompt_set_in_it(cli, project: Path, fake_llm: FakeServer) -> None:
    write(project / "suites" / "nested" / "q.yaml", question_set("demo.q2"))  # skipped: not a prompt set
    documents = run_json(cli, "suites")
    assert [(d["set"], d["prompt_count"]) for d in documents] == [("demo.a", 2), ("demo.b", 1)]
    assert fake_llm.calls == 3


def test_run_set_ids_from_the_configured_folders(cli, project: Path, fake_llm: FakeServer) -> None:
    documents = run_json(cli, "demo.b", "demo.a")
    assert [d["set"] for d in documents] == ["demo.b", "demo.a"]
    assert fake_llm.calls == 3


def test_unknown_set_id_lists_the_available_ids(cli, project: Path, fake_llm: FakeServer, db_file: Path) -> None:
    result = cli("run", "demo.c")  # a real set, but not in a configured folder
    assert result.exit_code == 2
    root = project.resolve()
    assert result.stderr.splitlines() == [
        f"Error: 'demo.c' is neither a file, a folder nor a set id in {root}/suites, {root}/more "
        "(available ids: demo.a, demo.b, demo.q)"
    ]
    assert fake_llm.calls == 0
    assert not db_file.exists()


def test_set_id_without_config_is_looked_up_in_sets(cli, isolated: Path) -> None:
    write(isolated / "sets" / "a.yaml", prompt_set("demo.a", "one"))
    result = cli("run", "demo.z")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"Error: 'demo.z' is neither a file, a folder nor a set id in {isolated.resolve()}/sets (available ids: demo.a)"
    ]


@pytest.mark.parametrize(
    ("target", "shown"),
    [("more/q.yaml", "more/q.yaml"), ("demo.q", "{root}/more/q.yaml")],
    ids=["file", "id"],
)
def test_question_set_is_refused_by_run(
    cli, project: Path, fake_llm: FakeServer, db_file: Path, target: str, shown: str
) -> None:
    result = cli("run", target)
    assert result.exit_code == 2
    path = shown.format(root=project.resolve())
    assert result.stderr.splitlines() == [f"Error: {path}: 'demo.q' is a question set; run it with evalkit retrieval"]
    assert fake_llm.calls == 0
    assert not db_file.exists()


def test_folder_without_set_files_exits_2(cli, project: Path) -> None:
    (project / "empty").mkdir()
    result = cli("run", "empty")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["Error: empty: no set files (*.yaml) in this folder"]


def test_duplicate_set_ids_in_a_folder_are_refused(cli, project: Path, fake_llm: FakeServer, db_file: Path) -> None:
    write(project / "dup" / "a.yaml", prompt_set("demo.same", "one"))
    write(project / "dup" / "b.yaml", prompt_set("demo.same", "two"))
    result = cli("run", "dup/")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ")
    assert "duplicate set id 'demo.same'" in result.stderr
    assert "dup/a.yaml" in result.stderr
    assert "dup/b.yaml" in result.stderr
    assert fake_llm.calls == 0
    assert not db_file.exists()


def test_duplicate_set_id_error_of_run_is_located(cli, project: Path) -> None:
    write(project / "dup" / "a.yaml", prompt_set("demo.same", "one"))
    write(project / "dup" / "b.yaml", prompt_set("demo.same", "two"))
    result = cli("run", "dup")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["Error: dup/b.yaml:1:5: id: duplicate set id 'demo.same': also in dup/a.yaml"]


def test_duplicate_set_ids_across_targets_are_refused(cli, project: Path, fake_llm: FakeServer) -> None:
    write(project / "elsewhere" / "a_copy.yaml", prompt_set("demo.a", "one"))
    result = cli("run", "suites/a.yaml", "elsewhere/a_copy.yaml")
    assert result.exit_code == 2
    assert "duplicate set id 'demo.a'" in result.stderr
    assert "suites/a.yaml" in result.stderr
    assert "elsewhere/a_copy.yaml" in result.stderr
    assert fake_llm.calls == 0


def test_duplicate_set_id_in_the_configured_folders_is_refused(cli, project: Path, fake_llm: FakeServer) -> None:
    write(project / "more" / "a_again.yaml", prompt_set("demo.a", "one"))
    result = cli("run", "demo.a")
    assert result.exit_code == 2
    assert "duplicate set id 'demo.a'" in result.stderr
    assert "suites/a.yaml" in result.stderr
    assert "more/a_again.yaml" in result.stderr
    assert fake_llm.calls == 0


def test_resolve_sets_reports_every_invalid_file(isolated: Path) -> None:
    write(isolated / "mixed" / "a.yaml", "id: BAD\nname: n\nprompts: [{id: a, prompt: p, reference: r}]\n")
    write(isolated / "mixed" / "b.yaml", "id: fine\nname: n\nprompts: []\n")
    write(isolated / "mixed" / "c.yaml", prompt_set("demo.ok", "one"))
    with pytest.raises(SetError) as caught:
        resolve_sets(["mixed"], [])
    assert [(Path(i.file).name, i.line, i.col, i.path) for i in caught.value.issues] == [
        ("a.yaml", 1, 5, "id"),
        ("b.yaml", 3, 10, "prompts"),
    ]


@pytest.mark.parametrize(
    "targets", [("demo.a", "suites/a.yaml"), ("suites/a.yaml", "suites/a.yaml")], ids=["id-and-path", "path-twice"]
)
def test_a_file_named_twice_runs_once(cli, project: Path, fake_llm: FakeServer, targets: tuple[str, str]) -> None:
    result = cli("run", *targets, "--format", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert isinstance(document, dict)  # one run, not an array of two
    assert document["set"] == "demo.a"
    assert fake_llm.calls == 2
