"""The layering docs/architecture.md "Layers" describes, where import-linter cannot see it: SQL runs
only in ``evalkit.store``, and the report types the rows it is given (records below it, never
``Any`` or a dict of strings)."""

from __future__ import annotations

import ast
import tomllib
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalkit import rows
from evalkit.report import html, markdown, render, text
from tests.conftest import REPO

QUERYING = {"execute", "executemany", "sql", "query"}  # DuckDB's ways to run SQL on a connection


def queries_in(source: str) -> list[int]:
    """The lines that run SQL on a connection (``x.execute(...)``, ``store.con...``)."""
    nodes = list(ast.walk(ast.parse(source)))
    calls = [n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    connections = [n for n in nodes if isinstance(n, ast.Attribute) and n.attr == "con"]
    return sorted({n.lineno for n in calls if n.func.attr in QUERYING} | {n.lineno for n in connections})


def test_the_sql_check_sees_a_query() -> None:
    source = 'def stored(store):\n    return store.con.execute("select 1").fetchone()\n'
    assert queries_in(source) == [2]
    assert queries_in("def f(x):\n    return x.executor\n") == []


def test_sql_runs_only_in_the_store() -> None:
    outside = [p for p in sorted((REPO / "evalkit").rglob("*.py")) if "store" not in p.relative_to(REPO).parts]
    assert len(outside) > 50
    found = {str(p.relative_to(REPO)): queries_in(p.read_text(encoding="utf-8")) for p in outside}
    assert {path: lines for path, lines in found.items() if lines} == {}


SHOWN: list[Callable[..., Any]] = [
    render.render_history,
    render.render_summaries,
    render.render_models,
    render.render_comparison,
    render.rate_cell,
    render.mean_cell,
    markdown.history_markdown,
    markdown.summaries_markdown,
    markdown.comparison_markdown,
    text.comparison_lines,
    html.trend_chart,
    html.scope_of,
]


def loose(hint: Any) -> bool:
    """Whether a type hint leaves a row untyped: ``Any`` or a dict/mapping of ``Any``, at any depth
    (``RankedModel[Any]``'s configuration is the one generic left open)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin is not None and getattr(origin, "__name__", "") == "RankedModel":
        return False
    return any(loose(arg) for arg in typing.get_args(hint))


def test_the_report_types_the_rows_it_is_given() -> None:
    assert loose(list[dict[str, Any]])
    assert not loose(list[Path])
    untyped = {
        f.__qualname__: name
        for f in SHOWN
        # the report names the rows for types only (under TYPE_CHECKING, to keep `evalkit --help` light)
        for name, hint in typing.get_type_hints(f, localns=vars(rows)).items()
        if name != "return" and loose(hint)
    }
    assert untyped == {}


def explicit_any(source: str) -> list[int]:
    """The lines that name ``Any`` (an annotation, a cast, an import)."""
    nodes = list(ast.walk(ast.parse(source)))
    names = [n.lineno for n in nodes if isinstance(n, ast.Name) and n.id == "Any"]
    imports = [n.lineno for n in nodes if isinstance(n, ast.ImportFrom) and any(a.name == "Any" for a in n.names)]
    return sorted(set(names + imports))


def test_the_any_check_sees_an_annotation() -> None:
    assert explicit_any("from typing import Any\ndef f(x: Any) -> None: ...\n") == [1, 2]
    assert explicit_any("def f(x: int) -> AnySet: ...\n") == []


def test_the_run_pipeline_is_small_typed_stage_modules() -> None:
    """docs/architecture.md "The run pipeline": one module per stage, none over ~300 lines, no
    ``Any`` at its seams (mypy's disallow_any_explicit holds there), session.py a re-export."""
    stages = {p.stem: p.read_text(encoding="utf-8") for p in (REPO / "evalkit" / "pipeline").glob("*.py")}
    assert {"plan", "execute", "baseline", "verdict", "persist"} <= stages.keys()
    assert {name: len(s.splitlines()) for name, s in stages.items() if len(s.splitlines()) > 300} == {}
    assert {name: explicit_any(s) for name, s in stages.items() if explicit_any(s)} == {}
    overrides = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]["overrides"]
    assert any(o["module"] == ["evalkit.pipeline.*"] and o.get("disallow_any_explicit") for o in overrides)
    session = ast.parse((REPO / "evalkit" / "session.py").read_text(encoding="utf-8"))
    assert [type(n).__name__ for n in session.body] == ["Expr", "ImportFrom", "Assign"]
