"""One prompt rendered and checked (README "Templates, variables, data files and conversations"): the step between a prompt as written (a prompt
of ``prompts:``, or the template with one row's columns) and its record.

A ``Plan`` holds what does not depend on the variables, done once: the assertions whose values
hold no template checked (and their records made), the conversation's shape and the templates'
syntax checked. A template's plan serves every row, so a row costs its renderings, the checks
of the values it renders, and its records. ``Drafter.literal`` builds the usual prompt (no
template, no conversation) in one pass, without a ``Plan`` but through the same rules and
messages (``Drafter.prepare``, ``_unassessed``): tests/sets/test_drafts.py holds the two paths to
the same prompts and issues. A ``Place`` says where a prompt's parts were written:
issues of a prompt of the set file name that file; a row's, the data file and the row's line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evalkit.assertions import registry
from evalkit.assertions.registry import AssertionType, AssertionValueError, Where
from evalkit.errors import Issue
from evalkit.records import Assertion, Message, Prompt
from evalkit.sets.cases import Case, CaseFile, assertion_form
from evalkit.sets.templates import Renderer, TemplateProblem, has_template, templated
from evalkit.sets.tools import declared
from evalkit.sets.validation import suggest
from evalkit.sets.yamldoc import DataPath, Document, format_path


def flagged_path(flagged: frozenset[str], path: DataPath) -> bool:
    if not flagged:
        return False
    shown = format_path(path)
    return any(f == shown or f.startswith(shown + ".") or f.startswith(shown + "[") for f in flagged)


class Place:
    """Where a prompt's parts were written (a prompt of ``prompts:``, or the template): issues
    and assertion locations in the set file."""

    __slots__ = ("_flagged", "_label", "doc", "prefix")

    def __init__(self, doc: Document, prefix: DataPath, label: str, flagged: frozenset[str] = frozenset()) -> None:
        self.doc, self.prefix, self._label, self._flagged = doc, prefix, label, flagged

    @property
    def label(self) -> str:
        return self._label

    def issue(self, sub: DataPath, message: str) -> Issue:
        return self.doc.issue((*self.prefix, *sub), message)

    def set_issue(self, path: DataPath, message: str) -> Issue:
        """An issue with a string of the set's own (its system prompt) as this prompt renders it."""
        return self.doc.issue(path, message)

    def where(self, sub: DataPath) -> object:
        """``file:line:col`` of ``sub`` when shown (a Location: a valid file never composes its graph)."""
        return self.doc.locate((*self.prefix, *sub))

    def flagged(self, sub: DataPath) -> bool:
        return flagged_path(self._flagged, (*self.prefix, *sub))

    @property
    def clean(self) -> bool:
        """Whether the schema reported nothing in the document (so nothing here either)."""
        return not self._flagged

    def hint(self, name: str) -> str:
        return "define it in vars: (the set's or the prompt's)"


class RowPlace(Place):
    """A row's rendering of the template: issues name the data file and the row's line; with
    ``own``, what the row writes itself (its assertions), located inside the row. One serves
    every row of a file in turn (``case``)."""

    __slots__ = ("case", "cases", "own")

    def __init__(self, doc: Document, cases: CaseFile, case: Case, own: bool = False) -> None:
        super().__init__(doc, () if own else ("template",), "")
        self.cases, self.case, self.own = cases, case, own

    @property
    def label(self) -> str:
        return f"row '{self.case.id}'"

    def issue(self, sub: DataPath, message: str) -> Issue:
        if self.own:
            return self.cases.issue(self.case.line, self.case.row, sub, message)
        return self.set_issue((*self.prefix, *sub), message)

    def set_issue(self, path: DataPath, message: str) -> Issue:
        line, col = self.cases.position(self.case.line, self.case.row)  # the row's start
        return Issue(self.cases.display, line, col, format_path(path), message)

    def where(self, sub: DataPath) -> object:
        if not self.own:
            return super().where(sub)
        line, col = self.cases.position(self.case.line, self.case.row, sub)
        return f"{self.cases.display}:{line}:{col}"

    def flagged(self, sub: DataPath) -> bool:
        return False

    def hint(self, name: str) -> str:
        return f"add a column '{name}' to {Path(self.cases.display).name} or define it in vars:"


