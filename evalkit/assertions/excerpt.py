"""Quoting a piece of an answer in a grade's reason."""

from __future__ import annotations

import re

_LAST_WORD = re.compile(r"\S+\Z")


def clip_words(text: str, limit: int) -> str:
    """``text``, at most ``limit`` characters. A word the cut would split is left out whole, a
    text of one long word entirely: a cut e-mail address, phone number or key is no longer
    recognisable to the redaction of a stored reason, so none may be kept in part."""
    if len(text) <= limit:
        return text
    head = text[: limit - 3]
    if not text[limit - 3].isspace():
        head = _LAST_WORD.sub("", head)
    return head + "..."


def excerpt(text: str, limit: int, *, flatten: bool = False) -> str:
    """``text`` (whitespace runs made single spaces with ``flatten``) quoted, cut by ``clip_words``."""
    return repr(clip_words(" ".join(text.split()) if flatten else text, limit))
