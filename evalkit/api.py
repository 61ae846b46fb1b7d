"""The public Python API: load and run sets, query the history, rank models.

Runs are planned and executed by ``evalkit.pipeline`` (shared with the CLI); these functions are
the small, stable surface ``import evalkit`` offers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.config import Config, ProviderConfig, db_path
from evalkit.errors import EvalkitError, InputError, SchemaOutdatedError, UnknownNameError
from evalkit.memory import collector_policy
from evalkit.pipeline import (
    GatePlan,
    RetrievalPlan,
    RunPlan,
    execute_plan,
    execute_retrieval,
    gate_group,
    load_prompt_sets,
    plan_gate,
    plan_retrieval,
    plan_run,
)
from evalkit.providers import default_alias
from evalkit.records import GRADERS, AnySet, BaselineFile, PendingBatch, PromptSet, RetrievalRunResult, RunResult
from evalkit.rows import Flip, RankedModel, RunComparison, RunFilter, RunRow, SetSummary
from evalkit.sets import load_config, load_set

if TYPE_CHECKING:
    from evalkit.pipeline.collect import Collected
    from evalkit.store import Store

__all__ = [
    "Flip",
    "GatePlan",
    "RankedModel",
    "RetrievalPlan",
    "RunComparison",
    "RunFilter",
    "RunPlan",
    "RunRow",
    "accept_baselines",
    "baseline_files",
    "clear_cache",
    "collect_batches",
    "collector_policy",
    "compare_runs",
    "execute_plan",
    "execute_retrieval",
    "gate_group",
    "history",
    "load_config",
    "load_prompt_sets",
    "load_set",
    "pending_batches",
    "plan_gate",
    "plan_retrieval",
    "plan_run",
    "rank_models",
    "resolve_grader_name",
    "run_set",
    "select_by_quality",
    "set_report",
    "show_run",
    "submit_batches",
]


def resolve_grader_name(name: str | None, *, strict: bool) -> str:
    """The grader to use. The CLI is strict (unknown -> exit 2); the API falls back to deterministic."""
    if name is None:
        return "deterministic"
    if name in GRADERS:
        return name
    if strict:
        raise UnknownNameError(f"unknown grader '{name}' (expected one of: {', '.join(GRADERS)})")
    return "deterministic"


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


def accept_baselines(
    config: Config, run_ids: list[str], *, db: str | Path | None = None, baselines: str | Path | None = None
) -> Any:
    """Write stored runs (default: the latest of every scope) into their sets' baseline files
    (README "Baselines kept in the repository") and mark them accepted; a run that cannot be a baseline is an InputError."""
    from evalkit.baselines import accept_runs

    return accept_runs(config, run_ids, db=db, folder=baselines)


def baseline_files(
    config: Config, set_id: str | None = None, *, baselines: str | Path | None = None
) -> list[BaselineFile]:
    """The accepted baselines in the repository (of one set, or all), read and checked."""
    from evalkit.baselines import baseline_files as read_files

    return read_files(config, set_id, baselines)


def _parse_overrides(values: dict[str, Any]) -> dict[str, Any]:
    from evalkit.records import parse_tolerance

    out = {}
    for name, value in values.items():
        if name not in ("max_pass_rate_drop", "max_mean_score_drop"):
            raise InputError(f"unknown tolerance {name!r} (expected max_pass_rate_drop or max_mean_score_drop)")
        try:
            out[name] = parse_tolerance(value)
        except ValueError as exc:
            raise InputError(f"tolerance {name}: {exc}") from None
    return out


def _read_store(config: Config, db: str | Path | None) -> Store | None:
    """A read-only store, or None when the database does not exist yet."""
    from evalkit.store import Store

    path = db_path(config, db)
    if not path.exists():
        return None
    try:
        return Store.open(path, read_only=True)
    except SchemaOutdatedError:  # open writable once to migrate, then read
        Store.open(path).close()
        return Store.open(path, read_only=True)


def history(
    config: Config,
    *,
    db: str | Path | None = None,
    set_id: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    grader: str | None = None,
    limit: int | None = None,
) -> list[RunRow]:
    """Stored runs, newest first (an empty list when there is no database yet)."""
    from evalkit.store import history as query

    store = _read_store(config, db)
    if store is None:
        return []
    with store:
        return query(store, RunFilter(set_id, provider, model, grader, limit))


def set_report(config: Config, *, db: str | Path | None = None) -> list[SetSummary]:
    """Per set: latest run, verdict, baseline and trend."""
    from evalkit.store import set_summaries

    store = _read_store(config, db)
    if store is None:
        return []
    with store:
        return set_summaries(store)


def html_report(
    config: Config,
    *,
    db: str | Path | None = None,
    set_id: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    grader: str | None = None,
    limit: int | None = None,
    runs: Sequence[RunResult | RetrievalRunResult] = (),
) -> str:
    """The self-contained HTML report (README "The HTML report") of the stored history, filtered as ``report``
    filters it; with ``runs`` (just made), of their sets, these runs shown as the latest."""
    from evalkit.baselines import baseline_files as read_files
    from evalkit.report import html
    from evalkit.report.htmldata import report_sets

    where = RunFilter(set_id, provider, model, grader, limit)
    store = _read_store(config, db)
    with store if store is not None else contextlib.nullcontext():
        sets = report_sets(store, config.privacy, where, runs, lambda found: read_files(config, found))
    models = [m.as_dict() for m in rank_models(config=config, db=db)] if store is not None else []
    source = str(db_path(config, db)) if store is not None else "the runs just made (no database)"
    return html.render(sets, models, source=source)


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
            return load_retrieval_run(store, full_id)
        return load_run(store, full_id)


def merge_databases(
    config: Config, sources: Sequence[str | Path], *, db: str | Path | None = None, with_cache: bool = False
) -> list[dict[str, object]]:
    """Fold the runs of other evalkit databases into this one (README "One history for a team: merge and export"); one entry per source."""
    from evalkit.store import Store
    from evalkit.store.merge import merge

    if not sources:
        raise InputError("merge needs at least one database to fold in: evalkit merge OTHER.duckdb...")
    with Store.open(db_path(config, db)) as store:
        return [m.as_dict() for m in merge(store, [Path(s) for s in sources], with_cache=with_cache)]


def export_parquet(
    config: Config, folder: str | Path, *, db: str | Path | None = None, since: date | None = None
) -> dict[str, int]:
    """The history as Parquet under ``folder`` (runs, results, retrieval; Hive-partitioned by set)."""
    from evalkit.store.export import export_parquet as export

    store = _read_store(config, db)
    if store is None:
        raise UnknownNameError(f"no stored runs: the database {db_path(config, db)} does not exist yet")
    with store:
        return export(store, Path(folder), since)


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


def clear_cache(config: Config, *, older_than_days: int | None = None, db: str | Path | None = None) -> int:
    """Delete every completion cache entry (or those older than ``older_than_days``); returns how
    many. A database that does not exist yet is not created."""
    from evalkit.store import Store
    from evalkit.store import clear_cache as clear

    path = db_path(config, db)
    if not path.is_file():
        return 0
    with Store.open(path) as store:
        return clear(store, older_than_days)


def _safe_alias(provider: ProviderConfig) -> str:
    try:
        return default_alias(provider)
    except EvalkitError:
        return provider.alias


def rank_models(
    policy: str = "priority",
    min_quality: float | None = None,
    *,
    config: Config | str | Path | None = None,
    db: str | Path | None = None,
) -> list[RankedModel[ProviderConfig]]:
    """The configured provider instances ranked by ``policy`` (docs/contract.md "Model ranking"); with none configured,
    the implicit local instance once runs of it are stored (what ``evalkit run`` used)."""
    from evalkit.config import implicit_provider
    from evalkit.routing import Measured, rank
    from evalkit.store import instance_quality

    cfg = config if isinstance(config, Config) else load_config(config)
    store = _read_store(cfg, db)
    measured = []
    with store if store is not None else contextlib.nullcontext():
        for provider in cfg.providers:
            alias = _safe_alias(provider)
            quality, sets = instance_quality(store, provider.id, alias) if store is not None else (None, 0)
            measured.append(Measured(provider, alias, quality, sets))
        local = implicit_provider(None, "local")
        if not cfg.providers and store is not None and local is not None:
            alias = _safe_alias(local)
            quality, sets = instance_quality(store, local.id, alias)
            if sets:
                measured.append(Measured(local, alias, quality, sets))
    return rank(measured, policy, min_quality)


def select_by_quality(
    min_quality: float | None = None, *, config: Config | str | Path | None = None, db: str | Path | None = None
) -> RankedModel[ProviderConfig] | None:
    """The instance with the best known quality (at least ``min_quality``), or None."""
    ranked = rank_models("quality", min_quality, config=config, db=db)
    return next((r for r in ranked if r.quality is not None), None)


def compare_runs(
    config: Config,
    first: str | None = None,
    second: str | None = None,
    *,
    set_id: str | None = None,
    providers: tuple[str, ...] = (),
    db: str | Path | None = None,
) -> RunComparison:
    """Compare two stored runs by id (or the latest run of ``set_id`` on each of two providers)."""
    from evalkit.compare import paired_test, per_item
    from evalkit.store import item_outcomes, latest_run_id, resolve_run_id, run_summary

    store = _read_store(config, db)
    if store is None:
        raise UnknownNameError(f"no stored runs: the database {db_path(config, db)} does not exist yet")
    with store:
        if set_id is not None:
            if len(providers) != 2:
                raise InputError("compare --set needs exactly two --provider options")
            found = [latest_run_id(store, set_id, p) for p in providers]
            for provider, run_id in zip(providers, found, strict=True):
                if run_id is None:
                    raise UnknownNameError(f"no stored run of set '{set_id}' on provider instance '{provider}'")
            ids = [str(r) for r in found]
        elif first and second:
            ids = [resolve_run_id(store, first), resolve_run_id(store, second)]
        else:
            raise InputError("compare needs two run ids, or --set SET with two --provider options")
        summaries = [run_summary(store, i) for i in ids]
        samples = [item_outcomes(store, i) for i in ids]
    if summaries[0].kind != summaries[1].kind:
        raise InputError(
            f"run {ids[0]} is a {summaries[0].kind} run and run {ids[1]} a {summaries[1].kind} run; "
            "compare runs of one kind"
        )
    if summaries[0].set_id != summaries[1].set_id:
        raise InputError(
            f"runs {ids[0]} ({summaries[0].set_id}) and {ids[1]} ({summaries[1].set_id}) are of different "
            "sets; compare runs of one set"
        )
    for summary, rows in zip(summaries, samples, strict=True):
        if not rows:
            raise InputError(
                f"run {summary.run_id} has no stored items (privacy {summary.privacy}); "
                "compare needs runs stored at privacy metadata or above"
            )
    test = paired_test(samples[0], samples[1])
    a, b = per_item(samples[0]), per_item(samples[1])
    flips = tuple(
        Flip(i, a[i][0], b[i][0], a[i][1], b[i][1]) for i in a if i in b and (a[i][0] != b[i][0] or a[i][1] != b[i][1])
    )
    return RunComparison(summaries[0], summaries[1], test, flips)


def submit_batches(plan: RunPlan) -> list[PendingBatch]:
    """``run --batch``: the plan's uncached requests sent as provider batches and kept in the
    database (README "Batches"): the prompts', or the judge's when the cache answers every
    prompt; none when the cache answers everything."""
    from evalkit.pipeline.judgebatches import submit_run

    return submit_run(plan)


def pending_batches(
    config: Config, batch_ids: Sequence[str] = (), *, db: str | Path | None = None
) -> list[PendingBatch]:
    """The batches named (with their submissions' others), else every pending one."""
    from evalkit.pipeline.collect import find

    return find(db_path(config, db), batch_ids)


def collect_batches(
    config: Config,
    batches: Sequence[PendingBatch],
    *,
    db: str | Path | None = None,
    fail_on_regression: bool = False,
    tolerance_overrides: dict[str, Any] | None = None,
    gate_overrides: dict[str, Any] | None = None,
    baselines: str | None = None,
    wait: bool = False,
    poll_interval: float | None = None,
    max_wait: float | None = None,
    on_status: Any = None,
    plan: RunPlan | None = None,
    on_submit: Any = None,
) -> list[Collected]:
    """``evalkit collect``: each submission whose batches have ended graded, compared, gated and
    stored like ``run``; the others left pending (README "Batches"). A submission whose answers
    are in sends its judge's requests as batches first (``on_submit(batches)`` is told) and is
    graded once they have ended too. ``plan``: the plan that submitted them, when this process
    did (it is not planned again)."""
    from evalkit.pipeline.collect import CollectOptions, collect

    given = CollectOptions(fail_on_regression, tolerance_overrides, gate_overrides, baselines)
    waiting = (poll_interval or config.batch_poll_s, max_wait) if wait else None
    return collect(
        config, db_path(config, db), batches, given, waiting=waiting, on_status=on_status, submitted=plan,
        on_submit=on_submit,
    )  # fmt: skip
