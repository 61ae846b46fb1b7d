"""Accepted baselines kept in the repository (README "Baselines kept in the repository"): accept stored runs, list the files.

A CI runner starts with an empty database, so the baseline a pull request is gated on is a
text file committed next to the sets: ``baselines/<set id>.json``, one entry per scope (provider
instance, alias, reported model, grader). Accepting writes the run's aggregates and per-prompt
outcomes (ids only, never text) into its scope's entry and marks the run accepted in the
database, which makes it a baseline there too even when it regressed (no ratchet otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalkit._version import __version__
from evalkit.compare import not_comparable_reason, per_item
from evalkit.config import Config, db_path
from evalkit.errors import InputError
from evalkit.records import SET_ID, BaselineEntry, BaselineFile, RunResult


@dataclass(frozen=True, slots=True)
class Accepted:
    """One run written into a baseline file."""

    run: RunResult
    path: Path

    def as_dict(self) -> dict[str, Any]:
        gen = self.run.generator
        return {
            "run_id": self.run.run_id,
            "set": self.run.set_id,
            "provider": gen.provider if gen else self.run.provider,
            "model": gen.model if gen else self.run.model,
            "reported_model": gen.reported_model if gen else None,
            "grader": self.run.grader,
            "pass_rate": self.run.pass_rate,
            "mean_score": self.run.mean_score,
            "file": str(self.path),
        }


def baselines_folder(config: Config, folder: str | Path | None = None) -> Path:
    return Path(folder) if folder else config.baselines_dir


@dataclass(frozen=True, slots=True)
class Acceptance:
    """What ``accept_runs`` wrote, and (by default) the scopes whose latest run it passed over."""

    accepted: tuple[Accepted, ...]
    skipped: tuple[str, ...] = ()  # why, one sentence per scope


def accept_runs(
    config: Config, run_ids: list[str], *, db: str | Path | None = None, folder: str | Path | None = None
) -> Acceptance:
    """Write each run into its set's baseline file and mark it accepted. Named runs are checked
    before any file is written: one that cannot be a baseline is an InputError (exit 2) and
    nothing changes. By default the latest run of every scope is taken, and a scope whose latest
    run cannot be a baseline is passed over (and said), never replaced by an older run."""
    from evalkit.sets.baselinefile import baseline_path, load_baseline_file, write_baseline
    from evalkit.store import Store, latest_per_scope, load_run, mark_accepted, resolve_run_id

    path = db_path(config, db)
    if not path.exists():
        raise InputError(f"{path}: no database yet, so no run to accept; run the sets first (evalkit run)")
    target = baselines_folder(config, folder)
    with Store.open(path) as store:
        ids = [resolve_run_id(store, r) for r in run_ids] if run_ids else latest_per_scope(store)
        if not ids:
            raise InputError(f"{path}: no prompt run is stored; run the sets first (evalkit run)")
        runs, skipped = [], []
        for run, meta in (load_run(store, run_id) for run_id in dict.fromkeys(ids)):
            try:
                runs.append(_acceptable(run, meta))
            except InputError as exc:
                if run_ids:
                    raise
                skipped.append(str(exc).split("; accept another run")[0])
        if not runs:
            raise InputError("no run to accept: " + "; ".join(skipped))
        _one_per_scope(runs)
        for set_id in {run.set_id for run in runs}:  # a malformed file is refused before any is written
            load_baseline_file(baseline_path(target, set_id))
        now = datetime.now(UTC).isoformat(timespec="seconds")
        accepted = [Accepted(run, write_baseline(target, run.set_id, entry_of(run, now))) for run in runs]
        mark_accepted(store, [a.run.run_id for a in accepted])
    return Acceptance(tuple(accepted), tuple(skipped))


def _acceptable(run: RunResult, meta: dict[str, Any]) -> RunResult:
    if meta.get("kind") != "prompts":
        raise InputError(f"run {run.run_id} is a retrieval run; baselines are kept for prompt runs")
    if run.shard is not None and run.shard.is_part:  # README "Larger suites: shards and batches"
        raise InputError(
            f"run {run.run_id} ({run.set_id}) is shard {run.shard.index}/{run.shard.count} of run group "
            f"{run.shard.group}, not a whole run; accept the run evalkit gate assembled from the group"
        )
    reason = not_comparable_reason(run)
    if reason is not None:
        raise InputError(f"run {run.run_id} ({run.set_id}) cannot be a baseline: {reason}; accept another run")
    if not run.items:
        raise InputError(
            f"run {run.run_id} ({run.set_id}) was stored at privacy {meta.get('privacy')}, which keeps no per-prompt "
            "outcomes; run the set again with privacy: metadata (or more) and accept that run"
        )
    return run


def _one_per_scope(runs: list[RunResult]) -> None:
    seen: dict[tuple[str, ...], str] = {}
    for run in runs:
        gen = run.generator
        assert gen is not None  # not_comparable_reason checked it
        assert gen.reported_model is not None
        scope = (run.set_id, gen.provider, gen.model, gen.reported_model, run.grader)
        if scope in seen:
            raise InputError(
                f"runs {seen[scope]} and {run.run_id} are of one scope ({run.set_id} on {gen.provider}/{gen.model}); "
                "a scope has one baseline: accept one of them"
            )
        seen[scope] = run.run_id


def entry_of(run: RunResult, accepted_at: str) -> BaselineEntry:
    """The baseline entry of a comparable run with its items."""
    gen = run.generator
    assert gen is not None
    assert gen.reported_model is not None
    outcomes = per_item((i.id, i.passed, i.score) for i in run.items)
    return BaselineEntry(
        provider=gen.provider,
        model=gen.model,
        reported_model=gen.reported_model,
        grader=run.grader,
        run_id=run.run_id,
        accepted_at=accepted_at,
        evalkit_version=__version__,
        set_fingerprint=run.set_fingerprint,
        prompt_count=run.prompt_count,
        passed_count=run.passed_count,
        pass_rate=run.pass_rate,
        mean_score=run.mean_score,
        items=outcomes,
        repeats=run.repeats,
    )


def baseline_files(config: Config, set_id: str | None = None, folder: str | Path | None = None) -> list[BaselineFile]:
    """The baseline files in the folder (or the one of ``set_id``), read and checked, by set id."""
    from evalkit.sets.baselinefile import baseline_path, load_baseline_file

    target = baselines_folder(config, folder)
    if set_id is not None and not SET_ID.fullmatch(set_id):
        raise InputError(f"'{set_id}' is not a set id (lowercase letters, digits and _ in dot-separated parts)")
    if folder is not None and not target.is_dir():
        raise InputError(f"--baselines {folder}: no such folder; check the path (evalkit baseline accept writes it)")
    if set_id is not None:
        paths = [baseline_path(target, set_id)]
    else:
        paths = sorted(target.glob("*.json")) if target.is_dir() else []
    found = [load_baseline_file(p) for p in paths]
    return sorted((f for f in found if f is not None), key=lambda f: f.set_id)
