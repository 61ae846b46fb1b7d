"""One promptfoo test (defaultTest merged in) -> evalkit prompt entries, one per prompt and var
combination, and the findings that go with them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.config import APPLICATION_ADAPTERS
from evalkit.importers.promptfoo.asserts import Converted, NotConverted, Scope, convert
from evalkit.importers.promptfoo.config import PromptSpec, prompt_allowed, unique_id
from evalkit.importers.promptfoo.graded import GRADED
from evalkit.importers.promptfoo.render import Message, RenderProblem, prepare_vars, render_prompt
from evalkit.importers.promptfoo.report import ImportReport
from evalkit.importers.promptfoo.source import Loc, expand, file_reference
from evalkit.importers.promptfoo.tests import TestCase
from evalkit.importers.yamlout import Commented

KNOWN_KEYS = frozenset(("description", "vars", "assert", "options", "metadata", "provider", "providers",
                        "providerOutput", "threshold", "prompts", "assertScoringFunction"))  # fmt: skip
_REFUSED_KEYS = {
    "providerOutput": "it grades a fixed output; put it in a replay answers file (adapter: replay)",
    "assertScoringFunction": "a scoring function decides the verdict; evalkit scores by weights and threshold",
}
_REFUSED_OPTIONS = {
    "transform": "evalkit grades the raw response; move the transform into a python: check",
    "transformVars": "vars computed by code; write the vars out",
    "storeOutputAs": "a conversation built from earlier outputs; write it as messages:",
}
_NOTED_OPTIONS = {
    "rubricPrompt": "grading prompt override: evalkit's judges ask with their own fixed, versioned profiles",
    "repeat": "use evalkit run --repeat N",
}


@dataclass
class Outcome:
    """What became of one test."""

    written: int = 0
    failed: bool = False  # some prompt or combination could not be written
    partly: bool = False
    assertions: dict[str, bool] = field(default_factory=dict)  # by where written: converted everywhere?
    types: dict[str, str] = field(default_factory=dict)  # by where written: promptfoo's type


@dataclass
class SetDraft:
    spec: PromptSpec
    entries: list[Commented] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)


def convert_test(test: TestCase, drafts: list[SetDraft], base: Path, out: Path, report: ImportReport) -> Outcome:
    outcome = Outcome()
    for assertion in test.asserts:
        outcome.assertions.setdefault(_key(assertion.loc, assertion.label), True)
        outcome.types[_key(assertion.loc, assertion.label)] = promptfoo_type(assertion.value)
    if not _test_level(test, report, outcome):
        outcome.failed = True
        _all_failed(test, outcome)
        return outcome
    try:
        combinations = _combinations(test, base)
    except RenderProblem as problem:
        report.add("not_converted", test.loc.key_of("vars"), "vars", str(problem))
        outcome.failed = True
        _all_failed(test, outcome)
        return outcome
    allowed = [d for d in drafts if prompt_allowed(d.spec, test.data.get("prompts"))]
    if not allowed:
        report.add("not_converted", _where(test, "prompts"), "prompts filter", "it names none of the prompts")
        outcome.failed = True
        _all_failed(test, outcome)
    for draft in allowed:
        for index, combination in enumerate(combinations, start=1):
            number = index if len(combinations) > 1 else 0
            entry = _entry(test, draft, combination, number, base=base, out=out, report=report, outcome=outcome)
            if entry is not None:
                draft.entries.append(entry)
                outcome.written += 1
    return outcome


def promptfoo_type(assertion: Any) -> str:
    """An assertion's type as the summary lists what was not converted."""
    kind = assertion.get("type") if isinstance(assertion, Mapping) else None
    if not isinstance(kind, str):
        return "assertion"
    return f"{kind} with transform" if "transform" in assertion else kind


def _key(loc: Loc, label: str) -> str:
    return f"{loc}|{'.'.join(map(str, loc.path))}|{label}"


def _all_failed(test: TestCase, outcome: Outcome) -> None:
    """The test's own assertions are not converted (defaultTest's may be, in other tests)."""
    for assertion in test.asserts[test.from_default :]:
        outcome.assertions[_key(assertion.loc, assertion.label)] = False


def _where(test: TestCase, *key: str) -> Loc:
    """Where a test's key was written: in the test, or in defaultTest when inherited."""
    return test.inherited.get(".".join(key)) or test.loc.key_of(*key)


