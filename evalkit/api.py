"""The public Python API, and the orchestration the CLI calls.

A run goes: check every input (sets, tolerances, provider, grader, database) -> call and grade
(runner) -> compare with the baseline and store (one short transaction). Everything that can be
wrong with the user's input is found before the first model call, so an input error leaves
nothing called and nothing stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evalkit import __version__
from evalkit.compare import BaselineRun, compare_run, not_comparable_reason
from evalkit.config import Config, ProviderConfig, RetrieverConfig, choose_provider, db_path
from evalkit.errors import InputError, UnknownNameError
from evalkit.protocols import Grader
from evalkit.providers import ProviderPool, check_provider, default_alias
from evalkit.records import (
    GRADERS,
    AnySet,
    Comparison,
    ItemResult,
    PromptSet,
    QuestionSet,
    RetrievalRunResult,
    RetrievalTolerances,
    RunResult,
    Tolerances,
)
from evalkit.runner import build_request, cache_key, run_prompt_set
from evalkit.sets import load_config, load_set, resolve_sets

Progress = Callable[[ItemResult], None]

__all__ = ["RunPlan", "execute_plan", "load_config", "load_set", "plan_run", "resolve_grader_name", "run_set"]


def resolve_grader_name(name: str | None, *, strict: bool) -> str:
    """The grader to use. The CLI is strict (unknown -> exit 2); the API falls back to deterministic."""
    if name is None:
        return "deterministic"
    if name in GRADERS:
        return name
    if strict:
        raise UnknownNameError(f"unknown grader '{name}' (expected one of: {', '.join(GRADERS)})")
    return "deterministic"


@dataclass(frozen=True, slots=True)
class RunPlan:
    """Everything a run needs, checked: nothing here has called a model or written a file."""

    sets: tuple[PromptSet, ...]
    config: Config
    provider: ProviderConfig
    alias: str
    grader: str
    judge: ProviderConfig | None
    judge_alias: str | None
    db: Path | None
    use_cache: bool  # keep completions in the cache (config ``cache:``)
    read_cache: bool  # replay cached completions (off with --no-cache)
    concurrency: int
    tolerance_overrides: dict[str, Any]
    fail_on_regression: bool = False


def plan_run(
    sets: Sequence[PromptSet],
    config: Config,
    *,
    provider: str | None = None,
    model: str | None = None,
    grader: str = "deterministic",
    judge: str | None = None,
    db: str | Path | None = None,
    store: bool = True,
    use_cache: bool = True,
    concurrency: int | None = None,
    tolerance_overrides: dict[str, Any] | None = None,
    fail_on_regression: bool = False,
) -> RunPlan:
    chosen = choose_provider(config, provider, model)
    for instance in _fallback_chain(config, chosen):
        check_provider(instance)  # a missing key, answers file or model file fails here
    alias = model or default_alias(chosen)
    judge_config = _judge(config, grader, judge)
    limit = concurrency or max(1, chosen.max_concurrency)
    if limit < 1:
        raise InputError("--concurrency must be at least 1")
    return RunPlan(
        sets=tuple(sets),
        config=config,
        provider=chosen,
        alias=alias,
        grader=grader,
        judge=judge_config,
        judge_alias=default_alias(judge_config) if judge_config else None,
        db=db_path(config, db) if store else None,
        use_cache=config.cache,
        read_cache=use_cache,
        concurrency=limit,
        tolerance_overrides=dict(tolerance_overrides or {}),
        fail_on_regression=fail_on_regression,
    )


def _judge(config: Config, grader: str, judge: str | None) -> ProviderConfig | None:
    """The decision grader's judge instance, checked (configured, key present)."""
    if grader != "decision":
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


def _lookup(config: Config, plan_provider: ProviderConfig) -> Callable[[str], ProviderConfig]:
    def lookup(instance_id: str) -> ProviderConfig:
        return plan_provider if instance_id == plan_provider.id else config.provider(instance_id)

    return lookup


def _make_grader(plan: RunPlan, pool: ProviderPool, cache: Any) -> Grader:
    from evalkit.graders import DecisionGrader, DeterministicGrader
    from evalkit.runner import CachedProvider

    if plan.judge is None or plan.judge_alias is None:
        return DeterministicGrader()
    return DecisionGrader(CachedProvider(pool.get(plan.judge.id), cache, plan.read_cache), plan.judge_alias)


