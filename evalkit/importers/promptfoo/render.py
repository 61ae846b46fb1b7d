"""promptfoo's rendering of a prompt for one test: vars, then the prompt, then the messages.

As promptfoo's renderPrompt and its providers do it:

1. ``file://`` vars are read (text trimmed; YAML as compact JSON); one trailing newline is cut
   from every string var; ``{{ name }}`` placeholders inside vars are filled from other vars
   (resolveVariables: first placeholder per var, up to five rounds).
2. A prompt that parses as JSON is a structure whose every string is rendered with the vars; the
   provider then reads a list of ``{role, content}`` as the conversation.
3. Any other prompt is rendered as one template, with each string var rendered first (unless it
   names a variable that is not defined); a template with an unclosed tag is sent as written.
   The provider reads a result starting ``- role:`` as a YAML conversation, else one user message.

Nunjucks is rendered with Jinja2 where the two agree (``evalkit.sets.nunjucks``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.importers.promptfoo.source import (
    JS_EXTENSIONS,
    Loc,
    OutsideFolder,
    file_reference,
    inside,
    parse_yaml_text,
)
from evalkit.sets.nunjucks import TemplateMismatch, dump, js_string, render

_PARTIAL = re.compile(r"(\{%[^%]*$|\{\{[^}]*$|\{#[^#]*$)", re.M)
_RAW_OPEN = re.compile(r"\{%\s*raw\s*%\}")
_RAW_CLOSE = re.compile(r"\{%\s*endraw\s*%\}")
_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_VARIABLES = re.compile(r"\{\{[\s]*([^{}\s|]+)[\s]*(?:\|[^}]+)?\}\}|\{%[\s]*(?:if|for)[\s]+([^{}\s]+)[\s]*.*?%\}")
_FOR = re.compile(r"\{%[\s]*for[\s]+(\w+)[\s]+in[\s]+(\w+)[\s]*%\}")
_COMMENT = re.compile(r"\{#[\s\S]*?#\}")
_ROOT = re.compile(r"^([A-Za-z_]\w*)")
ROLES = ("system", "user", "assistant")


class RenderProblem(Exception):
    """This prompt cannot be rendered for this test as promptfoo would; the message says why,
    ``var`` names the var whose own template is the cause."""

    def __init__(self, message: str, var: str | None = None) -> None:
        super().__init__(message)
        self.var = var


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    messages: tuple[Message, ...]
    undefined: tuple[str, ...]  # variables the templates read that no var defines


def prepare_vars(variables: Mapping[str, Any], base: Path, where: Loc) -> dict[str, Any]:
    """Step 1: the vars a test's prompt and assertions see; a file outside the folders the import
    may read stops it (SetError at the var)."""
    out: dict[str, Any] = {}
    for name, value in variables.items():
        if isinstance(value, str) and value.startswith("file://"):
            try:
                value = _load_var(name, value, base)
            except OutsideFolder as exc:
                raise where.at("vars", name).error(str(exc)) from None
        out[name] = value
    for name, value in out.items():
        if isinstance(value, str) and value.endswith("\n"):
            out[name] = value[:-1]
    return resolve_variables(out)


def _load_var(name: str, value: str, base: Path) -> str:
    path = inside(base / file_reference(value), value)
    suffix = path.suffix.lower()
    if suffix in JS_EXTENSIONS or suffix in (".py", ".pdf"):
        raise RenderProblem(f"var {name!r} is computed from {value}; evalkit vars are written out")
    if suffix in (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".mp3", ".wav", ".mp4", ".webm"):
        raise RenderProblem(f"var {name!r} is a media file ({value}); evalkit prompts are text")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise RenderProblem(f"var {name!r}: cannot read {value} as UTF-8 text") from None
    if suffix in (".yaml", ".yml"):
        return dump(parse_yaml_text(text, Loc(str(path))))
    return text.strip()


def resolve_variables(variables: dict[str, Any]) -> dict[str, Any]:
    """promptfoo's resolveVariables: ``{{ name }}`` inside a var replaced by var ``name``."""
    for _ in range(5):
        changed = False
        for key, value in variables.items():
            if not isinstance(value, str):
                continue
            found = _PLACEHOLDER.search(value)
            if found is None or found.group(1) not in variables:
                continue
            replacement = variables[found.group(1)]
            text = "null" if replacement is None else js_string(replacement)
            variables[key] = value[: found.start()] + _substitution(text, value, found) + value[found.end() :]
            changed = True
        if not changed:
            break
    return variables


def _substitution(text: str, subject: str, found: re.Match[str]) -> str:
    """JavaScript's String.replace reading ``$$``, ``$&``, ``$``` and ``$'`` in the replacement."""
    specials = {"$": "$", "&": found.group(), "`": subject[: found.start()], "'": subject[found.end() :]}
    return re.sub(r"\$([$&`'])", lambda m: specials[m.group(1)], text)


