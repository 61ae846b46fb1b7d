"""Grade records: one assertion's result, a grader's verdict on one answer, and a prompt's outcome
(README "Score and pass")."""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.records.base import JsonValue, record
from evalkit.records.calls import ServingRecord, ToolCall, Usage


@record
class AssertionResult:
    type: str
    passed: bool
    reason: str = ""
    score: float | None = None  # None: 1.0 when it passed, else 0.0
    weight: float = 1.0
    yardstick: str | None = None  # a model-graded one: <profile>:<instance>:<reported model>:v<version>

    @property
    def value(self) -> float:
        """The score counted: ``score``, else 1 or 0."""
        return self.score if self.score is not None else (1.0 if self.passed else 0.0)


def assertions_reason(
    failed: Sequence[str],
    counted: int,
    notes: Sequence[str] = (),
    threshold: tuple[float, float, bool] | None = None,
) -> str:
    """A prompt's reason from its counted assertions (weight above 0; README "Score and pass"):
    ``run`` gives each failed one's reason (and the reasons of those that held, as ``notes``), the
    store at privacy ``metadata`` their types; the counts and the words are the same.
    ``threshold``: (score, threshold, passed) of a prompt that sets one."""
    if not failed:
        text = "assertion holds" if counted == 1 else f"all {counted} assertions hold"
    else:
        text = "assertion failed" if counted == 1 else f"{len(failed)} of {counted} assertions failed"
        text += f": {'; '.join(failed)}"
    if notes:  # the reasons of those that held
        text += f"{'; held' if failed else ''}: {'; '.join(notes)}"
    if threshold is None:
        return text
    score, limit, passed = threshold
    return f"score {score:.2f} {'reaches' if passed else 'is below'} the threshold {limit:g}; {text}"


@record
class Grade:
    """A grader's verdict on one answer; ``yardstick`` names what measured it."""

    passed: bool
    score: float
    reason: str
    assertions: tuple[AssertionResult, ...] = ()
    yardstick: str | None = "deterministic"  # None: the grading failed, nothing measured it
    usage: Usage = Usage()
    cached: bool = False  # the judge's answer came from the completion cache
    error: str | None = None  # a model-graded assertion could not be judged: the item is errored
    judge_calls: int = 0  # judge and embedding calls asked for this answer (cached ones included)
    judge_cached: int = 0  # of them, answered by the completion cache
    cost: float | None = None  # the priced cost of those calls (None: no judge instance is priced)


@record
class ItemResult:
    """One prompt's outcome: a grade, or an error when its call failed after retries."""

    id: str
    passed: bool
    score: float
    reason: str
    latency_ms: float | None = None
    error: str | None = None
    assertions: tuple[AssertionResult, ...] = ()
    prompt: str = ""
    system: str | None = None
    response: str | None = None
    serving: ServingRecord | None = None
    adapter: str | None = None
    usage: Usage = Usage()
    yardstick: str | None = None
    grader_usage: Usage = Usage()
    cached: bool = False
    repeat: int = 0  # which sample of the prompt (run --repeat N)
    grader_cached: bool = False  # the judge's grading was replayed from the cache
    threshold: float | None = None  # the prompt's pass threshold, for its text-free reason
    cached_at: str | None = None  # the answer came from a cache entry stored before this run, written then
    tool_calls: tuple[ToolCall, ...] = ()  # answer content: stored and shown per privacy level
    context: JsonValue = None
    judge_calls: int = 0  # model-graded assertions: judge and embedding calls (README "Model-graded assertions")
    judge_cached: int = 0
    grader_cost: float | None = None

    @property
    def errored(self) -> bool:
        return self.error is not None
