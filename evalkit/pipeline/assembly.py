"""Assembly: a set's shard parts checked complete and consistent, then made one run (README
"Larger suites: shards and batches").

A group is gated only whole: every shard 1..N present exactly once, one set fingerprint, one scope
(instance, alias, reported model, grader) and every prompt of the set exactly once (each
``repeats`` times). Each part keeps what the check needs of its whole set (its prompt count, the
part's positions in it, its critical prompts and gate minimums), so no set file is read: every
prompt a part holds must hash to that part's shard, no position may be held twice, and the parts
together must hold every position of the set. Any gap or double is a problem named in words; the
caller gates nothing when there is one. The assembled run's id is derived from the group, set,
instance and alias, so gating the same group twice (or in two jobs) makes the same run.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from evalkit.pipeline.shards import shard_of
from evalkit.records import Gate, RunResult, ServingRecord, Shard, Tolerances, Usage
from evalkit.runner import stored_grader
from evalkit.verdicts import Yardstick

SHOWN_IDS = 5


@dataclass(frozen=True, slots=True)
class Parts:
    """A set's stored parts on one instance and alias."""

    set_id: str
    provider: str
    model: str
    runs: tuple[RunResult, ...]

    @property
    def name(self) -> str:
        return f"{self.set_id} on {self.provider}/{self.model}"

    def shards(self) -> list[Shard]:
        return [run.shard for run in self.runs if run.shard is not None]


def problems(parts: Parts) -> list[str]:
    """What keeps the parts from being one run: missing, doubled or inconsistent shards or prompts."""
    runs = parts.runs
    counts = sorted({shard.count for shard in parts.shards()})
    if len(counts) != 1:
        return [f"its shards disagree on the shard count ({', '.join(map(str, counts))})"]
    found = _shard_problems(runs, counts[0])
    fingerprints = sorted({run.set_fingerprint for run in runs})
    if len(fingerprints) > 1:
        found.append(f"its shards ran different versions of the set (fingerprints {', '.join(fingerprints)})")
    gates = {(s.set_prompts, s.minimums) for s in parts.shards()}
    if len(fingerprints) == 1 and len(gates) > 1:
        found.append("its shards ran different versions of the set (its size or its gate: minimums differ)")
    found += _scope_problems(runs)
    if not found:
        found += _prompt_problems(parts, counts[0])
    return found


def _shard_problems(runs: Sequence[RunResult], count: int) -> list[str]:
    by_index: dict[int, list[str]] = {}
    for run in runs:
        if run.shard is not None and run.shard.index is not None:
            by_index.setdefault(run.shard.index, []).append(run.run_id)
    missing = [i for i in range(1, count + 1) if i not in by_index]
    found = []
    if missing:
        shown = ", ".join(f"{i}/{count}" for i in missing)
        found.append(f"shard{'s' if len(missing) > 1 else ''} {shown} {'are' if len(missing) > 1 else 'is'} missing")
    for index, ids in sorted(by_index.items()):
        if len(ids) > 1:
            found.append(f"shard {index}/{count} is there {len(ids)} times (runs {', '.join(ids)})")
    return found


def _scope_problems(runs: Sequence[RunResult]) -> list[str]:
    found = []
    answered = [run for run in runs if run.totals.item_count > run.error_count]
    generators = {_scope(run.generator) for run in answered if run.generator is not None}
    if len(generators) > 1:
        found.append(f"its shards were answered by different models ({'; '.join(sorted(generators))})")
    graders = {Yardstick.parse(run.grader).kind for run in runs if run.items}
    if len(graders) > 1:
        found.append(f"its shards were graded by different graders ({', '.join(sorted(graders))})")
    repeats = {run.repeats for run in runs}
    if len(repeats) > 1:
        found.append(f"its shards sampled each prompt a different number of times ({', '.join(map(str, repeats))})")
    for run in runs:
        if run.totals.item_count and not run.items:
            found.append(f"run {run.run_id} kept no per-prompt outcomes (privacy none)")
    return found


def _scope(gen: ServingRecord) -> str:
    return f"{gen.provider}/{gen.model} reported {gen.reported_model}"


