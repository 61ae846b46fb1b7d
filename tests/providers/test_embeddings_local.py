"""The local model in llama.cpp's embedding mode, out of the box (README "Embeddings"): on the
shipped SmolLM2-135M, paraphrases score a higher cosine than unrelated sentences.

Measured when written (mean pooling): paraphrase pairs 0.88-0.96 (mean 0.93), unrelated pairs
0.54-0.91 (median 0.76, mean 0.74). A 135M chat model is no embedding model: one unrelated pair
of long instructions outscores the weakest paraphrase, so the test compares each paraphrase with
the typical unrelated pair, and the means, never one pair with every other.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics

import pytest

from evalkit.config import ProviderConfig
from evalkit.providers.embedder import open_embedder
from evalkit.providers.embeddings import cosine
from evalkit.providers.local import default_model_path, model_id

PARAPHRASES = [
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    (
        "You can return the item within 14 days for a full refund.",
        "Items may be returned for a complete refund within fourteen days.",
    ),
    ("The meeting has been moved to Thursday afternoon.", "We rescheduled the meeting for Thursday afternoon."),
    ("It is raining heavily in London today.", "Today there is heavy rain in London."),
    ("Please reset your password using the link in the email.", "Use the link in the email to reset your password."),
    ("The train to Paris leaves at nine in the morning.", "The Paris train departs at 9 a.m."),
]


@pytest.mark.model
@pytest.mark.slow
def test_paraphrases_score_higher_than_unrelated_sentences() -> None:
    texts = [text for pair in PARAPHRASES for text in pair]

    async def measure() -> tuple[tuple[tuple[float, ...], ...], str | None, float]:
        embedder = open_embedder(ProviderConfig(id="local", adapter="local"))
        try:
            embedded = await embedder.embed(texts)
            # the grader's path: one answer against one expected value, both known by now
            similar = await embedder.similarity(PARAPHRASES[0][1], PARAPHRASES[0][0])
            return embedded.vectors, embedded.reported_model, similar.score
        finally:
            await embedder.aclose()

    vectors, reported, score = asyncio.run(measure())
    path = default_model_path()
    assert path is not None
    assert reported == model_id(path)
    assert len({len(v) for v in vectors}) == 1
    assert len(vectors) == len(texts)

    paraphrase = [cosine(vectors[2 * i], vectors[2 * i + 1]) for i in range(len(PARAPHRASES))]
    unrelated = [
        cosine(vectors[a], vectors[b])
        for a, b in itertools.combinations(range(len(texts)), 2)
        if a // 2 != b // 2  # from different pairs
    ]
    typical = statistics.median(unrelated)
    assert all(p > typical for p in paraphrase), (paraphrase, typical)
    assert statistics.mean(paraphrase) > statistics.mean(unrelated), (paraphrase, unrelated)
    assert score == pytest.approx(paraphrase[0])
