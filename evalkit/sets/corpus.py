"""Corpora for the built-in retrievers: a JSONL file of ``{id, text, title?}`` or a folder of
.md/.txt files (id = the path relative to the folder). Problems are reported with file:line.

The corpus revision is a content hash over the documents in order, so the same revision always
means the same documents in the same order (the lexical index is cached under it).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import Issue, SetError
from evalkit.jsonl import json_lines

TEXT_SUFFIXES = (".md", ".txt")


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    text: str
    title: str | None = None


@dataclass(frozen=True, slots=True)
class Corpus:
    path: Path
    documents: tuple[Document, ...]
    revision: str

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(d.id for d in self.documents)


def revision_of(documents: tuple[Document, ...]) -> str:
    digest = hashlib.sha256()
    for doc in documents:
        digest.update(json.dumps([doc.id, doc.title, doc.text], ensure_ascii=False).encode())
        digest.update(b"\n")
    return f"sha256:{digest.hexdigest()[:16]}"


def load_corpus(path: Path, declared_in: str = "", line: int = 0) -> Corpus:
    """Load a corpus; ``declared_in``/``line`` locate the ``corpus:`` key for a missing path."""
    if path.is_dir():
        documents = _folder(path)
    elif path.is_file():
        documents = _jsonl(path)
    else:
        where = declared_in or str(path)
        raise SetError([Issue(where, line, 1 if line else 0, "corpus", f"corpus {path} not found; check the path")])
    return Corpus(path, documents, revision_of(documents))


def _jsonl(path: Path) -> tuple[Document, ...]:
    issues: list[Issue] = []
    documents: list[Document] = []
    first_line: dict[str, int] = {}
    file = str(path)
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, record, unreadable in json_lines(handle):
            if unreadable is not None:
                issues.append(Issue(file, number, unreadable[0], "", unreadable[1]))
                continue
            problem = _record_problem(record)
            if problem:
                issues.append(Issue(file, number, 1, "", problem))
                continue
            doc_id = record["id"]
            if doc_id in first_line:
                issues.append(
                    Issue(
                        file, number, 1, "id", f"duplicate document id '{doc_id}' (first at line {first_line[doc_id]})"
                    )
                )
                continue
            first_line[doc_id] = number
            documents.append(Document(doc_id, record["text"], record.get("title")))
    if issues:
        raise SetError(issues)
    return tuple(documents)


def _record_problem(record: object) -> str | None:
    if not isinstance(record, dict):
        return "expected a JSON object {id, text, title?} per line"
    if not isinstance(record.get("id"), str) or not record["id"].strip():
        return "missing string field 'id'"
    if not isinstance(record.get("text"), str):
        return "missing string field 'text'"
    if record.get("title") is not None and not isinstance(record["title"], str):
        return "'title' must be a string"
    return None


def _folder(root: Path) -> tuple[Document, ...]:
    documents = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES):
        if any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        title = next((line.lstrip("#").strip() for line in text.splitlines() if line.startswith("# ")), None)
        documents.append(Document(path.relative_to(root).as_posix(), text, title))
    return tuple(documents)
