"""Parse a user's YAML file with positions, refusing alias bombs, into plain data.

The file is composed into a node graph (with libyaml's C parser from ruamel.yaml.clib when it
is installed, else the pure-Python one; YAML 1.2 resolution either way). Every node knows its
line and column, so any later check can point at ``file:line:col``. Before the graph is
constructed, its expanded size is counted (anchors counted once per use): a small file whose
aliases expand into millions of nodes is rejected instead of expanded, and so is nesting deeper
than MAX_DEPTH. Explicit tags other than YAML's core ones are refused. The plain data (dicts,
lists, str, int, float, bool, None) is what the JSON Schema and the record builders see;
positions are looked up in the node graph only when something needs reporting.
"""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import Issue, SetError

MAX_ALIAS_EXPANSION = 200_000
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
    """A parsed YAML file: its plain data and the node graph that knows positions. A file read
    on the fast path (evalkit/sets/yamlfast.py) has no graph until a position is asked for: ``text``
    is then composed once, so a valid file never pays for (or holds) its graph."""

    file: str
    data: Any
    tree: Any  # the root node (ruamel.yaml.nodes.Node), None for an empty file or not yet composed
    text: str | None = field(default=None, repr=False, compare=False)
    _composed: list[Any] = field(default_factory=list, repr=False, compare=False)
    _positions: list[Document] = field(default_factory=list, repr=False, compare=False)
    floats: dict[tuple[str, str], str] = field(default_factory=dict, repr=False, compare=False)
    finite: bool = field(default=False, repr=False, compare=False)  # known to hold no infinite or NaN number

    @property
    def nodes(self) -> Any:
        """The root node, composed from ``text`` on first use when the fast path skipped it."""
        if self.tree is not None or self.text is None:
            return self.tree
        if not self._composed:
            self._composed.append(_compose(self.text))
        return self._composed[0]

    def position(self, path: Sequence[PathPart], key: bool = False) -> tuple[int, int]:
        """1-based (line, col) of the value at ``path`` (or of its key when ``key``); the
        nearest enclosing node's position when the path does not exist."""
        node = self.nodes
        if node is None:
            return 1, 1
        mark = node.start_mark
        for depth, part in enumerate(path):
            found = _child(node, part)
            if found is None:
                break
            key_node, node = found
            last = depth == len(path) - 1
            mark = key_node.start_mark if key and last and key_node is not None else node.start_mark
        return mark.line + 1, mark.column + 1

    def float_text(self, section: str, name: str) -> str | None:
        """The text of the number at ``section.name`` as written in the file (``0.1000000000000000055``)
        when it is a float; None otherwise. A float rounds a long decimal, so a tolerance is read
        from this text instead (README, "Baselines and regressions"). The fast path keeps the text
        of the floats two levels down; a document read on the full path looks in its node graph."""
        if self.tree is None:
            return self.floats.get((section, name))
        from ruamel.yaml.nodes import ScalarNode

        found = _child(self.tree, section)
        found = _child(found[1], name) if found is not None else None
        node = found[1] if found is not None else None
        if isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:float":
            return str(node.value)
        return None

    def locate(self, path: Sequence[PathPart]) -> Location:
        """Where ``path`` is, worked out when shown; every Location of a document shares one copy
        of it without its data."""
        if not self._positions:
            self._positions.append(positions_of(self))
        return Location(self._positions[0], path)

    def issue(self, path: Sequence[PathPart], message: str, key: bool = False) -> Issue:
        line, col = self.position(path, key=key)
        return Issue(self.file, line, col, format_path(path), message)


class Location:
    """``file:line:col`` of a path in a document, worked out only when shown (a valid file read
    on the fast path has no positions until one is asked for)."""

    __slots__ = ("doc", "path")

    def __init__(self, doc: Document, path: Sequence[PathPart]) -> None:
        self.doc = doc if doc.data is None else positions_of(doc)  # positions only, not the data
        self.path = tuple(path)

    def __str__(self) -> str:
        line, col = self.doc.position(self.path)
        return f"{self.doc.file}:{line}:{col}"


def positions_of(doc: Document) -> Document:
    """``doc`` without its data: what a ``Location`` keeps (sharing the graph, composed once)."""
    return Document(doc.file, None, doc.tree, doc.text, doc._composed)