def _prompt_problems(parts: Parts, count: int) -> list[str]:
    """Every position of the set held once, by the part whose shard its prompt hashes to, each
    prompt ``repeats`` times."""
    repeats = parts.runs[0].repeats
    total = parts.shards()[0].set_prompts
    held: Counter[int] = Counter()
    strays, short = [], []
    for run in parts.runs:
        assert run.shard is not None
        assert run.shard.index is not None
        held.update(run.shard.positions)
        samples = Counter(item.id for item in run.items)
        if sorted(samples.values()) != [repeats] * len(run.shard.positions) or len(samples) != len(run.shard.positions):
            short.append(f"shard {run.shard.index}/{count} (run {run.run_id}) holds other prompts than it ran")
        strays += [p for p in samples if shard_of(parts.set_id, p, count) != run.shard.index]
    found = short
    missing = [str(i + 1) for i in range(total) if not held[i]]
    doubled = [str(i + 1) for i, n in sorted(held.items()) if n > 1 or not 0 <= i < total]
    for what, positions in (("missing", missing), ("doubled", doubled)):
        if positions:
            found.append(f"the set's prompt{'s' if len(positions) > 1 else ''} number {_shown(positions)} {what}")
    if strays:
        found.append(f"prompts in another shard than their own: {_shown(strays)}")
    return found


def _shown(ids: Sequence[str]) -> str:
    more = f" (+{len(ids) - SHOWN_IDS} more)" if len(ids) > SHOWN_IDS else ""
    return ", ".join(ids[:SHOWN_IDS]) + more


def assembled_id(group: str, parts: Parts, started_at: str) -> str:
    """The run id of the assembled run: its start, and a hash of group, set, instance and alias."""
    key = "\x00".join((group, parts.set_id, parts.provider, parts.model))
    moment = datetime.fromisoformat(started_at)
    return f"{moment:%Y%m%d-%H%M%S}-{hashlib.sha256(key.encode()).hexdigest()[:6]}"


def assemble(parts: Parts, group: str, tolerances: Tolerances | None) -> RunResult:
    """The parts (checked by ``problems``) as one run of the whole set, items in set order;
    ``tolerances`` None: the set's, as the parts stored them."""
    runs = parts.runs
    order: dict[str, int] = {}
    for run in runs:
        assert run.shard is not None
        ids = list(dict.fromkeys(item.id for item in run.items))
        order.update(zip(ids, run.shard.positions, strict=True))
    items = sorted((item for run in runs for item in run.items), key=lambda i: (order[i.id], i.repeat))
    started = min(run.started_at for run in runs)
    first = runs[0]
    graders = {run.grader for run in runs if run.items}
    grader = graders.pop() if len(graders) == 1 else stored_grader(Yardstick.parse(first.grader).kind, items)
    assembled = RunResult.create(
        tuple(items),
        run_id=assembled_id(group, parts, started),
        set_id=parts.set_id,
        set_fingerprint=first.set_fingerprint,
        provider=parts.provider,
        model=parts.model,
        grader=grader,
        started_at=started,
        finished_at=max(run.finished_at for run in runs),
        tolerances=tolerances or first.tolerances,
        set_name=first.set_name,
        set_path=first.set_path,
        adapter=first.adapter,
        cost=_total([run.cost for run in runs]),
        grader_cost=_total([run.grader_cost for run in runs]),
        repeats=first.repeats,
        shard=Shard(None, len(runs), group),
    )
    grader_usage = sum((run.grader_usage for run in runs), Usage())
    return replace(assembled, generator=_generator(runs), grader_usage=grader_usage)


def set_gate(parts: Parts) -> tuple[Gate, list[str]]:
    """The set's own gate minimums and its critical prompts, as the parts kept them."""
    shards = parts.shards()
    return shards[0].minimums, [prompt for shard in shards for prompt in shard.critical]


def _generator(runs: Sequence[RunResult]) -> ServingRecord | None:
    """The one verified generator every answered part reports, else None (docs/contract.md "Serving identity")."""
    answered = [run for run in runs if run.totals.item_count > run.error_count]
    generators = {run.generator for run in answered}
    if len(generators) != 1:
        return None
    return generators.pop()


def _total(values: Sequence[float | None]) -> float | None:
    priced = [v for v in values if v is not None]
    return sum(priced) if priced else None