def execute_plan(
    plan: RunPlan, progress: Progress | None = None, on_start: Callable[[PromptSet], None] | None = None
) -> list[RunResult]:
    """Run every set of the plan, compare each with its baseline and store it."""
    from evalkit.store import StoreCache

    cache = StoreCache(plan.db) if plan.db is not None and plan.use_cache else None
    if plan.db is not None:
        _prepare_database(plan, cache)
    pool = ProviderPool(_lookup(plan.config, plan.provider))
    grader = _make_grader(plan, pool, cache)

    async def run_all() -> list[RunResult]:
        results = []
        try:
            if plan.judge is not None and plan.judge_alias is not None and plan.judge.adapter != "replay":
                from evalkit.graders import probe

                await probe(pool.get(plan.judge.id), plan.judge_alias)
            for prompt_set in plan.sets:
                if on_start is not None:
                    on_start(prompt_set)
                result = await run_prompt_set(
                    prompt_set,
                    pool=pool,
                    provider=plan.provider,
                    grader=grader,
                    alias=plan.alias,
                    cache=cache,
                    read_cache=plan.read_cache,
                    concurrency=plan.concurrency,
                    tolerances=_tolerances(prompt_set, plan.tolerance_overrides),
                    progress=progress,
                    grader_cost=plan.judge.cost if plan.judge else None,
                )
                results.append(_compare_and_store(plan, result))
        finally:
            await pool.aclose()
        return results

    try:
        return asyncio.run(run_all())
    finally:
        if cache is not None:
            cache.flush()


def _prepare_database(plan: RunPlan, cache: Any) -> None:
    """Open (create, migrate) the database once before any call, and preload the cache with
    every entry the run may ask for: each prompt on the instance and on its fallback chain."""
    from evalkit.store import Store

    assert plan.db is not None
    with Store.open(plan.db):
        pass
    if cache is not None and plan.read_cache:
        chain = _fallback_chain(plan.config, plan.provider)
        aliases = {plan.provider.id: plan.alias} | {c.id: default_alias(c) for c in chain[1:]}
        keys = [
            cache_key(instance, build_request(s, p, alias))
            for instance, alias in aliases.items()
            for s in plan.sets
            for p in s.prompts
        ]
        cache.preload(keys)
        if plan.judge is not None and plan.judge_alias is not None:
            cache.preload_instance(plan.judge.id, plan.judge_alias)


def _tolerances(prompt_set: PromptSet, overrides: dict[str, Any]) -> Tolerances:
    base = prompt_set.tolerances
    return Tolerances(
        max_pass_rate_drop=overrides.get("max_pass_rate_drop", base.max_pass_rate_drop),
        max_mean_score_drop=overrides.get("max_mean_score_drop", base.max_mean_score_drop),
    )


def _compare_and_store(plan: RunPlan, run: RunResult) -> RunResult:
    from evalkit.compare import gate_passed
    from evalkit.store import Store, find_baseline, save_run

    if plan.db is None:
        reason = not_comparable_reason(run)
        text = f"Not compared: {reason}." if reason else "Not compared: no store (the run was not stored)."
        return replace(run, comparison=Comparison("not_compared", text))
    with Store.open(plan.db) as store:
        baseline = None
        gen = run.generator
        if gen is not None and gen.reported_model:
            row = find_baseline(
                store,
                set_id=run.set_id,
                provider=gen.provider,
                model=gen.model,
                reported_model=gen.reported_model,
                grader=run.grader,
            )
            baseline = BaselineRun(**row) if row else None
        comparison = compare_run(run, baseline, run.tolerances)
        run = replace(run, comparison=comparison)
        gate = {
            "fail_on_regression": plan.fail_on_regression,
            "passed": gate_passed(comparison, plan.fail_on_regression),
        }
        save_run(store, run, plan.config.privacy, __version__, gate)
    return run


def run_set(
    prompt_set: PromptSet | str | Path,
    *,
    provider: str | None = None,
    model: str | None = None,
    grader: str | None = "deterministic",
    config: Config | str | Path | None = None,
    db: str | Path | None = None,
    store: bool = True,
    use_cache: bool = True,
    concurrency: int | None = None,
    tolerances: dict[str, Any] | None = None,
) -> RunResult:
    """Run one prompt set and return its result (compared and stored unless ``store=False``).

    An unknown grader name falls back to ``deterministic``, so the API never spends judge
    tokens by accident.
    """
    cfg = config if isinstance(config, Config) else load_config(config)
    loaded: AnySet = prompt_set if isinstance(prompt_set, PromptSet) else load_set(prompt_set)
    if not isinstance(loaded, PromptSet):
        raise InputError(f"{loaded.path}: is a question set; use evalkit retrieval")
    overrides = _parse_overrides(tolerances or {})
    plan = plan_run(
        [loaded],
        cfg,
        provider=provider,
        model=model,
        grader=resolve_grader_name(grader, strict=False),
        db=db,
        store=store,
        use_cache=use_cache,
        concurrency=concurrency,
        tolerance_overrides=overrides,
    )
    return execute_plan(plan)[0]


