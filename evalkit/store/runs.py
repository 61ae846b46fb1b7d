"""Write a run (one transaction, in bulk) and read it back, honouring the privacy level."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from evalkit.errors import UnknownNameError
from evalkit.records import (
    Aggregates,
    AssertionResult,
    BatchCost,
    Comparison,
    Gate,
    ItemResult,
    JudgeBatchCost,
    RunResult,
    ServingRecord,
    Shard,
    Tolerances,
    Usage,
    assertions_reason,
    tool_calls_of,
)
from evalkit.store.privacy import details_for, keeps_items, text_for
from evalkit.store.store import Store
from evalkit.verdicts import ComparisonState, GateVerdict, Yardstick

RUN_COLUMNS = (
    "run_id", "kind", "set_id", "set_name", "set_fingerprint", "set_path", "grader", "provider", "model",
    "reported_model", "generator_provenance", "adapter", "started_at", "finished_at", "item_count",
    "passed_count", "error_count", "pass_rate", "mean_score", "status", "comparison_state", "regressed",
    "baseline_run_id", "comparison", "tolerances", "metrics", "provenance", "input_tokens", "output_tokens",
    "cost", "privacy", "evalkit_version", "repeats",
)  # fmt: skip
# a prompt run's shard (README "Larger suites: shards and batches"); null for a retrieval run
SHARD_COLUMNS = ("shard_index", "shard_count", "run_group")
RESULT_COLUMNS = (
    "run_id", "item_index", "item_id", "passed", "score", "reason", "error", "latency_ms", "assertions",
    "prompt", "system_prompt", "response", "serving", "adapter", "input_tokens", "output_tokens", "cached",
    "yardstick", "details", "repeat_index",
)  # fmt: skip


def to_timestamp(iso: str) -> datetime:
    """An ISO 8601 time as a naive UTC datetime (the store keeps UTC)."""
    moment = datetime.fromisoformat(iso)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def from_timestamp(moment: datetime | None) -> str:
    return moment.replace(tzinfo=UTC).isoformat(timespec="milliseconds") if moment else ""


def metadata_reason(item: ItemResult) -> str:
    """A reason with no prompt or response text in it (for the metadata level)."""
    if item.error is not None:
        return f"error: {_failed(item)}"
    counted = [a for a in item.assertions if a.weight > 0]
    if counted:  # the words of the grader's reason, with each failed assertion's type for its reason
        failed = [a.type for a in counted if not a.passed]
        threshold = None if item.threshold is None else (item.score, item.threshold, item.passed)
        return assertions_reason(failed, len(counted), threshold=threshold)
    if item.yardstick and Yardstick.parse(item.yardstick).judged:
        return f"decision score {item.score:.2f}"
    return "passed" if item.passed else "failed"


def _failed(item: ItemResult) -> str:
    """What failed for an errored item, without its text: the call, or a model-graded assertion's
    judgement (README "Model-graded assertions")."""
    return "a judgement failed" if item.judge_calls and item.response is not None else "the call failed"


def _item_row(
    run: RunResult, index: int, item: ItemResult, level: str, written: dict[tuple[int, ...], str] | None = None
) -> tuple[Any, ...]:
    """One results row. ``written``: the assertions column already written for a tuple of the
    same assertion result records (a run shares the record of an assertion that held)."""
    reason: str | None
    if level in ("redacted", "full"):
        reason, error = text_for(level, item.reason), text_for(level, item.error)
    else:
        reason, error = metadata_reason(item), (_failed(item) if item.error is not None else None)
    same = tuple(map(id, item.assertions)) if written is not None else ()
    assertions = written.get(same) if written is not None else None
    if assertions is None:
        assertions = _assertions_json(item, level)
        if written is not None:
            written[same] = assertions
    return (
        run.run_id,
        index,
        item.id,
        item.passed,
        item.score,
        reason,
        error,
        item.latency_ms,
        assertions,
        text_for(level, item.prompt),
        text_for(level, item.system),
        text_for(level, item.response),
        json.dumps(item.serving.as_dict()) if level == "full" and item.serving else None,
        item.adapter if level == "full" else None,
        item.usage.input_tokens,
        item.usage.output_tokens,
        item.cached,
        item.yardstick,
        json.dumps(details) if (details := details_for(level, item.tool_calls, item.context)) else None,
        item.repeat,
    )


def _assertions_json(item: ItemResult, level: str) -> str:
    assertions: list[dict[str, Any]] = []
    for a in item.assertions:
        entry: dict[str, Any] = {"type": a.type, "passed": a.passed, "score": a.value, "weight": a.weight}
        if a.yardstick:  # a model-graded assertion's judge (README "Model-graded assertions")
            entry["yardstick"] = a.yardstick
        if a.reason and level in ("redacted", "full"):
            entry["reason"] = text_for(level, a.reason)
        assertions.append(entry)
    return json.dumps(assertions)


def as_kept(run: RunResult, level: str) -> RunResult:
    """``run`` with its items as the database keeps them at ``level`` (none at ``none``): what
    a report of a run just made may show (README "Privacy")."""
    rows = [_item_row(run, i, item, level) for i, item in enumerate(run.items)] if keeps_items(level) else []
    return replace(run, items=tuple(_item_from_row(dict(zip(RESULT_COLUMNS, r, strict=True))) for r in rows))


def _run_row(run: RunResult, level: str, version: str, metrics: dict[str, Any]) -> tuple[Any, ...]:
    gen = run.generator
    comparison = run.comparison or Comparison(ComparisonState.NOT_COMPARED, "not compared")
    return (
        run.run_id,
        run.kind,
        run.set_id,
        run.set_name,
        run.set_fingerprint,
        run.set_path,
        run.grader,
        gen.provider if gen else run.provider,
        gen.model if gen else run.model,
        gen.reported_model if gen else None,
        json.dumps(gen.as_dict()) if gen else None,
        run.adapter,
        to_timestamp(run.started_at),
        to_timestamp(run.finished_at),
        run.sample_count,
        run.passed_count,
        run.error_count,
        run.pass_rate,
        run.mean_score,
        "errored" if run.error_count else "complete",
        comparison.state.value,
        comparison.regressed,
        comparison.baseline_run_id,
        json.dumps(comparison.as_dict()),
        json.dumps(run.tolerances.as_dict()),
        json.dumps(metrics),
        None,
        run.usage.input_tokens,
        run.usage.output_tokens,
        run.cost,
        level,
        version,
        run.repeats,
    )


def _part_facts(shard: Shard | None) -> dict[str, Any]:
    """What a shard's part keeps of its whole set, for evalkit gate (README "Larger suites: shards
    and batches"): the set's prompt count, the part's positions in it, its critical prompts, the
    set's gate minimums (exact decimals, as text)."""
    if shard is None or not shard.is_part:
        return {}
    minimums = {k: str(v) for k, v in (("min_pass_rate", shard.minimums.min_pass_rate),
                                        ("min_mean_score", shard.minimums.min_mean_score)) if v is not None}  # fmt: skip
    return {
        "shard_set": {
            "prompt_count": shard.set_prompts,
            "positions": list(shard.positions),
            "critical": list(shard.critical),
            "gate": minimums,
        }
    }


