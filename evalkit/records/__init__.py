"""Frozen records shared by every layer, by domain (docs/architecture.md "Layers").

Loaders produce set records (``sets``), providers produce call records (``calls``), graders
produce grades (``grades``), compare produces comparisons (``comparisons``), the runner assembles
runs (``runs``), and the store and report layers read them all. Nothing here does I/O. Every
record is made by one decorator, ``base.record``: a frozen, slotted dataclass whose fast
``__init__`` lives in ``_fastinit`` (README "Development": ``EVALKIT_PLAIN_RECORDS=1`` turns it off).

Every public name is re-exported here: ``from evalkit.records import X`` is the way to import one.
"""

from __future__ import annotations

from evalkit.records.base import PLAIN_RECORDS, JsonValue, Params, record
from evalkit.records.batches import BatchCost, JudgeBatchCost, PendingBatch
from evalkit.records.calls import (
    MAX_TOKENS_PER_CALL,
    RESERVED_PARAMS,
    CallFacts,
    Completion,
    CompletionRequest,
    Embeddings,
    Message,
    ServingRecord,
    Similarity,
    ToolCall,
    Usage,
    plausible_tokens,
    recorded_tool_calls,
    tool_arguments,
    tool_calls_of,
    without_lone_surrogates,
)
from evalkit.records.comparisons import BaselineEntry, BaselineFile, Comparison, Flips, OtherScope, PairedTest
from evalkit.records.grades import AssertionResult, Grade, ItemResult, assertions_reason
from evalkit.records.runs import (
    Aggregates,
    Ranking,
    RetrievalItem,
    RetrievalRunResult,
    RunResult,
    Shard,
    shared_generator,
)
from evalkit.records.sets import (
    GRADERS,
    SET_ID,
    AnySet,
    Assertion,
    Gate,
    Prompt,
    PromptSet,
    Question,
    QuestionSet,
    RetrievalTolerances,
    Tolerances,
    parse_tolerance,
)

__all__ = [
    "GRADERS",
    "MAX_TOKENS_PER_CALL",
    "PLAIN_RECORDS",
    "RESERVED_PARAMS",
    "SET_ID",
    "Aggregates",
    "AnySet",
    "Assertion",
    "AssertionResult",
    "BaselineEntry",
    "BaselineFile",
    "BatchCost",
    "CallFacts",
    "Comparison",
    "Completion",
    "CompletionRequest",
    "Embeddings",
    "Flips",
    "Gate",
    "Grade",
    "ItemResult",
    "JsonValue",
    "JudgeBatchCost",
    "Message",
    "OtherScope",
    "PairedTest",
    "Params",
    "PendingBatch",
    "Prompt",
    "PromptSet",
    "Question",
    "QuestionSet",
    "Ranking",
    "RetrievalItem",
    "RetrievalRunResult",
    "RetrievalTolerances",
    "RunResult",
    "ServingRecord",
    "Shard",
    "Similarity",
    "Tolerances",
    "ToolCall",
    "Usage",
    "assertions_reason",
    "parse_tolerance",
    "plausible_tokens",
    "record",
    "recorded_tool_calls",
    "shared_generator",
    "tool_arguments",
    "tool_calls_of",
    "without_lone_surrogates",
]
