"""The HTML report as a file (README "The HTML report"): self-contained, everything untrusted inert, answers only
where the privacy level kept them, and `run --html` / `report --html` as commands. What a person
sees in a browser is tests/report/test_html_browser.py."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from evalkit.records import BaselineEntry, BaselineFile
from evalkit.report.html import script_json, trend_chart, visible
from evalkit.report.htmldata import baseline_from_file, report_sets
from evalkit.rows import RunFilter
from evalkit.store import Store, save_run
from tests.factories import run_of
from tests.report.htmlproject import (
    BIDI,
    HOSTILE_ID,
    HOSTILE_MODEL,
    HOSTILE_NEEDLE,
    SCRIPT,
    TEMPLATE,
    make_project,
    make_small,
)


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text of each <script>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def parsed(text: str) -> Elements:
    elements = Elements()
    elements.feed(text)
    return elements


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One project for the tests that only read its reports (built once: six runs and a retrieval)."""
    from click.testing import CliRunner

    from evalkit.cli import cli as group

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(group, list(args), catch_exceptions=True)

    folder = tmp_path_factory.mktemp("html-project")
    with pytest.MonkeyPatch.context() as patch:
        for var in ("EVALKIT_CONFIG", "EVALKIT_DB"):
            patch.delenv(var, raising=False)
        patch.chdir(folder)
        made = make_project(folder, invoke)
    return {
        **made,
        "args": ("--config", str(folder / "evalkit.yaml"), "--db", str(folder / ".evalkit" / "evalkit.duckdb")),
    }


@pytest.fixture
def project(built: dict[str, Any], isolated: Path) -> dict[str, Any]:
    return built


def report(cli: Any, *args: str, of: dict[str, Any] | None = None) -> str:
    result = cli("report", "--html", "report.html", *args, *(of["args"] if of else ()))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("wrote report.html (")
    return Path("report.html").read_text(encoding="utf-8")


def page_text(page: str) -> str:
    """What a person reads: the page without its scripts and tags, whitespace made single spaces."""
    from html import unescape

    body = re.sub(r"<script.*?</script>", "", page, flags=re.S)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", body)).split())


def section(page: str, start: str, end: str = "</table>") -> str:
    return page.split(start, 1)[1].split(end, 1)[0]


def test_the_file_needs_nothing_from_outside(cli: Any, project: dict[str, Any]) -> None:
    page = report(cli, of=project)
    elements = parsed(page)
    assert [t for t, a in elements.tags if t in ("link", "iframe", "object", "embed", "img", "base")] == []
    assert [a for t, a in elements.tags if a.get("src") or a.get("srcset")] == []
    assert [t for t, _ in elements.tags].count("script") == 3  # Chart.js, the data, the page's own
    assert "Chart.js v4" in elements.scripts[0]
    assert not re.search(r"@import|url\(", page.split("<script>", 1)[0])  # the styles load nothing
    policy = next(a["content"] for t, a in elements.tags if t == "meta" and a.get("http-equiv"))
    assert policy is not None
    assert "default-src 'none'" in policy  # and the browser may fetch nothing even if asked


def test_untrusted_text_is_shown_never_run(cli: Any, project: dict[str, Any]) -> None:
    page = report(cli, of=project)
    elements = parsed(page)
    # nothing the data carries became an element: the only scripts are the page's three
    assert [t for t, _ in elements.tags].count("script") == 3
    assert not any(t == "img" for t, _ in elements.tags)
    assert "&lt;/script&gt;&lt;img src=x onerror=" in page
    assert "evil-&lt;/td&gt;&lt;script&gt;" in page
    assert "m&lt;b&gt;1&lt;/b&gt;" in page  # a model name
    # a reason quoting the assertion's value
    assert "contains &#34;&lt;script&gt;document.title=&#39;owned&#39;&lt;/script&gt;{{7*7}}\\u202e&#34;" in page
    assert TEMPLATE in page  # {{7*7}} stays text: the report renders no data as a template
    assert "49 beta" not in page
    # control and bidi characters are shown as their code points, not obeyed
    assert "abc⟨U+202E⟩dcba⟨U+2066⟩x⟨U+0007⟩⟨U+0000⟩y" in page
    assert not any(c in page for c in ("\u202e", "\u2066", "\x07", "\x00"))
    # the charts' data: JSON that cannot end its element, and that reads back whole
    data = elements.scripts[1]
    assert "<" not in data
    assert ">" not in data
    charts = json.loads(data)
    labels = [d["label"] for d in charts["set-0"]["trend"]["datasets"]]
    assert any("m<b>1</b>⟨U+202E⟩" in label for label in labels)


