"""A set's ``tools:`` and ``tool_choice:`` (README, "Tools and tool calls").

The set, the template and a prompt may each declare tools (OpenAI's function-tool form:
``{name, description, parameters}``) and a ``tool_choice``; a template's or a prompt's replace
the set's. The schema checks their shape; here, what it cannot: each ``parameters`` is a usable
JSON Schema (checked as the ``json_schema`` assertion checks its value), a name is declared once
per list, a ``tool_choice: {name: N}`` names a tool the call declares, and ``valid_tool_calls``
is only asked of a call that declares tools.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalkit.assertions.compiling import compile_json_schema
from evalkit.assertions.registry import AssertionValueError
from evalkit.errors import Issue
from evalkit.sets.yamldoc import Document, PathPart

Tools = tuple[Mapping[str, Any], ...]
Flagged = Callable[[tuple[PathPart, ...]], bool]  # a path the schema has reported


def declared(fields: Mapping[str, Any]) -> tuple[Tools | None, Any]:
    """The tools (None: not declared here) and tool_choice (None: not given) of a set, a template or a prompt."""
    tools = fields.get("tools")
    listed = tuple(dict(t) for t in tools if isinstance(t, dict)) if isinstance(tools, list) else None
    choice = fields.get("tool_choice")
    return listed, dict(choice) if isinstance(choice, dict) else choice


def tool_issues(doc: Document, data: Mapping[str, Any], flagged: Flagged) -> list[Issue]:
    """What is wrong with the tools of the set, its template and each of its prompts."""
    issues = _list_issues(doc, ("tools",), data.get("tools"), flagged)
    set_tools, _ = declared(data)
    places: list[tuple[tuple[PathPart, ...], Any]] = [((), data)]
    if isinstance(data.get("template"), dict):
        places.append((("template",), data["template"]))
    prompts = data.get("prompts")
    places.extend((("prompts", k), p) for k, p in enumerate(prompts if isinstance(prompts, list) else []))
    for path, fields in places:
        if not isinstance(fields, dict):
            continue
        if path:
            issues.extend(_list_issues(doc, (*path, "tools"), fields.get("tools"), flagged))
        own, choice = declared(fields)
        tools = own if own is not None else set_tools or ()
        if choice is not None:  # said where it is written
            issues.extend(_choice_issues(doc, (*path, "tool_choice"), choice, tools))
        elif path and own is not None:  # the set's choice, with this call's own tools
            issues.extend(_choice_issues(doc, (*path, "tools"), data.get("tool_choice"), tools))
        if path:
            issues.extend(_assertion_issues(doc, path, fields, tools))
    return issues


def _list_issues(doc: Document, path: tuple[PathPart, ...], tools: Any, flagged: Flagged) -> list[Issue]:
    if not isinstance(tools, list) or flagged(path):
        return []
    issues: list[Issue] = []
    seen: set[str] = set()
    for k, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str):
            continue  # the schema says so
        if name in seen:
            issues.append(doc.issue((*path, k, "name"), f"tool '{name}' is declared twice; keep one"))
        seen.add(name)
        parameters = tool.get("parameters")
        if isinstance(parameters, dict | bool):
            try:
                compile_json_schema(parameters)
            except AssertionValueError as exc:
                message = f"tool '{name}': parameters: {exc}; give a JSON Schema of the arguments"
                issues.append(doc.issue((*path, k, "parameters"), message))
    return issues


def _choice_issues(
    doc: Document, path: tuple[PathPart, ...], choice: Any, tools: Sequence[Mapping[str, Any]]
) -> list[Issue]:
    """A ``tool_choice: {name: N}`` whose tool the call does not declare."""
    if not isinstance(choice, dict) or not isinstance(choice.get("name"), str):
        return []
    names = [str(t.get("name")) for t in tools]
    if choice["name"] in names:
        return []
    shown = ", ".join(names) or "none"
    message = (
        f"tool_choice names '{choice['name']}', which this call does not declare (its tools: {shown}); name one of them"
    )
    return [doc.issue(path, message)]


def _assertion_issues(
    doc: Document, path: tuple[PathPart, ...], fields: Mapping[str, Any], tools: Sequence[Any]
) -> list[Issue]:
    """``valid_tool_calls`` asked of a call that declares no tools (it could never hold)."""
    listed = fields.get("assertions")
    if tools or not isinstance(listed, list):
        return []
    issues: list[Issue] = []
    for k, item in enumerate(listed):
        if not isinstance(item, dict):
            continue
        name = next((n for n in _VALID_CALLS if n in item or item.get("type") == n), None)
        if name is not None:
            message = f"{name} checks calls against the declared tools, and this call declares none; add tools:"
            issues.append(doc.issue((*path, "assertions", k), message))
    return issues


_VALID_CALLS = ("valid_tool_calls", "not_valid_tool_calls")