def duplicate_ids(doc: Document, section: str, noun: str = "") -> tuple[list[Issue], set[str]]:
    """Issues for repeated ``id`` values among the mappings listed under ``section``, and the ids."""
    items = doc.data.get(section) if isinstance(doc.data, dict) else None
    issues: list[Issue] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items if isinstance(items, list) else []):
        item_id = item.get("id") if isinstance(item, dict) else None
        if not isinstance(item_id, str):
            continue
        if item_id in seen:
            line = doc.position((section, seen[item_id]))[0]
            label = f"{noun} id" if noun else "id"
            issues.append(doc.issue((section, index, "id"), f"duplicate {label} '{item_id}' (first at line {line})"))
        else:
            seen[item_id] = index
    return issues, set(seen)


def _child(node: Any, part: PathPart) -> tuple[Any, Any] | None:
    """(key node or None, value node) of ``part`` under ``node``."""
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    if isinstance(node, SequenceNode) and isinstance(part, int):
        return (None, node.value[part]) if 0 <= part < len(node.value) else None
    if isinstance(node, MappingNode):
        for key_node, value_node in reversed(node.value):  # the last duplicate wins, as in the data
            written = str(getattr(key_node, "value", ""))
            if written == str(part) or (isinstance(part, bool) and written.lower() == str(part).lower()):
                return key_node, value_node
    return None


def load_document(path: Path, display: str | None = None) -> Document:
    """Read and parse ``path``; any YAML problem is a SetError naming file:line:col."""
    file = display or str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SetError([Issue(file, 0, 0, "", "file not found; check the path")]) from None
    except OSError as exc:
        raise SetError([Issue(file, 0, 0, "", f"cannot read: {exc.strerror}")]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line_start = before.rfind(b"\n") + 1
        col = len(before[line_start:].decode("utf-8", "replace")) + 1
        message = f"not UTF-8 text ({exc.reason}); save the file as UTF-8"
        raise SetError([Issue(file, before.count(b"\n") + 1, col, "", message)]) from None
    return parse_document(text, file)


def safe_yaml(pure: bool = False) -> Any:
    """ruamel.yaml's safe loader at YAML 1.2's core schema, with libyaml's C parser when installed."""
    from ruamel.yaml import YAML

    try:
        yaml = YAML(typ="safe", pure=pure)
    except (ImportError, AttributeError):  # no C extension: the pure-Python parser
        yaml = YAML(typ="safe", pure=True)
    yaml.Resolver = _resolver_12()
    return yaml


# YAML 1.2's core schema (spec 10.3.2), which ruamel's own 1.2 table widens: it reads timestamps
# ("2001-12-14 21:59:43" became "2001-12-14T21:59:43") and underscores in numbers (1_000).
# Everything else is a string; merge keys (<<) are kept.
CORE_SCHEMA = (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("merge", r"^(?:<<)$", "<"),
)


@functools.cache
def _resolver_12() -> Any:
    """A resolver fixed at YAML 1.2 and its core schema: ruamel otherwise works out the version
    per scalar (through two caught AttributeErrors, a third of the load time of a large set)."""
    from ruamel.yaml.resolver import VersionedResolver

    class Resolver12(VersionedResolver):
        @property
        def processing_version(self) -> Any:
            return (1, 2)

        @property
        def versioned_resolver(self) -> Any:
            if (1, 2) not in self._version_implicit_resolver:
                for name, pattern, first in CORE_SCHEMA:
                    self.add_version_implicit_resolver(
                        (1, 2), f"tag:yaml.org,2002:{name}", re.compile(pattern), list(first)
                    )
            return self._version_implicit_resolver[(1, 2)]

    return Resolver12


def _compose(text: str) -> Any:
    """The node graph of a text that has already parsed (positions for an issue)."""
    from ruamel.yaml.error import MarkedYAMLError

    try:
        return safe_yaml().compose(text)
    except MarkedYAMLError:
        return safe_yaml(pure=True).compose(text)


def parse_document(text: str, file: str) -> Document:
    """The document of ``text``: its plain data from the events when the fast path takes it
    (evalkit/sets/yamlfast.py), else from the node graph, with every check of the full path."""
    from evalkit.sets import yamlfast

    floats: dict[tuple[str, str], str] = {}
    fast = yamlfast.plain_data(text, floats)
    if fast is not yamlfast.DECLINED:
        return Document(file, fast, None, text, floats=floats, finite=True)  # the fast path declines them
    return _parse_slowly(text, file)


def _parse_slowly(text: str, file: str) -> Document:  # noqa: PLR0912  (split with the speed seams, #28)
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = safe_yaml()
    deep = _first_too_deep(text, file)
    if deep is not None:
        raise SetError([deep])
    try:
        try:
            node = yaml.compose(text)
        except MarkedYAMLError:  # libyaml is stricter than YAML 1.2 in places: ask the pure parser
            yaml = safe_yaml(pure=True)
            node = yaml.compose(text)
        if node is None:
            return Document(file, None, None)
        tagged = _check_expansion(node, file)
        if tagged:
            raise SetError(_tag_issues(node, file))
        try:
            data = yaml.constructor.construct_document(node)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise SetError([_construction_issue(node, file, exc)]) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = exc.problem or exc.context or "invalid YAML"
        if "duplicate key" in problem:
            problem = problem.split(" with value", 1)[0] + "; remove one of them"
        elif problem.startswith("found character '\\t'"):
            problem = "a tab where YAML expects indentation or a value; indent with spaces (YAML does not allow tabs)"
        elif problem.startswith("expected <block end>"):
            # a line dedented to no enclosing block's level: the parser names the token it met
            # there ('?', '<block mapping start>'), which is nothing the file contains
            problem = (
                f"the indentation is inconsistent at line {line}: indent it like the other keys "
                "(or list items) of the block it belongs to"
            )
        elif exc.context and exc.problem:
            problem = f"{exc.problem} ({exc.context})"
        raise SetError([Issue(file, line, col, "", f"YAML error: {problem}")]) from None
    except YAMLError as exc:
        raise SetError([Issue(file, 0, 0, "", f"YAML error: {exc}")]) from None
    except RecursionError:
        raise SetError([_too_deep(text, file)]) from None
    doc = Document(file, None, node)
    issues: list[Issue] = []
    plain = _plain(data, (), issues, doc)
    if issues:
        raise SetError(issues)
    return Document(file, plain, node)


CORE_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq", "merge", "timestamp")
)


