"""Build a PromptSet from a validated document, with the checks a schema cannot express.

The checks run on whatever part of the document is well-formed, so ``evalkit validate`` lists
schema and semantic issues together: duplicate prompt ids, invalid regexes, invalid JSON
Schemas, prompts with nothing to grade against, and tolerances that are not finite numbers.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evalkit.errors import Issue
from evalkit.records import Assertion, Gate, Prompt, PromptSet, Tolerances, parse_tolerance
from evalkit.sets.assertions import AssertionValueError, compile_json_schema, compile_regex
from evalkit.sets.yamldoc import Document, duplicate_ids


def prompt_set_issues(doc: Document) -> tuple[list[Issue], dict[tuple[int, int], Any]]:
    """Semantic issues, and the compiled assertion values keyed by (prompt, assertion) index."""
    issues: list[Issue] = []
    compiled: dict[tuple[int, int], Any] = {}
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
        for a_index, assertion in enumerate(assertions):
            if not isinstance(assertion, dict) or len(assertion) != 1:
                continue
            kind, value = next(iter(assertion.items()))
            try:
                if kind == "regex" and isinstance(value, str) and value:
                    compiled[(index, a_index)] = compile_regex(value)
                elif kind == "json_schema" and isinstance(value, dict | bool | str):
                    compiled[(index, a_index)] = compile_json_schema(value)
            except AssertionValueError as exc:
                issues.append(doc.issue(("prompts", index, "assertions", a_index, kind), str(exc)))
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
        assertions = tuple(
            Assertion(kind, value, compiled.get((index, a_index)))
            for a_index, item in enumerate(raw.get("assertions", []))
            for kind, value in item.items()
        )
        prompts.append(
            Prompt(
                id=raw["id"],
                prompt=raw["prompt"],
                assertions=assertions,
                system=raw.get("system"),
                params=dict(raw.get("params", {})),
                reference=raw.get("reference"),
                critical=bool(raw.get("critical", False)),
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
