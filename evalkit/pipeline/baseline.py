"""Baseline: what a run is compared with (README "Baselines and regressions").

The scope's entry in the set's committed baseline file comes first, else the newest comparable
run of the scope in the database; a retrieval run is compared with the previous run of its set
and retriever.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.compare import BaselineRun, PreviousRetrieval, describe_scope, per_item
from evalkit.pipeline.plans import RunPlan
from evalkit.records import BaselineEntry, BaselineFile, RetrievalRunResult, RunResult

if TYPE_CHECKING:
    from evalkit.store import Store


def baseline_of(plan: RunPlan, store: Store, run: RunResult) -> BaselineRun | None:
    """The run's baseline: its scope's entry in the set's baseline file, else the newest
    comparable run of its scope in the database (README "Baselines and regressions")."""
    from evalkit.store import find_baseline, item_outcomes

    gen = run.generator
    if gen is None or not gen.reported_model:
        return None
    baseline_file = plan.baselines.get(run.set_id)
    entry = baseline_file.entry_for(gen.provider, gen.model, gen.reported_model, run.grader) if baseline_file else None
    if baseline_file is not None and entry is not None:
        return file_baseline(baseline_file, entry)
    row = find_baseline(
        store,
        set_id=run.set_id,
        provider=gen.provider,
        model=gen.model,
        reported_model=gen.reported_model,
        grader=run.grader,
    )
    if row is None:
        return None
    outcomes = item_outcomes(store, row["run_id"])
    return BaselineRun(**row, items=per_item(outcomes) if outcomes else None)


def file_baseline(baseline_file: BaselineFile, entry: BaselineEntry) -> BaselineRun:
    return BaselineRun(
        run_id=entry.run_id,
        pass_rate=entry.pass_rate,
        mean_score=entry.mean_score,
        passed_count=entry.passed_count,
        item_count=entry.prompt_count * entry.repeats,
        set_fingerprint=entry.set_fingerprint,
        source="file",
        file=shown_path(baseline_file.path),
        items=entry.items,
        repeats=entry.repeats,
    )


def other_baseline(plan: RunPlan, store: Store, run: RunResult) -> tuple[BaselineRun, tuple[str, ...]] | None:
    """Another model's baseline of the run's set and grader, with its scope: the newest accepted
    entry of the set's baseline file, else the newest such run in the database (README,
    "Baselines and regressions")."""
    from evalkit.store import find_other_baseline, item_outcomes

    gen = run.generator
    if gen is None or not gen.reported_model:
        return None
    own = (gen.provider, gen.model, gen.reported_model, run.grader)
    baseline_file = plan.baselines.get(run.set_id)
    entries = [e for e in baseline_file.entries if e.grader == run.grader and e.scope != own] if baseline_file else []
    if baseline_file is not None and entries:
        entry = max(entries, key=lambda e: e.accepted_at)
        return file_baseline(baseline_file, entry), entry.scope
    row = find_other_baseline(
        store, set_id=run.set_id, provider=gen.provider, model=gen.model, reported_model=gen.reported_model,
        grader=run.grader,
    )  # fmt: skip
    if row is None:
        return None
    scope = (row.pop("provider"), row.pop("model"), row.pop("reported_model"), run.grader)
    outcomes = item_outcomes(store, row["run_id"])
    return BaselineRun(**row, items=per_item(outcomes) if outcomes else None), scope


def scope_missing(plan: RunPlan, run: RunResult) -> str | None:
    """Why a run whose set has a baseline file, but no entry for the run's scope, has no
    baseline: a new model snapshot, a fallback that answered or another grader would otherwise
    record a fresh baseline and pass a CI gate that the committed file was meant to hold."""
    baseline_file = plan.baselines.get(run.set_id)
    gen = run.generator
    if baseline_file is None or not baseline_file.entries or gen is None:
        return None
    held = "; ".join(
        f"{e.provider}/{e.model} (reported {e.reported_model}) graded by {e.grader}" for e in baseline_file.entries
    )
    return (
        f"{shown_path(baseline_file.path)} has no baseline for {describe_scope(run)} (it holds: {held}); "
        "run with the instance, model and grader it holds, or accept a baseline for this scope "
        "with evalkit baseline accept"
    )


def shown_path(path: Path) -> str:
    """A path as a user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def baseline_outcomes(store: Store, baseline: BaselineRun) -> list[tuple[str, bool, float]]:
    """(id, passed, score) samples of the baseline for the paired test."""
    from evalkit.store import item_outcomes

    if baseline.source == "file":  # each prompt's samples as the file describes them
        samples = []
        for item_id, (rate, score) in (baseline.items or {}).items():
            passed = round(rate * baseline.repeats)
            samples += [(item_id, k < passed, score) for k in range(baseline.repeats)]
        return samples
    return item_outcomes(store, baseline.run_id)


def previous_retrieval(store: Store, run: RetrievalRunResult) -> PreviousRetrieval | None:
    """The previous stored run of the retrieval run's set and retriever."""
    from evalkit.store import previous_retrieval as previous_row

    row = previous_row(store, run.set_id, run.retriever)
    return PreviousRetrieval(**row) if row else None
