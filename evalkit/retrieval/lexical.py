"""The built-in ``lexical`` retriever: BM25 (bm25s) over the question set's corpus.

Tokenisation is Unicode-aware: runs of letters and digits (underscores split identifiers),
case-folded, then optionally stop words removed and words stemmed (Snowball, PyStemmer) for the
configured language. The index is cached on disk under a key made of the corpus revision, the
parameters and the library versions, so a re-run does not re-index; it is written to a
temporary folder and renamed into place, so an interrupted build never leaves a broken index.
Documents that match no query term are not returned.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import InputError
from evalkit.records import Ranking
from evalkit.sets.corpus import Corpus

TOKENIZER_VERSION = "unicode-words-v2"
LANGUAGES = {
    "en": ("english", "STOPWORDS_EN"),
    "de": ("german", "STOPWORDS_GERMAN"),
    "fr": ("french", "STOPWORDS_FRENCH"),
    "es": ("spanish", "STOPWORDS_SPANISH"),
    "it": ("italian", "STOPWORDS_ITALIAN"),
    "pt": ("portuguese", "STOPWORDS_PORTUGUESE"),
    "nl": ("dutch", "STOPWORDS_DUTCH"),
    "sv": ("swedish", "STOPWORDS_SWEDISH"),
    "no": ("norwegian", "STOPWORDS_NORWEGIAN"),
    "da": ("danish", "STOPWORDS_DANISH"),
    "ru": ("russian", "STOPWORDS_RUSSIAN"),
    "tr": ("turkish", "STOPWORDS_TURKISH"),
}


@dataclass(frozen=True, slots=True)
class LexicalParams:
    language: str = "en"  # a key of LANGUAGES, or "none" (no stop words, no stemming)
    stemming: bool = True
    k1: float = 1.5
    b: float = 0.75

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> LexicalParams:
        params = cls(**{k: options[k] for k in ("language", "stemming", "k1", "b") if k in options})
        if params.language != "none" and params.language not in LANGUAGES:
            known = ", ".join(sorted(LANGUAGES))
            raise InputError(
                f"lexical retriever: unknown language '{params.language}' (expected one of: {known}, none)"
            )
        return params


class Tokenizer:
    def __init__(self, params: LexicalParams) -> None:
        self.stop: frozenset[str] = frozenset()
        self._stem: Callable[[list[str]], list[str]] | None = None
        if params.language in LANGUAGES:
            algorithm, stop_name = LANGUAGES[params.language]
            import bm25s.stopwords

            self.stop = frozenset(w.casefold() for w in getattr(bm25s.stopwords, stop_name))
            if params.stemming:
                import Stemmer

                self._stem = Stemmer.Stemmer(algorithm).stemWords

    def __call__(self, text: str) -> list[str]:
        # NFC first, so a decomposed "Mu\u0308ller" is one word; combining marks belong to words.
        words = [w for w in _words().findall(unicodedata.normalize("NFC", text).casefold()) if w not in self.stop]
        return self._stem(words) if self._stem is not None else words


@functools.cache
def _words() -> Any:
    import regex

    return regex.compile(r"[\p{L}\p{N}\p{M}]+")


def pipeline_identity(params: LexicalParams) -> str:
    import bm25s

    stem = params.language if params.stemming and params.language in LANGUAGES else "none"
    return (
        f"bm25s-{bm25s.__version__}:lucene:k1={params.k1:g}:b={params.b:g}:tok={TOKENIZER_VERSION}"
        f":stop={params.language}:stem={stem}"
    )


class LexicalRetriever:
    id = "lexical"

    def __init__(self, corpus: Corpus, params: LexicalParams, cache_dir: Path | None = None) -> None:
        self.corpus = corpus
        self.params = params
        self.tokenize = Tokenizer(params)
        self.ids = [d.id for d in corpus.documents]
        self.reindexed = False
        self._model = self._load_or_build(cache_dir)

    @property
    def provenance(self) -> dict[str, str]:
        return {
            "corpus_revision": self.corpus.revision,
            "model_revision": "not-applicable",
            "chunking": "not-applicable",
            "pipeline": pipeline_identity(self.params),
        }

    def _key(self) -> str:
        body = {"corpus": self.corpus.revision, "pipeline": pipeline_identity(self.params)}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20]

    def _load_or_build(self, cache_dir: Path | None) -> Any:
        import bm25s

        target = cache_dir / f"bm25-{self._key()}" if cache_dir is not None else None
        if target is not None and (target / "params.index.json").is_file():
            try:
                return bm25s.BM25.load(str(target), mmap=False, show_progress=False)
            except (OSError, ValueError):
                shutil.rmtree(target, ignore_errors=True)  # a damaged index is rebuilt
        tokens = [self.tokenize(_document_text(d.title, d.text)) for d in self.corpus.documents]
        self.reindexed = True
        if not any(tokens):  # no document has a word: nothing can ever match
            return None
        model = bm25s.BM25(k1=self.params.k1, b=self.params.b, method="lucene")
        model.index(tokens, show_progress=False)
        if target is not None:
            _save_atomically(model, target)
        return model

    def search_many(self, questions: Sequence[str], limit: int) -> list[Ranking]:
        """Rankings for many questions in one batch (the fast path)."""
        if self._model is None or limit <= 0:
            return [Ranking(()) for _ in questions]
        tokens = [self.tokenize(q) for q in questions]
        k = min(limit, len(self.ids))
        documents, scores = self._model.retrieve(tokens, k=k, show_progress=False)
        rankings = []
        for row_docs, row_scores in zip(documents, scores, strict=True):
            ranked = tuple(self.ids[int(d)] for d, s in zip(row_docs, row_scores, strict=True) if s > 0)
            rankings.append(Ranking(ranked))
        return rankings


def _document_text(title: str | None, text: str) -> str:
    return f"{title}\n{text}" if title else text


def _save_atomically(model: Any, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".bm25-", dir=target.parent))
    try:
        model.save(str(staging), show_progress=False)
        os.replace(staging, target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
