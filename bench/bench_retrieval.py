"""Lexical retrieval at scale (issue 6): evalkit's BM25 (bm25s) against rank-bm25, same corpus.

    python bench/bench_retrieval.py [--docs 100000] [--questions 10000] [--rank-bm25-questions 200]

A synthetic corpus (Zipf-distributed vocabulary, 40-160 words per document) and questions made of
words drawn from one target document each. Each engine runs in its own process so its peak RSS
is its own: evalkit's LexicalRetriever (its tokeniser, stop words and stemming; index build,
then all questions in one batch, top 12) and rank-bm25's BM25Okapi over the same tokens (index
build, then ``get_top_n`` per question). rank-bm25 scores every document in Python for each
question, so it answers a sample of the questions and its total is extrapolated (and labelled so).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.measure import measure  # noqa: E402


def corpus(docs: int, seed: int = 7) -> tuple[list[dict[str, str]], list[tuple[str, str]]]:
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "so", "vi", "da", "pe", "zu", "ro", "fa", "gi", "ho"]
    vocabulary = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(60_000)})
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    documents = []
    for index in range(docs):
        words = rng.choices(vocabulary, weights=weights, k=rng.randint(40, 160))
        documents.append({"id": f"d{index}", "text": " ".join(words)})
    return documents, [(d["id"], d["text"]) for d in documents]


def questions(documents: list[dict[str, str]], count: int, seed: int = 11) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    picked = []
    for _ in range(count):
        doc = rng.choice(documents)
        words = doc["text"].split()
        picked.append((doc["id"], " ".join(rng.sample(words, k=min(len(words), rng.randint(4, 8))))))
    return picked


def child_evalkit(corpus_path: Path, questions_path: Path) -> dict[str, float]:
    from evalkit.retrieval.lexical import LexicalParams, LexicalRetriever
    from evalkit.sets.corpus import load_corpus

    started = time.perf_counter()
    loaded = load_corpus(corpus_path)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    retriever = LexicalRetriever(loaded, LexicalParams(), cache_dir=None)
    index_s = time.perf_counter() - started
    asked = json.loads(questions_path.read_text())
    started = time.perf_counter()
    rankings = retriever.search_many([q for _, q in asked], 12)
    query_s = time.perf_counter() - started
    top1 = sum(1 for (target, _), r in zip(asked, rankings, strict=True) if r.ids[:1] == (target,)) / len(asked)
    return {"load_s": load_s, "index_s": index_s, "query_s": query_s, "questions": len(asked), "top1": top1}


def child_rank_bm25(corpus_path: Path, questions_path: Path, sample: int) -> dict[str, float]:
    from rank_bm25 import BM25Okapi

    from evalkit.retrieval.lexical import LexicalParams, Tokenizer
    from evalkit.sets.corpus import load_corpus

    loaded = load_corpus(corpus_path)
    tokenize = Tokenizer(LexicalParams())
    ids = [d.id for d in loaded.documents]
    started = time.perf_counter()
    model = BM25Okapi([tokenize(d.text) for d in loaded.documents])
    index_s = time.perf_counter() - started
    asked = json.loads(questions_path.read_text())
    sampled = asked[:sample]
    started = time.perf_counter()
    hits = 0
    for target, question in sampled:
        top = model.get_top_n(tokenize(question), ids, n=12)
        hits += top[:1] == [target]
    query_s = time.perf_counter() - started
    return {
        "index_s": index_s,
        "query_s_sample": query_s,
        "questions_sampled": len(sampled),
        "query_s_extrapolated": query_s / len(sampled) * len(asked),
        "top1_sample": hits / len(sampled),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--rank-bm25-questions", type=int, default=200)
    parser.add_argument("--child", choices=["evalkit", "rank-bm25"])
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--asked", type=Path)
    args = parser.parse_args()
    if args.child == "evalkit":
        print(json.dumps(child_evalkit(args.corpus, args.asked)))
        return
    if args.child == "rank-bm25":
        print(json.dumps(child_rank_bm25(args.corpus, args.asked, args.rank_bm25_questions)))
        return
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as tmp:
        documents, _ = corpus(args.docs)
        corpus_path = Path(tmp) / "corpus.jsonl"
        corpus_path.write_text("".join(json.dumps(d) + "\n" for d in documents))
        asked_path = Path(tmp) / "questions.json"
        asked_path.write_text(json.dumps(questions(documents, args.questions)))
        common = [
            "--corpus",
            str(corpus_path),
            "--asked",
            str(asked_path),
            "--rank-bm25-questions",
            str(args.rank_bm25_questions),
        ]
        ours = measure([sys.executable, __file__, "--child", "evalkit", *common])
        theirs = measure([sys.executable, __file__, "--child", "rank-bm25", *common])
    e, r = json.loads(ours.stdout), json.loads(theirs.stdout)
    print(
        f"corpus: {args.docs:,} documents, {args.questions:,} questions (rank-bm25: {r['questions_sampled']} sampled)\n"
    )
    print("| engine | index build s | questions s | per question ms | peak RSS MB | top-1 |")
    print("|---|---:|---:|---:|---:|---:|")
    print(
        f"| evalkit lexical (bm25s) | {e['index_s']:.2f} | {e['query_s']:.2f} | {e['query_s'] / e['questions'] * 1000:.3f} "
        f"| {ours.peak_rss_mb:.0f} | {e['top1']:.3f} |"
    )
    print(
        f"| rank-bm25 BM25Okapi | {r['index_s']:.2f} | {r['query_s_extrapolated']:.1f} (extrapolated from "
        f"{r['questions_sampled']}) | {r['query_s_sample'] / r['questions_sampled'] * 1000:.1f} | {theirs.peak_rss_mb:.0f} "
        f"| {r['top1_sample']:.3f} |"
    )
    print(f"\n(corpus load by evalkit: {e['load_s']:.2f} s, not included in the index build)")


if __name__ == "__main__":
    main()
