"""promptfoo assertions -> evalkit assertions, by promptfoo's own semantics.

A value is rendered as promptfoo renders it before checking: a string as a Nunjucks template
with the test's vars, each string of a list likewise, a mapping not at all; ``file://`` loads a
.json/.yaml file (parsed) or a .txt file (trimmed). Then:

    equals          exact (a string or number: String(value)); equals_json (a mapping or list)
    contains, icontains, starts-with       the same names (String(value))
    contains-any/-all, icontains-any/-all  the list, or a comma-separated string split as promptfoo does
    regex           regex, the JavaScript pattern translated (evalkit.importers.jsregex)
    is-json         json_schema: true, or the schema (a mapping, YAML text or a file)
    contains-json   contains_json likewise
    levenshtein     levenshtein {value, max: threshold (default 5)}
    latency, cost   latency_ms, cost: the threshold
    word-count      word_count {min, max} (a number N: exactly N)
    python          python: file.py:function (default get_assert), when given as file://
    is-valid-openai-tools-call   valid_tool_calls: true
    tool-call-f1                 tool_call_f1 {expected: the names, min: threshold (default 1)}
    trajectory:tool-used         tool_called: the name
    trajectory:tool-sequence     tool_sequence: the steps ({steps, exact: true} in mode exact)
    llm-rubric, model-graded-closedqa, factuality, similar: rubric, factuality, similar (graded.py)

``not-`` becomes ``not_``, ``weight`` the weight, ``metric`` a comment (evalkit has no named
metrics). Everything else is not converted, with a hint. Each converted value is checked by
evalkit's own assertion registry, so what is written loads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.assertions import registry
from evalkit.assertions.registry import AssertionValueError, Where
from evalkit.importers.jsregex import UntranslatableRegex, translate
from evalkit.importers.promptfoo.graded import GRADED, Refused, convert_graded
from evalkit.importers.promptfoo.graded import HINTS as GRADED_HINTS
from evalkit.importers.promptfoo.graded import item as graded_item
from evalkit.importers.promptfoo.source import (
    JS_EXTENSIONS,
    Loc,
    OutsideFolder,
    file_reference,
    inside,
    parse_yaml_text,
    split_function,
)
from evalkit.sets.nunjucks import TemplateMismatch, js_string, render

DECISION = "write what it checks as a rubric: (a judge rates the answer on five levels)"
PYTHON = "rewrite it as a python: check (file.py:function, called with (response, context))"
HINTS = {
    **dict.fromkeys(("agent-rubric", "search-rubric", "conversation-relevance"), f"model-graded: {DECISION}"),
    **GRADED_HINTS,
    **dict.fromkeys(("context-faithfulness", "context-recall", "context-relevance"),
                    "RAG context check: evalkit measures retrieval with question sets (evalkit retrieval)"),
    **dict.fromkeys(("javascript", "ruby", "webhook"), PYTHON),
    **dict.fromkeys(("is-xml", "contains-xml", "is-html", "contains-html", "is-sql", "contains-sql"),
                    "no evalkit equivalent; a python: check can parse it"),
    **dict.fromkeys(("is-valid-function-call", "is-valid-openai-function-call", "finish-reason", "skill-used",
                     "trace-error-spans", "trace-span-count", "trace-span-duration", "trajectory:goal-success",
                     "trajectory:tool-args-match", "trajectory:step-count"),
                    "evalkit checks tool calls with tool_called, tool_sequence, valid_tool_calls and tool_call_f1 "
                    "(no legacy function calls, finish reasons or traces)"),
    **dict.fromkeys(("moderation", "guardrails", "pi", "classifier", "is-refusal"),
                    "no evalkit equivalent; a python: check, or --grader decision"),
    **dict.fromkeys(("perplexity", "perplexity-score"), "needs token log-probabilities, which evalkit does not check"),
    **dict.fromkeys(("rouge-n", "bleu", "gleu", "meteor"),
                    "n-gram overlap has no evalkit equivalent; levenshtein or a python: check"),
    **dict.fromkeys(("select-best", "max-score", "human"),
                    "compares the outputs of several prompts; evalkit grades each answer on its own"),
    "assert-set": "write its assertions into the test itself",
}  # fmt: skip
TOOLS = ("is-valid-openai-tools-call", "tool-call-f1", "trajectory:tool-used", "trajectory:tool-sequence")
CONVERTED = frozenset(
    ("equals", "contains", "icontains", "contains-any", "contains-all", "icontains-any", "icontains-all",
     "starts-with", "regex", "is-json", "contains-json", "levenshtein", "latency", "cost", "word-count", "python",
     *TOOLS)
)  # fmt: skip
_NAMES = {"equals": "exact", "starts-with": "starts_with", "is-json": "json_schema", "contains-json": "contains_json",
          "latency": "latency_ms", "word-count": "word_count"}  # fmt: skip
NEGATABLE = CONVERTED | GRADED | frozenset(HINTS) - {"select-best", "max-score", "human", "assert-set"}
_LAX_JSON = (  # what promptfoo's contains-json reads as JSON in an answer, and evalkit's contains_json does not
    'a truncated object ({"city": "Paris")',
    "single quotes ({'city': 'Paris'})",
    'unquoted keys ({city: "Paris"})',
    '// comments ({"city": "Paris" // the capital\\n})',
)


@dataclass(frozen=True, slots=True)
class Converted:
    item: dict[str, Any]  # the evalkit assertion, in the one-key or the long form
    comment: str | None = None
    partly: tuple[str, ...] = ()  # why it does not mean quite what promptfoo's did
    notes: tuple[str, ...] = ()  # differences in edge cases, reported once per import


@dataclass(frozen=True, slots=True)
class NotConverted:
    what: str
    hint: str


@dataclass(frozen=True, slots=True)
class Scope:
    """What converting an assertion needs: promptfoo's base folder, the output folder (python
    files are written relative to it) and the test's vars."""

    base: Path
    out: Path
    vars: Mapping[str, Any]
    instances: Mapping[str, str] = field(default_factory=dict)  # promptfoo provider id -> instance (graded.py)
    grader: Any = None  # the test's options.provider: model-graded assertions' default provider