def test_the_pieces_of_untrusted_text_round_trip() -> None:
    hostile = f"{SCRIPT}{HOSTILE_ID}{BIDI}{HOSTILE_MODEL}{HOSTILE_NEEDLE}\u2028\u2029"
    text = script_json({"k": hostile})
    assert "</" not in text
    assert "\u2028" not in text
    assert json.loads(text) == {"k": hostile}
    assert visible("a\u200bb\ufeffc\td\ne") == "a⟨U+200B⟩b⟨U+FEFF⟩c\td\ne"


def test_the_report_has_every_part(cli: Any, project: dict[str, Any]) -> None:
    page = report(cli, of=project)
    assert page.count('class="set"') == 2  # the prompt set and the retrieval set
    assert project["regressed"] in page
    assert "Regression: pass rate dropped" in page
    assert page.count('<tr class="item"') == 5
    assert 'id="diff-set-0"' in page
    assert "1 prompt(s) flipped" in page
    assert 'class="bars-form"' in page
    assert 'class="bars-hard"' in page
    assert "corpus_revision" in page  # the retrieval run's provenance
    assert 'class="models"' in page
    charts = json.loads(parsed(page).scripts[1])
    trend = charts["set-0"]["trend"]
    assert len(trend["labels"]) == len(project["runs"])
    by_label = {d["label"].split(" · ")[0] + " · " + d["label"].split(" · ")[1]: d for d in trend["datasets"]}
    assert sum(p is not None for p in by_label["pass rate · good"]["data"]) == len(project["runs"]) - 1
    assert sum(p is not None for p in by_label["pass rate · bad"]["data"]) == 1
    marks = by_label["pass rate · good"]["marks"]
    assert marks[0] == "accepted"
    assert marks[-1] == "regressed"
    assert sorted(charts["set-1"]["by_form"]["labels"]) == ["gap", "match"]


def test_filters_narrow_the_report(cli: Any, project: dict[str, Any]) -> None:
    page = report(cli, "html.demo", "--provider", "bad", of=project)
    charts = json.loads(parsed(page).scripts[1])
    assert list(charts) == ["set-0"]
    assert len(charts["set-0"]["trend"]["labels"]) == 1
    assert project["bad"] in page
    limited = json.loads(parsed(report(cli, "--limit", "2", of=project)).scripts[1])
    assert len(limited["set-0"]["trend"]["labels"]) == 2


@pytest.mark.slow  # a project of its own: several runs
def test_answers_only_where_the_privacy_level_kept_them(isolated: Path, cli: Any) -> None:
    make_project(isolated, cli, runs=1, privacy="metadata")
    page = report(cli)
    assert "alpha" not in page.split('<table class="items"', 1)[1].split("</table>", 1)[0].split("<tbody>")[1].replace(
        "Say alpha", ""
    ).replace("contains &#39;alpha&#39;", "")
    assert "not kept (privacy metadata)" in page


@pytest.mark.slow  # a project of its own: several runs
def test_run_html_writes_the_runs_just_made(isolated: Path, cli: Any) -> None:
    made = make_project(isolated, cli, runs=1)
    result = cli("run", "set.yaml", "--html", "out/run.html", "--format", "json")
    assert result.exit_code == 0, result.stderr
    run_id = json.loads(result.stdout)["run_id"]
    page = (isolated / "out" / "run.html").read_text(encoding="utf-8")
    assert f'<strong>Latest run</strong> <span class="t">{run_id}</span>' in page
    charts = json.loads(parsed(page).scripts[1])
    assert list(charts) == ["set-0"]  # the set that ran, not the retrieval set
    assert len(charts["set-0"]["trend"]["labels"]) == len(made["runs"]) + 1


