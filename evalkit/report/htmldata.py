"""What the HTML report shows of each set (README "The HTML report"): its stored runs (oldest
first), its latest run as ``--format json`` prints it, and the baseline that run was compared with.

Runs just made and not stored (no database, or it refused them) are shown alone; a run just made
is shown as the database keeps it at the configured privacy (README "Privacy"). A baseline not in
the database (a fresh CI runner) is the committed baseline file's entry (README "Baselines kept in
the repository").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from evalkit.records import BaselineFile, RetrievalRunResult, RunResult
from evalkit.report.jsonout import envelope
from evalkit.rows import RunFilter, RunRow
from evalkit.store import Store
from evalkit.verdicts import GateVerdict

BaselineFiles = Callable[[str], Sequence[BaselineFile]]  # a set id -> its baseline files, read and checked
Made = RunResult | RetrievalRunResult


def report_sets(
    store: Store | None,
    privacy: str,
    where: RunFilter,
    runs: Sequence[Made],
    baseline_files: BaselineFiles,
) -> list[dict[str, Any]]:
    """Per set: ``set_id``, ``set_name``, ``runs`` (``RunRow``, oldest first), ``latest`` and ``baseline``
    (envelopes, or None), as ``evalkit.report.html.render`` takes them. With ``runs`` (just made),
    only their sets, these runs shown as the latest."""
    from evalkit.store.reportdata import report_runs

    made = {r.run_id: r for r in runs}
    rows = report_runs(store, where, tuple(made)) if store is not None and (made or not runs) else []
    sets: dict[str, dict[str, Any]] = {}
    for row in [*rows, *(unstored_row(r) for r in runs if r.run_id not in {s.run_id for s in rows})]:
        entry = sets.setdefault(row.set_id, {"set_id": row.set_id, "set_name": row.set_name, "runs": []})
        entry["runs"].append(row)
    for entry in sets.values():
        mine = [r for r in entry["runs"] if r.run_id in made]
        latest_row: RunRow = (mine or entry["runs"])[-1]
        entry["latest"] = _latest(store, privacy, latest_row, made.get(latest_row.run_id))
        entry["baseline"] = _baseline(store, entry["set_id"], entry["latest"], baseline_files)
    return list(sets.values())


def _latest(store: Store | None, privacy: str, row: RunRow, run: Made | None) -> dict[str, Any]:
    """The latest run's envelope, with the privacy level it is shown at."""
    from evalkit.store import as_kept, load_retrieval_run, load_run

    if run is not None:
        meta: dict[str, Any] = {"privacy": privacy}
        # only what the database keeps at this level: the file is an artifact (README "Privacy")
        latest = envelope(run if isinstance(run, RetrievalRunResult) else as_kept(run, privacy), run.gate)
    else:
        assert store is not None  # a row not made now was read from the database
        loaded, meta = (load_retrieval_run if row.kind == "retrieval" else load_run)(store, row.run_id)
        latest = envelope(loaded, GateVerdict.stored(meta.get("gate")))
    latest["privacy"] = meta.get("privacy") or row.privacy
    return latest


def _baseline(
    store: Store | None, set_id: str, latest: dict[str, Any], baseline_files: BaselineFiles
) -> dict[str, Any] | None:
    """The envelope of the baseline the latest prompt run was compared with, if any."""
    from evalkit.store import load_run, run_exists

    baseline_id = (latest.get("comparison") or {}).get("baseline_run_id")
    if not baseline_id or latest.get("kind") == "retrieval":
        return None
    if store is not None and run_exists(store, baseline_id):
        return envelope(load_run(store, baseline_id)[0])
    return baseline_from_file(baseline_files(set_id), baseline_id)


def baseline_from_file(files: Sequence[BaselineFile], run_id: str) -> dict[str, Any] | None:
    """The baseline file's entry for ``run_id`` as an envelope the report can diff against: its
    prompts' outcomes (the file keeps ids, pass fractions and scores, never texts)."""
    for found in files:
        for baseline in found.entries:
            if baseline.run_id == run_id:
                items = [
                    {"id": pid, "passed": passed >= 1.0, "score": score,
                     "reason": f"in {found.path.name}: {passed:.0%} of its samples passed"}
                    for pid, (passed, score) in baseline.items.items()
                ]  # fmt: skip
                return {"run_id": run_id, "items": items}
    return None


def unstored_row(run: Made) -> RunRow:
    """A run that is not in the database, as ``report_runs`` gives stored ones."""
    comparison = run.comparison
    common: dict[str, Any] = {
        "run_id": run.run_id, "set_id": run.set_id, "kind": run.kind, "grader": run.grader,
        "item_count": len(run.items), "error_count": run.error_count,
        "started_at": run.started_at, "comparison_state": comparison.state if comparison else None,
        "regressed": comparison.regressed if comparison else None,
        "baseline_run_id": comparison.baseline_run_id if comparison else None,
    }  # fmt: skip
    if isinstance(run, RetrievalRunResult):
        return RunRow(**common, provider=run.retriever, model=None, reported_model=None,
                      pass_rate=run.top1_hit_rate, mean_score=run.top3_hit_rate)  # fmt: skip
    gen = run.generator
    scope = (gen.provider, gen.model, gen.reported_model) if gen else (run.provider, run.model, None)
    return RunRow(**common, provider=scope[0], model=scope[1], reported_model=scope[2],
                  pass_rate=run.pass_rate, mean_score=run.mean_score)  # fmt: skip
