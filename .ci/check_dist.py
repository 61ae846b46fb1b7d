"""Check the release artifacts in DIST (built by .ci/release-check): one wheel and one sdist of
the distribution evalkit-cli at evalkit/_version.py's version, the `evalkit` console script, the
JSON Schemas inside the wheel and the README as the long description. Prints each problem and
exits 1 if there is any; standard library only, so it runs before anything is installed."""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NAME = "evalkit-cli"  # the PyPI name "evalkit" is an unrelated project's (README "Installing")
SCRIPT = "evalkit = evalkit.cli:main"


def version() -> str:
    text = (REPO / "evalkit" / "_version.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
    return found.group(1) if found else "?"


def metadata_problems(where: str, meta: Message, body: str) -> list[str]:
    problems = [
        f"{where}: {field} is {meta.get(field)!r}, expected {want!r}"
        for field, want in (("Name", NAME), ("Version", version()), ("Description-Content-Type", "text/markdown"))
        if meta.get(field) != want
    ]
    if body.strip() != (REPO / "README.md").read_text(encoding="utf-8").strip():
        problems.append(f"{where}: the long description is not README.md")
    if not any("xllamacpp" in req and "extra == 'local'" in req for req in meta.get_all("Requires-Dist", [])):
        problems.append(f"{where}: no 'local' extra with xllamacpp")
    return problems


def wheel_problems(path: Path) -> list[str]:
    stem = f"{NAME.replace('-', '_')}-{version()}"
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        text = archive.read(f"{stem}.dist-info/METADATA").decode() if f"{stem}.dist-info/METADATA" in names else ""
        meta = Parser().parsestr(text)
        problems = metadata_problems(path.name, meta, meta.get_payload())  # type: ignore[arg-type]
        scripts = archive.read(f"{stem}.dist-info/entry_points.txt").decode() if text else ""
        if SCRIPT not in scripts.splitlines():
            problems.append(f"{path.name}: no console script {SCRIPT!r}")
        for schema in sorted((REPO / "schemas").glob("*.json")):
            inside = f"evalkit/schemas/{schema.name}"
            if inside not in names or archive.read(inside) != schema.read_bytes():
                problems.append(f"{path.name}: {inside} missing or not schemas/{schema.name}")
    return problems


def sdist_problems(path: Path) -> list[str]:
    stem = f"{NAME.replace('-', '_')}-{version()}"
    with tarfile.open(path) as archive:
        names = set(archive.getnames())
        member = archive.extractfile(f"{stem}/PKG-INFO") if f"{stem}/PKG-INFO" in names else None
        meta = Parser().parsestr(member.read().decode() if member else "")
    problems = metadata_problems(path.name, meta, meta.get_payload())  # type: ignore[arg-type]
    needed = ["pyproject.toml", "README.md", "evalkit/__init__.py", *(f"schemas/{p.name}" for p in (REPO / "schemas").glob("*.json"))]
    problems += [f"{path.name}: {name} missing" for name in needed if f"{stem}/{name}" not in names]
    return problems


def main(dist: Path) -> int:
    stem = f"{NAME.replace('-', '_')}-{version()}"
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    problems = []
    if [w.name for w in wheels] != [f"{stem}-py3-none-any.whl"] or [s.name for s in sdists] != [f"{stem}.tar.gz"]:
        problems.append(f"{dist}: expected {stem}-py3-none-any.whl and {stem}.tar.gz, found {[p.name for p in (*wheels, *sdists)]}")
    problems += [p for w in wheels for p in wheel_problems(w)] + [p for s in sdists for p in sdist_problems(s)]
    for problem in problems:
        print(f"release check: {problem}", file=sys.stderr)
    if not problems:
        print(f"release check: {stem} wheel and sdist metadata hold")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