def _shard_of(row: dict[str, Any], metrics: dict[str, Any]) -> Shard | None:
    if not row["run_group"]:
        return None
    facts = metrics.get("shard_set") or {}
    minimums = facts.get("gate") or {}
    return Shard(
        row["shard_index"],
        row["shard_count"],
        row["run_group"],
        set_prompts=int(facts.get("prompt_count", 0)),
        positions=tuple(int(p) for p in facts.get("positions", ())),
        critical=tuple(str(c) for c in facts.get("critical", ())),
        minimums=Gate(**{k: Decimal(str(v)) for k, v in minimums.items() if k in ("min_pass_rate", "min_mean_score")}),
    )


def save_run(store: Store, run: RunResult, level: str, version: str, gate: GateVerdict | None = None) -> None:
    """Write the run row and its item rows in one transaction."""
    metrics = {
        "gate": gate.as_dict() if gate is not None else None,
        "requested_provider": run.provider,
        "requested_model": run.model,
        "grader_input_tokens": run.grader_usage.input_tokens,
        "grader_output_tokens": run.grader_usage.output_tokens,
        "grader_cost": run.grader_cost,
        "judge_calls": run.judge_calls,
        "judge_cached": run.judge_cached,
        **_part_facts(run.shard),
    }
    if run.batch is not None:  # README "Batches": what answering through provider batches saved
        metrics["batch"] = run.batch.as_dict(run.cost)
    shard = (run.shard.index, run.shard.count, run.shard.group) if run.shard else (None, None, None)
    run_row = (*_run_row(run, level, version, metrics), *shard)
    # made as the appender takes them: never all at once (README "Privacy": none keeps no item)
    written: dict[tuple[int, ...], str] = {}  # the records live as long as the run: their ids stay theirs
    item_rows = (
        (_item_row(run, i, item, level, written) for i, item in enumerate(run.items)) if keeps_items(level) else ()
    )
    with store.transaction():
        store.insert_rows("runs", (*RUN_COLUMNS, *SHARD_COLUMNS), [run_row])
        store.insert_rows("results", RESULT_COLUMNS, item_rows)


def resolve_run_id(store: Store, run_id: str) -> str:
    """A full run id from an id or a unique prefix of one."""
    rows = store.con.execute(
        "select run_id from runs where run_id = $1 or starts_with(run_id, $1) order by run_id limit 3", [run_id]
    ).fetchall()
    exact = [str(r[0]) for r in rows if r[0] == run_id]
    if exact:
        return exact[0]
    if len(rows) == 1:
        return str(rows[0][0])
    if not rows:
        raise UnknownNameError(f"no stored run '{run_id}'; list runs with evalkit report")
    raise UnknownNameError(
        f"'{run_id}' matches several runs ({', '.join(r[0] for r in rows)}, ...); give more of the id"
    )


