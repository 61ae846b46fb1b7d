"""Shards: one CI job's part of a run (README "Larger suites: shards and batches").

``run --shard I/N`` runs only the prompts whose stable hash of (set id, prompt id) falls in shard
I: the hash does not depend on the other prompts, so the same prompt lands in the same shard on
every machine and adding a prompt moves no other. A part is stored with its shard, in state
``shard``, never compared or gated on its own; ``evalkit gate`` assembles the group's parts
(``pipeline.assemble``).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal

from evalkit.config import Config
from evalkit.errors import InputError
from evalkit.records import Comparison, PromptSet, RunResult, Shard
from evalkit.verdicts import ComparisonState

MAX_SHARDS = 256
_SHARD = re.compile(r"\s*(\d{1,6})\s*/\s*(\d{1,6})\s*")
GATE_POINTER = "a shard is compared and gated with the other shards by evalkit gate, after evalkit merge"


def shard_of(set_id: str, prompt_id: str, count: int) -> int:
    """The shard (1..count) a prompt belongs to: a stable hash of its set id and prompt id."""
    digest = hashlib.sha256(f"{set_id}\x00{prompt_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (1 <= I <= N <= 256) as (I, N); InputError (exit 2) otherwise."""
    match = _SHARD.fullmatch(text)
    if match is None:
        raise InputError(f"--shard {text!r}: give the shard as I/N, e.g. --shard 2/8 for the second of eight")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= count <= MAX_SHARDS or not 1 <= index <= count:
        raise InputError(f"--shard {text}: needs 1 <= I <= N <= {MAX_SHARDS}")
    return index, count


def ci_run_group(environ: Mapping[str, str]) -> str | None:
    """The run group a CI job is in: GitHub Actions' run id and attempt, else GitLab's pipeline id."""
    github = environ.get("GITHUB_RUN_ID", "").strip()
    if github:
        return f"{github}-{environ.get('GITHUB_RUN_ATTEMPT', '').strip() or '1'}"
    gitlab = environ.get("CI_PIPELINE_ID", "").strip()
    return gitlab or None


def run_group(given: str | None, command: str, environ: Mapping[str, str] | None = None) -> str:
    """``--run-group``, else the CI's; exit 2 asking for it outside a CI that names one."""
    if given is not None:
        group = given.strip()
        if not group or any(not c.isprintable() for c in group):
            raise InputError(f"--run-group {given!r}: give a non-empty id, e.g. the CI pipeline's id")
        return group
    found = ci_run_group(os.environ if environ is None else environ)
    if found is None:
        raise InputError(
            f"{command}: no run group: pass --run-group ID (the same id to every shard and to evalkit gate); "
            "in GitHub Actions and GitLab CI it defaults to the pipeline's id"
        )
    return found


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """A shard run's part of each set, and what each part keeps of its whole set: the set's
    fingerprint, and its shard with the set's prompt count, positions, critical prompts and gate."""

    shard: Shard
    parts: tuple[PromptSet, ...]
    fingerprints: Mapping[str, str]
    shards: Mapping[str, Shard]  # by set id


def plan_shard(
    sets: Sequence[PromptSet], config: Config, shard: str, group: str | None, refused: Sequence[str]
) -> ShardPlan:
    """The shard's part of every set, after refusing what makes no sense for one part: the gate
    options (``refused``: the options given) and privacy ``none``, which keeps no item to assemble."""
    from evalkit.runner import set_fingerprint

    index, count = parse_shard(shard)
    if refused:
        raise InputError(
            f"{', '.join(refused)} with --shard: {GATE_POINTER}; give {'them' if len(refused) > 1 else 'it'} "
            "to evalkit gate instead"
        )
    if config.privacy == "none":
        raise InputError(
            "--shard with privacy: none: evalkit gate assembles the shards from their per-prompt outcomes, which "
            "privacy none does not keep; use privacy: metadata (ids, verdicts and scores, no text)"
        )
    common = Shard(index, count, run_group(group, "--shard"))
    parts, shards = [], {}
    for whole in sets:
        positions = tuple(i for i, p in enumerate(whole.prompts) if shard_of(whole.id, p.id, count) == index)
        prompts = tuple(whole.prompts[i] for i in positions)
        parts.append(replace(whole, prompts=prompts))
        shards[whole.id] = replace(
            common,
            set_prompts=len(whole.prompts),
            positions=positions,
            critical=tuple(p.id for p in prompts if p.critical),
            minimums=whole.gate,
        )
    return ShardPlan(common, tuple(parts), {s.id: set_fingerprint(s) for s in sets}, shards)


def refused_options(
    *,
    fail_on_regression: bool,
    significance: float | None,
    gate_overrides: Mapping[str, Decimal] | None,
    tolerance_overrides: Mapping[str, Decimal] | None,
    baselines: object,
) -> list[str]:
    """The options given that decide a verdict, which a shard's part never has."""
    named = [
        ("--fail-on-regression", fail_on_regression),
        ("--significance", significance is not None),
        ("--baselines", baselines is not None),
    ]
    named += [("--" + name.replace("_", "-"), True) for name in (gate_overrides or {})]
    named += [("--" + name.replace("_", "-"), True) for name in (tolerance_overrides or {})]
    return [option for option, given in named if given]


def as_part(run: RunResult, shards: Mapping[str, Shard], fingerprints: Mapping[str, str]) -> RunResult:
    """A run of a set's part as the shard it is: the whole set's fingerprint, and its shard."""
    return replace(run, set_fingerprint=fingerprints[run.set_id], shard=shards[run.set_id])


def part_comparison(shard: Shard) -> Comparison:
    """A part's state: ``shard``, never compared on its own."""
    return Comparison(
        ComparisonState.SHARD,
        f"Shard {shard.index}/{shard.count} of run group {shard.group}: {GATE_POINTER}.",
    )
