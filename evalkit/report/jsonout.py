"""The JSON documents of README "JSON output": one envelope per run (``run``, ``show``), ``report``."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Sequence
from typing import Any

from evalkit.records import BaselineFile, Comparison, RetrievalRunResult, RunResult
from evalkit.report.summary import cached_before_run, cached_counts
from evalkit.verdicts import ComparisonState, GateVerdict, Yardstick


def item_json(run: RunResult) -> list[dict[str, Any]]:
    return list(item_entries(run))


def item_entries(run: RunResult, shared: dict[int, dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
    """Each item's entry, made when taken. ``shared``: one entry per assertion result record
    (a run shares the record of an assertion that held), reused by the entries that hold it."""
    repeated = run.repeats > 1
    for item in run.items:
        assertions = []
        for a in item.assertions:
            entry_ = shared.get(id(a)) if shared is not None else None
            if entry_ is None:
                entry_ = {"type": a.type, "passed": a.passed, "score": a.value, "weight": a.weight}
                if a.yardstick:
                    entry_["yardstick"] = a.yardstick
                if shared is not None:
                    shared[id(a)] = entry_
            assertions.append(entry_)
        entry: dict[str, Any] = {
            "id": item.id,
            "passed": item.passed,
            "score": item.score,
            "reason": item.reason,
            "latency_ms": round(item.latency_ms, 3) if item.latency_ms is not None else None,
            "error": item.error,
            "assertions": assertions,
        }
        if item.prompt:  # as kept: a conversation as ``role: content`` lines; none below privacy redacted
            entry["prompt"] = item.prompt
        if item.response is not None:
            entry["response"] = item.response
        if item.tool_calls:  # as kept: names only below privacy redacted (arguments null)
            entry["tool_calls"] = [call.as_dict() for call in item.tool_calls]
        if item.context is not None:
            entry["context"] = item.context
        if item.cached:
            entry["cached"] = True
        if repeated:
            entry["repeat"] = item.repeat
        yield entry


class LazyItems:
    """A prompt run's items in an envelope for ``document_parts``, each entry made as it is written
    (100,000 items held as entries took about 100 MB; bench/README.md, session 10)."""

    __slots__ = ("run",)

    def __init__(self, run: RunResult) -> None:
        self.run = run

    def __len__(self) -> int:
        return len(self.run.items)

    def entries(self) -> Iterator[dict[str, Any]]:
        return item_entries(self.run, {})


def run_json(run: RunResult, gate: GateVerdict | None = None, *, lazy: bool = False) -> dict[str, Any]:
    """The envelope ``evalkit run --format json`` prints for one prompt run; ``lazy``: its items
    as ``LazyItems``, for ``document_parts`` only."""
    gen = run.generator
    comparison = run.comparison or Comparison.not_compared("no store")
    return (
        {
            "run_id": run.run_id,
            "set": run.set_id,
            "kind": run.kind,
            "grader": run.grader,
            "generator": {"provider": gen.provider, "model": gen.model, "reported_model": gen.reported_model}
            if gen
            else None,
            "provider": run.provider,
            "model": run.model,
            "prompt_count": run.prompt_count,
            "passed_count": run.passed_count,
            "error_count": run.error_count,
            "cached_count": cached_counts(run)[0],  # replayed answers (docs/contract.md "The completion cache")
            "cached_before_run_count": cached_before_run(run)[
                0
            ],  # of them, stored before this run (README "JSON output")
            "pass_rate": run.pass_rate,
            "mean_score": run.mean_score,
            "usage": {"input_tokens": run.usage.input_tokens, "output_tokens": run.usage.output_tokens},
            "grader_usage": {
                "input_tokens": run.grader_usage.input_tokens,
                "output_tokens": run.grader_usage.output_tokens,
            },
            "cost": run.cost,
            "grader_cost": run.grader_cost,
            "started_at": run.started_at,
            "finished_at": run.finished_at,
            "tolerances": run.tolerances.as_dict(),
            "items": LazyItems(run) if lazy and run.items else item_json(run),
            "comparison": comparison.as_dict(),
            "gate": (gate or GateVerdict(fail_on_regression=False)).as_dict(),
        }
        | (_repeats(run) if run.repeats > 1 else {})
        | _judge_cached(run)
        | ({"shard": run.shard.as_dict()} if run.shard is not None else {})
        | ({"batch": run.batch.as_dict(run.cost)} if run.batch is not None else {})  # README "Batches"
        | judge_block(run)
    )


def judge_block(run: RunResult) -> dict[str, Any]:
    """``judge``: the calls of a run's judges, counted apart from the generator's (README
    "Model-graded assertions"); none for a run no model graded."""
    if not Yardstick.parse(run.grader).judged:
        return {}
    usage = run.grader_usage
    return {
        "judge": {
            "calls": run.judge_calls,
            "cached": run.judge_cached,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cost": run.grader_cost,
        }
    }


def _judge_cached(run: RunResult) -> dict[str, Any]:
    gradings = cached_counts(run)[1]
    return {} if gradings is None else {"judge_cached_count": gradings}


def _repeats(run: RunResult) -> dict[str, Any]:
    from evalkit.report.summary import repeat_summary

    # the per-prompt figures need the items: a run kept at privacy none has none to tell
    return {
        "sample_count": run.sample_count,
        **(repeat_summary(run).as_dict() if run.items else {"repeats": run.repeats}),
    }


def dumps(document: Any) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)


def documents(envelopes: Sequence[dict[str, Any]]) -> str:
    return "".join(document_parts(envelopes))


def document_parts(envelopes: Sequence[dict[str, Any]]) -> list[str]:
    """The JSON text of envelopes (one as an object; several as an array) in parts, to be written
    one after the other: indented, but each of ``items`` on one line, a part of its own (json's
    indenting encoder is pure Python, 2.2 s for 20,000 items; its compact one C), so the text is
    never copied whole."""
    nonce = secrets.token_hex(8)
    lists: dict[str, list[Any] | LazyItems] = {}
    shells = []
    for envelope_ in envelopes:
        items = envelope_.get("items")
        if isinstance(items, list | LazyItems) and items:
            token = f"evalkit-items-{nonce}-{len(lists)}"
            lists[json.dumps(token)] = items
            envelope_ = {**envelope_, "items": token}
        shells.append(envelope_)
    depth = 1 if len(shells) == 1 else 2
    rest = dumps(shells[0] if len(shells) == 1 else shells)
    pad = "  " * (depth + 1)
    parts = []
    for token, items in lists.items():
        head, rest = rest.split(token, 1)
        separator = head + "[\n" + pad
        for item in items.entries() if isinstance(items, LazyItems) else items:
            parts.append(separator + json.dumps(item, ensure_ascii=False))
            separator = ",\n" + pad
        parts.append("\n" + "  " * depth + "]")
    parts.append(rest)
    return parts


def retrieval_json(run: RetrievalRunResult, gate: GateVerdict | None = None) -> dict[str, Any]:
    """The envelope ``evalkit retrieval --format json`` prints (README "JSON output")."""
    comparison = run.comparison or Comparison.not_compared("no store", ComparisonState.UNKNOWN)
    items = []
    for item in run.items:
        entry: dict[str, Any] = {
            "id": item.id,
            "form": item.form,
            "hard_class": item.hard_class,
            "top1_hit": item.top1_hit,
            "top3_hit": item.top3_hit,
            "retrieved": list(item.retrieved),
        }
        if item.error is not None:
            entry["error"] = item.error
        items.append(entry)
    return {
        "run_id": run.run_id,
        "set": run.set_id,
        "kind": run.kind,
        "grader": run.grader,
        "retriever": run.retriever,
        "question_count": run.question_count,
        "error_count": run.error_count,
        "top1_hit_rate": run.top1_hit_rate,
        "top3_hit_rate": run.top3_hit_rate,
        "by_form": {k: dict(v) for k, v in run.by_form.items()},
        "by_hard_class": {k: dict(v) for k, v in run.by_hard_class.items()},
        "metrics": dict(run.metrics),
        "metrics_questions": run.scored,
        "metrics_left_out": run.left_out,
        "provenance": dict(run.provenance),
        "benchmark_fingerprint": run.benchmark_fingerprint,
        "variant_fingerprint": run.variant_fingerprint,
        "tolerances": run.tolerances.as_dict(),
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "items": items,
        "comparison": {"treatment_changed": None, **comparison.as_dict()},  # null: no earlier run looked at
        "gate": (gate or GateVerdict(fail_on_regression=False)).as_dict(),
    }


def envelope(
    run: RunResult | RetrievalRunResult, gate: GateVerdict | None = None, *, lazy: bool = False
) -> dict[str, Any]:
    """``lazy``: a prompt run's items as ``LazyItems`` (``run_json``)."""
    return retrieval_json(run, gate) if isinstance(run, RetrievalRunResult) else run_json(run, gate, lazy=lazy)


def baselines_json(files: Sequence[BaselineFile]) -> dict[str, Any]:
    """``evalkit baseline show --format json``: every entry with its set and file."""
    return {
        "baselines": [
            {
                "set": f.set_id,
                "file": str(f.path),
                "provider": e.provider,
                "model": e.model,
                "reported_model": e.reported_model,
                "grader": e.grader,
                "run_id": e.run_id,
                "accepted_at": e.accepted_at,
                "prompt_count": e.prompt_count,
                "passed_count": e.passed_count,
                "pass_rate": e.pass_rate,
                "mean_score": e.mean_score,
            }
            for f in files
            for e in f.entries
        ]
    }
