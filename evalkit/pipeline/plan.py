"""Planning: every input checked into a plan, nothing called and nothing stored.

Everything that can be wrong with the user's input is found here (sets, tolerances, providers,
grader and judge, baseline files, retriever), so an input error is exit 2 with nothing called and
nothing stored (README "Commands").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path

from evalkit.config import Config, ProviderConfig, choose_provider, db_path
from evalkit.errors import InputError
from evalkit.pipeline.judging import plan_judged
from evalkit.pipeline.plans import RetrievalPlan, RunPlan, Target
from evalkit.pipeline.shards import plan_shard, refused_options
from evalkit.providers import check_provider, default_alias
from evalkit.records import BaselineFile, PromptSet, QuestionSet, RetrievalTolerances
from evalkit.sets import resolve_sets
from evalkit.sets.replayed import check_answered, replay_chain


def plan_run(
    sets: Sequence[PromptSet],
    config: Config,
    *,
    provider: str | Sequence[str] | None = None,
    model: str | None = None,
    grader: str = "deterministic",
    judge: str | None = None,
    db: str | Path | None = None,
    store: bool = True,
    use_cache: bool = True,
    concurrency: int | None = None,
    tolerance_overrides: Mapping[str, Decimal] | None = None,
    fail_on_regression: bool = False,
    repeats: int = 1,
    significance: float | None = None,
    gate_overrides: Mapping[str, Decimal] | None = None,
    baselines: str | Path | None = None,
    shard: str | None = None,
    run_group: str | None = None,
) -> RunPlan:
    """Every input checked into a plan; ``shard`` (``I/N``) plans that shard's part of each set
    (README "Larger suites: shards and batches")."""
    sharded = None
    if shard is not None:
        refused = refused_options(
            fail_on_regression=fail_on_regression, significance=significance, gate_overrides=gate_overrides,
            tolerance_overrides=tolerance_overrides, baselines=baselines,
        )  # fmt: skip
        sharded = plan_shard(sets, config, shard, run_group, refused)
        sets = sharded.parts
    elif run_group is not None:
        raise InputError("--run-group names the group of a sharded run: give it with --shard I/N")
    requested = [provider] if isinstance(provider, str) or provider is None else list(dict.fromkeys(provider))
    if len(requested) > 1 and model:
        raise InputError("--model applies to one provider instance; give each instance its model: in evalkit.yaml")
    targets = []
    for name in requested or [None]:
        chosen = choose_provider(config, name, model)
        for instance in fallback_chain(config, chosen):
            check_provider(instance)  # a missing key, answers file or model file fails here
        targets.append(Target(chosen, model or default_alias(chosen)))
    _check_priced(sets, config, targets)
    for target in targets:  # a replay with no recorded answer for a prompt: exit 2 now, not an item error
        chain = replay_chain(config, target.provider)
        if chain is not None:
            check_answered([(s.path or Path(s.id), s.id, [p.id for p in s.prompts]) for s in sets], chain)
    if repeats < 1:
        raise InputError("--repeat must be at least 1")
    if concurrency is not None and concurrency < 1:  # the command line's IntRange, for API callers
        raise InputError(f"--concurrency must be at least 1, got {concurrency}")
    check_significance(significance)
    judge_config = _judge(config, grader, judge)
    judged = plan_judged(sets, config, grader)
    baseline_files = read_baselines([s.id for s in sets], config, baselines)
    return RunPlan(
        sets=tuple(sets),
        config=config,
        targets=tuple(targets),
        grader=grader,
        judge=judge_config,
        judge_alias=default_alias(judge_config) if judge_config else None,
        db=db_path(config, db) if store else None,
        use_cache=config.cache,
        read_cache=use_cache,
        concurrency=concurrency,
        tolerance_overrides=dict(tolerance_overrides or {}),
        fail_on_regression=fail_on_regression,
        repeats=repeats,
        significance=significance,
        gate_overrides=dict(gate_overrides or {}),
        baselines=baseline_files,
        shard=sharded.shard if sharded else None,
        fingerprints=sharded.fingerprints if sharded else {},
        set_shards=sharded.shards if sharded else {},
        judged=judged,
    )


def _check_priced(sets: Sequence[PromptSet], config: Config, targets: Sequence[Target]) -> None:
    """A ``cost`` assertion needs every instance that may answer to be priced (README "Assertions")."""
    from evalkit.assertions import registry

    for prompt_set in sets:
        for prompt in prompt_set.prompts:
            for assertion in prompt.assertions:
                kind = registry.get(assertion.type)
                if kind is None or "cost" not in kind.needs:
                    continue
                for target in targets:
                    for instance in fallback_chain(config, target.provider):
                        if instance.cost is None:
                            raise InputError(
                                f"{assertion.where or prompt_set.path}: a cost assertion needs a priced instance, "
                                f"and provider '{instance.id}' has no cost: in evalkit.yaml; add "
                                "cost: {input_per_mtok: ..., output_per_mtok: ...} to it or remove the assertion"
                            )


def check_significance(significance: float | None) -> None:
    if significance is not None and not 0 < significance < 1:
        raise InputError(f"--significance: must be a number between 0 and 1 (exclusive), got {significance!r}")


def read_baselines(set_ids: Sequence[str], config: Config, baselines: str | Path | None) -> dict[str, BaselineFile]:
    """Each set's baseline file that exists, in ``--baselines DIR`` else the configured folder, read
    and checked: a malformed one is exit 2 before anything is called."""
    from evalkit.sets.baselinefile import baseline_path, load_baseline_file

    if baselines is not None and not Path(baselines).is_dir():
        raise InputError(f"--baselines {baselines}: no such folder; check the path (evalkit baseline accept writes it)")
    folder = Path(baselines) if baselines else config.baselines_dir
    found = {}
    for set_id in set_ids:
        loaded = load_baseline_file(baseline_path(folder, set_id))
        if loaded is not None:
            found[set_id] = loaded
    return found


def _judge(config: Config, grader: str, judge: str | None) -> ProviderConfig | None:
    """The decision grader's judge instance, checked (configured, key present)."""
    if grader != "decision":
        if judge is not None:  # the user meant the judge to grade: say so rather than ignore it
            raise InputError(
                f"--judge {judge} is the judge of --grader decision; add --grader decision or drop --judge"
            )
        return None
    judge_id = judge or config.decision_provider
    if not judge_id:
        raise InputError(
            "the decision grader needs a judge: set decision: {provider: ID} in evalkit.yaml or pass --judge ID"
        )
    judge_config = config.provider(judge_id)
    check_provider(judge_config)
    return judge_config