def _tag_issues(root: Any, file: str) -> list[Issue]:
    """Explicit tags other than YAML's core ones (``!env``, ``!!python/object``, ``!!binary``)."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode

    issues: list[Issue] = []
    stack: list[tuple[Any, DataPath]] = [(root, ())]
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        tag = str(getattr(node.tag, "value", node.tag) or "")
        if tag and tag not in CORE_TAGS:
            shown = tag.replace("tag:yaml.org,2002:", "!!")
            kind = (
                ""
                if isinstance(node, ScalarNode)
                else (" on a mapping" if isinstance(node, MappingNode) else " on a list")
            )
            mark = node.start_mark
            issues.append(
                Issue(
                    file,
                    mark.line + 1,
                    mark.column + 1,
                    format_path(path),
                    f"unsupported YAML tag {shown}{kind}; remove the tag",
                )
            )
            continue
        if isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                part = key_node.value if isinstance(key_node, ScalarNode) else "?"
                stack.append((value_node, (*path, part)))
                stack.append((key_node, path))  # a tag on a key (``!!binary id: x``) is refused too
        elif not isinstance(node, ScalarNode):
            stack.extend((child, (*path, index)) for index, child in enumerate(node.value))
    return sorted(issues, key=lambda i: (i.line, i.col))


def _first_too_deep(text: str, file: str) -> Issue | None:
    """The first node nested deeper than MAX_DEPTH (the node _check_expansion would name), found
    on the parser's events before any node graph is composed: libyaml's composer recurses in C,
    and a document nested 100,000 deep overflowed the stack (a segfault, no message). The events
    are iterative; a YAML error among them is left for composing to report, which stops there."""
    from ruamel.yaml.error import YAMLError
    from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, NodeEvent

    depth = 0
    try:
        for event in safe_yaml().parse(text):
            if isinstance(event, NodeEvent) and not isinstance(event, AliasEvent) and depth > MAX_DEPTH:
                return _issue_at(file, event, f"nested deeper than {MAX_DEPTH} levels; flatten it")
            if isinstance(event, CollectionStartEvent):
                depth += 1
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
    except YAMLError:
        return None
    return None


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
                safe_yaml(pure=True).constructor.construct_object(node, deep=True)
            except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                tag = str(getattr(node.tag, "value", node.tag) or "").replace("tag:yaml.org,2002:", "!!")
                return _issue_at(file, node, f"{node.value!r} is not a valid {tag} value")
        else:
            stack.extend(reversed(node.value))
    return Issue(file, 1, 1, "", f"YAML error: cannot read this document ({type(exc).__name__})")


def _issue_at(file: str, node: Any, message: str) -> Issue:
    mark = node.start_mark
    return Issue(file, mark.line + 1, mark.column + 1, "", f"YAML error: {message}")


def _check_expansion(root: Any, file: str) -> bool:
    """Reject aliases that expand the document by more than MAX_ALIAS_EXPANSION nodes, recursive
    aliases, and nesting deeper than MAX_DEPTH. A large document without aliases is fine.
    Returns whether any node carries a tag other than YAML's core ones (one pass for both)."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    extra = 0  # nodes that exist only through aliases
    tagged = False

    def size(node: Any, depth: int) -> int:
        nonlocal extra, tagged
        key = id(node)
        if key in sizes:  # an alias: its whole subtree is repeated
            extra += sizes[key]
            if extra > MAX_ALIAS_EXPANSION:
                _bomb(node, file)
            return sizes[key]
        if key in visiting:  # a recursive alias: infinite when expanded
            _bomb(node, file)
        if depth > MAX_DEPTH:
            raise SetError([_issue_at(file, node, f"nested deeper than {MAX_DEPTH} levels; flatten it")])
        total = 1
        if str(node.ctag) not in CORE_TAGS:
            tagged = True
        value = node.value
        if isinstance(value, list):
            visiting.add(key)
            for child in value:
                if isinstance(child, tuple):
                    total += size(child[0], depth + 1) + size(child[1], depth + 1)
                else:
                    total += size(child, depth + 1)
            visiting.discard(key)
        sizes[key] = total
        return total

    size(root, 0)
    return tagged


