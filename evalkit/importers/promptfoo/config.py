"""A promptfoo config's prompts and providers.

Prompts: inline strings, ``{raw|id, label}`` mappings, a ``{path: label}`` mapping, and files
(``file://``, globs): ``.txt`` split on lines that are ``---``, ``.md``/``.j2`` whole, ``.json`` and
``.yaml`` chat prompts, ``.jsonl`` one prompt a line. Prompt functions (``.py``, ``.js``) and CSV
prompts are not converted.

Providers: ``openai:chat:<model>`` (and ``openai:<model>``), ``anthropic:messages:<model>`` (and
``anthropic:<model>``) and ``ollama:chat:<model>`` become evalkit.yaml entries for the ``openai``
and ``anthropic`` adapters, with ``apiBaseUrl``/``apiHost`` as ``base_url`` and ``apiKeyEnvar``
as ``api_key_env``. A key written in the config is never copied or printed. Providers that call
the user's application (``file://x.py``, ``exec:``, ``http``) are apps.py's; any provider's
``config.tools`` become the sets' ``tools:``.
"""

from __future__ import annotations

import glob
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.config import ANTHROPIC_DEFAULT_URL, OPENAI_DEFAULT_URL
from evalkit.importers.promptfoo.apps import application_entry, is_application, read_tools
from evalkit.importers.promptfoo.graded import instance_key
from evalkit.importers.promptfoo.report import ImportReport
from evalkit.importers.promptfoo.source import (
    JS_EXTENSIONS,
    Loc,
    expand,
    file_reference,
    read_text,
    read_yaml,
    refuse_deep_json,
    shown,
    split_function,
)

PARAMS = ("temperature", "max_tokens", "top_p", "seed", "stop")
_IGNORED_CONFIG = ("apiKey", "apiKeyEnvar", "apiBaseUrl", "apiHost", "organization", "tools")
OPENAI_URL = OPENAI_DEFAULT_URL
ANTHROPIC_URL = ANTHROPIC_DEFAULT_URL
OLLAMA_URL = "http://localhost:11434/v1"
_OPENAI_KINDS = ("chat", "completion", "responses", "assistant", "embedding", "embeddings", "image", "realtime",
                 "moderation", "transcription", "agents", "codex", "chatkit")  # fmt: skip


@dataclass(frozen=True, slots=True)
class PromptSpec:
    raw: str  # the prompt as promptfoo holds it (JSON text for a chat file)
    name: str  # a short name, for the set's id
    labels: tuple[str, ...]  # what a test's prompts: filter may name it by
    loc: Loc


def read_prompts(value: Any, loc: Loc, base: Path, report: ImportReport) -> list[PromptSpec]:
    if isinstance(value, str):
        entries: list[tuple[Any, Loc]] = [(value, loc)]
    elif isinstance(value, list):
        entries = [(v, loc.at(i)) for i, v in enumerate(value)]
    elif isinstance(value, Mapping) and value:
        entries = [({"raw": k, "label": v}, loc.at(k)) for k, v in value.items()]
    else:
        raise loc.error("prompts must be a string, a list of prompts or a mapping of paths to labels")
    specs: list[PromptSpec] = []
    for entry, where in entries:
        label = None
        if isinstance(entry, Mapping):
            raw = entry.get("raw") or entry.get("id")
            label = entry.get("label") if isinstance(entry.get("label"), str) else None
            if entry.get("config"):
                report.add("partly", where, "prompt config", "per-prompt provider settings are not converted")
            ident = entry.get("id") if isinstance(entry.get("id"), str) else None
        else:
            raw, ident = entry, None
        if not isinstance(raw, str) or not raw:
            raise where.error("a prompt needs its text (or raw:, or id: naming a file)")
        specs.extend(_prompt(raw, label, ident, where, base=base, count=len(specs), report=report))
    return specs


def _is_file(raw: str, base: Path) -> bool:
    if raw.startswith("file://"):
        return True
    if "\n" in raw or len(raw) > 1000:
        return False
    path = split_function(raw)[0]
    if "*" in path:  # a glob, as promptfoo's maybeFilePath reads one, when it names files
        return bool(glob.glob(str(base / path), recursive=True))
    return (base / path).is_file()


