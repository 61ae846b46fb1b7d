"""Plans and their execution: what the CLI and the Python API run.

A run goes: check every input (sets, tolerances, providers, grader and judge, database) into a
plan -> call and grade (runner) -> compare with the baseline and store (one short transaction
per run). Everything that can be wrong with the user's input is found while planning, so an
input error leaves nothing called and nothing stored. Several provider instances run the same
sets concurrently and store one run each.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from evalkit._version import __version__
from evalkit.compare import (
    BaselineRun,
    compare_run,
    describe_scope,
    gate_of,
    not_comparable_reason,
    paired_test,
    per_item,
    with_other_scope,
)
from evalkit.config import Config, ProviderConfig, RetrieverConfig, choose_provider, db_path
from evalkit.errors import InputError, RunsNotStored, StoreError
from evalkit.memory import running
from evalkit.protocols import Grader
from evalkit.providers import ProviderPool, caches_answers, check_provider, default_alias, endpoint_identity
from evalkit.records import (
    BaselineEntry,
    BaselineFile,
    Comparison,
    Gate,
    ItemResult,
    PromptSet,
    QuestionSet,
    RetrievalRunResult,
    RetrievalTolerances,
    RunResult,
    Tolerances,
)
from evalkit.runner import build_request, cache_key, first_error, run_prompt_set
from evalkit.sets import resolve_sets
from evalkit.sets.replayed import check_answered, replay_chain
from evalkit.verdicts import ComparisonState

Progress = Callable[[ItemResult], None]
INTERRUPTED_FLUSH_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class Target:
    """One provider instance a plan runs on, and the alias sent to it."""

    provider: ProviderConfig
    alias: str


@dataclass(frozen=True, slots=True)
class RunPlan:
    """Everything a run needs, checked: nothing here has called a model or written a file."""

    sets: tuple[PromptSet, ...]
    config: Config
    targets: tuple[Target, ...]
    grader: str
    judge: ProviderConfig | None
    judge_alias: str | None
    db: Path | None
    use_cache: bool  # keep completions in the cache (config ``cache:``)
    read_cache: bool  # replay cached completions (off with --no-cache)
    concurrency: int | None  # None: each instance's max_concurrency
    tolerance_overrides: dict[str, Any]
    fail_on_regression: bool = False
    repeats: int = 1
    significance: float | None = None
    gate_overrides: Mapping[str, Decimal] = field(default_factory=dict)  # --min-pass-rate, --min-mean-score
    baselines: Mapping[str, BaselineFile] = field(default_factory=dict)  # set id -> its baseline file, read

    @property
    def provider(self) -> ProviderConfig:
        return self.targets[0].provider

    @property
    def alias(self) -> str:
        return self.targets[0].alias


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
    tolerance_overrides: dict[str, Any] | None = None,
    fail_on_regression: bool = False,
    repeats: int = 1,
    significance: float | None = None,
    gate_overrides: Mapping[str, Decimal] | None = None,
    baselines: str | Path | None = None,
) -> RunPlan:
    requested = [provider] if isinstance(provider, str) or provider is None else list(dict.fromkeys(provider))
    if len(requested) > 1 and model:
        raise InputError("--model applies to one provider instance; give each instance its model: in evalkit.yaml")
    targets = []
    for name in requested or [None]:
        chosen = choose_provider(config, name, model)
        for instance in _fallback_chain(config, chosen):
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
    if significance is not None and not 0 < significance < 1:
        raise InputError(f"--significance: must be a number between 0 and 1 (exclusive), got {significance!r}")
    judge_config = _judge(config, grader, judge)
    if baselines is not None and not Path(baselines).is_dir():
        raise InputError(f"--baselines {baselines}: no such folder; check the path (evalkit baseline accept writes it)")
    baseline_files = _baseline_files(sets, Path(baselines) if baselines else config.baselines_dir)
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
                    for instance in _fallback_chain(config, target.provider):
                        if instance.cost is None:
                            raise InputError(
                                f"{assertion.where or prompt_set.path}: a cost assertion needs a priced instance, "
                                f"and provider '{instance.id}' has no cost: in evalkit.yaml; add "
                                "cost: {input_per_mtok: ..., output_per_mtok: ...} to it or remove the assertion"
                            )


def _baseline_files(sets: Sequence[PromptSet], folder: Path) -> dict[str, BaselineFile]:
    """Each set's baseline file that exists, read and checked: a malformed one is exit 2 before
    anything is called."""
    from evalkit.sets.baselinefile import baseline_path, load_baseline_file

    found = {}
    for prompt_set in sets:
        loaded = load_baseline_file(baseline_path(folder, prompt_set.id))
        if loaded is not None:
            found[prompt_set.id] = loaded
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


def _fallback_chain(config: Config, first: ProviderConfig) -> list[ProviderConfig]:
    chain, seen = [first], {first.id}
    while chain[-1].fallback and chain[-1].fallback not in seen:
        nxt = config.provider(chain[-1].fallback)
        chain.append(nxt)
        seen.add(nxt.id)
    return chain


def _lookup(plan: RunPlan) -> Callable[[str], ProviderConfig]:
    chosen = {t.provider.id: t.provider for t in plan.targets}

    def lookup(instance_id: str) -> ProviderConfig:
        return chosen.get(instance_id) or plan.config.provider(instance_id)

    return lookup


def _make_grader(plan: RunPlan, pool: ProviderPool, cache: Any) -> Grader:
    from evalkit.graders import DecisionGrader, DeterministicGrader
    from evalkit.runner import CachedProvider

    if plan.judge is None or plan.judge_alias is None:
        return DeterministicGrader()
    judge = CachedProvider(pool.get(plan.judge.id), cache, plan.read_cache, pool.endpoint(plan.judge.id))
    return DecisionGrader(judge, plan.judge_alias)


def execute_plan(
    plan: RunPlan, progress: Progress | None = None, on_start: Callable[[PromptSet], None] | None = None
) -> list[RunResult]:
    """Run every set of the plan on every target; then compare each run with its baseline and
    store it (one transaction per run). An interrupted or aborted plan stores no run; the answers
    it received stay in the cache.

    The database is opened (created, migrated) before the first call, so one that cannot be
    opened costs no call (opening it alongside the calls was tried: bench/README.md, session 2)."""
    from evalkit.store import StoreCache

    cache = StoreCache(plan.db, plan.config.cache_ttl_days) if plan.db is not None and plan.use_cache else None
    if plan.db is not None:
        _prepare_database(plan, cache)
    try:
        with running():  # the collector policy, when the caller asked for it (evalkit/memory.py)
            runs = asyncio.run(_run_all(plan, cache, progress, on_start))
    except KeyboardInterrupt:
        raise _interrupted(0, [], cache) from None
    except BaseException:
        if cache is not None:
            cache.flush()
        raise
    return _compare_and_store(plan, runs, cache)


def _answers(count: int) -> str:
    return f"{count} answer{'' if count == 1 else 's'} received"


def _interrupted(total: int, stored: Sequence[RunResult], cache: Any) -> KeyboardInterrupt:
    """Ctrl-C, saying what was kept. The answers received are written to the cache first, but a
    user who pressed Ctrl-C does not wait long for a database another process holds."""
    from evalkit.store.store import lock_wait_s

    if stored:
        ids = ", ".join(r.run_id for r in stored)
        others = "" if len(stored) == total else "; the others were not"
        kept = f"{len(stored)} of {total} runs of this command were stored ({ids}){others}"
    else:
        kept = "no run of this command was stored"
    if cache is not None:
        with contextlib.suppress(StoreError, KeyboardInterrupt):  # a second Ctrl-C: stop waiting
            cache.flush(wait_s=min(INTERRUPTED_FLUSH_WAIT_S, lock_wait_s()))
        if cache.unwritten:
            kept += (
                f"; {_answers(cache.unwritten)} could not be cached: "
                f"{cache.path} was held by another process or could not be opened"
            )
        else:
            kept += "; the answers received are in the cache"
    return KeyboardInterrupt(kept)


async def _run_all(
    plan: RunPlan, cache: Any, progress: Progress | None, on_start: Callable[[PromptSet], None] | None
) -> list[RunResult]:
    pool = ProviderPool(_lookup(plan))
    grader = _make_grader(plan, pool, cache)
    runs: list[RunResult] = []
    try:
        if plan.judge is not None and plan.judge_alias is not None and plan.judge.adapter != "replay":
            from evalkit.graders import probe

            await probe(pool.get(plan.judge.id), plan.judge_alias)
        for prompt_set in plan.sets:
            if on_start is not None:
                on_start(prompt_set)
            try:
                async with asyncio.TaskGroup() as group:
                    tasks = [
                        group.create_task(
                            run_prompt_set(
                                prompt_set,
                                pool=pool,
                                provider=target.provider,
                                grader=grader,
                                alias=target.alias,
                                cache=cache,
                                read_cache=plan.read_cache,
                                concurrency=plan.concurrency or max(1, target.provider.max_concurrency),
                                tolerances=_tolerances(prompt_set, plan.tolerance_overrides),
                                progress=progress,
                                grader_cost=plan.judge.cost if plan.judge else None,
                                repeats=plan.repeats,
                            )
                        )
                        for target in plan.targets
                    ]
            except BaseExceptionGroup as failure:
                raise first_error(failure) from None
            runs.extend(task.result() for task in tasks)
    finally:
        await pool.aclose()
    return runs


def _prepare_database(plan: RunPlan, cache: Any) -> None:
    """Open (create, migrate) the database before any call, and preload the cache with every
    entry the run may ask for: each prompt and repeat on every target and its fallbacks."""
    from evalkit.store import Store

    assert plan.db is not None
    with Store.open(plan.db) as store:
        if cache is None or not plan.read_cache:
            return
        aliases: dict[str, str] = {}
        endpoints: dict[str, str] = {}
        for target in plan.targets:
            chain = [c for c in _fallback_chain(plan.config, target.provider) if caches_answers(c)]
            # recorded answers, and applications without cache: true, are never cached: nothing to preload
            aliases |= {c.id: target.alias if c is target.provider else default_alias(c) for c in chain}
            endpoints |= {c.id: endpoint_identity(c) for c in chain}
        keys = [
            cache_key(instance, build_request(s, p, alias), repeat, endpoint=endpoints[instance])
            for instance, alias in aliases.items()
            for s in plan.sets
            for p in s.prompts
            for repeat in range(plan.repeats)
        ]
        cache.preload(store, keys)
        if plan.judge is not None and plan.judge_alias is not None:
            cache.preload_instance(store, plan.judge.id, plan.judge_alias)


def _tolerances(prompt_set: PromptSet, overrides: dict[str, Any]) -> Tolerances:
    base = prompt_set.tolerances
    return Tolerances(
        max_pass_rate_drop=overrides.get("max_pass_rate_drop", base.max_pass_rate_drop),
        max_mean_score_drop=overrides.get("max_mean_score_drop", base.max_mean_score_drop),
    )


def _compare_and_store(plan: RunPlan, runs: list[RunResult], cache: Any = None) -> list[RunResult]:
    """The fresh answers cached, and each run compared with its baseline and stored, in one
    short database session."""
    from evalkit.store import Store

    if plan.db is None:
        return [_gated(plan, replace(run, comparison=_unstored_comparison(run))) for run in runs]
    stored: list[RunResult] = []  # each run is its own transaction: the ones before a fault are kept
    try:
        with Store.open(plan.db) as store:
            if cache is not None:
                cache.flush(store=store)
            for run in runs:
                stored.append(_compare_and_save(plan, store, run))
    except KeyboardInterrupt:
        raise _interrupted(len(runs), stored, cache) from None
    except StoreError as exc:  # the runs were carried out: they are still reported (README "Commands")
        if cache is not None:
            cache.flush(wait_s=0.0)  # once more, without waiting: a busy database keeps them pending
        lost = [
            _gated(
                plan,
                replace(run, comparison=Comparison.not_compared(f"the run could not be stored ({exc})")),
            )
            for run in runs[len(stored) :]
        ]
        unwritten = f"; {_answers(cache.unwritten)} were not cached" if cache is not None and cache.unwritten else ""
        raise RunsNotStored(
            f"{exc}; {len(lost)} of {len(runs)} runs were not stored{unwritten}", (*stored, *lost)
        ) from None
    return stored


def _unstored_comparison(run: RunResult) -> Comparison:
    reason = not_comparable_reason(run)
    return Comparison.not_compared(reason or "no store (the run was not stored)")


def _compare_and_save(plan: RunPlan, store: Any, run: RunResult) -> RunResult:
    from evalkit.store import save_run

    baseline = _baseline(plan, store, run)
    paired = None
    if baseline is not None and (plan.repeats > 1 or plan.significance is not None):
        before = _baseline_outcomes(store, baseline)
        if before:
            paired = paired_test(before, [(i.id, i.passed, i.score) for i in run.items])
    comparison = compare_run(run, baseline, run.tolerances, paired, plan.significance)
    missing = _scope_missing(plan, run) if comparison.state.is_baseline else None
    if missing is not None:  # a committed baseline exists, just not for what answered: say so, never pass
        comparison = Comparison.not_compared(missing)
    if comparison.state.is_baseline or missing is not None:
        other = _other_baseline(plan, store, run)
        if other is not None:  # another model's baseline: numbers for information, the verdict stands
            comparison = with_other_scope(comparison, run, *other)
    run = _gated(plan, replace(run, comparison=comparison))
    save_run(store, run, plan.config.privacy, __version__, run.gate)
    return run


def _gated(plan: RunPlan, run: RunResult) -> RunResult:
    """The run with its gate decided: the regression gate when asked, and the absolute gates."""
    prompt_set = next(s for s in plan.sets if s.id == run.set_id)
    minimums = Gate(
        min_pass_rate=plan.gate_overrides.get("min_pass_rate", prompt_set.gate.min_pass_rate),
        min_mean_score=plan.gate_overrides.get("min_mean_score", prompt_set.gate.min_mean_score),
    )
    critical = [p.id for p in prompt_set.prompts if p.critical]
    return replace(run, gate=gate_of(run, plan.fail_on_regression, minimums, critical))


def _baseline(plan: RunPlan, store: Any, run: RunResult) -> BaselineRun | None:
    """The run's baseline: its scope's entry in the set's baseline file, else the newest
    comparable run of its scope in the database (README "Baselines and regressions")."""
    from evalkit.store import find_baseline, item_outcomes

    gen = run.generator
    if gen is None or not gen.reported_model:
        return None
    baseline_file = plan.baselines.get(run.set_id)
    entry = baseline_file.entry_for(gen.provider, gen.model, gen.reported_model, run.grader) if baseline_file else None
    if baseline_file is not None and entry is not None:
        return _file_baseline(baseline_file, entry)
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


def _file_baseline(baseline_file: BaselineFile, entry: BaselineEntry) -> BaselineRun:
    return BaselineRun(
        run_id=entry.run_id,
        pass_rate=entry.pass_rate,
        mean_score=entry.mean_score,
        passed_count=entry.passed_count,
        item_count=entry.prompt_count * entry.repeats,
        set_fingerprint=entry.set_fingerprint,
        source="file",
        file=_shown_path(baseline_file.path),
        items=entry.items,
        repeats=entry.repeats,
    )


def _other_baseline(plan: RunPlan, store: Any, run: RunResult) -> tuple[BaselineRun, tuple[str, ...]] | None:
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
        return _file_baseline(baseline_file, entry), entry.scope
    row = find_other_baseline(
        store, set_id=run.set_id, provider=gen.provider, model=gen.model, reported_model=gen.reported_model,
        grader=run.grader,
    )  # fmt: skip
    if row is None:
        return None
    scope = (row.pop("provider"), row.pop("model"), row.pop("reported_model"), run.grader)
    outcomes = item_outcomes(store, row["run_id"])
    return BaselineRun(**row, items=per_item(outcomes) if outcomes else None), scope


def _scope_missing(plan: RunPlan, run: RunResult) -> str | None:
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
        f"{_shown_path(baseline_file.path)} has no baseline for {describe_scope(run)} (it holds: {held}); "
        "run with the instance, model and grader it holds, or accept a baseline for this scope "
        "with evalkit baseline accept"
    )


def _shown_path(path: Path) -> str:
    """A path as a user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _baseline_outcomes(store: Any, baseline: BaselineRun) -> list[tuple[str, bool, float]]:
    """(id, passed, score) samples of the baseline for the paired test."""
    from evalkit.store import item_outcomes

    if baseline.source == "file":  # each prompt's samples as the file describes them
        samples = []
        for item_id, (rate, score) in (baseline.items or {}).items():
            passed = round(rate * baseline.repeats)
            samples += [(item_id, k < passed, score) for k in range(baseline.repeats)]
        return samples
    return item_outcomes(store, baseline.run_id)


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