def _bomb(node: Any, file: str) -> None:
    mark = node.start_mark
    raise SetError(
        [
            Issue(
                file,
                mark.line + 1,
                mark.column + 1,
                "",
                f"YAML aliases expand this document by more than {MAX_ALIAS_EXPANSION:,} nodes "
                "(an alias bomb); write the repeated parts out or use fewer nested aliases",
            )
        ]
    )


def _plain(value: Any, path: DataPath, issues: list[Issue], doc: Document) -> Any:
    """Dates become ISO strings; non-string keys, binary values and lone surrogates become issues."""
    if isinstance(value, str):
        return _text(value, path, issues, doc)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                shown = repr(k) if isinstance(k, int | float | bool) or k is None else "a list or mapping"
                line, col = doc.position((*path, k), key=True)
                issues.append(
                    Issue(doc.file, line, col, format_path(path), f"keys must be strings, got {shown}; quote the key")
                )
                continue
            key = _text(k, path, issues, doc, key_of=k)
            out[key] = _plain(v, (*path, k), issues, doc)
        return out
    if isinstance(value, list):
        return [_plain(v, (*path, i), issues, doc) for i, v in enumerate(value)]
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        issues.append(doc.issue(path, "unsupported YAML tag !!binary; remove the tag"))
        return None
    return value


SURROGATE = re.compile("[\ud800-\udfff]")


def _text(value: str, path: DataPath, issues: list[Issue], doc: Document, key_of: str | None = None) -> str:
    """``value`` with escaped surrogate pairs (``"\\ud83d\\ude00"``, as JSON reads them) joined into
    their character; a lone surrogate escape is an issue: it is not a character and no prompt,
    id or parameter holding it can be sent, cached or stored."""
    if SURROGATE.search(value) is None:
        return value
    joined = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    lone = SURROGATE.search(joined)
    if lone is not None:
        escape = f"\\u{ord(lone.group()):04x}"
        where = (*path, key_of) if key_of is not None else path
        line, col = doc.position(where, key=key_of is not None)
        shown = format_path(where) if key_of is None else format_path(path)
        message = (
            f"lone surrogate escape {escape} in a {'key' if key_of is not None else 'string'} "
            "(half of a UTF-16 pair, not a character); remove it or write the character itself"
        )
        issues.append(Issue(doc.file, line, col, shown, message))
    return joined


def walk(data: Any, path: DataPath = ()) -> Iterator[tuple[DataPath, Any]]:
    """Every (path, value) pair in ``data``, depth first."""
    yield path, data
    if isinstance(data, dict):
        for k, v in data.items():
            yield from walk(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from walk(v, (*path, i))
