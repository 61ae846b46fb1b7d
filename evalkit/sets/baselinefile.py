"""Read, check and write a set's baseline file, ``baselines/<set id>.json`` (README "Baselines kept in the repository").

The file is committed and reviewed like code, so its text is canonical: keys sorted, two-space
indent, a newline at the end, non-ASCII text kept readable, entries sorted by scope (provider,
model, reported model, grader). Accepting the same run twice writes the same bytes: an entry
replaced by the same run keeps its ``accepted_at``. Writes go through a temporary file in the
same folder and ``os.replace``, so a reader never sees half a file.

A baseline gates CI, so reading is strict and every problem is a SetError (exit 2) naming
``file:line:col``: JSON syntax first (``json.loads``, so the message speaks of JSON), then the
file is composed once more as YAML (JSON is YAML 1.2) only for node positions, then the JSON
Schema, then the cross-field checks a schema cannot express. The values checked and built are
JSON's: YAML refuses a few characters JSON carries raw in strings (DEL, C1 controls) and reads
others differently (NEL), so such a hand-edited file still loads, its issues located at line 1.
The writer escapes those characters, so every file evalkit writes reads back through both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalkit.errors import Issue, SetError
from evalkit.records import SET_ID, BaselineEntry, BaselineFile
from evalkit.sets.validation import schema_issues
from evalkit.sets.yamldoc import Document, parse_document

FORMAT = "evalkit-baseline/1"
RATE_TOLERANCE = 1e-9
RECREATE = "delete the file and re-create it with `evalkit baseline accept`"
FILE_HINT = f"fix it by hand, or {RECREATE}"
ENTRY_HINT = "remove this entry and accept its run again with `evalkit baseline accept`"
# Characters JSON may carry raw inside a string that YAML refuses or reads as a line break, and
# lone surrogates (which UTF-8 cannot encode): written as \\u escapes.
_ESCAPED = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
_SCOPE_KEYS = ("provider", "model", "reported_model", "grader")


def baseline_path(folder: Path, set_id: str) -> Path:
    """Where the baselines of ``set_id`` are kept in ``folder``."""
    return folder / f"{set_id}.json"


def load_baseline_file(path: Path) -> BaselineFile | None:
    """The baseline file at ``path``, checked; None when there is none. A malformed file is a
    SetError listing every issue found, with its line and column."""
    file = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        message = f"cannot read the baseline file ({exc.strerror}); check its path and permissions"
        raise SetError([Issue(file, 0, 0, "", message)]) from None
    doc = _parse(raw, file)
    issues = [_with_hint(issue, FILE_HINT) for issue in schema_issues("baseline", doc)]
    if not issues:  # the cross-field checks rely on the schema's types
        issues = _consistency_issues(doc, path)
    if issues:
        raise SetError(sorted(issues, key=lambda i: (i.line, i.col)))
    entries = (_entry(raw_entry) for raw_entry in doc.data["baselines"])
    return BaselineFile(path, doc.data["set"], tuple(sorted(entries, key=lambda e: e.scope)))


def baseline_text(set_id: str, entries: Sequence[BaselineEntry]) -> str:
    """The canonical text of the baseline file of ``set_id`` holding ``entries``."""
    ordered = sorted(entries, key=lambda e: e.scope)
    for first, second in itertools.pairwise(ordered):
        if first.scope == second.scope:
            raise ValueError(f"two baseline entries for one scope {first.scope!r}")
    document = {"format": FORMAT, "set": set_id, "baselines": [_entry_json(e) for e in ordered]}
    text = json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True, allow_nan=False)
    return _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def write_baseline(folder: Path, set_id: str, entry: BaselineEntry) -> Path:
    """Add ``entry`` to the baseline file of ``set_id`` in ``folder``, replacing the entry of its
    scope; a malformed existing file is a SetError and is left as it is."""
    if not SET_ID.fullmatch(set_id):
        raise ValueError(f"not a set id: {set_id!r}")
    path = baseline_path(folder, set_id)
    existing = load_baseline_file(path)
    kept = existing.entries if existing is not None else ()
    previous = next((e for e in kept if e.scope == entry.scope), None)
    if previous is not None and previous.run_id == entry.run_id:
        entry = dataclasses.replace(entry, accepted_at=previous.accepted_at)
    text = baseline_text(set_id, [*(e for e in kept if e.scope != entry.scope), entry])
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _replace_atomically(path, text.encode("utf-8"))
    except OSError as exc:
        message = f"cannot write the baseline file ({exc.strerror}); check the folder's permissions and free space"
        raise SetError([Issue(str(path), 0, 0, "", message)]) from None
    return path


def _parse(raw: bytes, file: str) -> Document:
    """The file's JSON data, with YAML's node graph for positions when YAML can read it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        col = len(before[before.rfind(b"\n") + 1 :].decode("utf-8", "replace")) + 1
        message = f"not UTF-8 text ({exc.reason}); save it as UTF-8, or {RECREATE}"
        raise SetError([Issue(file, before.count(b"\n") + 1, col, "", message)]) from None
    if text.startswith("\ufeff"):
        raise SetError(
            [Issue(file, 1, 1, "", f"starts with a byte order mark; save it as UTF-8 without one, or {RECREATE}")]
        )
    duplicates: list[str] = []
    try:
        data = json.loads(text, object_pairs_hook=lambda pairs: _mapping(pairs, duplicates))
    except json.JSONDecodeError as exc:
        raise SetError([Issue(file, exc.lineno, exc.colno, "", f"not valid JSON ({exc.msg}); {FILE_HINT}")]) from None
    except RecursionError:
        raise SetError([Issue(file, 1, 1, "", f"nested too deeply to be a baseline file; {RECREATE}")]) from None
    try:
        tree = parse_document(text, file).nodes
    except SetError as exc:
        if not duplicates:
            return Document(file, data, None)  # valid JSON that YAML refuses: no positions
        first = exc.issues[0] if exc.issues else Issue(file, 0, 0, "", "")
        line, col = (first.line, first.col) if "duplicate key" in first.message else (0, 0)
        message = f"duplicate key {duplicates[0]!r}; keep one of them"
        raise SetError([Issue(file, line, col, "", message)]) from None
    return Document(file, data, tree)