@dataclass(frozen=True, slots=True)
class _Item:
    """An assertion as written, prepared: ``fixed`` when its value holds no template (checked
    once), else rendered and checked for each prompt."""

    kind: str
    raw: Any
    weight: float
    path: DataPath  # of the value, within the prompt
    spec: AssertionType
    where: object | None  # str() is file:line:col
    fixed: Assertion | None


class Plan:
    """A prompt's fields as written, with what does not depend on its variables done once: its
    assertions prepared and its conversation's shape checked. A template's plan serves every row."""

    __slots__ = (
        "complete",
        "critical",
        "fields",
        "issues",
        "items",
        "listed",
        "params",
        "place",
        "threshold",
        "tool_choice",
        "tools",
    )

    def __init__(self, drafter: Drafter, fields: Mapping[str, Any], place: Place) -> None:
        self.fields, self.place = fields, place
        self.issues: list[Issue] = []
        listed = fields.get("assertions")
        self.listed = len(listed) if isinstance(listed, list) else (0 if listed is None else -1)
        prepared = [
            drafter.prepare(item, place, ("assertions", k), self.issues)
            for k, item in enumerate(listed if isinstance(listed, list) else [])
        ]
        self.items = [item for item in prepared if item is not None]
        self.complete = len(self.items) == self.listed
        self.params, self.critical, self.threshold = _extras(fields)
        self.tools, self.tool_choice = declared(fields)
        turns: Any = fields.get("messages")
        if _well_formed(turns) and not place.flagged(("messages",)):
            self.issues.extend(drafter.turn_issues(turns, fields, place))
        self.issues.extend(drafter.syntax_issues(fields, place))


def _extras(fields: Mapping[str, Any]) -> tuple[dict[str, Any], bool, float | None]:
    """A prompt's params, critical and threshold (what the schema let through; it reports the rest)."""
    params, threshold = fields.get("params"), fields.get("threshold")
    return dict(params) if isinstance(params, dict) else {}, fields.get("critical") is True, _number(threshold)


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a number (a weight, a threshold), else None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _misspelt(fields: Mapping[str, Any], flagged: Callable[[DataPath], bool]) -> bool:
    """Whether the schema reported a key of a prompt that is (or is close to) ``assertions`` or
    ``reference`` (``asertions:``): then "has neither an assertion nor a reference" would only
    repeat that root cause, as its consequence."""
    return any(isinstance(k, str) and flagged((k,)) and suggest(k, _ROOTS) is not None for k in fields)


_ROOTS = ("assertions", "reference")


def _unassessed(
    place: Place, flagged: Callable[[DataPath], bool], fields: Mapping[str, Any], reference: Any, where: str = ""
) -> list[Issue]:
    """For a prompt that lists no assertion: the issue that it has no reference either (none when
    its reference is there, or when the schema reported a misspelt key that would explain it)."""
    if (isinstance(reference, str) and reference.strip()) or _misspelt(fields, flagged):
        return []
    message = f"{place.label} has neither an assertion nor a reference; add assertions: {where}or reference:"
    return [place.issue((), message)]


def _well_formed(turns: Any) -> bool:
    """A list of {role, content} strings (the schema reports anything else)."""
    return (
        isinstance(turns, list)
        and bool(turns)
        and all(
            isinstance(t, dict) and isinstance(t.get("role"), str) and isinstance(t.get("content"), str) for t in turns
        )
    )


_UNSET = object()
MAX_SHARED = 50_000  # assertion records kept for their twins (a set of distinct ones stops there)


