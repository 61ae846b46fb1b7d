"""Retrieval runs in the store: written like prompt runs (one transaction, in bulk), with the
metrics, breakdowns, provenance and fingerprints kept on the run row."""

from __future__ import annotations

import json
from typing import Any

from evalkit.records import Comparison, RetrievalItem, RetrievalRunResult, RetrievalTolerances
from evalkit.store.privacy import keeps_items, text_for
from evalkit.store.runs import RESULT_COLUMNS, RUN_COLUMNS, decimal_of, from_timestamp, to_timestamp
from evalkit.store.store import Store
from evalkit.verdicts import ComparisonState, GateVerdict

EXTRA_RUN_COLUMNS = ("benchmark_fingerprint", "variant_fingerprint")


def _reason(item: RetrievalItem) -> str:
    if item.error is not None:
        return "error: the retriever call failed"
    return f"top-1 {'hit' if item.top1_hit else 'miss'}, top-3 {'hit' if item.top3_hit else 'miss'}"


def save_retrieval_run(
    store: Store, run: RetrievalRunResult, level: str, version: str, gate: GateVerdict | None
) -> None:
    comparison = run.comparison or Comparison(ComparisonState.UNKNOWN, "not compared")
    metrics = {
        "metrics": dict(run.metrics),
        "by_form": {k: dict(v) for k, v in run.by_form.items()},
        "by_hard_class": {k: dict(v) for k, v in run.by_hard_class.items()},
        "scored": run.scored,
        "left_out": run.left_out,
        "top1_hits": run.top1_hits,
        "top3_hits": run.top3_hits,
        "gate": gate.as_dict() if gate is not None else None,
    }
    values = {
        "run_id": run.run_id, "kind": run.kind, "set_id": run.set_id, "set_name": run.set_name,
        "set_fingerprint": run.benchmark_fingerprint, "set_path": run.set_path, "grader": run.grader,
        "provider": run.retriever, "model": run.provenance.get("model_revision"), "reported_model": None,
        "generator_provenance": None, "adapter": None, "started_at": to_timestamp(run.started_at),
        "finished_at": to_timestamp(run.finished_at), "item_count": run.question_count,
        "passed_count": run.top1_hits, "error_count": run.error_count, "pass_rate": run.top1_hit_rate,
        "mean_score": run.top3_hit_rate, "status": "errored" if run.error_count else "complete",
        "comparison_state": comparison.state.value, "regressed": comparison.regressed,
        "baseline_run_id": comparison.baseline_run_id, "comparison": json.dumps(comparison.as_dict()),
        "tolerances": json.dumps(run.tolerances.as_dict()), "metrics": json.dumps(metrics),
        "provenance": json.dumps(dict(run.provenance)), "input_tokens": None, "output_tokens": None, "cost": None,
        "privacy": level, "evalkit_version": version, "repeats": 1,
        "benchmark_fingerprint": run.benchmark_fingerprint, "variant_fingerprint": run.variant_fingerprint,
    }  # fmt: skip
    columns = (*RUN_COLUMNS, *EXTRA_RUN_COLUMNS)
    items = [
        tuple(_item_values(run, index, item, level)[c] for c in RESULT_COLUMNS) for index, item in enumerate(run.items)
    ]
    with store.transaction():
        store.insert_rows("runs", columns, [tuple(values[c] for c in columns)])
        store.insert_rows("results", RESULT_COLUMNS, items if keeps_items(level) else [])


