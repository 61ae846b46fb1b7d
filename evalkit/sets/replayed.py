"""Prompts a replay instance has no recorded answer for: an input error at ``evalkit validate``
and before ``evalkit run`` calls anything (README "Configuration"), not an error per item."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evalkit.answers import read_answers
from evalkit.config import Config, ProviderConfig
from evalkit.errors import InputError, Issue, SetError
from evalkit.sets.yamldoc import load_document

SHOWN = 3  # the missing ids a message lists after the first


def replay_chain(config: Config, first: ProviderConfig) -> list[ProviderConfig] | None:
    """``first`` and its fallbacks when every one replays recorded answers, else None (an
    instance that calls a model would answer what no file holds)."""
    chain, seen = [first], {first.id}
    while chain[-1].fallback and chain[-1].fallback not in seen:
        try:
            nxt = config.provider(chain[-1].fallback)
        except InputError:
            return None  # an unknown fallback: the config's own check says so
        chain.append(nxt)
        seen.add(nxt.id)
    return chain if all(c.adapter == "replay" and c.path is not None for c in chain) else None


def unanswered(path: Path, set_id: str, prompt_ids: Sequence[str], chain: Sequence[ProviderConfig]) -> Issue | None:
    """The issue of a set whose prompts ``chain``'s answers files do not all answer, or None.
    Unreadable answers files are said where they are checked, not here."""
    try:
        files = [(c, read_answers(c.path)) for c in chain if c.path is not None]
    except InputError:
        return None
    missing = [pid for pid in prompt_ids if all(a.get(set_id, pid) is None for _, a in files)]
    if not missing:
        return None
    first, rest = missing[0], missing[1:]
    more = ""
    if rest:
        listed = ", ".join(f"'{pid}'" for pid in rest[:SHOWN]) + (", ..." if len(rest) > SHOWN else "")
        more = f" (and {len(rest)} more: {listed})"
    instance, answers_file = files[0][0].id, files[0][0].path
    shown = answers_file.name if answers_file is not None else "?"
    message = (
        f"no recorded answer for prompt '{first}'{more} in {shown} (replay instance '{instance}'); "
        f'add a line {{"id": "{first}", "response": "..."}} to it, or run another provider'
    )
    line, col = _position(path, first)
    return Issue(str(path), line, col, "", message)


def check_answered(sets: Sequence[tuple[Path, str, Sequence[str]]], chain: Sequence[ProviderConfig]) -> None:
    """SetError naming every set (path, id, prompt ids) with a prompt ``chain`` cannot answer."""
    issues = [i for path, set_id, ids in sets if (i := unanswered(path, set_id, ids, chain)) is not None]
    if issues:
        raise SetError(issues)


def _position(path: Path, prompt_id: str) -> tuple[int, int]:
    """Where ``prompt_id`` is written in its set file: its prompts: entry, else the template
    (a prompt made from a row of cases), else the top."""
    try:
        doc = load_document(path)
    except SetError:
        return 1, 1
    data = doc.data if isinstance(doc.data, dict) else {}
    prompts = data.get("prompts")
    for index, raw in enumerate(prompts if isinstance(prompts, list) else []):
        if isinstance(raw, dict) and raw.get("id") == prompt_id:
            return doc.position(("prompts", index))
    return doc.position(("template",)) if "template" in data else (1, 1)