def fallback_chain(config: Config, first: ProviderConfig) -> list[ProviderConfig]:
    chain, seen = [first], {first.id}
    while chain[-1].fallback and chain[-1].fallback not in seen:
        nxt = config.provider(chain[-1].fallback)
        chain.append(nxt)
        seen.add(nxt.id)
    return chain


def load_prompt_sets(targets: Sequence[str], config: Config) -> list[PromptSet]:
    """Prompt sets named by files, folders or ids (question sets in a folder are skipped)."""
    loaded = resolve_sets(targets, config.set_dirs)
    prompt_sets = [s for s in loaded if isinstance(s, PromptSet)]
    named_files = {Path(t) for t in targets if Path(t).is_file()}
    for s in loaded:
        if not isinstance(s, PromptSet) and (s.path in named_files or s.id in targets):
            raise InputError(f"{s.path}: '{s.id}' is a question set; run it with evalkit retrieval")
    if not prompt_sets:
        raise InputError(f"no prompt sets in {', '.join(targets)}")
    return prompt_sets


def plan_retrieval(
    target: str,
    config: Config,
    *,
    retriever: str,
    limit: int = 12,
    db: str | Path | None = None,
    store: bool = True,
    tolerance_overrides: Mapping[str, Decimal] | None = None,
    fail_on_regression: bool = False,
) -> RetrievalPlan:
    from evalkit.retrieval.evaluate import missing_expected, set_corpus

    loaded = resolve_sets([target], config.set_dirs)
    if len(loaded) != 1 or not isinstance(loaded[0], QuestionSet):
        kinds = ", ".join(f"{s.id} ({s.kind})" for s in loaded)
        raise InputError(f"{target}: evalkit retrieval needs exactly one question set, got: {kinds}")
    question_set = loaded[0]
    retriever_config = config.retriever(retriever)
    from evalkit.retrieval import registry

    registry.resolve(retriever_config)  # an unknown kind or a plugin that cannot load: exit 2 before the database
    if retriever_config.kind == "lexical" and question_set.corpus is None:
        raise InputError(f"{question_set.path}: the lexical retriever needs a corpus: add corpus: to the set file")
    if limit < 1:
        raise InputError("--limit must be at least 1")
    corpus = set_corpus(question_set)
    warnings: list[str] = []
    if corpus is not None:
        missing = missing_expected(question_set, corpus)
        if missing:
            shown = ", ".join(missing[:10]) + (f", ... ({len(missing)} in all)" if len(missing) > 10 else "")
            warnings.append(f"{question_set.path}: expected ids not in the corpus {question_set.corpus}: {shown}")
    overrides = tolerance_overrides or {}
    base = question_set.tolerances
    return RetrievalPlan(
        question_set=question_set,
        config=config,
        retriever=retriever_config,
        limit=limit,
        db=db_path(config, db) if store else None,
        tolerances=RetrievalTolerances(
            max_top1_drop=overrides.get("max_top1_drop", base.max_top1_drop),
            max_top3_drop=overrides.get("max_top3_drop", base.max_top3_drop),
        ),
        corpus=corpus,
        warnings=tuple(warnings),
        fail_on_regression=fail_on_regression,
    )