def render_prompt(raw: str, variables: Mapping[str, Any]) -> RenderedPrompt:
    """Steps 2 and 3 for one prompt (prefix and suffix already added to ``raw``)."""
    undefined: set[str] = set()
    parsed = _json(raw)
    if parsed is not _NOT_JSON:
        try:
            structure = _render_structure(parsed, variables, undefined)
        except RecursionError:
            raise RenderProblem(_TOO_DEEP) from None
        return RenderedPrompt(_messages(structure), tuple(sorted(undefined)))
    rendered_vars = dict(variables)
    for name, value in variables.items():
        if isinstance(value, str) and not references_undefined(value, variables):
            try:
                rendered_vars[name] = _template(value, variables, undefined, partial_raw=True)
            except RenderProblem as problem:
                raise RenderProblem(str(problem), var=name) from None
    text = _template(raw, rendered_vars, undefined, partial_raw=True)
    return RenderedPrompt(_chat(text), tuple(sorted(undefined)))


_NOT_JSON = object()
_TOO_DEEP = "the prompt is JSON nested too deeply to read; flatten it"


def _json(text: str) -> Any:
    """``text`` as JSON, or _NOT_JSON."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError):
        return _NOT_JSON
    except RecursionError:
        raise RenderProblem(_TOO_DEEP) from None


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _template(text: str, variables: Mapping[str, Any], undefined: set[str], partial_raw: bool = False) -> str:
    """``text`` rendered; with ``partial_raw``, a template with an unclosed tag is kept as written,
    as promptfoo's autoWrapRawIfPartialNunjucks does for prompts and vars."""
    if partial_raw and _PARTIAL.search(text) and not (_RAW_OPEN.search(text) and _RAW_CLOSE.search(text)):
        return text
    try:
        result = render(text, variables)
    except TemplateMismatch as exc:
        raise RenderProblem(f"its template: {exc}") from None
    undefined.update(result.undefined)
    return result.text


def references_undefined(template: str, variables: Mapping[str, Any]) -> bool:
    """promptfoo's referencesUndefinedVariables (over extractVariablesFromTemplate)."""
    template = _COMMENT.sub("", template)
    names = {m.group(1) or m.group(2) for m in _VARIABLES.finditer(template)}
    for loop in _FOR.finditer(template):
        names.discard(loop.group(1))
        names.add(loop.group(2))
    for name in names:
        root = _ROOT.match(name)
        if root and root.group(1) != "env" and root.group(1) not in variables:
            return True
    return False


def _render_structure(value: Any, variables: Mapping[str, Any], undefined: set[str]) -> Any:
    if isinstance(value, str):
        return _template(value, variables, undefined)
    if isinstance(value, list):
        return [_render_structure(v, variables, undefined) for v in value]
    if isinstance(value, dict):
        return {k: _render_structure(v, variables, undefined) for k, v in value.items()}
    return value


def _chat(text: str) -> tuple[Message, ...]:
    """The provider's reading of a rendered text prompt (parseChatPrompt)."""
    trimmed = text.strip()
    if trimmed.startswith("- role:"):
        try:
            return _messages(parse_yaml_text(text, Loc("prompt")))
        except Exception as exc:  # a SetError: the YAML of the rendered prompt
            raise RenderProblem(f"the rendered prompt is not a YAML conversation: {exc}") from None
    parsed = _json(text)
    if parsed is _NOT_JSON:
        if _looks_like_json(trimmed):
            raise RenderProblem("the rendered prompt looks like JSON but is not valid JSON")
        return (Message("user", text),)
    return _messages(parsed)


def _looks_like_json(trimmed: str) -> bool:
    if trimmed.startswith("{") and trimmed.endswith("}"):
        return True
    if trimmed.startswith("[") and trimmed.endswith("]"):
        after = trimmed[1:].lstrip()
        return not after or bool(re.match(r'["{\[\d-]|true|false|null', after))
    return False


def _messages(value: Any) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise RenderProblem("the prompt is JSON but not a list of {role, content} messages")
    messages = []
    for item in value:
        if not isinstance(item, Mapping) or not isinstance(item.get("role"), str):
            raise RenderProblem("a chat message needs role: and content:")
        role, content = item["role"], item.get("content")
        if role not in ROLES:
            raise RenderProblem(f"the chat role {role!r} is not converted (system, user and assistant are)")
        if not isinstance(content, str):
            raise RenderProblem("a message whose content is not text (images, tool calls) is not converted")
        extra = set(item) - {"role", "content"}
        if extra:
            raise RenderProblem(f"message keys {', '.join(sorted(extra))} are not converted")
        messages.append(Message(role, content))
    return tuple(messages)