def convert(assertion: Any, loc: Loc, scope: Scope) -> Converted | NotConverted:
    """One promptfoo assertion as an evalkit one."""
    if not isinstance(assertion, Mapping) or not isinstance(assertion.get("type"), str):
        return NotConverted("assertion", "not a promptfoo assertion: it needs type:")
    kind = assertion["type"]
    negated = kind.startswith("not-") and kind[4:] in NEGATABLE
    base = kind[4:] if negated else kind
    if base not in CONVERTED and base not in GRADED:
        return NotConverted(kind, HINTS.get(base, "not a promptfoo assertion type evalkit knows"))
    if "transform" in assertion:
        return NotConverted(
            f"{kind} with transform", "evalkit grades the raw response; move the transform into a python: check"
        )
    weight = assertion.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) or weight < 0:
        return NotConverted(f"{kind} weight {weight!r}", "evalkit weights are numbers, 0 or more")
    if base in GRADED:
        return _graded(base, assertion, scope, negated=negated, weight=weight)
    try:
        found = _convert(base, assertion, scope)
    except _Refused as refused:
        return NotConverted(kind, str(refused))
    except OutsideFolder as exc:  # a file the import may not read: stop (exit 2)
        raise loc.error(str(exc)) from None
    if isinstance(found, NotConverted):
        return found
    name, value, comment, partly, notes = found
    name = f"not_{name}" if negated else name
    spec = registry.get(name)
    assert spec is not None, name
    try:
        spec.check(value, Where(scope.out))
    except AssertionValueError as exc:
        return NotConverted(kind, f"evalkit refuses the converted value: {exc}")
    item = {name: value} if weight == 1 else {"type": name, "value": value, "weight": weight}
    metric = assertion.get("metric")
    if isinstance(metric, str) and metric:
        comment = f"{comment}; metric: {metric}" if comment else f"metric: {metric}"
        partly = [*partly, f"metric {metric!r} kept as a comment: evalkit reports no named metrics"]
    return Converted(item, comment, tuple(partly), tuple(notes))


class _Refused(Exception):
    """The assertion cannot be converted; the message is the hint."""