def _parse_overrides(values: dict[str, Any]) -> dict[str, Any]:
    from evalkit.records import parse_tolerance

    out = {}
    for name, value in values.items():
        try:
            out[name] = parse_tolerance(value)
        except ValueError as exc:
            raise InputError(f"tolerance {name}: {exc}") from None
    return out


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


def _read_store(config: Config, db: str | Path | None) -> Any:
    """A read-only store, or None when the database does not exist yet."""
    from evalkit.store import Store

    path = db_path(config, db)
    if not path.is_file():
        return None
    try:
        return Store.open(path, read_only=True)
    except Exception as exc:  # an older schema: open writable once to migrate
        from evalkit.errors import StoreError

        if isinstance(exc, StoreError) and "schema is older" in str(exc):
            Store.open(path).close()
            return Store.open(path, read_only=True)
        raise


def history(
    config: Config,
    *,
    db: str | Path | None = None,
    set_id: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    grader: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Stored runs, newest first (an empty list when there is no database yet)."""
    from evalkit.store import history as query

    store = _read_store(config, db)
    if store is None:
        return []
    with store:
        return query(store, set_id=set_id, provider=provider, model=model, grader=grader, limit=limit)


def set_report(config: Config, *, db: str | Path | None = None) -> list[dict[str, Any]]:
    """Per set: latest run, verdict, baseline and trend."""
    from evalkit.store import set_summaries

    store = _read_store(config, db)
    if store is None:
        return []
    with store:
        return set_summaries(store)


def show_run(
    config: Config, run_id: str, *, db: str | Path | None = None
) -> tuple[RunResult | RetrievalRunResult, dict[str, Any]]:
    """One stored run with its items (as its privacy level kept them)."""
    from evalkit.store import load_retrieval_run, load_run, run_kind

    store = _read_store(config, db)
    if store is None:
        raise UnknownNameError(f"no stored run '{run_id}': the database {db_path(config, db)} does not exist yet")
    with store:
        full_id, kind = run_kind(store, run_id)
        if kind == "retrieval":
            run = load_retrieval_run(store, full_id)
            gate = store.con.execute("select metrics->'gate' from runs where run_id = $1", [full_id]).fetchone()
            return run, {"gate": _json(gate[0]) if gate else None}
        return load_run(store, full_id)


def _json(value: Any) -> Any:
    import json

    return json.loads(value) if isinstance(value, str) else value


def prune(config: Config, *, older_than_days: int | None = None, db: str | Path | None = None) -> tuple[int, int]:
    """Delete whole runs and cache entries older than the retention; returns (runs, cache entries)."""
    from evalkit.store import Store, prune_cache, prune_runs

    days = older_than_days if older_than_days is not None else config.retention_days
    path = db_path(config, db)
    if not path.is_file():
        return 0, 0
    with Store.open(path) as store:
        runs = prune_runs(store, days)
        with store.transaction():
            entries = prune_cache(store, days)
    return runs, entries


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
    from evalkit.compare import PreviousRetrieval, compare_retrieval, gate_passed
    from evalkit.retrieval.evaluate import evaluate
    from evalkit.runner import new_run_id, utc_now
    from evalkit.store import Store, previous_retrieval, save_retrieval_run

    if plan.db is not None:
        Store.open(plan.db).close()  # create or migrate before any call; a bad database fails here
    cache_dir = plan.db.parent / "index" if plan.db is not None else None
    run = asyncio.run(
        evaluate(
            plan.question_set,
            plan.retriever,
            run_id=new_run_id(),
            started_at=utc_now(),
            finished=utc_now,
            limit=plan.limit,
            corpus=plan.corpus,
            cache_dir=cache_dir,
            tolerances=plan.tolerances,
        )
    )
    if plan.db is None:
        return replace(run, comparison=compare_retrieval(run, None, plan.tolerances))
    with Store.open(plan.db) as store:
        row = previous_retrieval(store, run.set_id, run.retriever)
        comparison = compare_retrieval(run, PreviousRetrieval(**row) if row else None, plan.tolerances)
        run = replace(run, comparison=comparison)
        gate = {
            "fail_on_regression": plan.fail_on_regression,
            "passed": gate_passed(comparison, plan.fail_on_regression),
        }
        save_retrieval_run(store, run, plan.config.privacy, __version__, gate)
    return run
