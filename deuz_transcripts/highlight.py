"""Safe HTML for message text with the matched words in ``<mark>``, and excerpts of long text.

Every piece of text is escaped on its own; only the joined result is marked safe,
so no message or query can inject markup.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from .text import highlight_spans

__all__ = ["ELLIPSIS", "find_spans", "highlighted_excerpt", "render_spans"]

ELLIPSIS = "…"
#: Text is scanned for matches in chunks this long, stopping once enough are found.
_CHUNK = 8_192


def find_spans(
    text: str, terms: Sequence[str], *, substring: bool, enough: int = 0
) -> list[tuple[int, int]]:
    """``highlight_spans`` over ``text``, stopping after ``enough`` spans (0: all).

    A long tool log is scanned chunk by chunk, each chunk cut after whitespace so
    no word is split, so a page of hits does not fold megabytes of text.
    """
    if not terms or not text:
        return []
    if enough <= 0 or len(text) <= _CHUNK:
        return highlight_spans(text, list(terms), substring=substring)
    spans: list[tuple[int, int]] = []
    start = 0
    while start < len(text) and len(spans) < enough:
        end = min(len(text), start + _CHUNK)
        if end < len(text):
            cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
            end = cut + 1 if cut > start else end
        spans.extend(
            (a + start, b + start)
            for a, b in highlight_spans(text[start:end], list(terms), substring=substring)
        )
        start = end
    return spans


def render_spans(text: str, spans: Sequence[tuple[int, int]]) -> SafeString:
    """``text`` escaped, each span wrapped in ``<mark>``."""
    pieces: list[str] = []
    position = 0
    for start, end in spans:
        if start < position:  # overlapping spans never happen; be safe anyway
            continue
        pieces.append(escape(text[position:start]))
        pieces.append(f"<mark>{escape(text[start:end])}</mark>")
        position = end
    pieces.append(escape(text[position:]))
    return mark_safe("".join(pieces))  # every piece is escaped above


def highlighted_excerpt(
    text: str,
    terms: Sequence[str],
    *,
    substring: bool,
    limit: int = 1_200,
    context: int = 160,
    windows: int = 3,
) -> SafeString:
    """The whole text when short, else up to ``windows`` snippets around the first matches."""
    if len(text) <= limit:
        return render_spans(text, find_spans(text, terms, substring=substring))
    spans = find_spans(text, terms, substring=substring, enough=windows * 4)
    if not spans:
        return render_spans(text[:limit] + ELLIPSIS, [])
    ranges: list[list[int]] = []
    for start, end in spans:
        low, high = max(0, start - context), min(len(text), end + context)
        if ranges and low <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], high)
        elif len(ranges) < windows:
            ranges.append([low, high])
        else:
            break
    pieces: list[str] = []
    for low, high in ranges:
        inside = [(a - low, b - low) for a, b in spans if a >= low and b <= high]
        pieces.append(
            (ELLIPSIS if low > 0 else "")
            + render_spans(text[low:high], inside)
            + (ELLIPSIS if high < len(text) else "")
        )
    return mark_safe(" ".join(pieces))  # pieces: escaped text
