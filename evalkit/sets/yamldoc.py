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
MAX_DEPTH = 64
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
        node = yaml.compose(text)
        if node is None:
            return Document(file, None, None)
        _check_expansion(node, file)
        try:
            tree = yaml.constructor.construct_document(node)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise SetError([_construction_issue(node, file, exc)]) from None
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
    except RecursionError:
        raise SetError([_too_deep(text, file)]) from None
    issues: list[Issue] = []
    data = _plain(tree, (), issues, Document(file, None, tree))
    if issues:
        raise SetError(issues)
    return Document(file, data, tree)


def _too_deep(text: str, file: str) -> Issue:
    """Locate nesting too deep to compose, with the (iterative) event parser."""
    from ruamel.yaml import YAML
    from ruamel.yaml.events import CollectionEndEvent, CollectionStartEvent

    depth = 0
    for event in YAML(typ="rt").parse(text):
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                return Issue(
                    file,
                    mark.line + 1,
                    mark.column + 1,
                    "",
                    f"YAML error: nested deeper than {MAX_DEPTH} levels; flatten it",
                )
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
    return Issue(file, 1, 1, "", f"YAML error: nested deeper than {MAX_DEPTH} levels; flatten it")


def _construction_issue(root: Any, file: str, exc: Exception) -> Issue:
    """Locate the node ruamel could not construct (a bad explicit tag, a collection as a key)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.nodes import MappingNode, ScalarNode

    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, MappingNode):
            for key, value in node.value:
                if not isinstance(key, ScalarNode):
                    return _issue_at(file, key, "a mapping key must be a plain value, not a list or mapping")
                stack.extend((value, key))
        elif isinstance(node, ScalarNode):
            try:
                YAML(typ="rt").constructor.construct_object(node, deep=True)
            except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                tag = str(getattr(node.tag, "value", node.tag) or "").replace("tag:yaml.org,2002:", "!!")
                return _issue_at(file, node, f"{node.value!r} is not a valid {tag} value")
        else:
            stack.extend(reversed(node.value))
    return Issue(file, 1, 1, "", f"YAML error: cannot read this document ({type(exc).__name__})")


def _issue_at(file: str, node: Any, message: str) -> Issue:
    mark = node.start_mark
    return Issue(file, mark.line + 1, mark.column + 1, "", f"YAML error: {message}")


def _check_expansion(root: Any, file: str) -> None:
    """Reject a node graph whose aliases expand beyond MAX_EXPANDED_NODES."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()

    def size(node: Any, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in visiting:  # a recursive alias: infinite when expanded
            _bomb(node, file)
        if depth > MAX_DEPTH:
            raise SetError([_issue_at(file, node, f"nested deeper than {MAX_DEPTH} levels; flatten it")])
        visiting.add(key)
        total = 1
        value = node.value
        if isinstance(value, list):
            for child in value:
                if isinstance(child, tuple):
                    total += size(child[0], depth + 1) + size(child[1], depth + 1)
                else:
                    total += size(child, depth + 1)
                if total > MAX_EXPANDED_NODES:
                    _bomb(node, file)
        visiting.discard(key)
        sizes[key] = total
        return total

    size(root, 0)


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
    """A plain-Python copy of a round-trip tree; unsupported tags and keys become issues."""
    tag = getattr(getattr(value, "tag", None), "value", None)
    if isinstance(value, dict | list) and tag:
        kind = "mapping" if isinstance(value, dict) else "list"
        issues.append(doc.issue(path, f"unsupported YAML tag {tag} on a {kind}; remove the tag"))
        return None
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                line, col = value.lc.key(k)  # type: ignore[attr-defined]
                where = format_path(path)
                shown = repr(k) if isinstance(k, int | float | bool) or k is None else "a list or mapping"
                issues.append(
                    Issue(doc.file, line + 1, col + 1, where, f"keys must be strings, got {shown}; quote the key")
                )
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
    if tag == "tag:yaml.org,2002:str":  # an explicit !!str keeps the text as written
        return str(value.value)
    shown = (tag or "").replace("tag:yaml.org,2002:", "!!") or (
        "!!binary" if isinstance(value, bytes) else type(value).__name__
    )
    issues.append(doc.issue(path, f"unsupported YAML tag {shown}; remove the tag"))
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