def _mapping(pairs: list[tuple[str, Any]], duplicates: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            duplicates.append(key)
        out[key] = value
    return out


def _with_hint(issue: Issue, hint: str) -> Issue:
    message = issue.message
    said = f"{message} {hint[0].upper()}{hint[1:]}" if message.endswith("?") else f"{message}; {hint}"
    return dataclasses.replace(issue, message=said)


def _consistency_issues(doc: Document, path: Path) -> list[Issue]:
    """What the schema cannot say: the file's name, one entry per scope, counts that agree."""
    data: dict[str, Any] = doc.data
    issues: list[Issue] = []
    set_id = data["set"]
    if path.name != f"{set_id}.json":
        message = (
            f"is '{set_id}' but the file is named '{path.name}'; a baseline file must be named <set>.json: "
            f"rename it to '{set_id}.json' or correct `set`"
        )
        issues.append(doc.issue(("set",), message))
    seen: dict[tuple[str, ...], int] = {}
    for index, entry in enumerate(data["baselines"]):
        scope = tuple(entry[key] for key in _SCOPE_KEYS)
        if scope in seen:
            line = doc.position(("baselines", seen[scope]))[0]
            shown = ", ".join(
                f"{key.replace('_', ' ')} '{value}'" for key, value in zip(_SCOPE_KEYS, scope, strict=True)
            )
            message = f"a second entry for {shown} (the first is at line {line}); keep one of them"
            issues.append(doc.issue(("baselines", index), message))
        else:
            seen[scope] = index
        issues.extend(_count_issues(doc, index, entry))
    return issues


def _count_issues(doc: Document, index: int, entry: dict[str, Any]) -> list[Issue]:
    """Counts, items and rate of one entry that disagree with each other."""
    at = ("baselines", index)
    prompts, passed, repeats = entry["prompt_count"], entry["passed_count"], entry.get("repeats", 1)
    samples = prompts * repeats
    items: dict[str, Any] = entry["items"]
    issues: list[Issue] = []
    if passed > samples:
        of = f"{samples} samples ({prompts} prompts x {repeats} repeats)" if repeats > 1 else f"{prompts} prompts"
        issues.append(doc.issue((*at, "passed_count"), f"{passed} passed is more than the {of}; {ENTRY_HINT}"))
    elif abs(passed - (counted := sum(_fraction(item) for item in items.values()) * repeats)) > 1e-6:
        message = f"is {passed} but its items' samples that passed add up to {counted:g}; {ENTRY_HINT}"
        issues.append(doc.issue((*at, "passed_count"), message))
    for prompt_id, item in items.items():
        if "pass_rate" in item and item["passed"] != (item["pass_rate"] == 1):
            message = f"passed is {str(item['passed']).lower()} but pass_rate is {item['pass_rate']!r}; {ENTRY_HINT}"
            issues.append(doc.issue((*at, "items", prompt_id, "passed"), message))
    if len(items) != prompts:
        message = f"lists {len(items)} prompts but prompt_count is {prompts}; {ENTRY_HINT}"
        issues.append(doc.issue((*at, "items"), message))
    # A rate that disagrees with counts already found wrong says nothing more.
    expected_rate = passed / samples if samples else 0.0
    if not issues and abs(entry["pass_rate"] - expected_rate) > RATE_TOLERANCE:
        message = f"is {entry['pass_rate']!r} but passed_count / {_denominator(repeats)} is {expected_rate!r}"
        issues.append(doc.issue((*at, "pass_rate"), f"{message}; {ENTRY_HINT}"))
    mean = math.fsum(item["score"] for item in items.values()) / len(items) if items else 0.0
    if not issues and abs(entry["mean_score"] - mean) > RATE_TOLERANCE:
        message = f"is {entry['mean_score']!r} but the mean of its items' scores is {mean!r}"
        issues.append(doc.issue((*at, "mean_score"), f"{message}; {ENTRY_HINT}"))
    return issues


def _fraction(item: dict[str, Any]) -> float:
    return float(item.get("pass_rate", 1.0 if item["passed"] else 0.0))


def _denominator(repeats: int) -> str:
    return "(prompt_count x repeats)" if repeats > 1 else "prompt_count"


def _entry(raw: dict[str, Any]) -> BaselineEntry:
    return BaselineEntry(
        provider=raw["provider"],
        model=raw["model"],
        reported_model=raw["reported_model"],
        grader=raw["grader"],
        run_id=raw["run_id"],
        accepted_at=raw["accepted_at"],
        evalkit_version=raw["evalkit_version"],
        set_fingerprint=raw["set_fingerprint"],
        prompt_count=int(raw["prompt_count"]),  # JSON's 14.0 is an integer to the schema
        passed_count=int(raw["passed_count"]),
        pass_rate=float(raw["pass_rate"]),
        mean_score=float(raw["mean_score"]),
        items={
            prompt_id: (float(item.get("pass_rate", 1.0 if item["passed"] else 0.0)), float(item["score"]))
            for prompt_id, item in raw["items"].items()
        },
        repeats=int(raw.get("repeats", 1)),
    )


def _entry_json(entry: BaselineEntry) -> dict[str, Any]:
    """An entry as written; numbers normalised so an int rate and a float rate write alike."""
    out: dict[str, Any] = {
        "provider": entry.provider,
        "model": entry.model,
        "reported_model": entry.reported_model,
        "grader": entry.grader,
        "run_id": entry.run_id,
        "accepted_at": entry.accepted_at,
        "evalkit_version": entry.evalkit_version,
        "set_fingerprint": entry.set_fingerprint,
        "prompt_count": int(entry.prompt_count),
        "passed_count": int(entry.passed_count),
        "pass_rate": float(entry.pass_rate),
        "mean_score": float(entry.mean_score),
        "items": {
            prompt_id: _item_json(rate, score, entry.repeats) for prompt_id, (rate, score) in entry.items.items()
        },
    }
    if entry.repeats > 1:
        out["repeats"] = int(entry.repeats)
    return out


def _item_json(rate: float, score: float, repeats: int) -> dict[str, Any]:
    """One prompt's outcome; with repeats, the fraction of its samples that passed as well."""
    out: dict[str, Any] = {"passed": rate == 1.0, "score": float(score)}
    if repeats > 1:
        out["pass_rate"] = float(rate)
    return out


def _replace_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in its folder and ``os.replace``."""
    # A new file gets the usual 0644 (mkstemp's 0600 would hide a file meant to be committed).
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