def _test_level(test: TestCase, report: ImportReport, outcome: Outcome) -> bool:
    """Findings on the test's own keys; False when the test cannot be converted at all."""
    data, ok = test.data, True
    for key, hint in _REFUSED_KEYS.items():
        if data.get(key) is not None:
            report.add("not_converted", _where(test, key), key, hint)
            ok = False
    options = data.get("options") or {}
    for key, hint in _REFUSED_OPTIONS.items():
        if options.get(key) is not None:
            report.add("not_converted", _where(test, "options", key), f"options.{key}", hint)
            ok = False
    for key, hint in _NOTED_OPTIONS.items():
        if options.get(key) is not None:
            report.add("not_converted", _where(test, "options", key), f"options.{key}", hint)
    if options.get("provider") is not None and not any(_graded(a.value) for a in test.asserts):
        report.add("not_converted", _where(test, "options", "provider"), "options.provider", GRADER_UNUSED)
    if data.get("provider") is not None:
        report.add(
            "partly",
            _where(test, "provider"),
            "provider",
            "the test runs on its own provider in promptfoo; run it with --provider",
        )
        outcome.partly = True
    if data.get("providers") is not None:
        report.add(
            "partly",
            _where(test, "providers"),
            "providers",
            "promptfoo runs it on some providers only; evalkit on the one you choose",
        )
    threshold = data.get("threshold")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1
    ):
        report.add(
            "not_converted", _where(test, "threshold"), f"threshold {threshold!r}", "evalkit thresholds are in 0..1"
        )
        ok = False
    if test.vars_from_file_url:
        report.add("note", test.loc.key_of("vars"), "vars: file://", "read as promptfoo's documentation says; promptfoo "
                   "0.121 itself reads no vars from a file:// path there (write the path without file://)")  # fmt: skip
    for key in sorted(set(data) - KNOWN_KEYS):
        report.add("partly", test.loc.key_of(key), key, "not a test key evalkit converts")
    return ok


GRADER_UNUSED = (
    "grading provider: it grades model-graded assertions (in evalkit provider: on a rubric, factuality or "
    "similar), and this test has none"
)


def _graded(assertion: Any) -> bool:
    """A model-graded assertion (graded.py), negated or not."""
    kind = assertion.get("type") if isinstance(assertion, Mapping) else None
    return isinstance(kind, str) and kind.removeprefix("not-") in GRADED


def _combinations(test: TestCase, base: Path) -> list[dict[str, Any]]:
    """promptfoo's generateVarCombinations: an array of strings (or a file glob) multiplies."""
    variables = dict(test.data.get("vars") or {})
    if (test.data.get("options") or {}).get("disableVarExpansion") is True:
        return [variables]
    combinations: list[dict[str, Any]] = [{}]
    for name, value in variables.items():
        if isinstance(value, str) and value.startswith("file://"):
            paths = expand(base, file_reference(value), test.loc.at("vars", name))
            values: list[Any] = [f"file://{(p.relative_to(base) if p.is_relative_to(base) else p).as_posix()}"
                                 for p in paths]  # fmt: skip
        elif isinstance(value, list) and value and isinstance(value[0], str):
            values = value
        else:
            values = [value]
        combinations = [{**c, name: v} for c in combinations for v in values]
    return combinations


def _entry(
    test: TestCase,
    draft: SetDraft,
    combination: Mapping[str, Any],
    number: int,
    *,
    base: Path,
    out: Path,
    report: ImportReport,
    outcome: Outcome,
) -> Commented | None:
    options = test.data.get("options") or {}
    raw = f"{options.get('prefix') or ''}{draft.spec.raw}{options.get('suffix') or ''}"
    try:
        variables = prepare_vars(combination, base, test.loc)
    except RenderProblem as problem:
        report.add("not_converted", test.loc.key_of("vars"), "vars", str(problem))
        outcome.failed = True
        return None
    try:
        rendered = render_prompt(raw, variables)
        turns = _turns(rendered.messages)
    except RenderProblem as problem:  # where the template is written, once per reason
        if problem.var is not None:
            report.add("not_converted", test.loc.key_of("vars", problem.var), f"var {problem.var}", str(problem))
        else:
            report.add("not_converted", draft.spec.loc, f"prompt {draft.spec.name}", str(problem))
        outcome.failed = True
        return None
    for name in rendered.undefined:
        report.add("note", draft.spec.loc, f"undefined variable {name!r}", "renders as nothing, as in promptfoo")
    scope = Scope(base, out, variables, report.instances, (test.data.get("options") or {}).get("provider"))
    assertions, dropped = _assertions(test, scope, report, outcome)
    if not assertions:
        hint = "none of its assertions converts" if test.asserts else "promptfoo passes a test with no assertions"
        report.add("not_converted", test.loc, "test", f"{hint}; evalkit needs one to grade")
        outcome.failed = True
        return None
    entry: dict[str, Any] = {"id": unique_id(_id(test, number), draft.ids), **turns}
    if variables and (
        _for_application(report)
        or any("python" in _type(a.value if isinstance(a, Commented) else a) for a in assertions)
    ):
        entry["vars"] = dict(variables)
    entry["assertions"] = assertions
    threshold = test.data.get("threshold")
    if threshold is not None:
        entry["threshold"] = threshold
    description = test.data.get("description")
    comment = f"promptfoo test at {test.loc}" + (
        f": {description}" if isinstance(description, str) and description else ""
    )
    if dropped:
        comment += (
            f"\nNot converted (a regex that never matches stands in, failing until replaced): {', '.join(dropped)}"
        )
    return Commented(entry, comment)