def _graded(
    base: str, assertion: Mapping[str, Any], scope: Scope, *, negated: bool, weight: float
) -> Converted | NotConverted:
    """A model-graded assertion (graded.py), checked by evalkit's registry as the loader will."""
    kind = f"not-{base}" if negated else base
    provided = {**assertion, "provider": assertion.get("provider", scope.grader)}
    try:
        name, parts, partly, notes = convert_graded(base, provided, rendered_value(assertion.get("value"), scope),
                                                    scope.instances)  # fmt: skip
    except (Refused, _Refused) as refused:
        return NotConverted(kind, str(refused))
    name = f"not_{name}" if negated else name
    spec = registry.get(name)
    assert spec is not None, name
    try:
        spec.check(parts if set(parts) != {"value"} else parts["value"], Where(scope.out))
    except AssertionValueError as exc:
        return NotConverted(kind, f"evalkit refuses the converted value: {exc}")
    metric = assertion.get("metric")
    comment = None
    if isinstance(metric, str) and metric:
        comment = f"metric: {metric}"
        partly = [*partly, f"metric {metric!r} kept as a comment: evalkit reports no named metrics"]
    return Converted(graded_item(name, parts, weight), comment, tuple(partly), tuple(notes))


_Found = tuple[str, Any, str | None, list[str], list[str]]


def _convert(base: str, assertion: Mapping[str, Any], scope: Scope) -> _Found | NotConverted:
    value = assertion.get("value")
    threshold = assertion.get("threshold")
    if base == "python":
        return _python(value, threshold, scope)
    value = rendered_value(value, scope)
    if base in TOOLS:
        return _tools(base, value, threshold)
    if base == "equals":
        return _equals(value)
    if base in ("contains", "icontains", "starts-with"):
        return _contains(base, value)
    if base in ("contains-any", "contains-all", "icontains-any", "icontains-all"):
        return base.replace("-", "_"), _needles(value, base), None, [], []
    if base == "regex":
        return _regex(value)
    if base in ("is-json", "contains-json"):
        return _json(base, value)
    if base == "levenshtein":
        return _levenshtein(value, threshold)
    if base in ("latency", "cost"):
        return _bound(base, threshold)
    return _word_count(value)


def _equals(value: Any) -> _Found:
    if isinstance(value, Mapping | list):
        return "equals_json", value, None, [], []
    if value is None:
        raise _Refused("equals needs a value")
    note = "equals -> exact: evalkit trims whitespace at both ends before comparing, promptfoo compares verbatim"
    return "exact", js_string(value), None, [], [note]


def _contains(base: str, value: Any) -> _Found:
    text = _needle(value, base)
    notes = []
    if base == "icontains":
        notes.append("icontains: evalkit ignores case by Unicode case folding (ß = ss), promptfoo by toLowerCase")
    if base == "starts-with":
        notes.append("starts-with: evalkit ignores whitespace before the response, promptfoo does not")
    return _NAMES.get(base, base), text, None, [], notes


def _json(base: str, value: Any) -> _Found:
    schema = _schema(value, base)
    notes = []
    if base == "contains-json":
        notes.append("contains-json: evalkit checks the first JSON value in the text, promptfoo any of them")
        notes.extend(f"contains-json: promptfoo accepts {what}, evalkit requires strict JSON" for what in _LAX_JSON)
    return _NAMES[base], schema, None, _unchecked_formats(schema), notes


def _levenshtein(value: Any, threshold: Any) -> _Found:
    if not isinstance(value, str):
        raise _Refused("levenshtein needs a string value")
    limit = _number(5 if threshold is None else threshold, "levenshtein threshold")
    note = "levenshtein: evalkit trims the response's whitespace first, promptfoo compares it verbatim"
    return "levenshtein", {"value": value, "max": math.floor(limit)}, None, [], [note]


def _bound(base: str, threshold: Any) -> _Found:
    """latency and cost: a threshold is their bound."""
    if threshold is None:
        raise _Refused(f"{base} needs a threshold")
    bound = _number(threshold, f"{base} threshold")
    notes = ["cost: the instance needs cost: prices in evalkit.yaml"] if base == "cost" else []
    return _NAMES.get(base, base), bound, None, [], notes