@pytest.mark.slow  # a project of its own: several runs
def test_run_html_into_a_fresh_database_draws_the_run_alone(isolated: Path, cli: Any, write_file: Any) -> None:
    make_project(isolated, cli, runs=1)
    result = cli("run", "set.yaml", "--db", str(isolated / "fresh.duckdb"), "--html", "alone.html")
    assert result.exit_code == 0, result.stderr
    page = (isolated / "alone.html").read_text(encoding="utf-8")
    charts = json.loads(parsed(page).scripts[1])
    assert len(charts["set-0"]["trend"]["labels"]) == 1
    # a fresh runner's baseline is the committed file's entry: the diff is against its outcomes
    diff = page.split('id="diff-set-0"', 1)[1].split("</table>", 1)[0]
    assert 'class="flipped" data-id="p-flip"' in diff
    assert "in html.demo.json: 100% of its samples passed" in diff


@pytest.mark.slow  # a project of its own: several runs
def test_an_unwritable_html_path_is_refused_before_anything_runs(isolated: Path, cli: Any) -> None:
    make_project(isolated, cli, runs=1)
    (isolated / "taken").mkdir()
    before = json.loads(cli("report", "--format", "json").stdout)["runs"]
    nowhere = "set.yaml/report.html"  # under a file: no folder can be made there
    result = cli("run", "set.yaml", "--html", nowhere)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: {nowhere}: cannot write this file; choose another path"
    assert json.loads(cli("report", "--format", "json").stdout)["runs"] == before
    for args in (("run", "set.yaml", "--html", "taken"), ("report", "--html", "taken"), ("report", "--html", nowhere)):
        refused = cli(*args)
        assert refused.exit_code == 2
        assert len(refused.stderr.strip().splitlines()) == 1
    assert json.loads(cli("report", "--format", "json").stdout)["runs"] == before


def test_an_empty_history_still_makes_a_page(isolated: Path, cli: Any, write_file: Any) -> None:
    write_file("evalkit.yaml", "providers: []\n")
    page = report(cli)
    assert "No stored runs match." in page


def test_the_verdict_is_said_once(cli: Any, project: dict[str, Any], isolated: Path) -> None:
    text = page_text(report(cli, "html.demo", of=project))
    assert "Regression: pass rate dropped 20.0 pp" in text
    assert "Regressed" not in text
    assert text.count("Regression:") == 1
    make_small(isolated, cli)
    assert cli("run", "set.yaml", "--html", "again.html").exit_code == 0
    raw = Path("again.html").read_text(encoding="utf-8")
    again = page_text(raw)
    assert "No regression: pass rate +0.0 pp" in again
    assert again.count("No regression") == 1
    # a compared run that held is marked good, its verdict coloured as a pass
    assert '<div class="verdict good">' in raw
    assert 'class="verdict-text t pass"' in raw


@pytest.mark.parametrize("privacy", ["metadata", "none"])
def test_run_html_holds_only_what_the_database_keeps(isolated: Path, cli: Any, privacy: str) -> None:
    from tests.report.htmlproject import SECRET_ANSWER, SECRET_PROMPT

    make_small(isolated, cli, privacy=privacy)
    assert cli("run", "set.yaml", "--html", "run.html").exit_code == 0
    page = Path("run.html").read_text(encoding="utf-8")
    for secret in (SECRET_PROMPT, SECRET_ANSWER, "the secret plan"):  # the prompt, the answer, a reason quoting it
        assert secret not in page
    stored = report(cli)
    if privacy == "none":  # aggregates only: no prompt table
        assert 'class="items"' not in page
        return
    rows = section(page, '<table class="items"')
    assert rows == section(stored, '<table class="items"')  # the same rows the database gives the report
    assert "not kept (privacy metadata)" in rows
    assert "assertion failed: exact" in rows  # the text-free reason