@dataclass(frozen=True, slots=True)
class RetrievalPlan:
    """A checked retrieval run: nothing has been called or written yet."""

    question_set: QuestionSet
    config: Config
    retriever: RetrieverConfig
    limit: int
    db: Path | None
    tolerances: RetrievalTolerances
    corpus: Any
    warnings: tuple[str, ...]
    fail_on_regression: bool = False


def plan_retrieval(
    target: str,
    config: Config,
    *,
    retriever: str,
    limit: int = 12,
    db: str | Path | None = None,
    store: bool = True,
    tolerance_overrides: dict[str, Any] | None = None,
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


def execute_retrieval(plan: RetrievalPlan) -> RetrievalRunResult:
    """Run the question set against the retriever, compare with the previous run, store."""
    from evalkit.compare import PreviousRetrieval, compare_retrieval
    from evalkit.retrieval.evaluate import evaluate
    from evalkit.runner import new_run_id, utc_now
    from evalkit.store import Store, previous_retrieval, save_retrieval_run

    if plan.db is not None:
        Store.open(plan.db).close()  # create or migrate before any call; a bad database fails here
    cache_dir = plan.db.parent / "index" if plan.db is not None else None
    started = datetime.now(UTC)
    run = asyncio.run(
        evaluate(
            plan.question_set,
            plan.retriever,
            run_id=new_run_id(started),
            started_at=utc_now(started),  # the run id's time and the stored start are one instant
            finished=utc_now,
            limit=plan.limit,
            corpus=plan.corpus,
            cache_dir=cache_dir,
            tolerances=plan.tolerances,
        )
    )
    if plan.db is None:
        unstored = replace(run, comparison=compare_retrieval(run, None, plan.tolerances))
        return replace(unstored, gate=gate_of(unstored, plan.fail_on_regression))
    try:
        with Store.open(plan.db) as store:
            row = previous_retrieval(store, run.set_id, run.retriever)
            comparison = compare_retrieval(run, PreviousRetrieval(**row) if row else None, plan.tolerances)
            stored = replace(run, comparison=comparison)
            stored = replace(stored, gate=gate_of(stored, plan.fail_on_regression))
            save_retrieval_run(store, stored, plan.config.privacy, __version__, stored.gate)
    except StoreError as exc:  # carried out: still reported (README "Commands")
        lost = replace(
            run, comparison=Comparison.not_compared(f"the run could not be stored ({exc})", ComparisonState.UNKNOWN)
        )
        lost = replace(lost, gate=gate_of(lost, plan.fail_on_regression))
        raise RunsNotStored(f"{exc}; the run was not stored", (lost,)) from None
    return stored