def rendered_value(value: Any, scope: Scope) -> Any:
    """An assertion value as promptfoo gives it to the check."""
    if isinstance(value, str):
        if value.startswith("file://"):
            return load_value_file(value, scope.base)
        return _render(value, scope)
    if isinstance(value, list):
        return [
            (load_value_file(v, scope.base) if v.startswith("file://") else _render(v, scope))
            if isinstance(v, str)
            else v
            for v in value
        ]
    return value


def load_value_file(reference: str, base: Path) -> Any:
    """promptfoo's processFileReference: .json/.yaml parsed, .txt trimmed, anything else refused."""
    path = inside(base / file_reference(reference), reference)
    if path.suffix in JS_EXTENSIONS or path.suffix in (".py", ".rb"):
        raise _Refused("its value is computed by a script; evalkit values are written out")
    if path.suffix not in (".json", ".yaml", ".yml", ".txt"):
        raise _Refused(f"promptfoo reads no {path.suffix or 'extension-less'} value files")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise _Refused(f"cannot read {reference}") from None
    if path.suffix == ".txt":
        return text.strip()
    from evalkit.errors import SetError

    try:
        return parse_yaml_text(text, Loc(str(path)))
    except SetError as exc:
        raise _Refused(f"{reference}: {exc}") from None


def _render(text: str, scope: Scope) -> str:
    try:
        result = render(text, scope.vars)
    except TemplateMismatch as exc:
        raise _Refused(f"its template: {exc}") from None
    if result.undefined:
        names = ", ".join(repr(name) for name in result.undefined)
        raise _Refused(f"undefined variable {names} in its value (promptfoo renders it as nothing); define it in vars")
    return result.text


def _needle(value: Any, base: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float) or value == "":
        raise _Refused(f"{base} needs a non-empty string or a number")
    return js_string(value)


def _needles(value: Any, base: str) -> list[str]:
    if isinstance(value, str):
        value = split_commas(value)
    if not isinstance(value, list) or not value:
        raise _Refused(f"{base} needs a list of strings (or a comma-separated string)")
    needles = ["null" if v is None else js_string(v) for v in value]
    if "" in needles:
        raise _Refused(f"an empty string in {base} always matches; remove it")
    return needles


def split_commas(value: str) -> list[str]:
    """promptfoo's parseCommaSeparatedValues: fields split on commas and trimmed; a field in
    double quotes keeps its commas (\\" or "" for a quote); repeated commas are skipped."""
    fields: list[str] = []
    i = 0
    while i < len(value):
        while i < len(value) and (value[i].isspace() or value[i] == ","):
            i += 1
        if i >= len(value):
            break
        if value[i] == '"':
            field, i = _quoted_field(value, i + 1)
            while i < len(value) and value[i].isspace():
                i += 1
            if i < len(value) and value[i] != ",":
                raise _Refused("expected a comma after a quoted field in the list")
        else:
            end = value.find(",", i)
            end = len(value) if end < 0 else end
            field, i = value[i:end].strip(), end
        fields.append(field)
    return fields


def _quoted_field(value: str, i: int) -> tuple[str, int]:
    out = []
    while i < len(value):
        if value[i] == "\\" and value[i + 1 : i + 2] in ('"', "\\"):
            out.append(value[i + 1])
            i += 2
        elif value.startswith('""', i):
            out.append('"')
            i += 2
        elif value[i] == '"':
            return "".join(out), i + 1
        else:
            out.append(value[i])
            i += 1
    raise _Refused("an unterminated quoted field in the list")


def _regex(value: Any) -> _Found:
    if not isinstance(value, str) or not value:
        raise _Refused("regex needs a non-empty string")
    try:
        translation = translate(value)
    except UntranslatableRegex as exc:
        raise _Refused(str(exc)) from None
    partly = []
    if value.startswith("/") and value.rfind("/") > 0 and value[value.rfind("/") + 1 :].isalpha():
        partly.append(
            "the value looks like /pattern/flags, but promptfoo reads it as a pattern whose slashes are "
            "literal (new RegExp(value)); converted as promptfoo reads it"
        )
    comment = None if translation.value == value else f"promptfoo regex: {value}"
    return "regex", translation.value, comment, partly, list(translation.notes)


