"""The checked plans a run executes: what planning found, before anything is called.

A plan holds every input, checked (README "Commands"): executing it cannot fail on the user's
input, only on a provider, a retriever or the database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.config import Config, ProviderConfig, RetrieverConfig
from evalkit.records import BaselineFile, ItemResult, PromptSet, QuestionSet, RetrievalTolerances, Shard

if TYPE_CHECKING:
    from evalkit.sets.corpus import Corpus

Progress = Callable[[ItemResult], None]


@dataclass(frozen=True, slots=True)
class Target:
    """One provider instance a plan runs on, and the alias sent to it."""

    provider: ProviderConfig
    alias: str


@dataclass(frozen=True, slots=True)
class JudgedPlan:
    """The instances serving a plan's model-graded assertions (README "Model-graded assertions"),
    checked: ``targets`` each with the alias sent, ``defaults`` the instance of each service
    (judge, embeddings) for the assertions that name none, ``services`` what each instance
    serves (an instance may be a judge and an embeddings instance both), ``batched`` the judges
    whose requests provider batches answered (README "Batches": priced at their batch discount,
    not probed)."""

    targets: tuple[Target, ...]
    defaults: Mapping[str, str | None]
    services: Mapping[str, frozenset[str]] = field(default_factory=dict)
    batched: frozenset[str] = frozenset()


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
    tolerance_overrides: Mapping[str, Decimal]
    fail_on_regression: bool = False
    repeats: int = 1
    significance: float | None = None
    gate_overrides: Mapping[str, Decimal] = field(default_factory=dict)  # --min-pass-rate, --min-mean-score
    baselines: Mapping[str, BaselineFile] = field(default_factory=dict)  # set id -> its baseline file, read
    shard: Shard | None = None  # run --shard: ``sets`` hold this shard's part of each set
    fingerprints: Mapping[str, str] = field(default_factory=dict)  # with a shard: each whole set's fingerprint
    set_shards: Mapping[str, Shard] = field(default_factory=dict)  # with a shard: each set's part, with its facts
    judged: JudgedPlan | None = None  # the sets hold model-graded assertions (and the grader is not decision)
    judge_batched: bool = False  # the decision judge's requests were answered by provider batches (README "Batches")

    @property
    def provider(self) -> ProviderConfig:
        return self.targets[0].provider

    @property
    def alias(self) -> str:
        return self.targets[0].alias


@dataclass(frozen=True, slots=True)
class RetrievalPlan:
    """A checked retrieval run: nothing has been called or written yet."""

    question_set: QuestionSet
    config: Config
    retriever: RetrieverConfig
    limit: int
    db: Path | None
    tolerances: RetrievalTolerances
    corpus: Corpus | None
    warnings: tuple[str, ...]
    fail_on_regression: bool = False