def _type(item: Any) -> str:
    return str(item.get("type") if "type" in item else next(iter(item)))


def _assertions(test: TestCase, scope: Scope, report: ImportReport, outcome: Outcome) -> tuple[list[Any], list[str]]:
    """The converted assertions, weights as written (weight 0 never fails a test, in promptfoo
    and in evalkit, even when every weight is 0), a failing marker in the place of each one not
    converted, and what those were; no assertions when none converts (the test is left out)."""
    out: list[Any] = []
    dropped: list[str] = []
    for assertion in test.asserts:
        found = convert(assertion.value, assertion.loc, scope)
        label = f"{assertion.label}: " if assertion.label else ""
        if isinstance(found, NotConverted):
            report.add("not_converted", assertion.loc, f"{label}{found.what}", found.hint)
            outcome.assertions[_key(assertion.loc, assertion.label)] = False
            outcome.partly = True
            dropped.append(found.what)
            out.append(Commented(marker(assertion.value, found.what), f"not converted: {found.what}: {found.hint}"))
            continue
        assert isinstance(found, Converted)
        for reason in found.partly:
            report.add("partly", assertion.loc, f"{label}{_type(found.item)}", reason)
            outcome.partly = True
        for note in found.notes:
            report.add("note", "", "", note)
        out.append(Commented(found.item, found.comment) if found.comment else found.item)
    return (out, dropped) if len(dropped) < len(out) else ([], dropped)


MARKER = "(?!)"  # an empty negative lookahead: no text matches it


def marker(assertion: Any, what: str) -> dict[str, Any]:
    """A regex no response matches, in the place of an assertion that was not converted: the test
    fails until the user replaces it, instead of passing on fewer checks than promptfoo's
    (README "Coming from promptfoo"). It keeps the assertion's weight (weight 0 never fails)."""
    pattern = f"{MARKER}promptfoo {re.sub(r'[^A-Za-z0-9:_-]+', ' ', what).strip()} not converted: replace this"
    weight = assertion.get("weight", 1) if isinstance(assertion, Mapping) else 1
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight < float("inf"):
        weight = 1
    return {"regex": pattern} if weight == 1 else {"type": "regex", "value": pattern, "weight": weight}


def _turns(messages: tuple[Message, ...]) -> dict[str, Any]:
    if not messages or messages[-1].role != "user":
        raise RenderProblem("the conversation must end with the user's turn")
    if not messages[-1].content.strip():
        raise RenderProblem("the rendered prompt is empty")
    roles = [m.role for m in messages]
    if roles == ["user"]:
        return {"prompt": messages[0].content}
    if roles == ["system", "user"]:
        return {"system": messages[0].content, "prompt": messages[1].content}
    return {"messages": [{"role": m.role, "content": m.content} for m in messages]}


def _for_application(report: ImportReport) -> bool:
    """An application gets the test's vars in its request (README "Testing your application")."""
    return any(p.get("adapter") in APPLICATION_ADAPTERS for p in report.providers)


def slug(text: str) -> str:
    return re.sub(r"[^\w]+", "-", text.lower()).strip("-_")[:80].strip("-_")


def _id(test: TestCase, number: int) -> str:
    description = test.data.get("description")
    base = slug(description) if isinstance(description, str) and slug(description) else test.default_id
    return f"{base}-{number}" if number else base
