"""Why a message matched: the spans of the query's terms in its indexed text, and snippets.

The rule is ``highlight_spans`` (``span_rule``: the one every surface uses: hits, the
admin, the chat page); ``match_spans`` (``span_match``) finds its spans inside the
message's indexed prefix (its first 256 KiB of folded text), running it only on the few
pieces of text that may hold a query term. A 10 MB tool log costs what its indexed part
costs, and usually much less.

Pure Python, no Django: the memory index and every SQL backend attach the same spans.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable, Sequence

from .records import TranscriptHit
from .span_match import indexed_prefix, match_spans
from .span_rule import Span, highlight_spans
from .text import indexed_text

__all__ = [
    "MAX_HIT_SPANS",
    "Span",
    "highlight_spans",
    "hit_spans",
    "indexed_prefix",
    "match_spans",
    "one_line",
    "snippet",
    "snippet_bounds",
    "snippet_with_spans",
    "spans_within",
    "with_spans",
]

_SPACE_RE = re.compile(r"\s+")
# Lone surrogates (U+D800-U+DFFF) cannot be encoded: snippets show U+FFFD instead.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


#: A hit carries at most this many spans, its first ones: a 256 KiB message full of the
#: query's words (43,000 of them) costs what its first few KiB cost, as no surface shows more.
MAX_HIT_SPANS = 1_000


def hit_spans(
    message: object, terms: Sequence[str], *, substring: bool = False
) -> tuple[Span, ...]:
    """The first ``MAX_HIT_SPANS`` spans of a hit's message (``()`` for a message with no
    indexed text)."""
    return match_spans(
        indexed_text(message) or "", terms, substring=substring, enough=MAX_HIT_SPANS
    )


def with_spans(
    hits: list[TranscriptHit], terms: Sequence[str], *, substring: bool = False
) -> list[TranscriptHit]:
    """The page's hits, each carrying its spans; run once the page is chosen."""
    return [
        dataclasses.replace(hit, spans=hit_spans(hit.message, terms, substring=substring))
        for hit in hits
    ]


def _best_window(spans: Sequence[Span], width: int) -> tuple[int, int]:
    """The first span, and the last span that fits with it in ``width``, that cover the most
    spans (ties: the earliest)."""
    best = (0, 0)
    last = 0
    for first, (start, _end) in enumerate(spans):
        last = max(last, first)
        while last + 1 < len(spans) and spans[last + 1][1] - start <= width:
            last += 1
        if last - first > best[1] - best[0]:
            best = (first, last)
    return best


#: A snippet's edge moves at most this far to avoid cutting a word in two.
_WORD_SLACK = 16


def _whole_words(text: str, start: int, end: int, keep_from: int, keep_to: int) -> tuple[int, int]:
    """``start``/``end`` moved inwards to whitespace nearby, never inside ``keep_from:keep_to``."""
    if start > 0 and not text[start - 1].isspace():
        limit = min(start + _WORD_SLACK, keep_from if keep_to else end)
        space = _SPACE_RE.search(text, start, limit)
        if space is not None:
            start = space.end()
    if end < len(text) and not text[end].isspace():
        low = max(end - _WORD_SLACK, keep_to, start)
        cut = max(text.rfind(" ", low, end), text.rfind("\n", low, end))
        if cut > low:
            end = cut
    return start, end


#: A snippet's window is the best among a text's first this many spans: a 256 KiB message
#: full of the query's words (43,000 spans) costs what its first window costs.
SNIPPET_SPANS = 256


def _usable(text: str, spans: Iterable[Span]) -> list[Span]:
    """The first ``SNIPPET_SPANS`` spans that lie inside ``text``."""
    inside = ((start, end) for start, end in spans if 0 <= start < end <= len(text))
    return list(itertools.islice(inside, SNIPPET_SPANS))


