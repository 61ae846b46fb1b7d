"""The repository is self-contained (docs/architecture.md): comments, docstrings and docs cite the
README's sections or pages under docs/, never a document outside the repository, and every section
they cite exists."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

from tests.conftest import REPO

SCANNED = ("evalkit", "tests", "bench", "schemas", "docs", ".ci")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".json", ".toml", ".cfg", ".txt", ""}
# a document the repository does not hold: the old product contract, cited by name and section
OUTSIDE = re.compile(r"\bDESIGN(?:\.md)?\b")
# README "Heading", README, "Heading", docs/ci.md "Heading" (a citation may wrap across comment lines)
CITATION = re.compile(r'\b(README|docs/[\w./-]+\.md)(?:\.md)?[,:]?\s+"([A-Za-z`][^"\n]*)"')
# README, Privacy / README: HTTP: a section named without quotes cannot be checked
UNQUOTED = re.compile(r"\bREADME[,:]?\s+(?=[A-Z])(?!README)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$")
BOLD_LEAD = re.compile(r"^\*\*(.+?)\.\*\*")  # a paragraph's lead in bold: **Score and pass.**


def scanned_files() -> list[Path]:
    """Every text file of the scanned folders that git does not ignore, and pyproject.toml; this
    file names what it forbids. What git ignores is not the repository's: the peers bench/README.md
    installs (bench/node, bench/inspect-venv) hold third-party text of their own."""
    files = [REPO / "pyproject.toml"]
    for folder in SCANNED:
        files += [p for p in repository_files(folder) if p.suffix in SUFFIXES]
    return [p for p in files if p.resolve() != Path(__file__).resolve() and "__pycache__" not in p.parts]


def repository_files(folder: str) -> list[Path]:
    """The files under ``folder``: tracked or new but not ignored in a git checkout, every file
    elsewhere (an unpacked sdist)."""
    if not (REPO / ".git").exists():
        return [p for p in sorted((REPO / folder).rglob("*")) if p.is_file()]
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", folder],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return sorted(p for p in (REPO / name for name in listed.split("\0") if name) if p.is_file())


def flattened(text: str) -> str:
    """The text with its lines joined, comment markers dropped, so a wrapped citation reads whole."""
    return re.sub(r"\s*\n\s*(?:#+\s*)?", " ", text)


def normalised(name: str) -> str:
    return " ".join(name.replace("`", "").split())


@cache
def sections(document: str) -> frozenset[str]:
    """The headings and bold paragraph leads of a markdown file outside its code blocks, each also
    without a trailing parenthesis (README "Configuration" for "Configuration (`evalkit.yaml`)")."""
    names: set[str] = set()
    fenced = False
    for line in (REPO / document).read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line) or BOLD_LEAD.match(line)
        if match:
            name = normalised(match.group(1))
            names |= {name, re.sub(r"\s*\([^)]*\)$", "", name)}
    return frozenset(names)


def citations(path: Path) -> list[tuple[str, str]]:
    document = path.read_text(encoding="utf-8", errors="replace")
    return [(doc + ".md" * (doc == "README"), normalised(name)) for doc, name in CITATION.findall(flattened(document))]


def test_nothing_cites_a_document_outside_the_repository() -> None:
    cited = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in scanned_files()
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not cited, "cite the README or docs/ instead:\n" + "\n".join(cited)


def test_every_readme_citation_names_its_section_in_quotes() -> None:
    loose = [
        f"{path.relative_to(REPO)}: {flattened(text)[m.start() : m.start() + 40]}"
        for path in scanned_files()
        for text in [path.read_text(encoding="utf-8", errors="replace")]
        for m in UNQUOTED.finditer(flattened(text))
    ]
    assert not loose, 'write README "Section" so the section can be checked:\n' + "\n".join(loose)


def test_every_cited_section_exists() -> None:
    missing = [
        f'{path.relative_to(REPO)}: {doc} "{name}"'
        for path in scanned_files()
        for doc, name in citations(path)
        if not (REPO / doc).is_file() or name not in sections(doc)
    ]
    assert not missing, "no such heading (or **bold lead.**) in the cited file:\n" + "\n".join(missing)


def test_the_checks_see_what_they_look_for() -> None:
    """The patterns above against known text, so a check that finds nothing cannot pass by seeing nothing."""
    assert OUTSIDE.search("a baseline (DESIGN 5.2)")
    assert OUTSIDE.search("DESIGN.md 2.1")
    assert not OUTSIDE.search("DESIGN_41 = {")
    wrapped = 'policy (README, "Baselines and\n    # regressions"), and docs/ci.md "Exit codes".'
    assert CITATION.findall(flattened(wrapped)) == [
        ("README", "Baselines and regressions"),
        ("docs/ci.md", "Exit codes"),
    ]
    assert UNQUOTED.search("(README, Privacy)")
    assert not UNQUOTED.search('(README "Privacy")')
    assert {"Configuration", "Configuration (evalkit.yaml)", "Score and pass", "HTTP"} <= sections("README.md")
    assert "yaml-language-server: $schema=../schemas/prompt-set.schema.json" not in sections("README.md")


def test_the_readme_links_the_architecture_page() -> None:
    development = (REPO / "README.md").read_text(encoding="utf-8").split("\n## Development\n", 1)[1]
    assert "(docs/architecture.md)" in development
    assert (REPO / "docs" / "architecture.md").is_file()
