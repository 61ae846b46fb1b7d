"""A reason quotes at most so many characters of an answer, never part of a word (a cut address
or key would escape redaction)."""

from __future__ import annotations

import pytest

from evalkit.assertions.excerpt import clip_words, excerpt
from evalkit.store.privacy import redact


@pytest.mark.parametrize(
    ("text", "limit", "clipped"),
    [
        ("short", 60, "short"),
        (
            "Reach our account manager by mail: alice.smith@examplecorp.com or later",
            60,
            "Reach our account manager by mail: ...",
        ),
        ("Reach me on alice.smith@example.com today", 39, "Reach me on alice.smith@example.com ..."),
        ("jonathan.alexander.smithsonian.the.third@example.com.xx", 40, "..."),  # one word: left out whole
        ("a" * 50 + " bbbbb cccc", 60, "a" * 50 + " bbbbb ..."),
    ],
)
def test_a_cut_never_keeps_part_of_a_word(text: str, limit: int, clipped: str) -> None:
    assert clip_words(text, limit) == clipped
    assert len(clip_words(text, limit)) <= limit


def test_no_fragment_of_an_address_reaches_a_redacted_reason() -> None:
    for limit in range(10, 80):
        quoted = excerpt("Mail alice.smith@examplecorp.com or call +49 30 1234 5678 now", limit)
        assert "alice" not in (redact(quoted) or "")


def test_flatten_makes_one_line() -> None:
    assert excerpt("a  b\n\tc", 80, flatten=True) == "'a b c'"