def test_no_changed_prompt_is_said_not_drawn_as_an_empty_table(isolated: Path, cli: Any) -> None:
    make_small(isolated, cli)
    assert cli("run", "set.yaml", "--html", "same.html").exit_code == 0
    page = Path("same.html").read_text(encoding="utf-8")
    assert 'class="diff"' not in page
    assert "No prompt changed: the 2 prompt(s) in both runs have the same verdict and score." in page_text(page)


def test_errored_runs_are_drawn_as_errors_not_as_a_collapse(isolated: Path, cli: Any) -> None:
    make_small(isolated, cli)
    assert cli("run", "set.yaml", "--provider", "gone").exit_code == 3  # every call errored
    page = report(cli)
    assert "gone · m · unverified · grader deterministic · 2 of 2 answers errored (no measure of quality)" in (
        page_text(page)
    )
    trend = json.loads(parsed(page).scripts[1])["set-0"]["trend"]
    lines = [d for d in trend["datasets"] if d.get("type") != "bar"]
    assert [d["label"].split(" · ")[:2] for d in lines] == [["pass rate", "rec"], ["mean score", "rec"]]
    assert not any("unverified" in d["label"] for d in lines)  # no line for the run that reported no model
    assert [d["data"] for d in lines] == [[0.5, None], [0.5, None]]  # the errored run is no quality point
    (errors,) = [d for d in trend["datasets"] if d.get("type") == "bar"]
    assert errors["data"] == [None, 1.0]  # every answer errored
    assert errors["marks"][1].startswith("2 of 2 answers errored · gone · m · unverified")


def test_the_cells_share_the_page_and_the_short_ones_stay_whole() -> None:
    from evalkit.report.cells import CELL_CHARS, PAGE_CHARS, cut, share

    assert share([10, 5_000_000]) == CELL_CHARS  # one huge answer: cut to a cell's most, nothing else
    assert share([CELL_CHARS] * 1_000) == PAGE_CHARS // 1_000  # a thousand long ones share the page
    lengths = [3] * 500 + [40_000] * 300 + [7] * 9_000
    limit = share(lengths)
    assert sum(min(n, limit) for n in lengths) <= PAGE_CHARS < sum(min(n, limit + 1) for n in lengths)
    assert limit > 7  # the short texts are whole
    assert cut("ab⟨U+0000⟩cd", 5) == "ab"  # a control character's mark is never cut in two
    assert cut("ab⟨U+0000⟩cd", 10) == "ab⟨U+0000⟩"


@pytest.mark.slow  # a thousand prompts, 8 MB of answers stored and read back
def test_long_answers_are_cut_and_the_file_stays_small(isolated: Path, cli: Any) -> None:
    from tests.report.htmlproject import write_answers

    count, huge = 1_000, 5_000_000
    hostile = '"<\x00&' * 750  # 3,000 characters that escaping makes longest
    rows = [{"id": f"q{i:04d}", "response": "x" * huge if i == 0 else hostile, "model": "m"} for i in range(count)]
    write_answers(isolated, "long.jsonl", rows)
    (isolated / "evalkit.yaml").write_text(
        "privacy: full\nproviders:\n  - {id: rec, adapter: replay, path: long.jsonl}\n"
    )
    prompts = "".join(f"  - {{id: q{i:04d}, prompt: hi, assertions: [{{contains: x}}]}}\n" for i in range(count))
    (isolated / "long.yaml").write_text(f"id: long\nname: Long\nprompts:\n{prompts}", encoding="utf-8")
    assert cli("run", "long.yaml").exit_code == 0
    page = report(cli)
    assert len(page.encode()) < 2_000_000  # the README's bound for 1,000 prompts, whatever the answers
    first = section(page, '<tr class="item"', "</tr>")
    shown = re.search(r"(x+)<span class=\"muted cut\">", first)
    assert shown is not None
    assert 100 < len(shown.group(1)) <= 150  # a thousand long answers: each its share of the page
    assert "… cut: 5,000,000 characters in all" in first
    assert page.count("… cut: 3,000 characters in all") == count - 1