class Drafter:
    """Renders and checks one prompt at a time; remembers what is the same for every prompt."""

    def __init__(self, doc: Document, set_system: Any) -> None:
        self.doc = doc
        self.folder = Where(Path(doc.file).parent)
        self.render = Renderer()
        self.set_system = set_system if isinstance(set_system, str) else None
        self.system_templated = self.set_system is not None and has_template(self.set_system)
        broken = self.render.syntax(self.set_system) if self.system_templated else None
        self.system_issues = [doc.issue(("system",), broken.message)] if broken is not None else []
        self.inherited: list[tuple[Prompt, str]] = []  # prompts that inherit a templated set system, as rendered
        self._checked: dict[Any, Any] = {}
        self._records: dict[str, Assertion] = {}  # by repr of the item as written: ``_shared``
        self._specs: dict[str, AssertionType | None] = {}
        self._suggested: dict[tuple[str, tuple[str, ...]], Any] = {}

    def draft(
        self,
        plan: Plan,
        pid: Any,
        variables: Mapping[str, Any],
        *,
        row: RowPlace | None = None,
        extra: Sequence[Any] = (),
        overrides: tuple[bool | None, float | None] = (None, None),
    ) -> tuple[Prompt | None, list[Issue]]:
        """The prompt ``plan`` makes with ``variables`` (None when it has issues) and its issues;
        ``row``, ``extra`` and ``overrides``: the row it is made for, its assertions, critical, threshold."""
        issues: list[Issue] = []
        fields, place = plan.fields, row or plan.place
        text = self._text(fields.get("prompt"), "prompt", place, variables, issues)
        messages = self._messages(fields.get("messages"), place, variables, issues)
        if messages:
            text = messages[-1].content
        system = self._text(fields.get("system"), "system", place, variables, issues)
        inherited = None
        if "system" not in fields and self.system_templated:
            inherited = self._set_system(place, variables, issues)
        reference = self._text(fields.get("reference"), "reference", place, variables, issues)
        assertions = [item.fixed or self._rendered(item, place, variables, issues) for item in plan.items]
        if extra:
            assert row is not None
            own = RowPlace(row.doc, row.cases, row.case, own=True)
            for k, written in enumerate(extra):
                item = self.prepare(written, own, ("assertions", k), issues)
                assertions.append(item.fixed or self._rendered(item, own, variables, issues) if item else None)
        shown = reference if reference is not None else fields.get("reference")  # as written when it failed to render
        if plan.listed == 0 and not extra:
            where = "to the template (or the row) " if row is not None else ""
            issues.extend(_unassessed(place, plan.place.flagged, fields, shown, where))
        if issues or plan.issues or not plan.complete or not isinstance(pid, str) or not isinstance(text, str):
            return None, issues
        built = tuple([a for a in assertions if a is not None])
        critical, threshold = overrides
        prompt = Prompt(
            id=pid,
            prompt=text,
            assertions=built,
            system=system,
            params=plan.params,  # a template's: one mapping for every row
            reference=reference,
            critical=plan.critical if critical is None else critical,
            threshold=plan.threshold if threshold is None else threshold,
            vars=variables,
            messages=messages or (),
            tools=plan.tools,
            tool_choice=plan.tool_choice,
        )
        if inherited is not None:
            self.inherited.append((prompt, inherited))
        return prompt, issues

    def literal(
        self, raw: dict[str, Any], place: Place, variables: Mapping[str, Any]
    ) -> tuple[Prompt | None, list[Issue]] | None:
        """A prompt of ``prompts:`` without a template or a conversation (the usual kind, of which a
        set may hold 100,000) checked and built in one pass, by the rules and messages of ``draft``
        (``prepare``, ``_unassessed``) without a ``Plan``; None for any other."""
        text, system, reference = raw.get("prompt"), raw.get("system"), raw.get("reference")
        if "messages" in raw or not isinstance(text, str) or has_template(text):
            return None
        if (isinstance(system, str) and has_template(system)) or ("system" not in raw and self.system_templated):
            return None
        if isinstance(reference, str) and has_template(reference):
            return None
        listed = raw.get("assertions")
        written = listed if isinstance(listed, list) else []
        issues: list[Issue] = []
        built = self._assertions(written, place, issues)
        if built is None:
            return None
        pid = raw.get("id")
        if listed in (None, []):
            issues.extend(_unassessed(place, place.flagged, raw, reference))
        if issues or len(built) != len(written) or not isinstance(pid, str):
            return None, issues
        params, critical, threshold = _extras(raw)
        tools, tool_choice = declared(raw)
        prompt = Prompt(
            id=pid,
            prompt=text,
            assertions=tuple(built),
            system=system,
            params=params,
            reference=reference,
            critical=critical,
            threshold=threshold,
            vars=variables,
            tools=tools,
            tool_choice=tool_choice,
        )
        return prompt, issues

    def _assertions(self, written: list[Any], place: Place, issues: list[Issue]) -> list[Assertion] | None:
        """The records of a literal prompt's assertions (those that could be built), or None when
        one holds a template. An assertion written as an earlier one was shares its record when
        the record is a function of the item alone (``prepare``: a checked value with no template,
        of a type that needs no location) and the schema reported nothing."""
        built = []
        records = self._records if place.clean else {}
        for k, item in enumerate(written):
            found = records.get(repr(item)) if type(item) is dict else None  # equal repr, equal plain value
            if found is None:
                form = assertion_form(item)
                if form is not None and templated(form[1]):
                    return None
                prepared = self.prepare(item, place, ("assertions", k), issues, form)
                found = prepared.fixed if prepared is not None else None
            if found is not None:
                built.append(found)
        return built

    def settle_system(self, prompts: list[Prompt]) -> str | None:
        """The set's system prompt once every prompt is built. A templated one that renders the
        same for every prompt inheriting it is the set's; otherwise each such prompt gets its own."""
        if not self.system_templated:
            return self.set_system
        rendered = {text for _, text in self.inherited}
        if len(rendered) <= 1:
            return rendered.pop() if rendered else self.set_system
        own = {id(prompt): text for prompt, text in self.inherited}
        prompts[:] = [replace(p, system=own[id(p)]) if id(p) in own else p for p in prompts]
        return None

    def _text(self, raw: Any, key: str, place: Place, variables: Mapping[str, Any], issues: list[Issue]) -> str | None:
        if not isinstance(raw, str):
            return None
        if not has_template(raw):
            return raw
        if place.flagged((key,)):
            return None
        try:
            return self.render.text(raw, variables)
        except TemplateProblem as exc:
            issues.append(place.issue((key,), self._described(exc, place, variables)))
            return None

    def _described(self, exc: TemplateProblem, place: Place, variables: Mapping[str, Any]) -> str:
        """The message of a rendering problem; an undefined variable with where to define it and
        the likeliest misspelt name (worked out once for rows with the same columns)."""
        if exc.missing is None:
            return exc.message
        key = (exc.missing, tuple(variables))
        close = self._suggested.get(key, _UNSET)
        if close is _UNSET:
            close = self._suggested[key] = suggest(exc.missing, [str(k) for k in variables])
        return exc.describe(place.hint(exc.missing) + (f"; did you mean '{close}'?" if close else ""))

    def _set_system(self, place: Place, variables: Mapping[str, Any], issues: list[Issue]) -> str | None:
        assert self.set_system is not None
        if self.system_issues:  # a syntax error: said once, at the set's system:
            return None
        try:
            return self.render.text(self.set_system, variables)
        except TemplateProblem as exc:
            issues.append(place.set_issue(("system",), self._described(exc, place, variables)))
            return None

    def _messages(
        self, turns: Any, place: Place, variables: Mapping[str, Any], issues: list[Issue]
    ) -> tuple[Message, ...] | None:
        if not _well_formed(turns) or place.flagged(("messages",)):
            return None
        built = []
        for k, turn in enumerate(turns):
            content = self._text(turn["content"], "content", place, variables, [])
            if content is None:  # rendering failed: say so at the turn
                try:
                    self.render.text(turn["content"], variables)
                except TemplateProblem as exc:
                    issues.append(place.issue(("messages", k, "content"), self._described(exc, place, variables)))
                continue
            built.append(Message(turn["role"], content))
        return tuple(built) if len(built) == len(turns) else None

    def turn_issues(self, turns: list[dict[str, Any]], fields: Mapping[str, Any], place: Place) -> list[Issue]:
        """What is wrong with a conversation's shape: where its system turn is, and its last turn."""
        issues = [
            place.issue(
                ("messages", k), "a system turn may only come first; move it to the start or make it a user turn"
            )
            for k, turn in enumerate(turns)
            if turn["role"] == "system" and k > 0
        ]
        if turns[0]["role"] == "system" and "system" in fields:
            message = "both system: and this system turn set the system prompt; keep one (remove system: or this turn)"
            issues.append(place.issue(("messages", 0), message))
        elif turns[0]["role"] == "system" and self.set_system:
            line = self.doc.position(("system",))[0]
            message = (
                f"the set's system: (line {line}) would be sent as well as this system turn; keep one: move the "
                "turn's text to system: here (it replaces the set's), or remove the set's system:"
            )
            issues.append(place.issue(("messages", 0), message))
        last = turns[-1]["role"]
        if last != "user":
            message = (
                f"the last turn is the {last}'s; end the conversation with a user turn (the one the model answers)"
            )
            issues.append(place.issue(("messages", len(turns) - 1), message))
        return issues

    def syntax_issues(self, fields: Mapping[str, Any], place: Place) -> list[Issue]:
        """Template syntax errors in a prompt's strings (or the template's: said once, not per row)."""
        issues = []
        turns = fields.get("messages")
        listed = fields.get("assertions")
        strings: list[tuple[DataPath, Any]] = [((key,), fields.get(key)) for key in ("prompt", "system", "reference")]
        strings += (
            [(("messages", k, "content"), t.get("content")) for k, t in enumerate(turns) if isinstance(t, dict)]
            if isinstance(turns, list)
            else []
        )
        for k, item in enumerate(listed if isinstance(listed, list) else []):
            form = assertion_form(item)
            if form is not None:
                strings.append((("assertions", k, *form[3]), form[1]))
        for path, value in strings:
            problem = self.render.syntax(value) if value is not None and not place.flagged(path) else None
            if problem is not None:
                issues.append(place.issue((*path, *problem.path), problem.message))
        return issues

    def spec(self, kind: str) -> AssertionType | None:
        if kind not in self._specs:
            self._specs[kind] = registry.get(kind)
        return self._specs[kind]

    def prepare(self, item: Any, place: Place, at: DataPath, issues: list[Issue], form: Any = _UNSET) -> _Item | None:
        """An assertion as written, checked now when its value holds no template; None when it
        cannot be used (the schema, the row check or an issue added here says why). ``form``:
        ``assertion_form(item)`` when the caller has it already."""
        form = assertion_form(item) if form is _UNSET else form
        if form is None or not isinstance(form[0], str):
            return None
        kind, raw, written_weight, where = form
        spec, weight = self.spec(kind), _number(written_weight)
        path = (*at, *where)
        if spec is None or weight is None or place.flagged(path):
            return None
        located = place.where(at) if spec.needs else None  # checked against the instances when the run is planned
        if templated(raw):
            return _Item(kind, raw, weight, path, spec, located, None)
        try:
            compiled = self._check(spec, kind, raw)
        except AssertionValueError as exc:
            issues.append(place.issue(path, _value_message(exc, kind, where, raw, raw)))
            return None
        record = Assertion(spec.name, raw, compiled, weight, located)
        if located is None and type(item) is dict and len(self._records) < MAX_SHARED:
            self._records.setdefault(repr(item), record)
        return _Item(kind, raw, weight, path, spec, located, record)

    def _rendered(
        self, item: _Item, place: Place, variables: Mapping[str, Any], issues: list[Issue]
    ) -> Assertion | None:
        try:
            value = self.render.value(item.raw, variables)
        except TemplateProblem as exc:
            issues.append(place.issue((*item.path, *exc.path), self._described(exc, place, variables)))
            return None
        try:
            compiled = self._check(item.spec, item.kind, value)
        except AssertionValueError as exc:
            where = item.path[2:]
            issues.append(place.issue(item.path, _value_message(exc, item.kind, where, value, item.raw)))
            return None
        return Assertion(item.spec.name, value, compiled, item.weight, item.where)

    def _check(self, spec: AssertionType, kind: str, value: Any) -> Any:
        """``spec.check(value)``, once per distinct value: equal values (strings, and mappings or
        lists written apart, one per prompt) are checked once for the whole set and share one
        checker, and a value without a template once however many rows use it."""
        key: Any = (kind, value) if isinstance(value, str) else (kind, repr(value))
        seen = self._checked.get(key)
        # the same repr and equal: shared (a value from the Python API may be any object, its repr anything)
        if seen is not None and (seen[0] is value or seen[0] == value):
            found = seen[1]
        else:
            try:
                found = spec.check(value, self.folder)
            except AssertionValueError as exc:
                found = exc
            if seen is None:
                self._checked[key] = (value, found)
        if isinstance(found, AssertionValueError):
            raise found
        return found


def _value_message(exc: AssertionValueError, kind: str, where: DataPath, value: Any, raw: Any) -> str:
    message = str(exc)
    if where == (kind,) and message.startswith(f"{kind}: "):  # the path ends with the type already
        message = message[len(kind) + 2 :]
    if value is not raw:
        message += f" (rendered from {raw!r})" if isinstance(raw, str) else " (as rendered)"
    return message
