"""``evalkit validate``: every issue in every set and config file, not only the first.

A set's cases file is checked with the set (every row rendered through the template); a cases
file named or found on its own (a CSV, a JSON Lines file of rows with ids, a YAML list) is
checked as far as it can be without one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.answers import read_answers
from evalkit.assertions.judged import judged_value
from evalkit.config import ANTHROPIC_DEFAULT_URL, CONFIG_NAME, OPENAI_DEFAULT_URL, Config, choose_provider, find_config
from evalkit.errors import InputError, Issue, SetError
from evalkit.proxies import environment_proxy
from evalkit.records import Prompt
from evalkit.sets.appcheck import header_env_issues
from evalkit.sets.baselinefile import load_baseline_file
from evalkit.sets.cases import grouped, read_cases
from evalkit.sets.configfile import build_config, config_issues
from evalkit.sets.corpus import load_corpus
from evalkit.sets.discovery import check_document, holds_rows, set_kind, yaml_files
from evalkit.sets.prompts import Prepared
from evalkit.sets.replayed import replay_chain, unanswered
from evalkit.sets.yamldoc import Document, load_document


@dataclass(slots=True)
class ValidationReport:
    files: int = 0
    sets: int = 0
    issues: list[Issue] = field(default_factory=list)


@dataclass(slots=True)
class _Walk:
    """What one validation learns across files: the set ids seen, the cases files checked on their
    own and those a set names, and the valid prompt sets a replay must answer."""

    configs: set[Path]
    seen_ids: dict[str, Path] = field(default_factory=dict)
    alone: dict[Path, list[Issue]] = field(default_factory=dict)  # cases files on their own, by resolved path
    referenced: set[Path] = field(default_factory=set)  # cases files a set names (checked with its template)
    answerable: list[tuple[Path, str, list[str]]] = field(default_factory=list)
    judged: list[tuple[Path, tuple[Prompt, ...]]] = field(default_factory=list)  # sets with model-graded assertions


def validate_paths(paths: Sequence[Path], config: str | None = None) -> ValidationReport:
    """Check files and folders (default: the config file, its set folders and its baseline files)."""
    report = ValidationReport()
    targets, configs = _targets(paths, config, report)
    walk = _Walk(configs)
    for file in dict.fromkeys(_files(targets, walk.configs, report)):
        report.files += 1
        _check_file(file, walk, report)
    for path, issues in walk.alone.items():
        if path not in walk.referenced:  # else its set's check has said all of it, with the rendering
            report.issues.extend(issues)
    report.files += len({p for p in walk.referenced if p.is_file()} - set(walk.alone))
    unanswered = _unanswered(walk.answerable, find_config(config)) if walk.answerable else []
    report.issues.extend(unanswered)
    report.sets -= len(unanswered)
    for issues in _judged_issues(walk.judged, find_config(config)):
        report.issues.extend(issues)
        report.sets -= 1
    return report


def _judged_issues(sets: list[tuple[Path, tuple[Prompt, ...]]], config_path: Path | None) -> list[list[Issue]]:
    """Per set with model-graded assertions that ``run`` would refuse, its issues (README
    "Model-graded assertions"): checked against the project's config, or none when there is none."""
    if not sets:
        return []
    from evalkit.sets.judged import problems

    loaded = _configured(config_path) if config_path is not None else Config()
    if loaded is None:  # a config with issues of its own: said separately
        return []
    found = [[Issue(at, 0, 0, "", said) for at, said in problems(prompts, loaded, str(path))] for path, prompts in sets]
    return [issues for issues in found if issues]


def _targets(paths: Sequence[Path], config: str | None, report: ValidationReport) -> tuple[list[Path], set[Path]]:
    """What to check and which of it are config files: the named paths (with a named config), else
    the project's config, its set folders and its baseline files."""
    targets, configs = list(paths), {p for p in paths if p.name == CONFIG_NAME}
    if targets and config is not None:  # a named config is checked with the named paths
        named = find_config(config)
        if named is not None:
            targets.append(named)
            configs.add(named)
    if targets:
        return targets, configs
    config_path = find_config(config)
    set_dirs, baselines = [Path("sets")], Path("baselines")
    if config_path is not None:
        targets.append(config_path)
        configs.add(config_path)
        loaded = _configured(config_path)
        set_dirs = list(loaded.set_dirs) if loaded else [config_path.parent / "sets"]
        baselines = loaded.baselines_dir if loaded else config_path.parent / "baselines"
    targets += [d for d in set_dirs if d.is_dir()]
    targets += sorted(baselines.glob("*.json")) if baselines.is_dir() else []
    if not targets:
        report.issues.append(Issue(".", 0, 0, "", "nothing to validate: no evalkit.yaml and no sets/ folder here"))
    return targets, configs


