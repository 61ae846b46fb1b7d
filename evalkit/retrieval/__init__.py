"""Retrieval evaluation: corpora, retrievers (lexical BM25, http, command), metrics, provenance."""