def run_kind(store: Store, run_id: str) -> tuple[str, str]:
    """(full run id, kind) for an id or a unique prefix."""
    full_id = resolve_run_id(store, run_id)
    row = store.con.execute("select kind from runs where run_id = $1", [full_id]).fetchone()
    return full_id, str(row[0]) if row else "prompts"


def load_run(store: Store, run_id: str) -> tuple[RunResult, dict[str, Any]]:
    """A stored prompt run (items as stored under its privacy level) and its metrics."""
    full_id = resolve_run_id(store, run_id)
    columns = (*RUN_COLUMNS, *SHARD_COLUMNS)
    cursor = store.con.execute(f"select {', '.join(columns)} from runs where run_id = $1", [full_id])
    row = dict(zip(columns, cursor.fetchone() or (), strict=True))
    items_cursor = store.con.execute(
        f"select {', '.join(RESULT_COLUMNS)} from results where run_id = $1 order by item_index", [full_id]
    )
    items = tuple(_item_from_row(dict(zip(RESULT_COLUMNS, r, strict=True))) for r in items_cursor.fetchall())
    metrics = json.loads(row["metrics"]) if row["metrics"] else {}
    gen = json.loads(row["generator_provenance"]) if row["generator_provenance"] else None
    comparison = json.loads(row["comparison"]) if row["comparison"] else None
    tolerances = json.loads(row["tolerances"]) if row["tolerances"] else {}
    run = RunResult(
        run_id=row["run_id"],
        set_id=row["set_id"],
        set_fingerprint=row["set_fingerprint"] or "",
        provider=metrics.get("requested_provider", row["provider"]),
        model=metrics.get("requested_model", row["model"]),
        grader=row["grader"],
        items=items,
        started_at=from_timestamp(row["started_at"]),
        finished_at=from_timestamp(row["finished_at"]),
        generator=ServingRecord(gen["provider"], gen["model"], gen["reported_model"], gen.get("version", 1))
        if gen
        else None,
        totals=Aggregates(
            row["item_count"], row["passed_count"], row["error_count"], row["pass_rate"], row["mean_score"]
        ),
        tolerances=Tolerances(**{k: decimal_of(v) for k, v in tolerances.items()})
        if row["kind"] == "prompts"
        else Tolerances(),
        comparison=Comparison.from_dict(comparison) if comparison else None,
        set_name=row["set_name"] or "",
        set_path=row["set_path"],
        adapter=row["adapter"] or "",
        usage=Usage(row["input_tokens"] or 0, row["output_tokens"] or 0),
        grader_usage=Usage(metrics.get("grader_input_tokens", 0), metrics.get("grader_output_tokens", 0)),
        cost=row["cost"],
        grader_cost=metrics.get("grader_cost"),
        judge_calls=metrics.get("judge_calls", 0),
        judge_cached=metrics.get("judge_cached", 0),
        repeats=row["repeats"] or 1,
        gate=GateVerdict.stored(metrics.get("gate")),
        shard=_shard_of(row, metrics),
        batch=_batch_cost(metrics.get("batch")),
    )
    return run, {**metrics, "privacy": row["privacy"], "kind": row["kind"], "provenance": row["provenance"]}


def _batch_cost(stored: Any) -> BatchCost | None:
    """A run's provider batches and their saving, as stored in ``metrics`` (README "Batches")."""
    if not isinstance(stored, dict):
        return None
    judged = stored.get("judge")
    judge = (
        JudgeBatchCost(tuple(judged.get("batch_ids") or ()), judged.get("standard_cost"), judged.get("cost"))
        if isinstance(judged, dict)
        else None
    )
    return BatchCost(
        tuple(stored.get("batch_ids") or ()), float(stored.get("discount", 0.5)), stored.get("standard_cost"), judge
    )


def decimal_of(value: float) -> Decimal:
    """A stored tolerance (a double) as the exact decimal it was written as."""
    return Decimal(repr(value))


def _item_from_row(row: dict[str, Any]) -> ItemResult:
    assertions = json.loads(row["assertions"]) if row["assertions"] else []
    serving = json.loads(row["serving"]) if row["serving"] else None
    details = json.loads(row["details"]) if row["details"] else {}
    return ItemResult(
        id=row["item_id"],
        passed=row["passed"],
        score=row["score"],
        reason=row["reason"] or "",
        latency_ms=row["latency_ms"],
        error=row["error"],
        assertions=tuple(
            AssertionResult(a["type"], a["passed"], a.get("reason", ""), a.get("score"), a.get("weight", 1.0))
            for a in assertions
        ),
        prompt=row["prompt"] or "",
        system=row["system_prompt"],
        response=row["response"],
        serving=ServingRecord(serving["provider"], serving["model"], serving["reported_model"]) if serving else None,
        adapter=row["adapter"],
        usage=Usage(row["input_tokens"] or 0, row["output_tokens"] or 0),
        yardstick=row["yardstick"],
        cached=bool(row["cached"]),
        repeat=row["repeat_index"] or 0,
        tool_calls=tool_calls_of(details.get("tool_calls")),
        context=details.get("context"),
    )