def _files(targets: list[Path], configs: set[Path], report: ValidationReport) -> list[Path]:
    """The files the targets name: a folder's YAML, baseline and config files; a missing target is an issue."""
    files: list[Path] = []
    for target in targets:
        if target.is_dir():
            files.extend(yaml_files(target))
            files.extend(_baseline_files_in(target))
            if (target / CONFIG_NAME).is_file():
                files.append(target / CONFIG_NAME)
                configs.add(target / CONFIG_NAME)
        elif target.is_file():
            files.append(target)
        else:
            report.issues.append(Issue(str(target), 0, 0, "", "no such file or folder"))
    return files


def _check_file(file: Path, walk: _Walk, report: ValidationReport) -> None:
    """One file, checked as what it holds: cases, a baseline, a corpus or answers, a config, a set."""
    if file.suffix.lower() == ".csv" or (file.suffix == ".jsonl" and _holds_cases(file)):
        walk.alone[file.resolve()] = _cases_issues(file)
    elif file.suffix == ".json":  # a baseline file (README "Baselines kept in the repository")
        report.issues.extend(_baseline_issues(file))
    elif file.suffix == ".jsonl":  # a corpus or a replay answers file named on its own
        report.issues.extend(_jsonl_issues(file))
    else:
        try:
            doc = load_document(file)
        except SetError as exc:
            report.issues.extend(exc.issues)
            return
        _check_yaml(doc, file, walk, report)


def _check_yaml(doc: Document, file: Path, walk: _Walk, report: ValidationReport) -> None:
    """A loaded YAML file: a config, a YAML cases file or a set."""
    if file in walk.configs:
        issues = config_issues(doc)
        report.issues.extend(issues or _config_file_issues(doc, file))
    elif holds_rows(doc):  # a YAML cases file (README "Templates, variables, data files and conversations")
        walk.alone[file.resolve()] = _cases_issues(file, doc)
    else:
        _check_set(doc, file, walk, report)


def _check_set(doc: Document, file: Path, walk: _Walk, report: ValidationReport) -> None:
    """A set: its own issues and its corpus's, its id unique across the files, and (when valid) the
    prompts a replay must answer."""
    cases = doc.data.get("cases") if isinstance(doc.data, dict) else None
    if isinstance(cases, str) and cases.strip():
        walk.referenced.add((file.parent / cases).resolve())
    issues, prepared = check_document(doc)
    issues += _corpus_issues(doc, file) if not issues else []
    report.issues.extend(issues)
    set_id = doc.data.get("id") if isinstance(doc.data, dict) else None
    if not isinstance(set_id, str):
        return
    if set_id in walk.seen_ids:
        line, col = doc.position(("id",))
        report.issues.append(
            Issue(str(file), line, col, "id", f"duplicate set id '{set_id}': also in {walk.seen_ids[set_id]}")
        )
        return
    walk.seen_ids[set_id] = file
    report.sets += 0 if issues else 1
    if not issues and isinstance(prepared, Prepared):
        walk.answerable.append((file, set_id, [p.id for p in prepared.prompts]))
        if any(judged_value(a) is not None for p in prepared.prompts for a in p.assertions):
            walk.judged.append((file, prepared.prompts))


def _baseline_issues(file: Path) -> list[Issue]:
    try:
        load_baseline_file(file)
    except SetError as exc:
        return exc.issues
    return []


def _jsonl_issues(file: Path) -> list[Issue]:
    """A corpus, or a replay answers file, read as a run would read it."""
    if _holds_answers(file):
        return _answers_issues(file)
    try:
        load_corpus(file)
    except SetError as exc:
        return exc.issues
    except InputError as exc:  # unreadable as a whole
        return [Issue(str(file), 0, 0, "", str(exc))]
    return []


def _unanswered(sets: list[tuple[Path, str, list[str]]], config_path: Path | None) -> list[Issue]:
    """The sets whose prompts the project's replay instance (the one ``run`` uses without
    --provider) has no recorded answer for: ``run`` would refuse them before any call."""
    loaded = _configured(config_path) if config_path is not None else None
    if loaded is None:
        return []
    try:
        chain = replay_chain(loaded, choose_provider(loaded, None, None))
    except InputError:  # no default instance: run needs --provider, and checks it then
        return []
    if chain is None:
        return []
    return [i for path, set_id, ids in sets if (i := unanswered(path, set_id, ids, chain)) is not None]


def _cases_issues(file: Path, doc: Document | None = None) -> list[Issue]:
    """A cases file on its own: as far as it can be checked without the template (every row
    readable, ids present and unique, what a row adds of the right type)."""
    try:
        return grouped(read_cases(file, str(file), doc).issues)
    except SetError as exc:
        return exc.issues


def _holds_cases(file: Path) -> bool:
    """Whether a JSON Lines file holds cases (rows with an id) rather than documents or answers."""
    record = _first_record(file)
    return isinstance(record, dict) and "id" in record and "text" not in record and "response" not in record


