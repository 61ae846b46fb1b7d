"""Load-time checks of the application adapters in evalkit.yaml (README, "Testing your
application"): what can be known without calling anything, each an issue at its file:line.

- ``python``: the function file exists (relative to evalkit.yaml) and defines the function at its
  top level. The file is parsed, never imported: validating runs none of the user's code.
- ``command``: the command can be split like a shell would, names a program that exists (on
  PATH, or a path relative to evalkit.yaml), and its arguments' templates parse.
- ``http``: the body's and the headers' templates parse (the URL is checked with the others);
  ``validate`` also checks that every variable a header reads (``{{ env.NAME }}``) is set.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from typing import Any

from evalkit.config import APPLICATION_ADAPTERS, split_command, unset_env
from evalkit.errors import Issue
from evalkit.sets.templates import Renderer
from evalkit.sets.yamldoc import DataPath, Document


def application_issues(doc: Document, data: dict[str, Any]) -> list[Issue]:
    issues: list[Issue] = []
    root = Path(doc.file).parent
    renderer = Renderer()
    for index, entry in enumerate(data.get("providers") or []):
        if not isinstance(entry, dict) or entry.get("adapter") not in APPLICATION_ADAPTERS:
            continue
        at: DataPath = ("providers", index)
        function = entry.get("function")
        if entry["adapter"] == "python" and isinstance(function, str) and ":" in function:
            problem = function_problem(root, function)
            if problem:
                issues.append(doc.issue((*at, "function"), problem))
        command = entry.get("command")
        if entry["adapter"] == "command" and isinstance(command, str):
            problem = command_problem(root, command, renderer)
            if problem:
                issues.append(doc.issue((*at, "command"), problem))
        for key in ("body", "headers"):
            value = entry.get(key)
            found = renderer.syntax(value) if isinstance(value, str | dict | list) else None
            if found is not None:
                issues.append(doc.issue((*at, key, *found.path), found.message))
    return issues


def function_problem(root: Path, function: str) -> str | None:
    """What is wrong with ``path/file.py:name`` (relative to ``root``), or None."""
    file, _, name = function.rpartition(":")
    path = root / file
    if not path.is_file():
        return f"no Python file at {file!r} (relative to evalkit.yaml); write path/file.py:function"
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as exc:
        return f"{file} cannot be parsed (line {exc.lineno}: {exc.msg}); fix the file"
    except (OSError, ValueError) as exc:
        return f"{file} cannot be read ({exc})"
    if name not in _top_level_names(tree):
        return f"{file} defines no function {name!r} at its top level; name a def or async def of that file"
    return None


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def command_problem(root: Path, command: str, renderer: Renderer) -> str | None:
    """What is wrong with a command line, or None."""
    try:
        argv = split_command(command)
    except ValueError as exc:
        return f"cannot split the command ({exc}); check its quoting"
    if not argv:
        return "the command is empty; name a program and its arguments"
    program = argv[0]
    if "/" in program:
        if not (root / program).is_file():
            return f"no program at {program!r} (relative to evalkit.yaml)"
    elif shutil.which(program) is None:
        return f"no program {program!r} on PATH; install it or give its path"
    for argument in argv[1:]:
        found = renderer.syntax(argument)
        if found is not None:
            return f"argument {argument!r}: {found.message}"
    return None


def header_env_issues(doc: Document) -> list[Issue]:
    """Every variable an ``http`` instance's header reads (``{{ env.NAME }}``) is set: checked by
    ``validate`` (and by a run, for the instances it uses), not by every command that reads the
    config, as keys are (``report`` needs no token)."""
    issues: list[Issue] = []
    data = doc.data if isinstance(doc.data, dict) else {}
    for index, entry in enumerate(data.get("providers") or []):
        headers = entry.get("headers") if isinstance(entry, dict) and entry.get("adapter") == "http" else None
        for name, value in (headers or {}).items() if isinstance(headers, dict) else ():
            unset = unset_env({name: value}) if isinstance(value, str) else []
            if unset:
                issues.append(
                    doc.issue(
                        ("providers", index, "headers", name),
                        f"environment variable {unset[0]} is not set (this header reads env.{unset[0]}); "
                        "export it before the run",
                    )
                )
    return issues