def _prompt(
    raw: str, label: str | None, ident: str | None, where: Loc, *, base: Path, count: int, report: ImportReport
) -> list[PromptSpec]:
    named = tuple(x for x in (label, ident) if x)
    if raw.startswith("exec:"):
        report.add("not_converted", where, "exec: prompt", "a prompt made by a program; write its output as a prompt")
        return []
    if not _is_file(raw, base):
        return [PromptSpec(raw, _slug(label) if label else f"prompt_{count + 1}", (*named, raw), where)]
    reference, function = split_function(file_reference(raw))
    specs: list[PromptSpec] = []
    for path in expand(base, reference, where):
        if path.suffix in (*JS_EXTENSIONS, ".py") or function:
            report.add("not_converted", where, "prompt function",
                       f"{path.name} makes prompts by code; write the prompts it makes as text or chat files")  # fmt: skip
            continue
        if path.suffix == ".csv":
            report.add("not_converted", where, "prompts from CSV", f"list the prompts of {path.name} under prompts:")
            continue
        texts = _file_prompts(path, where)
        stem = _slug(label) if label else _slug(path.stem)
        for k, text in enumerate(texts, start=1):
            name = stem if len(texts) == 1 else f"{stem}_{k}"
            labels = (*named, f"{label}: {reference}: {text}" if label else f"{reference}: {text}")
            specs.append(PromptSpec(text, name, labels, where))
    return specs


def _file_prompts(path: Path, where: Loc) -> list[str]:
    if path.suffix in (".yaml", ".yml"):
        return [json.dumps(read_yaml(path).data, ensure_ascii=False)]
    text = read_text(path, where)
    if path.suffix == ".txt":
        chunks: list[str] = []
        buffer: list[str] = []
        for line in re.split(r"\r?\n", text):
            if line.strip() == "---":
                chunks.append("\n".join(buffer).strip())
                buffer = []
            else:
                buffer.append(line)
        chunks.append("\n".join(buffer).strip())
        return [c for c in chunks if c]
    if path.suffix == ".jsonl":
        return [line for line in re.split(r"\r?\n", text) if line]
    if path.suffix == ".json":
        refuse_deep_json(text, Loc(shown(path), fixed_line=1))
    if path.suffix in (".json", ".md", ".j2"):
        return [text]
    raise where.error(f"unsupported prompt file {shown(path)} (promptfoo reads .txt, .md, .j2, .json, .jsonl, .yaml)")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40].strip("_") or "prompt"


def prompt_allowed(spec: PromptSpec, allowed: Any) -> bool:
    """promptfoo's isPromptAllowed for a test's (or defaultTest's) prompts: filter."""
    if not isinstance(allowed, list):
        return True
    for ref in allowed:
        if not isinstance(ref, str):
            continue
        for label in spec.labels:
            if label == ref or label.startswith(f"{ref}:") or (ref.endswith("*") and label.startswith(ref[:-1])):
                return True
    return False


@dataclass(frozen=True, slots=True)
class _Provider:
    ident: str
    options: Mapping[str, Any]
    loc: Loc


def read_providers(value: Any, loc: Loc, base: Path, out: Path, report: ImportReport) -> None:
    """The evalkit.yaml entries for the providers (into ``report.providers``), and the request
    parameters they share (``report.params``); an application provider's (apps.py) with the
    files it needs written (``report.files``) and its tools (``report.tools``)."""
    found = _provider_list(value, loc, base)
    params: list[dict[str, Any]] = []
    used: set[str] = set()
    for provider in found:
        if is_application(provider.ident):
            entry = application_entry(provider.ident, provider.options, provider.loc, base=base, out=out, report=report)
            _options(provider, report)
            label = provider.options.get("label")
            if entry is not None:
                entry["id"] = unique_id(_instance_id(label) if isinstance(label, str) and label else entry["id"], used)
                report.providers.append(entry)
            continue
        entry = _entry(provider, report)
        if entry is None:
            continue
        entry["id"] = unique_id(entry["id"], used)
        report.providers.append(entry)
        report.instances.setdefault(instance_key(provider.ident), entry["id"])  # a grading provider names it so
        params.append(
            {k: provider.options.get("config", {})[k] for k in PARAMS if k in provider.options.get("config", {})}
        )
    if params and all(p == params[0] for p in params):
        report.params = params[0]
    elif params:
        report.add("partly", loc, "provider parameters",
                   "the providers ask with different parameters; the sets carry none: add params: per set")  # fmt: skip


def _provider_list(value: Any, loc: Loc, base: Path) -> list[_Provider]:
    if value is None:
        return []
    if isinstance(value, str) and value.startswith("file://"):
        path = expand(base, file_reference(value), loc)[0]
        doc = read_yaml(path)
        return _provider_list(doc.data, Loc(shown(path), doc), path.parent)
    items = value if isinstance(value, list) else [value]
    out = []
    for index, item in enumerate(items):
        where = loc.at(index) if isinstance(value, list) else loc
        if isinstance(item, str) and item.startswith("file://") and item.endswith((".yaml", ".yml", ".json")):
            out.extend(_provider_list(item, where, base))  # a file of provider entries
        elif isinstance(item, str):
            out.append(_Provider(item, {}, where))
        elif isinstance(item, Mapping) and isinstance(item.get("id"), str):
            out.append(_Provider(item["id"], item, where))
        elif isinstance(item, Mapping) and len(item) == 1 and isinstance(next(iter(item.values())), Mapping | None):
            ident, options = next(iter(item.items()))
            out.append(_Provider(str(ident), options or {}, where))
        else:
            raise where.error("a provider is an id (openai:chat:gpt-4o-mini) or a mapping with id:")
    return out


