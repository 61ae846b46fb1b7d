"""Run a question set against a retriever and score it -> RetrievalRunResult (nothing stored).

The retriever comes from the registry of kinds (``evalkit.retrieval.registry``). The lexical
retriever answers every question in one batch; http, command and plugin retrievers are called
concurrently (bounded). A question whose call fails after retries becomes an item with an
error and the run goes on; a refusal (401/403/404) aborts it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.config import RetrieverConfig
from evalkit.errors import InputError, ProviderError, ProviderRefused, RetrieverError, RunError
from evalkit.protocols import Retriever
from evalkit.records import Question, QuestionSet, Ranking, RetrievalItem, RetrievalRunResult, RetrievalTolerances
from evalkit.retrieval import registry
from evalkit.retrieval.metrics import distinct, score
from evalkit.retrieval.provenance import FIELDS, Provenance, benchmark_fingerprint, variant_fingerprint
from evalkit.sets.corpus import Corpus, load_corpus


@dataclass(frozen=True, slots=True)
class Outcome:
    ranking: tuple[str, ...]
    provenance: dict[str, Any]
    error: str | None = None
    latency_ms: float | None = None


def set_corpus(question_set: QuestionSet) -> Corpus | None:
    if question_set.corpus is None:
        return None
    return load_corpus(question_set.corpus, str(question_set.path or ""), question_set.corpus_line)


def missing_expected(question_set: QuestionSet, corpus: Corpus) -> list[str]:
    """Expected ids the declared corpus does not contain (worth a warning, not an error)."""
    known = corpus.ids
    return sorted({doc for q in question_set.questions for doc in q.expected if doc not in known})


async def _remote(retriever: Retriever, questions: Sequence[Question], limit: int, concurrency: int) -> list[Outcome]:
    """Every question asked concurrently (bounded); a refusal cancels the rest and aborts."""
    slots = asyncio.Semaphore(max(1, concurrency))

    async def one(question: Question) -> Outcome:
        async with slots:
            try:
                ranking: Ranking = await retriever.search(question.question, limit)
            except ProviderRefused as exc:
                raise RunError(str(exc)) from exc
            except (ProviderError, RetrieverError) as exc:
                return Outcome((), {}, error=str(exc))
            return Outcome(ranking.ids, dict(ranking.provenance), latency_ms=ranking.latency_ms)

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(q)) for q in questions]
    except BaseExceptionGroup as failure:
        raise next(e for e in failure.exceptions if isinstance(e, BaseException)) from None
    finally:
        await retriever.aclose()
    return [task.result() for task in tasks]


def _returned_provenance(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Provenance the retriever returned; a field that differs between answers is unknown."""
    merged: dict[str, Any] = {}
    conflicted: set[str] = set()
    for outcome in outcomes:
        for name in FIELDS:
            value = outcome.provenance.get(name)
            if value is None:
                continue
            if name in merged and merged[name] != value:
                conflicted.add(name)
            merged.setdefault(name, value)
    return {k: v for k, v in merged.items() if k not in conflicted}


async def evaluate(
    question_set: QuestionSet,
    config: RetrieverConfig,
    *,
    run_id: str,
    started_at: str,
    finished: Callable[[], str],
    limit: int = 12,
    corpus: Corpus | None = None,
    cache_dir: Path | None = None,
    concurrency: int = 8,
    tolerances: RetrievalTolerances | None = None,
) -> RetrievalRunResult:
    questions = question_set.questions
    if config.kind == "lexical" and corpus is None:
        raise InputError(f"{question_set.path}: the lexical retriever needs a corpus: add corpus: to the set file")
    retriever = registry.build(config, registry.Resources(corpus, cache_dir))
    if isinstance(retriever, registry.BatchRetriever):  # lexical: one batch, its own provenance
        rankings = retriever.search_many([q.question for q in questions], limit)
        outcomes = [Outcome(r.ids, {}) for r in rankings]
        provenance = Provenance.merged(retriever.provenance)
    else:
        outcomes = await _remote(retriever, questions, limit, concurrency)
        provenance = Provenance.merged(config.provenance, _returned_provenance(outcomes))
    return _result(
        question_set,
        config=config,
        outcomes=outcomes,
        provenance=provenance,
        limit=limit,
        run_id=run_id,
        started_at=started_at,
        finished_at=finished(),
        tolerances=tolerances,
    )


def _result(
    question_set: QuestionSet,
    *,
    config: RetrieverConfig,
    outcomes: Sequence[Outcome],
    provenance: Provenance,
    limit: int,
    run_id: str,
    started_at: str,
    finished_at: str,
    tolerances: RetrievalTolerances | None,
) -> RetrievalRunResult:
    questions = question_set.questions
    # every kind of retriever is held to --limit distinct, non-blank ids (blank lines and repeats
    # a command prints do not use it up; an http answer longer than asked is cut)
    rankings = [distinct(o.ranking)[: max(limit, 0)] for o in outcomes]
    scores = score(questions, rankings, [o.error is not None for o in outcomes])
    items = tuple(
        RetrievalItem(
            id=q.id,
            form=q.form,
            hard_class=q.hard_class,
            top1_hit=flags[0],
            top3_hit=flags[1],
            retrieved=tuple(r[:3]),
            question=q.question,
            error=o.error,
            latency_ms=o.latency_ms,
        )
        for q, r, o, flags in zip(questions, rankings, outcomes, scores.per_question, strict=True)
    )
    return RetrievalRunResult(
        run_id=run_id,
        set_id=question_set.id,
        retriever=config.id,
        items=items,
        started_at=started_at,
        finished_at=finished_at,
        question_count=len(questions),
        top1_hit_rate=scores.rates.top1_hit_rate,
        top3_hit_rate=scores.rates.top3_hit_rate,
        by_form={k: v.as_dict() for k, v in scores.by_form.items()},
        by_hard_class={k: v.as_dict() for k, v in scores.by_hard_class.items()},
        metrics=scores.metrics,
        scored=scores.scored,
        left_out=scores.left_out,
        provenance=provenance.as_dict(),
        benchmark_fingerprint=benchmark_fingerprint(question_set, provenance.corpus_revision),
        variant_fingerprint=variant_fingerprint(provenance),
        top1_hits=scores.top1_hits,
        top3_hits=scores.top3_hits,
        tolerances=tolerances or question_set.tolerances,
        set_name=question_set.name,
        set_path=str(question_set.path) if question_set.path else None,
        error_count=sum(1 for o in outcomes if o.error is not None),
    )
