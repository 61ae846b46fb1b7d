"""Build a PromptSet from a validated document, with the checks a schema cannot express.

The checks run on whatever part of the document is well-formed, so ``evalkit validate`` lists
schema and semantic issues together: duplicate prompt ids, invalid regexes, invalid JSON
Schemas, prompts with nothing to grade against, and tolerances that are not finite numbers.

Templates (README "Templates, variables, data files and conversations"): a prompt's strings (its prompt, system, message contents, reference and
every string in its assertions' values) are rendered with its variables (the set's ``vars``, the
prompt's over them) before its assertions are checked, so a rendered regex is compiled as
rendered. Each row of a ``cases`` file becomes a prompt made from ``template`` with the row's
columns over those variables: the template was checked by the schema with the rest of the file,
a row only by cheap checks (cases.py), and what does not depend on the row (a string without a
template, the check of an assertion value that renders to itself) is done once for all rows.
Problems of a row name the data file and the row's line; the same problem in many rows is one
line that says how many.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from evalkit.errors import Issue, SetError
from evalkit.memory import loading
from evalkit.records import Gate, Prompt, PromptSet, Tolerances, parse_tolerance
from evalkit.sets.cases import CASE_SUFFIXES, assertion_form, grouped, read_cases
from evalkit.sets.drafts import Drafter, Place, Plan, RowPlace, flagged_path
from evalkit.sets.tools import declared, tool_issues
from evalkit.sets.yamldoc import Document, duplicate_ids

__all__ = ["assertion_form", "build_prompt_set", "prompt_set_issues", "used_types"]


def used_types(doc: Document) -> set[str]:
    """Every assertion type name the document's prompts and template use."""
    data = doc.data if isinstance(doc.data, dict) else {}
    prompts = data.get("prompts")
    found: set[str] = set()
    for prompt in [*(prompts if isinstance(prompts, list) else []), data.get("template")]:
        items = prompt.get("assertions") if isinstance(prompt, dict) else None
        for item in items if isinstance(items, list) else []:
            form = assertion_form(item)
            if form is not None and isinstance(form[0], str):
                found.add(form[0])
    return found


@dataclass(frozen=True, slots=True)
class Prepared:
    """What the checks built, for ``build_prompt_set``: the prompts and the set's system prompt."""

    prompts: tuple[Prompt, ...] = ()
    system: str | None = None


def prompt_set_issues(doc: Document, flagged: frozenset[str] = frozenset()) -> tuple[list[Issue], Prepared]:
    """Semantic issues, and the prompts built (rendered, their assertions compiled).
    ``flagged``: the paths the schema reported, whose values are not checked again."""
    with loading():  # the collector policy, when the caller asked for it (evalkit/memory.py)
        return _prompt_set_issues(doc, flagged)


def _prompt_set_issues(doc: Document, flagged: frozenset[str]) -> tuple[list[Issue], Prepared]:
    data = doc.data if isinstance(doc.data, dict) else {}
    issues = tolerance_issues(doc, data, ("max_pass_rate_drop", "max_mean_score_drop"))
    issues.extend(tolerance_issues(doc, data, ("min_pass_rate", "min_mean_score"), section="gate"))
    issues.extend(tool_issues(doc, data, lambda path: flagged_path(flagged, path)))
    set_vars = data["vars"] if isinstance(data.get("vars"), dict) else {}
    drafter = Drafter(doc, data.get("system"))
    built: list[Prompt] = []
    ids: dict[str, int] = {}
    prompts = data.get("prompts")
    if isinstance(prompts, list):
        issues.extend(duplicate_ids(doc, "prompts", "prompt")[0])
        for index, raw in enumerate(prompts):
            if not isinstance(raw, dict):
                continue
            pid = raw.get("id")
            if isinstance(pid, str):
                ids.setdefault(pid, index)
            own_vars = raw.get("vars")
            variables = {**set_vars, **own_vars} if isinstance(own_vars, dict) and own_vars else set_vars
            label = f"prompt '{pid}'" if isinstance(pid, str) else f"prompts[{index}]"
            place = Place(doc, ("prompts", index), label, flagged)
            literal = drafter.literal(raw, place, variables)
            if literal is not None:
                prompt, found = literal
            else:
                plan = Plan(drafter, raw, place)
                prompt, found = drafter.draft(plan, pid, variables)
                found = plan.issues + found
            issues.extend(found)
            if prompt is not None:
                built.append(prompt)
    issues.extend(_case_prompts(doc, data, drafter, set_vars=set_vars, ids=ids, built=built, flagged=flagged))
    system = drafter.settle_system(built)
    return [*drafter.system_issues, *issues], Prepared(tuple(built), system)