def _baseline_files_in(folder: Path) -> list[Path]:
    """The baseline files of a folder named to validate: every ``.json`` directly in it when it is
    a baselines folder (named so, or holding one), else none (a set folder may keep other JSON)."""
    found = sorted(p for p in folder.glob("*.json") if p.is_file())
    if folder.name == "baselines" or any(_is_baseline_file(p) for p in found):
        return found
    return []


def _is_baseline_file(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return b'"evalkit-baseline/' in handle.read(4096)
    except OSError:
        return False


def _holds_answers(file: Path) -> bool:
    """Whether a JSON Lines file holds replay answers (``response``) rather than documents."""
    record = _first_record(file)
    return isinstance(record, dict) and "response" in record and "text" not in record


def _first_record(file: Path) -> object:
    """The first line of a JSON Lines file, decoded; None when it cannot be (the reader says why)."""
    try:
        with file.open(encoding="utf-8", errors="replace") as handle:
            first = next((line for line in handle if line.strip()), "")
        return json.loads(first)
    except (OSError, ValueError, RecursionError):
        return None


def _corpus_issues(doc: Document, file: Path) -> list[Issue]:
    """A question set's corpus is loaded and checked too (duplicate ids, malformed lines)."""
    if set_kind(doc) != "questions" or not isinstance(doc.data.get("corpus"), str):
        return []
    try:
        load_corpus(file.parent / doc.data["corpus"], str(file), doc.position(("corpus",))[0])
    except SetError as exc:
        return exc.issues
    return []


def _config_file_issues(doc: Document, file: Path) -> list[Issue]:
    """The files a provider reads (replay answers, a local model) must exist; only validate checks
    this for every instance: a command fails on the ones it uses."""
    issues = []
    for index, provider in enumerate((doc.data or {}).get("providers") or []):
        if not isinstance(provider, dict) or provider.get("adapter") not in _built_in_adapters():
            continue  # a plugin adapter's keys are its own (README "Plugins"): path: may mean anything there
        for key, what in (("path", "replay answers file"), ("model_path", "model file")):
            written = provider.get(key)
            if isinstance(written, str) and not (file.parent / written).is_file():
                issues.append(
                    doc.issue(("providers", index, key), f"{what} {written!r} not found (relative to {file.name})")
                )
            elif isinstance(written, str) and key == "path" and provider.get("adapter") == "replay":
                issues += _answers_issues(file.parent / written)
    return issues + _proxy_issues(doc) + header_env_issues(doc)


def _proxy_issues(doc: Document) -> list[Issue]:
    """The environment's proxy for each endpoint evalkit calls must be one httpx can use, as a run
    checks it before any call (a provider's own ``proxy:`` wins over it)."""
    data = doc.data if isinstance(doc.data, dict) else {}
    endpoints: list[tuple[tuple[str | int, ...], object]] = []
    for index, provider in enumerate(data.get("providers") or []):
        if isinstance(provider, dict) and provider.get("adapter") in _DEFAULT_URLS and provider.get("proxy") is None:
            url = provider.get("base_url") or _DEFAULT_URLS[provider["adapter"]]
            endpoints.append((("providers", index, "base_url" if "base_url" in provider else "adapter"), url))
        elif isinstance(provider, dict) and provider.get("adapter") == "http" and provider.get("proxy") is None:
            endpoints.append((("providers", index, "url"), provider.get("url")))
    for index, retriever in enumerate(data.get("retrievers") or []):
        if isinstance(retriever, dict) and retriever.get("kind") == "http":
            endpoints.append((("retrievers", index, "url"), retriever.get("url")))
    issues = []
    for path, url in endpoints:
        try:
            environment_proxy(url) if isinstance(url, str) else None
        except InputError as exc:
            issues.append(doc.issue(path, str(exc)))
    return issues


_DEFAULT_URLS = {"openai": OPENAI_DEFAULT_URL, "anthropic": ANTHROPIC_DEFAULT_URL}


def _built_in_adapters() -> list[str]:
    """The adapters evalkit has itself: the config schema's enum (tested equal to the registry)."""
    from evalkit.sets.validation import load_schema

    adapters: list[str] = load_schema("config")["$defs"]["provider"]["properties"]["adapter"]["enum"]
    return adapters


def _answers_issues(path: Path) -> list[Issue]:
    """A replay answers file the config names is read as the replay adapter would read it."""
    try:
        read_answers(path)
    except SetError as exc:
        return exc.issues
    except InputError as exc:  # unreadable as a whole
        return [Issue(str(path), 0, 0, "", str(exc))]
    return []


def _configured(config_path: Path) -> Config | None:
    """The config when it loads cleanly (its own issues are reported separately)."""
    try:
        doc = load_document(config_path)
    except SetError:
        return None
    if config_issues(doc):
        return None
    return build_config(doc, config_path)