def _entry(provider: _Provider, report: ImportReport) -> dict[str, Any] | None:
    parts = provider.ident.split(":")
    vendor = parts[0]
    config = provider.options.get("config") or {}
    if not isinstance(config, Mapping):
        config = {}
    if vendor == "openai" and len(parts) >= 2 and (parts[1] == "chat" or parts[1] not in _OPENAI_KINDS):
        model = ":".join(parts[2:] if parts[1] == "chat" else parts[1:])
        entry = {"adapter": "openai", "base_url": _base_url(config, OPENAI_URL), "model": model,
                 "api_key_env": config.get("apiKeyEnvar") or "OPENAI_API_KEY"}  # fmt: skip
    elif vendor == "anthropic" and len(parts) >= 2 and parts[1] not in ("completion",):
        model = ":".join(parts[2:] if parts[1] == "messages" else parts[1:])
        url = _base_url(config, ANTHROPIC_URL)  # the Anthropic SDK's base URL has no /v1; evalkit's has
        entry = {"adapter": "anthropic", "base_url": url if url.endswith("/v1") else f"{url}/v1", "model": model,
                 "api_key_env": config.get("apiKeyEnvar") or "ANTHROPIC_API_KEY"}  # fmt: skip
    elif vendor == "ollama" and len(parts) >= 3 and parts[1] == "chat":
        entry = {"adapter": "openai", "base_url": _base_url(config, OLLAMA_URL), "model": ":".join(parts[2:])}
    else:
        hint = ("the import converts OpenAI-compatible chat, Anthropic messages, python file:// providers, exec: and "
                "http providers; for another, write an evalkit.yaml entry (an http, python or command adapter "
                "calls your own code)")  # fmt: skip
        report.add("not_converted", provider.loc, f"provider {provider.ident}", hint)
        return None
    if not entry["model"]:
        raise provider.loc.error(f"provider {provider.ident!r} names no model")
    label = provider.options.get("label")
    entry = {"id": _instance_id(label if isinstance(label, str) and label else entry["model"]), **entry}
    userinfo = _userinfo_key(config)
    if userinfo is not None:
        report.add("partly", provider.loc, f"provider {provider.ident} {userinfo}",
                   "its user:password@ is not copied (evalkit sends no credentials in a URL); export the key as "
                   f"{entry.get('api_key_env', 'a variable')}")  # fmt: skip
    if "apiKey" in config:
        report.add("partly", provider.loc, f"provider {provider.ident} apiKey",
                   f"the key written in the config is not copied; export it as {entry.get('api_key_env', 'a variable')}")  # fmt: skip
    read_tools(config, provider.loc, report)
    rest = sorted(set(config) - set(PARAMS) - set(_IGNORED_CONFIG))
    if rest:
        report.add("partly", provider.loc, f"provider {provider.ident} config", f"not converted: {', '.join(rest)}")
    _options(provider, report)
    return entry


def _options(provider: _Provider, report: ImportReport) -> None:
    """The provider options evalkit has no place for."""
    for key, hint in (("transform", "evalkit grades the raw response"), ("prompts", "run each set with --provider"),
                      ("env", "set the environment variables yourself")):  # fmt: skip
        if key in provider.options:
            report.add("partly", provider.loc, f"provider {provider.ident} {key}", hint)


def _base_url(config: Mapping[str, Any], default: str) -> str:
    if isinstance(config.get("apiBaseUrl"), str):
        return without_userinfo(str(config["apiBaseUrl"])).rstrip("/")
    if isinstance(config.get("apiHost"), str):
        return without_userinfo(f"https://{config['apiHost']}/v1")
    return default


def without_userinfo(url: str) -> str:
    """``url`` without a user:password@, which evalkit refuses in a base_url (README "HTTP") and
    the import never prints or writes."""
    scheme, sep, rest = url.partition("://")
    authority, slash, tail = rest.partition("/")
    return f"{scheme}{sep}{authority.rpartition('@')[2]}{slash}{tail}" if sep else url


def _userinfo_key(config: Mapping[str, Any]) -> str | None:
    """The config key whose URL carries a user:password@ (never shown itself)."""
    for key, scheme in (("apiBaseUrl", ""), ("apiHost", "https://")):
        value = config.get(key)
        if isinstance(value, str) and without_userinfo(scheme + value) != scheme + value:
            return key
    return None


def _instance_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:100] or "provider"


def unique_id(ident: str, used: set[str]) -> str:
    """``ident``, or ``ident-2``, ``ident-3``... the first not in ``used`` (which then holds it)."""
    candidate, n = ident, 2
    while candidate in used:
        candidate, n = f"{ident}-{n}", n + 1
    used.add(candidate)
    return candidate