def spans_within(spans: Sequence[Span], low: int, high: int) -> list[Span]:
    """The spans overlapping ``low:high``; spans in text order (as every hit's are) are
    looked at only up to ``high``, any other order whole."""
    found: list[Span] = []
    previous = 0
    for start, end in spans:
        if start < previous:  # not in text order: every span may overlap
            return [(a, b) for a, b in spans if a < high and b > low]
        previous = start
        if start >= high:
            break
        if end > low:
            found.append((start, end))
    return found


def snippet_bounds(text: str, spans: Sequence[Span], *, width: int = 160) -> tuple[int, int]:
    """Where ``snippet`` cuts ``text``: ``(start, end)`` (it then drops the whitespace at
    either edge). Lets a page mark the spans inside the very excerpt ``snippet`` shows.
    The window is the best among the first ``SNIPPET_SPANS`` spans."""
    if width < 1:
        raise ValueError("width must be at least 1")
    if not isinstance(text, str) or not text:
        return 0, 0
    usable = _usable(text, spans)
    if usable:
        first, last = _best_window(usable, width)
        start, end = usable[first][0], usable[last][1]
        spare = max(0, width - (end - start))
        start = max(0, start - spare // 2)
        end = min(len(text), max(end, start + width))
        start = max(0, min(start, end - width))
        start, end = _whole_words(text, start, end, usable[first][0], usable[last][1])
    else:
        start, end = _whole_words(text, 0, min(len(text), width), 0, 0)
    return start, end


def one_line(text: str) -> str:
    """Whitespace runs as one space and lone surrogates as U+FFFD: a line any page or
    terminal can show."""
    return _SPACE_RE.sub(" ", _SURROGATE_RE.sub("\ufffd", text))


def snippet(text: str, spans: Sequence[Span], *, width: int = 160) -> str:
    """A short plain-text excerpt of ``text`` around its best spans, at most about ``width``
    characters plus ``…`` marks.

    The window covering the most spans is picked (the start of the text when there is
    none), widened evenly on both sides. Whitespace runs (newlines, tabs) become one
    space and lone surrogates become U+FFFD, so the result is one line that any page or
    terminal can show; it holds no markup, and templates escape it as any text.
    """
    start, end = snippet_bounds(text, spans, width=width)
    if not isinstance(text, str) or not text:
        return ""
    shown = one_line(text[start:end]).strip()
    return ("…" if start > 0 else "") + shown + ("…" if end < len(text) else "")


def snippet_with_spans(
    text: str, spans: Sequence[Span], *, width: int = 160
) -> tuple[str, tuple[Span, ...]]:
    """``snippet(text, spans, width=width)`` and the spans moved into it (clipped to what it
    shows), so a client without the whole text can still mark the matched words."""
    if width < 1:
        raise ValueError("width must be at least 1")
    if not isinstance(text, str) or not text:
        return "", ()
    start, end = snippet_bounds(text, spans, width=width)
    usable = [(a, b) for a, b in spans_within(spans, start, end) if 0 <= a < b <= len(text)]
    # where each shown character of text[start:end] lands once whitespace runs are one space
    shown: list[str] = []
    moved = [0] * (end - start + 1)
    position = start
    for space in _SPACE_RE.finditer(text, start, end):
        for offset in range(position, space.start()):
            moved[offset - start] = len(shown)
            shown.append(text[offset])
        for offset in range(space.start(), space.end()):
            moved[offset - start] = len(shown)
        shown.append(" ")
        position = space.end()
    for offset in range(position, end):
        moved[offset - start] = len(shown)
        shown.append(text[offset])
    moved[end - start] = len(shown)
    body = "".join(shown)
    lead = len(body) - len(body.lstrip(" "))
    body = body.strip(" ")
    prefix = "…" if start > 0 else ""
    inside: list[Span] = []
    for low, high in usable:
        low, high = max(low, start), min(high, end)
        if low >= high:
            continue
        a = min(max(moved[low - start] - lead, 0), len(body))
        b = min(max(moved[high - start] - lead, 0), len(body))
        if a < b:
            inside.append((a + len(prefix), b + len(prefix)))
    body = _SURROGATE_RE.sub("\ufffd", body)
    return prefix + body + ("…" if end < len(text) else ""), tuple(inside)
