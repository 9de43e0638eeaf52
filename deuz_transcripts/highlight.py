"""Safe HTML for message text with the matched words in ``<mark>``, and bounded excerpts.

Every piece of text is escaped on its own; only the joined result is marked safe,
so no message or query can inject markup. The spans come from ``spans.match_spans``
(a hit carries its own): this module only renders them, never more than an excerpt's
worth of a long text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from .spans import one_line, snippet_bounds, spans_within

__all__ = [
    "ELLIPSIS",
    "highlighted_excerpt",
    "highlighted_snippet",
    "printable",
    "render_spans",
    "role_label",
]

ELLIPSIS = "…"
# Lone surrogates (content may hold them) cannot be encoded into the UTF-8 response.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, one character for one (spans
    still apply), so a page holding it can be encoded."""
    return _SURROGATE_RE.sub("\ufffd", text)


def render_spans(text: str, spans: Sequence[tuple[int, int]]) -> SafeString:
    """``text`` escaped (surrogates replaced), each span wrapped in ``<mark>``."""
    return _render(text, spans, printable)


def _render(text: str, spans: Sequence[tuple[int, int]], shown: Callable[[str], str]) -> SafeString:
    """``render_spans`` with each piece passed through ``shown`` (which must replace lone
    surrogates) before it is escaped."""
    pieces: list[str] = []
    position = 0
    for start, end in spans:
        if start < position:  # spans overlap only inside one character ("¼"): skip
            continue
        pieces.append(escape(shown(text[position:start])))
        pieces.append(f"<mark>{escape(shown(text[start:end]))}</mark>")
        position = end
    pieces.append(escape(shown(text[position:])))
    return mark_safe("".join(pieces))  # every piece is escaped above


def highlighted_snippet(
    text: str, spans: Sequence[tuple[int, int]], *, width: int = 160
) -> SafeString:
    """``spans.snippet(text, spans, width=width)`` as safe HTML, the spans inside it marked
    (shifted into the excerpt, cut at its edges); without the marks it reads exactly as
    the plain snippet."""
    if not isinstance(text, str) or not text:
        return mark_safe("")
    start, end = snippet_bounds(text, spans, width=width)
    window = text[start:end]
    low = start + len(window) - len(window.lstrip())  # snippet() drops edge whitespace
    high = max(low, start + len(window.rstrip()))
    inside = [(max(a, low) - low, min(b, high) - low) for a, b in spans_within(spans, low, high)]
    return mark_safe(  # the middle is escaped piece by piece by _render
        (ELLIPSIS if start > 0 else "")
        + _render(text[low:high], inside, one_line)
        + (ELLIPSIS if end < len(text) else "")
    )


def highlighted_excerpt(
    text: str,
    spans: Sequence[tuple[int, int]],
    *,
    limit: int = 1_200,
    context: int = 160,
    windows: int = 3,
) -> SafeString:
    """The whole text when short, else up to ``windows`` snippets around the first spans.

    A window is at most ``3 * context`` characters however long its span (a span may be
    a 256 KiB word), so the HTML stays bounded for any text.
    """
    if len(text) <= limit:
        return render_spans(text, spans)
    if not spans:
        return render_spans(text[:limit] + ELLIPSIS, [])
    ranges: list[list[int]] = []
    for start, end in spans:
        low, high = max(0, start - context), min(len(text), end + context, start + 2 * context)
        if ranges and low <= ranges[-1][1]:
            ranges[-1][1] = min(max(ranges[-1][1], high), ranges[-1][0] + 3 * context)
        elif len(ranges) < windows:
            ranges.append([low, high])
        else:
            break
    pieces: list[str] = []
    for low, high in ranges:
        inside = [
            (max(a, low) - low, min(b, high) - low) for a, b in spans_within(spans, low, high)
        ]
        pieces.append(
            (ELLIPSIS if low > 0 else "")
            + render_spans(text[low:high], inside)
            + (ELLIPSIS if high < len(text) else "")
        )
    return mark_safe(" ".join(pieces))  # pieces: escaped text


def role_label(message: Any) -> str:
    """A message's role as shown (printable), ``?`` when it has none."""
    role = message.get("role") if isinstance(message, dict) else None
    return printable(role) if isinstance(role, str) else "?"
