"""The built-in lexical retriever: BM25 ranking, Unicode-aware tokenisation per language, and the
on-disk index cache keyed by corpus revision and parameters."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from evalkit.errors import InputError
from evalkit.retrieval.lexical import LexicalParams, LexicalRetriever, Tokenizer
from evalkit.sets.corpus import Corpus, Document, revision_of


def corpus_of(*docs: tuple[str, str]) -> Corpus:
    documents = tuple(Document(doc_id, text) for doc_id, text in docs)
    return Corpus(Path("corpus.jsonl"), documents, revision_of(documents))


FRUIT = corpus_of(
    ("apple", "An apple pie needs apples, butter and flour."),
    ("banana", "Banana bread is sweet and soft."),
    ("cherry", "Cherries grow on cherry trees; a cherry is a stone fruit."),
)
GERMAN = corpus_of(
    ("haus", "Das Haus steht an der Straße."),
    ("buch", "Ein Buch über Katzen und Hunde."),
    ("fahrrad", "Mein Fahrrad hat zwei Räder."),
)
CYRILLIC = corpus_of(
    ("knigi", "Книги о кошках и собаках."),
    ("dom", "Большой дом у реки."),
)


def search(corpus: Corpus, question: str, limit: int = 10, **params: Any) -> tuple[str, ...]:
    return LexicalRetriever(corpus, LexicalParams(**params)).search_many([question], limit)[0].ids


# ---------------------------------------------------------------- ranking


def test_best_match_first_and_non_matching_documents_left_out() -> None:
    assert search(FRUIT, "cherry tree")[0] == "cherry"
    assert search(FRUIT, "banana") == ("banana",)
    assert search(FRUIT, "zebra crossing") == ()


def test_limit_caps_the_ranking() -> None:
    corpus = corpus_of(*((f"d{i}", f"common word {i}") for i in range(8)))
    assert len(search(corpus, "common", limit=3)) == 3
    assert len(search(corpus, "common", limit=50)) == 8


def test_questions_without_any_word_return_nothing() -> None:
    retriever = LexicalRetriever(FRUIT, LexicalParams())
    assert [r.ids for r in retriever.search_many(["", "?!", "   ", "banana"], 5)] == [(), (), (), ("banana",)]


def test_documents_without_words_are_never_returned() -> None:
    corpus = corpus_of(("a", "apple"), ("b", "!!!"), ("c", "the of and"))
    retriever = LexicalRetriever(corpus, LexicalParams())
    assert [r.ids for r in retriever.search_many(["apple", "the", "zebra"], 5)] == [("a",), (), ()]


@pytest.mark.parametrize(
    "documents",
    [(), (("a", "the and of"), ("b", "!!!"))],
    ids=["no-documents", "no-indexable-words"],
)
def test_corpus_without_words_returns_nothing(documents: tuple[tuple[str, str], ...]) -> None:
    retriever = LexicalRetriever(corpus_of(*documents), LexicalParams())
    assert [r.ids for r in retriever.search_many(["anything", "the"], 5)] == [(), ()]


def test_cli_empty_corpus_is_no_traceback(cli: Any, write_file: Any) -> None:
    write_file(
        "sets/empty.yaml",
        """
        id: empty.docs
        name: Empty
        corpus: docs.jsonl
        questions:
          - {id: none, question: is anything here, form: gap, expected: []}
        """,
    )
    write_file("sets/docs.jsonl", "")
    result = cli("retrieval", "sets/empty.yaml", "--retriever", "lexical", "--format", "json")
    assert result.exception is None
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["items"][0]["top1_hit"] is True


def test_provenance_is_derived() -> None:
    provenance = LexicalRetriever(FRUIT, LexicalParams(k1=1.2, b=0.5)).provenance
    assert provenance["corpus_revision"] == FRUIT.revision
    assert (provenance["model_revision"], provenance["chunking"]) == ("not-applicable", "not-applicable")
    pipeline = provenance["pipeline"]
    assert pipeline.startswith("bm25s-")
    assert ":k1=1.2:b=0.5:" in pipeline
    assert pipeline.endswith(":stop=en:stem=en")
    none = LexicalRetriever(FRUIT, LexicalParams(language="none")).provenance["pipeline"]
    assert none.endswith(":stop=none:stem=none")
    unstemmed = LexicalRetriever(FRUIT, LexicalParams(language="de", stemming=False)).provenance["pipeline"]
    assert unstemmed.endswith(":stop=de:stem=none")


# ---------------------------------------------------------------- tokenisation


def test_tokens_are_unicode_words_casefolded() -> None:
    tokenize = Tokenizer(LexicalParams(language="none"))
    assert tokenize("Grüße aus MÜNCHEN! naïve_mode 42, ÉCOLE") == [
        "grüsse",
        "aus",
        "münchen",
        "naïve",
        "mode",
        "42",
        "école",
    ]
    assert tokenize("КНИГИ и Дом") == ["книги", "и", "дом"]


def test_stop_words_per_language() -> None:
    assert Tokenizer(LexicalParams(language="en"))("the cat and the hat") == ["cat", "hat"]
    assert Tokenizer(LexicalParams(language="de", stemming=False))("die Katze und der Hund") == ["katze", "hund"]
    assert Tokenizer(LexicalParams(language="none"))("die Katze und der Hund") == ["die", "katze", "und", "der", "hund"]


def test_stemming_per_language() -> None:
    german = Tokenizer(LexicalParams(language="de"))
    assert german("Häuser") == german("Haus")
    assert german("Bücher") == german("Buch")
    assert Tokenizer(LexicalParams(language="de", stemming=False))("Häuser") == ["häuser"]
    russian = Tokenizer(LexicalParams(language="ru"))
    assert russian("книги") == russian("книга")


def test_umlauts_and_sharp_s_match_across_case() -> None:
    assert search(GERMAN, "STRASSE", language="de") == ("haus",)
    assert search(GERMAN, "straße", language="none") == ("haus",)
    assert search(GERMAN, "RÄDER", language="none") == ("fahrrad",)
    assert search(GERMAN, "Häuser", language="de") == ("haus",)  # stemmed to haus
    assert search(GERMAN, "Häuser", language="none") == ()


def test_cyrillic_lowercased_and_stemmed() -> None:
    assert search(CYRILLIC, "КНИГИ", language="none") == ("knigi",)
    assert search(CYRILLIC, "книга", language="none") == ()
    assert search(CYRILLIC, "книга", language="ru") == ("knigi",)


def test_titles_are_searchable() -> None:
    documents = (Document("z", "black and white stripes", title="Zebra"), Document("h", "a horse"))
    corpus = Corpus(Path("c.jsonl"), documents, revision_of(documents))
    assert search(corpus, "zebra") == ("z",)


@pytest.mark.parametrize("language", ["de", "none"])
def test_composed_and_decomposed_text_match(language: str) -> None:
    decomposed = unicodedata.normalize("NFD", "Die Müllerstraße in Köln")
    composed = unicodedata.normalize("NFC", "Die Müllerstraße in Köln")
    assert decomposed != composed
    tokenize = Tokenizer(LexicalParams(language=language))
    assert tokenize(decomposed) == tokenize(composed)
    corpus = corpus_of(("nfd", decomposed), ("other", "Ein ganz anderer Text"))
    assert search(corpus, "Müllerstraße", language=language) == ("nfd",)


def test_words_with_combining_marks_stay_whole() -> None:
    tokenize = Tokenizer(LexicalParams(language="none"))
    assert tokenize("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    corpus = corpus_of(("hi", "हिन्दी भाषा"), ("other", "हाथी"))  # shares the consonant ह with the query
    assert search(corpus, "हाथ") == ()


def test_stop_word_only_question_returns_nothing_in_its_language() -> None:
    assert search(GERMAN, "und", language="de") == ()
    assert search(GERMAN, "und", language="none") == ("buch",)


def test_unknown_language_is_an_input_error() -> None:
    with pytest.raises(InputError) as info:
        LexicalParams.from_options({"language": "xx"})
    assert str(info.value).startswith("lexical retriever: unknown language 'xx' (expected one of: da, de, en, ")
    assert str(info.value).endswith(", none)")


# ---------------------------------------------------------------- index cache


def test_index_is_cached_by_corpus_and_parameters(tmp_path: Path) -> None:
    cache = tmp_path / "index"
    first = LexicalRetriever(FRUIT, LexicalParams(), cache)
    assert first.reindexed
    again = LexicalRetriever(FRUIT, LexicalParams(), cache)
    assert not again.reindexed
    questions = ["apple pie", "cherry tree fruit", "sweet bread", "nothing here"]
    assert again.search_many(questions, 3) == first.search_many(questions, 3)
    assert len(list(cache.iterdir())) == 1

    changed = corpus_of(("apple", "An apple pie."), ("banana", "Banana bread."), ("cherry", "Cherry trees."))
    assert LexicalRetriever(changed, LexicalParams(), cache).reindexed
    assert LexicalRetriever(FRUIT, LexicalParams(k1=1.2), cache).reindexed
    assert LexicalRetriever(FRUIT, LexicalParams(b=0.3), cache).reindexed
    assert LexicalRetriever(FRUIT, LexicalParams(language="none"), cache).reindexed
    assert LexicalRetriever(FRUIT, LexicalParams(stemming=False), cache).reindexed
    assert sorted(p.name.startswith("bm25-") for p in cache.iterdir()) == [True] * 6
    assert not LexicalRetriever(changed, LexicalParams(), cache).reindexed
    assert not LexicalRetriever(FRUIT, LexicalParams(language="none"), cache).reindexed


def test_without_a_cache_folder_every_retriever_indexes() -> None:
    assert LexicalRetriever(FRUIT, LexicalParams()).reindexed
    assert LexicalRetriever(FRUIT, LexicalParams()).reindexed


def test_a_damaged_cached_index_is_rebuilt(tmp_path: Path) -> None:
    cache = tmp_path / "index"
    expected = LexicalRetriever(FRUIT, LexicalParams(), cache).search_many(["cherry tree"], 3)
    (folder,) = cache.iterdir()
    (folder / "params.index.json").write_text("{ not json", encoding="utf-8")
    rebuilt = LexicalRetriever(FRUIT, LexicalParams(), cache)
    assert rebuilt.reindexed
    assert rebuilt.search_many(["cherry tree"], 3) == expected
    assert not LexicalRetriever(FRUIT, LexicalParams(), cache).reindexed


def test_cli_rerun_uses_the_cached_index(
    cli: Any, write_file: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.retrieval import lexical

    built: list[bool] = []

    class Recording(lexical.LexicalRetriever):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self.reindexed)

    monkeypatch.setattr(lexical, "LexicalRetriever", Recording)
    write_file(
        "sets/fruit.yaml",
        """
        id: fruit.docs
        name: Fruit
        corpus: docs.jsonl
        questions:
          - {id: pie, question: apple pie, form: match, expected: [apple]}
        """,
    )
    docs = [{"id": d.id, "text": d.text} for d in FRUIT.documents]
    write_file("sets/docs.jsonl", "".join(json.dumps(d) + "\n" for d in docs))
    for _ in range(2):
        assert cli("retrieval", "sets/fruit.yaml", "--retriever", "lexical").exit_code == 0
    write_file("sets/docs.jsonl", "".join(json.dumps(d) + "\n" for d in docs[:2]))
    assert cli("retrieval", "sets/fruit.yaml", "--retriever", "lexical").exit_code == 0
    assert built == [True, False, True]
    assert len(list((tmp_path / "index").iterdir())) == 2  # next to the database (EVALKIT_DB)


def test_cli_language_from_the_retriever_config(cli: Any, write_file: Any) -> None:
    write_file(
        "evalkit.yaml",
        """
        retrievers:
          - {id: lex-de, kind: lexical, language: de}
          - {id: lex-plain, kind: lexical, language: none}
        """,
    )
    write_file(
        "sets/haus.yaml",
        """
        id: de.docs
        name: Deutsch
        corpus: docs.jsonl
        questions:
          - {id: haeuser, question: Welche Häuser stehen an der STRASSE?, form: gap, expected: [haus]}
          - {id: buecher, question: Bücher über Katzen, form: gap, expected: [buch]}
        """,
    )
    write_file("sets/docs.jsonl", "".join(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in GERMAN.documents))
    german = cli("retrieval", "sets/haus.yaml", "--retriever", "lex-de", "--format", "json")
    assert german.exit_code == 0, german.stderr
    doc = json.loads(german.stdout)
    assert (doc["retriever"], doc["top1_hit_rate"]) == ("lex-de", 1.0)
    assert doc["provenance"]["pipeline"].endswith(":stop=de:stem=de")
    plain = json.loads(cli("retrieval", "sets/haus.yaml", "--retriever", "lex-plain", "--format", "json").stdout)
    assert [i["retrieved"] for i in plain["items"]] == [["haus"], ["buch"]]  # "der"/"über" match without stop words
    assert plain["provenance"]["pipeline"].endswith(":stop=none:stem=none")
    write_file("evalkit.yaml", "retrievers: [{id: lexical, kind: lexical, language: de}]\n")
    configured = json.loads(cli("retrieval", "sets/haus.yaml", "--retriever", "lexical", "--format", "json").stdout)
    assert configured["provenance"]["pipeline"].endswith(":stop=de:stem=de")  # the configured 'lexical' wins
    write_file(
        "evalkit.yaml",
        """
        retrievers:
          - {id: lex-bad, kind: lexical, language: de}
          - {id: lexical, kind: http, url: "http://127.0.0.1:9/search"}
        """,
    )
    clash = cli("retrieval", "sets/haus.yaml", "--retriever", "lex-bad")
    assert clash.exit_code == 2
    assert "the id 'lexical' is the built-in BM25 retriever; choose another id" in clash.stderr
    write_file("evalkit.yaml", "retrievers: [{id: lex-bad, kind: lexical, language: xx}]\n")
    bad = cli("retrieval", "sets/haus.yaml", "--retriever", "lex-bad")
    assert bad.exit_code == 2
    assert "evalkit.yaml:1:" in bad.stderr  # a schema error, before any work
    assert "retrievers[0].language: 'xx' is not one of: en, de, fr," in bad.stderr


def test_the_config_schema_lists_exactly_the_languages_the_retriever_knows() -> None:
    from evalkit.retrieval.lexical import LANGUAGES
    from evalkit.sets.validation import load_schema

    retriever = load_schema("config")["$defs"]["retriever"]["properties"]
    assert retriever["language"]["enum"] == [*LANGUAGES, "none"]