def _schema(value: Any, base: str) -> Any:
    if value is None or value == "" or value is False:
        return True
    if isinstance(value, str):
        from evalkit.errors import SetError

        try:
            value = parse_yaml_text(value, Loc(base))
        except SetError as exc:
            raise _Refused(f"its schema is not YAML: {exc}") from None
    if not isinstance(value, Mapping | bool):
        raise _Refused(f"{base} needs a JSON Schema (a mapping)")
    return value


def _unchecked_formats(schema: Any) -> list[str]:
    """Why a schema is partly converted: the formats it names that evalkit does not check
    (README "Set files"), which then hold for any string."""
    from evalkit.assertions.compiling import unchecked_formats

    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            if isinstance(node.get("format"), str) and node["format"] in unchecked_formats():
                found.add(node["format"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return [f"evalkit does not check format {name}: any string holds" for name in sorted(found)]


def _number(value: Any, what: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise _Refused(f"{what} must be a number, 0 or more")
    return value


def _word_count(value: Any) -> _Found:
    if isinstance(value, str) and value.strip():
        try:
            value = float(value)
        except ValueError:
            raise _Refused("word-count needs a number or {min, max}") from None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not float(value).is_integer() or value < 0:
            raise _Refused("word-count: no answer has a fractional or negative number of words")
        return "word_count", {"min": int(value), "max": int(value)}, None, [], []
    if not isinstance(value, Mapping) or not ({"min", "max"} & set(value)):
        raise _Refused("word-count needs a number or {min, max}")
    bounds: dict[str, int] = {}
    for key, rounding in (("min", math.ceil), ("max", math.floor)):
        if value.get(key) is not None:
            bounds[key] = max(0, rounding(_number(value[key], f"word-count {key}")))
    return "word_count", bounds, None, [], []


def _python(value: Any, threshold: Any, scope: Scope) -> _Found | NotConverted:
    if not isinstance(value, str) or not value.startswith("file://"):
        return NotConverted("python (inline code)", "move the code into a file and use python: file.py:function")
    path, function = split_function(file_reference(value))
    if not path.endswith(".py"):
        return NotConverted("python", f"{value} is not a .py file")
    target = os.path.relpath((scope.base / path).resolve(), scope.out.resolve())
    partly = [
        "promptfoo passes any score above 0 and a context with test, config and provider; evalkit passes at "
        "0.5 and gives prompt, vars, reference, latency_ms, cost and model: check the function"
    ]
    if threshold is not None:
        partly.append("its threshold is not converted (evalkit passes a score at 0.5)")
    return "python", f"{Path(target).as_posix()}:{function or 'get_assert'}", None, partly, []


_TRAJECTORY = (
    "evalkit checks the answer's tool calls (README \"Tools and tool calls\"), promptfoo the trace's tool spans"
)


def _tools(base: str, value: Any, threshold: Any) -> _Found:
    """The four tool assertions (README "Coming from promptfoo")."""
    if base == "is-valid-openai-tools-call":
        return "valid_tool_calls", True, None, [], []
    if base == "tool-call-f1":
        expected = split_commas(value) if isinstance(value, str) else value
        if not isinstance(expected, list) or not expected or not all(isinstance(v, str) for v in expected):
            raise _Refused("tool-call-f1 needs the expected tool names (a list, or a comma-separated string)")
        limit = _number(1 if threshold is None else threshold, "tool-call-f1 threshold")
        return "tool_call_f1", {"expected": expected, "min": limit}, None, [], []
    if base == "trajectory:tool-used":
        name = value.get("name") if isinstance(value, Mapping) and set(value) == {"name"} else value
        if not isinstance(name, str) or not name:
            raise _Refused("only one tool name converts (a list or min/max counts: one tool_called each)")
        return "tool_called", name, None, [], [f"trajectory:tool-used: {_TRAJECTORY}"]
    steps = value.get("steps") if isinstance(value, Mapping) else value
    mode = value.get("mode", "in_order") if isinstance(value, Mapping) else "in_order"
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) for s in steps):
        raise _Refused("trajectory:tool-sequence needs its steps as a list of tool names")
    if mode not in ("in_order", "exact"):
        raise _Refused(f"trajectory:tool-sequence mode {mode!r}: evalkit has in_order and exact")
    converted: Any = {"steps": steps, "exact": True} if mode == "exact" else steps
    return "tool_sequence", converted, None, [], [f"trajectory:tool-sequence: {_TRAJECTORY}"]
