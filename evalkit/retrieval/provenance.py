"""Benchmark provenance and fingerprints (docs/contract.md "Retrieval evaluation").

The benchmark fingerprint says "same questions, same labels, same documents, same scoring": it
hashes the corpus revision, the labels (ids, questions, forms, expected ids, hard classes; not
their order and not the answer gists) and the scoring version. It is unknown when the corpus
revision is. The variant fingerprint hashes the treatment: model revision, chunking and
pipeline identity. Two runs are compared only under equal, known benchmark fingerprints; a
changed variant is still compared, and said so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from evalkit.records import QuestionSet
from evalkit.retrieval.metrics import SCORING_VERSION

FIELDS = ("corpus_revision", "model_revision", "chunking", "pipeline")


@dataclass(frozen=True, slots=True)
class Provenance:
    corpus_revision: str | None = None
    model_revision: str | None = None
    chunking: str | None = None
    pipeline: str | None = None

    @classmethod
    def merged(cls, *sources: Mapping[str, object] | None) -> Provenance:
        """Later sources win; blank or non-string values are ignored."""
        values: dict[str, str] = {}
        for source in sources:
            for name in FIELDS:
                value = (source or {}).get(name)
                if isinstance(value, str) and value.strip():
                    values[name] = value
        return cls(**values)

    def as_dict(self) -> dict[str, str | None]:
        return {name: getattr(self, name) for name in FIELDS}


def _digest(body: object) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def benchmark_fingerprint(question_set: QuestionSet, corpus_revision: str | None) -> str | None:
    if not corpus_revision:
        return None
    labels = sorted([q.id, q.question, q.form, sorted(q.expected), q.hard_class or ""] for q in question_set.questions)
    return _digest({"corpus": corpus_revision, "labels": labels, "scoring": SCORING_VERSION})


def variant_fingerprint(provenance: Provenance) -> str:
    return _digest(
        {"model": provenance.model_revision, "chunking": provenance.chunking, "pipeline": provenance.pipeline}
    )
