"""The HTML report's text cells (prompts, reasons, errors, answers), cut so the file stays small
whatever the answers (README "The HTML report").

A cell shows at most ``CELL_CHARS`` characters, and the cells of one page share ``PAGE_CHARS``
characters in all: when they would pass it, the longest are cut first, each to the same
length, so short texts stay whole. A cut cell keeps a note with its whole length. Lengths count
the text as shown (control characters written as ``⟨U+0007⟩``); HTML escaping makes a shown
character at most 5 bytes (``"`` is ``&#34;``), so the cells of a page hold at most
5 x ``PAGE_CHARS`` bytes (750 KB) however long, many or hostile the answers are. A 50 MB answer
is 1,000 characters and a note.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

CELL_CHARS = 1_000
PAGE_CHARS = 150_000
NAME_CHARS = 120  # a model name an endpoint reported, shown in a line's name and the verdict box
_MARK = "⟨U+"  # the start of a control character shown as its code point: never cut in two


@dataclass(frozen=True, slots=True)
class Cell:
    """A text as the page shows it."""

    text: str  # control characters shown as code points; cut to the page's share
    length: int  # characters of the whole text
    cut: bool


def share(lengths: Iterable[int], cell: int = CELL_CHARS, page: int = PAGE_CHARS) -> int:
    """The most characters a cell shows: ``cell``, or less so the cells fill at most ``page``
    in all (the largest cap that does; the shorter cells stay whole)."""
    capped = sorted(min(n, cell) for n in lengths)
    if sum(capped) <= page:
        return cell
    left = page
    for index, length in enumerate(capped):
        if length * (len(capped) - index) > left:
            return left // (len(capped) - index)
        left -= length
    return cell  # not reached: the sum passed ``page``


def cut(text: str, limit: int) -> str:
    """``text`` (as shown) to at most ``limit`` characters, a ``⟨U+...⟩`` mark whole or left out."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    mark = head.rfind(_MARK, max(0, limit - 10))
    return head[:mark] if mark != -1 and "⟩" not in head[mark:] else head


def short(text: str) -> str:
    """A name (as shown) of at most ``NAME_CHARS`` characters, an ellipsis where it was cut."""
    return text if len(text) <= NAME_CHARS else cut(text, NAME_CHARS) + "…"


def alone(show: Callable[[object], str], text: str) -> Cell:
    """A cell that takes no share of the page (a set's verdict): at most ``CELL_CHARS``."""
    shown = show(text)
    return Cell(cut(shown, CELL_CHARS), len(text), len(shown) > CELL_CHARS)


def fill(spots: Sequence[tuple[MutableMapping[str, Any], str]], show: Callable[[object], str]) -> None:
    """Replace each ``row[key]`` of ``spots`` by its Cell, shown by ``show`` and cut to the
    page's share."""
    shown = [show(row[key]) for row, key in spots]
    limit = share(len(text) for text in shown)
    for (row, key), text in zip(spots, shown, strict=True):
        row[key] = Cell(cut(text, limit), len(str(row[key])), len(text) > limit)
