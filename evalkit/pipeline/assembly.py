"""Assembly: a set's shard parts checked complete and consistent, then made one run (README
"Larger suites: shards and batches").

A group is gated only whole: every shard 1..N present exactly once, one set fingerprint (the set
file's here), one scope (instance, alias, reported model, grader) and every prompt of the set
exactly once (each ``repeats`` times). Any gap or double is a problem named in words; the caller
gates nothing when there is one. The assembled run's id is derived from the group, set, instance
and alias, so gating the same group twice (or in two jobs) makes the same run.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from evalkit.pipeline.shards import shard_of
from evalkit.records import PromptSet, RunResult, ServingRecord, Shard, Tolerances, Usage
from evalkit.runner import stored_grader
from evalkit.verdicts import Yardstick

SHOWN_IDS = 5


@dataclass(frozen=True, slots=True)
class Parts:
    """A set's stored parts on one instance and alias, with the set file they ran."""

    whole: PromptSet
    fingerprint: str  # the set file's fingerprint here
    provider: str
    model: str
    runs: tuple[RunResult, ...]

    @property
    def name(self) -> str:
        return f"{self.whole.id} on {self.provider}/{self.model}"


def problems(parts: Parts) -> list[str]:
    """What keeps the parts from being one run: missing, doubled or inconsistent shards or prompts."""
    runs = parts.runs
    counts = sorted({run.shard.count for run in runs if run.shard is not None})
    if len(counts) != 1:
        return [f"its shards disagree on the shard count ({', '.join(map(str, counts))})"]
    count = counts[0]
    found = _shard_problems(runs, count)
    fingerprints = sorted({run.set_fingerprint for run in runs})
    if len(fingerprints) > 1:
        found.append(f"its shards ran different versions of the set (fingerprints {', '.join(fingerprints)})")
    elif fingerprints[0] != parts.fingerprint:
        found.append(
            f"its shards ran another version of the set than {parts.whole.path or parts.whole.id} here "
            f"(fingerprint {fingerprints[0]}, here {parts.fingerprint}): gate in the commit the shards ran"
        )
    found += _scope_problems(runs)
    if not found:
        found += _prompt_problems(parts, count)
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
    """Every prompt of the set in its own shard, each ``repeats`` times; nothing else."""
    repeats = parts.runs[0].repeats
    expected = Counter({p.id: repeats for p in parts.whole.prompts})
    got: Counter[str] = Counter()
    strays = []
    for run in parts.runs:
        assert run.shard is not None
        assert run.shard.index is not None
        for item in run.items:
            got[item.id] += 1
            if shard_of(parts.whole.id, item.id, count) != run.shard.index:
                strays.append(item.id)
    found = []
    missing = [p for p in expected if got[p] < expected[p]]
    doubled = [p for p in expected if got[p] > expected[p]]
    unknown = [p for p in got if p not in expected]
    for what, ids in (("missing", missing), ("doubled", doubled), ("not in the set", unknown)):
        if ids:
            found.append(f"prompt{'s' if len(ids) > 1 else ''} {what}: {_shown(ids)}")
    if strays and not unknown:
        found.append(f"prompts in another shard than their own: {_shown(strays)}")
    return found


def _shown(ids: Sequence[str]) -> str:
    more = f" (+{len(ids) - SHOWN_IDS} more)" if len(ids) > SHOWN_IDS else ""
    return ", ".join(ids[:SHOWN_IDS]) + more


def assembled_id(group: str, parts: Parts, started_at: str) -> str:
    """The run id of the assembled run: its start, and a hash of group, set, instance and alias."""
    key = "\x00".join((group, parts.whole.id, parts.provider, parts.model))
    moment = datetime.fromisoformat(started_at)
    return f"{moment:%Y%m%d-%H%M%S}-{hashlib.sha256(key.encode()).hexdigest()[:6]}"


def assemble(parts: Parts, group: str, tolerances: Tolerances) -> RunResult:
    """The parts (checked by ``problems``) as one run of the whole set, items in set order."""
    runs = parts.runs
    order = {p.id: i for i, p in enumerate(parts.whole.prompts)}
    items = sorted((item for run in runs for item in run.items), key=lambda i: (order[i.id], i.repeat))
    started = min(run.started_at for run in runs)
    first = runs[0]
    graders = {run.grader for run in runs if run.items}
    grader = graders.pop() if len(graders) == 1 else stored_grader(Yardstick.parse(first.grader).kind, items)
    assembled = RunResult.create(
        tuple(items),
        run_id=assembled_id(group, parts, started),
        set_id=parts.whole.id,
        set_fingerprint=parts.fingerprint,
        provider=parts.provider,
        model=parts.model,
        grader=grader,
        started_at=started,
        finished_at=max(run.finished_at for run in runs),
        tolerances=tolerances,
        set_name=parts.whole.name,
        set_path=str(parts.whole.path) if parts.whole.path else first.set_path,
        adapter=first.adapter,
        cost=_total([run.cost for run in runs]),
        grader_cost=_total([run.grader_cost for run in runs]),
        repeats=first.repeats,
        shard=Shard(None, len(runs), group),
    )
    grader_usage = sum((run.grader_usage for run in runs), Usage())
    return replace(assembled, generator=_generator(runs), grader_usage=grader_usage)


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
