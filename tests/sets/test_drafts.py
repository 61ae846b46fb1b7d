"""One prompt builder (evalkit/sets/drafts.py): the fast path that builds a prompt of ``prompts:``
without a template or a conversation (``Drafter.literal``) gives what the general path (a
``Plan`` drafted) gives, issues and messages included, for every such prompt."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from evalkit.errors import Issue
from evalkit.records import Prompt
from evalkit.sets.drafts import Drafter, Place, Plan
from evalkit.sets.yamldoc import parse_document
from tests.sets.test_properties import SETTINGS

ASSERTIONS = st.sampled_from(
    [
        {"contains": "x"},
        {"contains": "x", "weight": 2},
        {"contains": "x", "weight": "heavy"},  # the schema reports it
        {"regex": "("},  # a value the type refuses
        {"regex": "^a+$"},
        {"json_schema": {"type": 1}},
        {"json_schema": {"type": "object"}},
        {"containz": "x"},  # an unknown type
        "contains",
    ]
)
PROMPTS = st.fixed_dictionaries(
    {"prompt": st.sampled_from(["Q", "What is 2 + 2?"])},
    optional={
        "id": st.sampled_from(["p1", 5]),
        "assertions": st.none() | st.lists(ASSERTIONS, max_size=3),
        "reference": st.sampled_from(["", "  ", "four"]),
        "asertions": st.just([{"contains": "x"}]),  # misspelt: flagged by the schema below
        "system": st.just("Be brief."),
        "critical": st.booleans(),
        "threshold": st.sampled_from([0.5, 1]),
    },
)


def built(raw: dict[str, Any], general: bool) -> tuple[Prompt | None, list[Issue], list[str]]:
    doc = parse_document(json.dumps({"id": "s", "name": "S", "prompts": [raw]}, indent=1), "set.yaml")
    flagged = frozenset({"prompts[0].asertions"}) if "asertions" in raw else frozenset()
    pid = raw.get("id")
    place = Place(doc, ("prompts", 0), f"prompt '{pid}'" if isinstance(pid, str) else "prompts[0]", flagged)
    drafter = Drafter(doc, None)
    if general:
        plan = Plan(drafter, raw, place)
        prompt, issues = drafter.draft(plan, pid, {})
        issues = plan.issues + issues
    else:
        literal = drafter.literal(raw, place, {})
        assert literal is not None  # no template, no conversation: the fast path takes it
        prompt, issues = literal
    wheres = [str(a.where) for a in prompt.assertions] if prompt is not None else []
    return prompt, issues, wheres


@SETTINGS
@given(PROMPTS)
def test_the_fast_path_builds_a_prompt_as_the_general_path_does(raw: dict[str, Any]) -> None:
    assert built(raw, general=False) == built(raw, general=True)


def test_a_prompt_without_assertions_or_reference_is_told_so_by_both_paths() -> None:
    raw = {"id": "p1", "prompt": "Q"}
    prompt, issues, _ = built(raw, general=False)
    assert prompt is None
    assert [(i.line, i.message) for i in issues] == [
        (5, "prompt 'p1' has neither an assertion nor a reference; add assertions: or reference:")
    ]
    assert built(raw, general=True)[1] == issues