def _item_values(run: RetrievalRunResult, index: int, item: RetrievalItem, level: str) -> dict[str, Any]:
    if item.error is None:
        error = None
    else:
        error = text_for(level, item.error) if level in ("redacted", "full") else "the retriever call failed"
    details = {
        "form": item.form,
        "hard_class": item.hard_class,
        "top1_hit": item.top1_hit,
        "top3_hit": item.top3_hit,
        "retrieved": list(item.retrieved),
    }
    return {
        "run_id": run.run_id, "item_index": index, "item_id": item.id, "passed": item.top1_hit,
        "score": 1.0 if item.top3_hit else 0.0, "reason": _reason(item), "error": error, "latency_ms": item.latency_ms,
        "assertions": None, "prompt": text_for(level, item.question), "system_prompt": None, "response": None,
        "serving": None, "adapter": None, "input_tokens": None, "output_tokens": None, "cached": False,
        "yardstick": run.grader, "details": json.dumps(details), "repeat_index": 0,
    }  # fmt: skip


def previous_retrieval(store: Store, set_id: str, retriever: str) -> dict[str, Any] | None:
    """The newest stored retrieval run of this set and retriever without errored questions."""
    row = store.con.execute(
        """
        select run_id, passed_count, metrics, item_count, benchmark_fingerprint, variant_fingerprint, provenance
        from runs
        where kind = 'retrieval' and set_id = $1 and provider = $2 and error_count = 0
        order by started_at desc, run_id desc limit 1
        """,
        [set_id, retriever],
    ).fetchone()
    if row is None:
        return None
    run_id, top1, metrics, count, bench, variant, provenance = row
    return {
        "run_id": run_id,
        "top1_hits": top1,
        "top3_hits": json.loads(metrics).get("top3_hits", 0),
        "question_count": count,
        "benchmark_fingerprint": bench,
        "variant_fingerprint": variant,
        "provenance": json.loads(provenance) if provenance else {},
    }


def load_retrieval_run(store: Store, run_id: str) -> tuple[RetrievalRunResult, dict[str, Any]]:
    """A stored retrieval run and its metrics (gate included), like ``load_run``."""
    columns = (*RUN_COLUMNS, *EXTRA_RUN_COLUMNS)
    fetched = store.con.execute(f"select {', '.join(columns)} from runs where run_id = $1", [run_id]).fetchone()
    row = dict(zip(columns, fetched or (), strict=True))
    metrics = json.loads(row["metrics"] or "{}")
    comparison = json.loads(row["comparison"]) if row["comparison"] else None
    items = []
    for item_id, detail, question, error, latency in store.con.execute(
        "select item_id, details, prompt, error, latency_ms from results where run_id = $1 order by item_index",
        [run_id],
    ).fetchall():
        d = json.loads(detail)
        items.append(
            RetrievalItem(
                item_id,
                d["form"],
                d["hard_class"],
                d["top1_hit"],
                d["top3_hit"],
                tuple(d["retrieved"]),
                question or "",
                error,
                latency,
            )
        )
    tolerances = json.loads(row["tolerances"] or "{}")
    run = RetrievalRunResult(
        run_id=row["run_id"], set_id=row["set_id"], retriever=row["provider"], items=tuple(items),
        started_at=from_timestamp(row["started_at"]), finished_at=from_timestamp(row["finished_at"]),
        question_count=row["item_count"], top1_hit_rate=row["pass_rate"], top3_hit_rate=row["mean_score"],
        by_form=metrics.get("by_form", {}), by_hard_class=metrics.get("by_hard_class", {}),
        metrics=metrics.get("metrics", {}), scored=metrics.get("scored", 0), left_out=metrics.get("left_out", 0),
        provenance=json.loads(row["provenance"] or "{}"), benchmark_fingerprint=row["benchmark_fingerprint"],
        variant_fingerprint=row["variant_fingerprint"] or "", top1_hits=row["passed_count"],
        top3_hits=metrics.get("top3_hits", 0),
        tolerances=RetrievalTolerances(**{k: decimal_of(v) for k, v in tolerances.items()}),
        comparison=Comparison.from_dict(comparison) if comparison else None, set_name=row["set_name"] or "",
        set_path=row["set_path"], error_count=row["error_count"],
    )  # fmt: skip
    return run, {**metrics, "privacy": row["privacy"], "kind": row["kind"]}