def _case_prompts(
    doc: Document,
    data: dict[str, Any],
    drafter: Drafter,
    *,
    set_vars: dict[str, Any],
    ids: dict[str, int],
    built: list[Prompt],
    flagged: frozenset[str],
) -> list[Issue]:
    """The prompts of ``template`` for every row of ``cases`` (appended to ``built``), and the
    issues of the data file and of each row."""
    template, written = data.get("template"), data.get("cases")
    if not isinstance(written, str) or not written.strip() or flagged_path(flagged, ("cases",)):
        return []
    path = Path(doc.file).parent / written
    if path.suffix.lower() not in CASE_SUFFIXES:
        kinds = ", ".join(CASE_SUFFIXES)
        return [doc.issue(("cases",), f"{written!r} is not a cases file: name a {kinds} file")]
    if not path.is_file():
        return [
            doc.issue(
                ("cases",), f"cases file {written!r} not found (relative to {Path(doc.file).name}); check the path"
            )
        ]
    try:
        found = read_cases(path, os.path.normpath(path))
    except SetError as exc:
        return exc.issues
    row_issues = list(found.issues)
    if not isinstance(template, dict) or flagged_path(flagged, ("template",)):
        return grouped(row_issues)  # the schema has said what is wrong with the template
    plan = Plan(drafter, template, Place(doc, ("template",), "the template"))
    if plan.issues:  # the same for every row: said once, at the template
        return [*plan.issues, *grouped(row_issues)]
    template_vars = template.get("vars")
    base = {**set_vars, **template_vars} if isinstance(template_vars, dict) and template_vars else set_vars
    row = RowPlace(doc, found, found.cases[0]) if found.cases else None
    for case in found.cases:
        assert row is not None
        row.case = case
        if case.id in ids:
            line = doc.position(("prompts", ids[case.id]))[0]
            message = f"duplicate prompt id '{case.id}': also in prompts: ({Path(doc.file).name} line {line})"
            row_issues.append(found.issue(case.line, case.row, ("id",), message))
            continue
        prompt, problems = drafter.draft(
            plan,
            case.id,
            {**base, **case.vars},
            row=row,
            extra=case.assertions,
            overrides=(case.critical, case.threshold),
        )
        row_issues.extend(problems)
        if prompt is not None:
            built.append(prompt)
    return grouped(row_issues)


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


def build_prompt_set(doc: Document, path: Path, prepared: Prepared) -> PromptSet:
    """The record for a document that passed every check."""
    data = doc.data
    gate = data.get("gate", {})
    defaults = Tolerances()
    tools, tool_choice = declared(data)
    return PromptSet(
        id=data["id"],
        name=data["name"],
        prompts=prepared.prompts,
        path=path,
        description=data.get("description"),
        system=prepared.system,
        params=dict(data.get("params", {})),
        tolerances=Tolerances(
            max_pass_rate_drop=written_tolerance(doc, "tolerances", "max_pass_rate_drop", defaults.max_pass_rate_drop),
            max_mean_score_drop=written_tolerance(
                doc, "tolerances", "max_mean_score_drop", defaults.max_mean_score_drop
            ),
        ),
        gate=Gate(
            min_pass_rate=written_tolerance(doc, "gate", "min_pass_rate", None) if "min_pass_rate" in gate else None,
            min_mean_score=written_tolerance(doc, "gate", "min_mean_score", None) if "min_mean_score" in gate else None,
        ),
        tools=tools or (),
        tool_choice=tool_choice,
    )


def written_tolerance(doc: Document, section: str, name: str, default: Decimal | None) -> Decimal:
    """A tolerance (or gate minimum) of the set as the decimal written in the file, as the same
    text on the command line is read: ``0.10000000000000000001`` is not rounded through a float
    (README, "Baselines and regressions")."""
    values = doc.data.get(section, {})
    if name not in values:
        assert default is not None
        return default
    text = doc.float_text(section, name)
    return parse_tolerance(text if text is not None else values[name])
