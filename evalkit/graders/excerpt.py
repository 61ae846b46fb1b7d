"""Quoting a piece of an answer in a grade's reason."""

from __future__ import annotations


def excerpt(text: str, limit: int, *, flatten: bool = False) -> str:
    """``text`` (whitespace runs made single spaces with ``flatten``) quoted, at most ``limit``
    characters before quoting. A word the cut would split is left out whole: a cut e-mail address,
    phone number or key is no longer recognisable to the redaction of a stored reason."""
    if flatten:
        text = " ".join(text.split())
    if len(text) > limit:
        head = text[: limit - 3]
        if not text[limit - 3].isspace():
            whole = head.rstrip().rsplit(maxsplit=1)
            head = head[: len(head) - len(whole[-1])] if len(whole) > 1 else head
        text = head + "..."
    return repr(text)
