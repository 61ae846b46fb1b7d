"""``similar``: the cosine of the answer's and the expected text's embeddings (README
"Model-graded assertions", "Embeddings").

The embeddings instance (``embeddings: {provider: ID}``, or ``provider:`` on the assertion) is
asked through the run's embedder (``providers.embedder.RunEmbedder``): each distinct text once
per run, through the completion cache. Score = the cosine clipped to 0..1; the assertion holds
at score >= ``min`` (default 0.8). A failed embedding is a failed judgement (the assertion is
undecided, the item errored, the reason says why); an endpoint that refuses us (a key refused,
an unknown model, a local model that cannot start) stops the run, as a refused judge does.
"""

from __future__ import annotations

from evalkit.assertions.judged import JudgedValue
from evalkit.assertions.registry import Outcome
from evalkit.errors import EmbeddingError, ProviderRefused
from evalkit.graders.judging import Instance, Judgement, Task, register
from evalkit.protocols import Embedder
from evalkit.records import Similarity, Usage

PROFILE = "evalkit.similar"
VERSION = 1


def similar_outcome(score: float, threshold: float) -> Outcome:
    """Holds at score >= threshold; the reason says the score when it does not."""
    if score >= threshold - 1e-12:
        return Outcome(True, score)
    return Outcome(False, score, f"similarity {score:.3f} is below the min {threshold:g}")


def counted(similarity: Similarity) -> tuple[int, int]:
    """(calls, cached) of one similarity: the requests sent; or, when the cache answered all it
    needed, one call answered by the cache; none when the run already held both vectors."""
    if similarity.calls:
        return similarity.calls, 0
    if similarity.cached:
        return 1, 1
    return 0, 0


class SimilarJudge:
    """``similar``: one similarity from the embeddings instance."""

    service = "embeddings"

    async def judge(self, value: JudgedValue, task: Task, instance: Instance) -> Judgement:
        embedder: Embedder = instance.client
        try:
            similarity = await self._similarity(embedder, task.response, value.text or "")
        except EmbeddingError as exc:
            if exc.refused:
                raise ProviderRefused(str(exc)) from None
            return Judgement.failed("similar", str(exc))
        calls, cached = counted(similarity)
        model = similarity.reported_model or f"{instance.alias}?"
        return Judgement(
            similar_outcome(similarity.score, value.threshold),
            f"{instance.id}:{model}",
            f"{PROFILE}:{instance.id}:{model}:v{VERSION}",
            calls,
            cached,
            Usage(similarity.input_tokens, 0),
        )

    @staticmethod
    async def _similarity(embedder: Embedder, answer: str, expected: str) -> Similarity:
        """The similarity; for an answer of nothing but whitespace (similar to nothing: 0.0) the
        expected text is still embedded, so the model that would have measured it is named."""
        if answer.strip():
            return await embedder.similarity(answer, expected)
        embedded = await embedder.embed([expected])
        return Similarity(0.0, embedded.reported_model, embedded.input_tokens, embedded.cached, embedded.calls)


register("similar", SimilarJudge())
