"""What a run answered and graded through provider batches costs (README "Batches").

Batch answers are priced at their instance's ``cost.batch_discount``: ``batch_priced`` gives the
plan's targets (the answers' batches) and judges (the judge's batches) that price, so the run's
``cost`` and the judge's cost are what was paid. ``priced`` then completes each run with its
``BatchCost``: its answers' tokens at the standard price and, when the judge's batches served its
grading, the judge's batch answers it took (``BatchAnswers.served``, each counted to the run whose
answer asked it first) at both prices; the saving is the difference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import replace

from evalkit.config import Config, Cost, ProviderConfig
from evalkit.pipeline.batchanswers import Answering
from evalkit.pipeline.plans import RunPlan, Target
from evalkit.records import BatchCost, JudgeBatchCost, PendingBatch, RunResult
from evalkit.records.batches import PHASE_ANSWERS, PHASE_JUDGE
from evalkit.runner import run_cost


def batch_priced(plan: RunPlan, batches: Sequence[PendingBatch]) -> RunPlan:
    """The plan with each instance a batch answered for priced at its batch discount: the targets
    of the answers' batches, and the judges of the judge's batches (the model-graded assertions'
    or the decision grader's, which are then not probed)."""
    answered = {b.provider for b in batches if b.phase == PHASE_ANSWERS}
    judging = frozenset(b.provider for b in batches if b.phase == PHASE_JUDGE)
    judged = plan.judged
    if judged is not None and judging:
        judged = replace(judged, targets=_discounted(judged.targets, judging), batched=judging)
    plan = replace(plan, targets=_discounted(plan.targets, answered), judged=judged)
    if plan.judge is not None and plan.judge.id in judging and judged is None:  # --grader decision
        plan = replace(plan, judge=discounted(plan.judge), judge_batched=True)
    return plan


def _discounted(targets: Sequence[Target], batched: Set[str]) -> tuple[Target, ...]:
    return tuple(Target(discounted(t.provider), t.alias) if t.provider.id in batched else t for t in targets)


def discounted(config: ProviderConfig) -> ProviderConfig:
    """The instance priced as its batch answers are: ``cost.batch_discount`` of each price."""
    return config if config.cost is None else replace(config, cost=batch_price(config.cost))


def batch_price(cost: Cost) -> Cost:
    factor = cost.batch_discount
    return Cost(cost.input_per_mtok * factor, cost.output_per_mtok * factor, factor)


def priced(plan: RunPlan, group: Sequence[PendingBatch], answering: Answering) -> Callable[[RunResult], RunResult]:
    """Each run's batch record: its answers' batches, and the judge's answers it took from the
    judge's batches, at the standard price beside what they cost."""
    answered: dict[str, list[str]] = {}
    for batch in group:
        if batch.phase == PHASE_ANSWERS:
            answered.setdefault(batch.provider, []).append(batch.batch_id)
    judge_ids = tuple(b.batch_id for b in group if b.phase == PHASE_JUDGE)
    owners = {key: owner for b in group if b.phase == PHASE_JUDGE for key, owner in b.custom_ids.items()}

    def amend(run: RunResult) -> RunResult:
        judge = _judge_share(plan.config, run, judge_ids, owners, answering) if judge_ids else None
        if run.provider not in answered and judge is None:
            return run
        full = plan.config.provider(run.provider).cost  # the configured price
        standard = run_cost(run.items, full)
        if judge is not None and judge.standard_cost is not None:
            standard = (standard or 0.0) + judge.standard_cost
        discount = (full or Cost()).batch_discount
        return replace(run, batch=BatchCost(tuple(answered.get(run.provider, ())), discount, standard, judge))

    return amend


def _judge_share(
    config: Config,
    run: RunResult,
    batch_ids: tuple[str, ...],
    owners: Mapping[str, Sequence[object]],
    answering: Answering,
) -> JudgeBatchCost | None:
    """The judge's batch answers the run's grading took (each counted to the run whose answer asked
    it first), priced at each judge's standard and batch price; None when it took none."""
    standard = cost = 0.0
    served = priced = False
    for instance_id, made in answering.made.items():
        price = config.provider(instance_id).cost
        for key, usage in made.served:
            owner = owners.get(key)
            if owner is None or len(owner) < 4 or (owner[0], owner[3]) != (run.set_id, run.provider):
                continue
            served = True
            if price is not None:
                priced = True
                standard += price.of(usage.input_tokens, usage.output_tokens)
                cost += batch_price(price).of(usage.input_tokens, usage.output_tokens)
    if not served:
        return None
    return JudgeBatchCost(batch_ids, standard if priced else None, cost if priced else None)
