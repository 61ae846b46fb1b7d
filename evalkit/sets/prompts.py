"""Build a PromptSet from a validated document, with the checks a schema cannot express.

The checks run on whatever part of the document is well-formed, so ``evalkit validate`` lists
schema and semantic issues together: duplicate prompt ids, invalid regexes, invalid JSON
Schemas, prompts with nothing to grade against, and tolerances that are not finite numbers.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evalkit.assertions import registry
from evalkit.assertions.registry import AssertionValueError, Where
from evalkit.errors import Issue
from evalkit.records import Assertion, Gate, Prompt, PromptSet, Tolerances, parse_tolerance
from evalkit.sets.yamldoc import Document, duplicate_ids, format_path


def assertion_form(item: Any) -> tuple[Any, Any, Any, tuple[str, ...]] | None:
    """(type, value, weight, path to the value within the item) of either form, or None when
    the item is neither (the schema says why)."""
    if not isinstance(item, dict):
        return None
    if "type" in item:
        return item.get("type"), item.get("value"), item.get("weight", 1), ("value",)
    if len(item) != 1:
        return None
    kind, value = next(iter(item.items()))
    return kind, value, 1, (kind,)


def used_types(doc: Document) -> set[str]:
    """Every assertion type name the document's prompts use."""
    data = doc.data if isinstance(doc.data, dict) else {}
    found: set[str] = set()
    for prompt in data.get("prompts") or [] if isinstance(data.get("prompts"), list) else []:
        items = prompt.get("assertions") if isinstance(prompt, dict) else None
        for item in items if isinstance(items, list) else []:
            form = assertion_form(item)
            if form is not None and isinstance(form[0], str):
                found.add(form[0])
    return found


def _flagged(flagged: frozenset[str], path: tuple[str | int, ...]) -> bool:
    if not flagged:
        return False
    shown = format_path(path)
    return any(f == shown or f.startswith(shown + ".") or f.startswith(shown + "[") for f in flagged)


def prompt_set_issues(
    doc: Document, flagged: frozenset[str] = frozenset()
) -> tuple[list[Issue], dict[tuple[int, int], Any]]:
    """Semantic issues, and the compiled assertion values keyed by (prompt, assertion) index.
    ``flagged``: the paths the schema reported, whose values are not checked again."""
    issues: list[Issue] = []
    compiled: dict[tuple[int, int], Any] = {}
    folder = Where(Path(doc.file).parent)
    data = doc.data if isinstance(doc.data, dict) else {}
    issues.extend(tolerance_issues(doc, data, ("max_pass_rate_drop", "max_mean_score_drop")))
    issues.extend(tolerance_issues(doc, data, ("min_pass_rate", "min_mean_score"), section="gate"))
    prompts = data.get("prompts")
    if not isinstance(prompts, list):
        return issues, compiled
    issues.extend(duplicate_ids(doc, "prompts", "prompt")[0])
    for index, prompt in enumerate(prompts):
        if not isinstance(prompt, dict):
            continue
        pid = prompt.get("id")
        raw_assertions = prompt.get("assertions")
        assertions = raw_assertions if isinstance(raw_assertions, list) else []
        reference = prompt.get("reference")
        has_reference = isinstance(reference, str) and bool(reference.strip())
        if raw_assertions in (None, []) and not has_reference:  # a wrong-typed list is the schema's to report
            name = f"prompt '{pid}'" if isinstance(pid, str) else f"prompts[{index}]"
            issues.append(
                doc.issue(
                    ("prompts", index),
                    f"{name} has neither an assertion nor a reference; add assertions: or reference:",
                )
            )
        zero_weights = 0
        for a_index, assertion in enumerate(assertions):
            form = assertion_form(assertion)
            if form is None:
                continue
            kind, value, weight, where = form
            zero_weights += 1 if isinstance(weight, int | float) and not isinstance(weight, bool) and weight == 0 else 0
            spec = registry.get(kind) if isinstance(kind, str) else None
            path: tuple[str | int, ...] = ("prompts", index, "assertions", a_index, *where)
            if spec is None or _flagged(flagged, path):  # the schema has said what is wrong
                continue
            try:
                compiled[(index, a_index)] = spec.check(value, folder)
            except AssertionValueError as exc:
                message = str(exc)
                if where == (kind,) and message.startswith(f"{kind}: "):  # the path ends with the type already
                    message = message[len(kind) + 2 :]
                issues.append(doc.issue(path, message))
        if assertions and zero_weights == len(assertions):
            issues.append(
                doc.issue(
                    ("prompts", index, "assertions"),
                    "every assertion has weight 0, so nothing would be graded; give one a weight above 0",
                )
            )
    return issues, compiled


def tolerance_issues(
    doc: Document, data: dict[str, Any], names: tuple[str, ...], section: str = "tolerances"
) -> list[Issue]:
    """Tolerances (or gate minimums) the schema lets through that are still not finite numbers:
    NaN compares as neither below 0 nor above 1. (The schema reports every other bad value itself.)"""
    tolerances = data.get(section)
    if not isinstance(tolerances, dict):
        return []
    return [
        doc.issue((section, name), f"must be a finite number in 0..1, got {tolerances[name]!r}")
        for name in names
        if isinstance(tolerances.get(name), float) and math.isnan(tolerances[name])
    ]


def build_prompt_set(doc: Document, path: Path, compiled: dict[tuple[int, int], Any]) -> PromptSet:
    """The record for a document that passed every check."""
    data = doc.data
    prompts = []
    for index, raw in enumerate(data["prompts"]):
        assertions = []
        for a_index, item in enumerate(raw.get("assertions", [])):
            form = assertion_form(item)
            assert form is not None
            kind, value, weight, _ = form
            spec = registry.get(kind)
            where = None
            if spec is not None and spec.needs:  # checked against the instances when the run is planned
                line, col = doc.position(("prompts", index, "assertions", a_index))
                where = f"{doc.file}:{line}:{col}"
            assertions.append(Assertion(kind, value, compiled.get((index, a_index)), float(weight), where))
        prompts.append(
            Prompt(
                id=raw["id"],
                prompt=raw["prompt"],
                assertions=tuple(assertions),
                system=raw.get("system"),
                params=dict(raw.get("params", {})),
                reference=raw.get("reference"),
                critical=bool(raw.get("critical", False)),
                threshold=float(raw["threshold"]) if "threshold" in raw else None,
            )
        )
    tol = data.get("tolerances", {})
    gate = data.get("gate", {})
    defaults = Tolerances()
    return PromptSet(
        id=data["id"],
        name=data["name"],
        prompts=tuple(prompts),
        path=path,
        description=data.get("description"),
        system=data.get("system"),
        params=dict(data.get("params", {})),
        tolerances=Tolerances(
            max_pass_rate_drop=parse_tolerance(tol.get("max_pass_rate_drop", defaults.max_pass_rate_drop)),
            max_mean_score_drop=parse_tolerance(tol.get("max_mean_score_drop", defaults.max_mean_score_drop)),
        ),
        gate=Gate(
            min_pass_rate=parse_tolerance(gate["min_pass_rate"]) if "min_pass_rate" in gate else None,
            min_mean_score=parse_tolerance(gate["min_mean_score"]) if "min_mean_score" in gate else None,
        ),
    )
