"""Parse a user's YAML file with positions, refusing alias bombs, into plain data.

ruamel.yaml's round-trip loader keeps the line and column of every key and item, so any later
check can point at ``file:line:col``. Before the node graph is constructed, its expanded size is
counted (anchors counted once per use): a small file whose aliases expand into millions of
nodes is rejected instead of expanded. The plain copy (dicts, lists, str, int, float, bool,
None) is what the JSON Schema and the record builders see; positions are looked up lazily in
the round-trip copy only when something needs reporting.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import Issue, SetError

MAX_EXPANDED_NODES = 200_000
PathPart = str | int
DataPath = tuple[PathPart, ...]


def format_path(path: Sequence[PathPart]) -> str:
    """``('prompts', 1, 'assertions', 0)`` -> ``prompts[1].assertions[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(frozen=True, slots=True)
class Document:
    """A parsed YAML file: its plain data and the round-trip tree that knows positions."""

    file: str
    data: Any
    tree: Any

    def position(self, path: Sequence[PathPart], key: bool = False) -> tuple[int, int]:
        """1-based (line, col) of the value at ``path`` (or of its key when ``key``)."""
        node = self.tree
        line, col = _start(node)
        for depth, part in enumerate(path):
            lc = getattr(node, "lc", None)
            try:
                if isinstance(part, int):
                    line, col = lc.item(part)  # type: ignore[union-attr]
                elif key and depth == len(path) - 1:
                    line, col = lc.key(part)  # type: ignore[union-attr]
                else:
                    line, col = lc.value(part)  # type: ignore[union-attr]
                node = node[part]
            except (AttributeError, KeyError, IndexError, TypeError):
                break
            # A nested block collection's own start is more precise than its parent's value mark.
            if hasattr(node, "lc") and not (key and depth == len(path) - 1):
                line, col = _start(node, (line, col))
        return line + 1, col + 1

    def issue(self, path: Sequence[PathPart], message: str, key: bool = False) -> Issue:
        line, col = self.position(path, key=key)
        return Issue(self.file, line, col, format_path(path), message)


def _start(node: Any, default: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    lc = getattr(node, "lc", None)
    if lc is None or lc.line is None:
        return default
    return int(lc.line), int(lc.col)


def load_document(path: Path, display: str | None = None) -> Document:
    """Read and parse ``path``; any YAML problem is a SetError naming file:line:col."""
    file = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SetError([Issue(file, 0, 0, "", "file not found; check the path")]) from None
    except UnicodeDecodeError as exc:
        raise SetError([Issue(file, 0, 0, "", f"not UTF-8 text ({exc.reason})")]) from None
    except OSError as exc:
        raise SetError([Issue(file, 0, 0, "", f"cannot read: {exc.strerror}")]) from None
    return parse_document(text, file)


def parse_document(text: str, file: str) -> Document:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = YAML(typ="rt")
    try:
        constructor, parser = yaml.get_constructor_parser(text)
        try:
            node = constructor.composer.get_single_node()
            if node is not None:
                _check_expansion(node, file)
            tree = constructor.construct_document(node) if node is not None else None
        finally:
            parser.dispose()
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = exc.problem or exc.context or "invalid YAML"
        if "duplicate key" in problem:
            problem = problem.split(" with value", 1)[0] + "; remove one of them"
        elif exc.context and exc.problem:
            problem = f"{exc.problem} ({exc.context})"
        raise SetError([Issue(file, line, col, "", f"YAML error: {problem}")]) from None
    except YAMLError as exc:
        raise SetError([Issue(file, 0, 0, "", f"YAML error: {exc}")]) from None
    issues: list[Issue] = []
    data = _plain(tree, (), issues, Document(file, None, tree))
    if issues:
        raise SetError(issues)
    return Document(file, data, tree)


def _check_expansion(root: Any, file: str) -> None:
    """Reject a node graph whose aliases expand beyond MAX_EXPANDED_NODES."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in visiting:  # a recursive alias: infinite when expanded
            _bomb(node, file)
        visiting.add(key)
        total = 1
        value = node.value
        if isinstance(value, list):
            for child in value:
                if isinstance(child, tuple):
                    total += size(child[0]) + size(child[1])
                else:
                    total += size(child)
                if total > MAX_EXPANDED_NODES:
                    _bomb(node, file)
        visiting.discard(key)
        sizes[key] = total
        return total

    size(root)


def _bomb(node: Any, file: str) -> None:
    mark = node.start_mark
    raise SetError(
        [
            Issue(
                file,
                mark.line + 1,
                mark.column + 1,
                "",
                f"YAML aliases expand this document beyond {MAX_EXPANDED_NODES:,} nodes "
                "(an alias bomb); write the repeated parts out or use fewer nested aliases",
            )
        ]
    )


def _plain(value: Any, path: DataPath, issues: list[Issue], doc: Document) -> Any:
    """A plain-Python copy of a round-trip tree; unsupported tags become issues."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                issues.append(doc.issue((*path, str(k)), f"keys must be strings, got {k!r}", key=True))
                continue
            out[str(k)] = _plain(v, (*path, k), issues, doc)
        return out
    if isinstance(value, list):
        return [_plain(v, (*path, i), issues, doc) for i, v in enumerate(value)]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    tag = getattr(getattr(value, "tag", None), "value", None) or type(value).__name__
    issues.append(doc.issue(path, f"unsupported YAML tag {tag}; remove the tag"))
    return None


def walk(data: Any, path: DataPath = ()) -> Iterator[tuple[DataPath, Any]]:
    """Every (path, value) pair in ``data``, depth first."""
    yield path, data
    if isinstance(data, dict):
        for k, v in data.items():
            yield from walk(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from walk(v, (*path, i))