def test_a_long_model_name_from_an_endpoint_is_cut(isolated: Path, cli: Any) -> None:
    from evalkit.report.cells import NAME_CHARS
    from tests.report.htmlproject import write_answers

    write_answers(isolated, "a.jsonl", [{"id": "q", "response": "yes", "model": "m" * 1_000_000}])
    (isolated / "evalkit.yaml").write_text("providers:\n  - {id: rec, adapter: replay, path: a.jsonl}\n")
    (isolated / "a.yaml").write_text(
        "id: a\nname: A\nprompts:\n  - {id: q, prompt: hi, assertions: [{contains: yes}]}\n"
    )
    assert cli("run", "a.yaml").exit_code == 0
    page = report(cli)
    assert len(page.encode()) < 400_000  # Chart.js and the page: the name is not 4 MB of it
    labels = [d["label"] for d in json.loads(parsed(page).scripts[1])["set-0"]["trend"]["datasets"]]
    assert labels == [
        f"{metric} · rec · replay · {'m' * NAME_CHARS}… · deterministic" for metric in ("pass rate", "mean score")
    ]
    assert f"· {'m' * NAME_CHARS}… ·" in page_text(page)  # in the verdict box too


def test_runs_not_stored_are_shown_alone_as_the_database_would_keep_them() -> None:
    """No database: the run just made is its set's only run and its latest, at the configured
    privacy; an errored run's row keeps its error count, so the chart draws it as errors (README
    "The HTML report")."""
    run = run_of(1, 3, errors=1)
    asked: list[str] = []
    [entry] = report_sets(None, "metadata", RunFilter(), [run], lambda set_id: asked.append(set_id) or [])
    assert (entry["set_id"], entry["set_name"], entry["baseline"], asked) == ("demo.set", None, None, [])
    [row] = entry["runs"]
    assert (row.run_id, row.item_count, row.error_count, row.provider) == (run.run_id, 3, 1, "fake")
    assert (entry["latest"]["run_id"], entry["latest"]["privacy"]) == (run.run_id, "metadata")
    assert all(item.get("response") is None for item in entry["latest"]["items"])  # metadata keeps no texts
    assert trend_chart(entry["runs"], set())["datasets"][-1]["type"] == "bar"


def test_stored_runs_are_read_through_the_filter(tmp_path: Path) -> None:
    demo = [run_of(i, 3, started_at=f"2026-11-0{i + 1}T00:00:00+00:00") for i in range(3)]
    with Store.open(tmp_path / "e.duckdb") as store:
        for run in [*demo, run_of(3, 3, set_id="other.set")]:
            save_run(store, run, "redacted", "test")
        sets = report_sets(store, "full", RunFilter(set_id="demo.set", limit=2), (), lambda set_id: [])
        everything = report_sets(store, "full", RunFilter(), (), lambda set_id: [])
    [entry] = sets
    assert [r.run_id for r in entry["runs"]] == [demo[1].run_id, demo[2].run_id]  # the newest two, oldest first
    assert (entry["latest"]["run_id"], entry["latest"]["privacy"]) == (demo[2].run_id, "redacted")
    assert entry["runs"][-1].started_at == "2026-11-03T00:00:00+00:00"
    assert [e["set_id"] for e in everything] == ["demo.set", "other.set"]


def test_a_baseline_not_in_the_database_is_the_files_entry(tmp_path: Path) -> None:
    entry = BaselineEntry(
        "fake", "alias-1", "model-1", "deterministic", "run-1", "2026-11-01T00:00:00+00:00", "0", "f" * 16,
        2, 1, 0.5, 0.5, {"p0": (1.0, 1.0), "p1": (0.5, 0.25)},
    )  # fmt: skip
    files = [BaselineFile(tmp_path / "demo.set.json", "demo.set", (entry,))]
    assert baseline_from_file(files, "run-2") is None
    found = baseline_from_file(files, "run-1")
    assert found is not None
    assert found["items"] == [
        {"id": "p0", "passed": True, "score": 1.0, "reason": "in demo.set.json: 100% of its samples passed"},
        {"id": "p1", "passed": False, "score": 0.25, "reason": "in demo.set.json: 50% of its samples passed"},
    ]
