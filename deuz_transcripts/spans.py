"""Why a message matched: the spans of the query's terms in its indexed text, and snippets.

The rule is ``highlight_spans`` (the one every surface uses: hits, the admin, the
chat page); this module only decides where it must run. Words never cross whitespace
(every whitespace character folds to a separator), so the rule is applied to the few
whitespace-separated tokens whose folded form holds a query term, and only inside the
message's indexed prefix (its first 256 KiB of folded text). A 10 MB tool log costs
what its indexed part costs, and usually much less.

Pure Python, no Django: the memory index and every SQL backend attach the same spans.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from collections.abc import Iterable, Sequence

from .records import TranscriptHit
from .text import (
    MAX_FOLD_GROWTH,
    MAX_INDEXED_BYTES,
    fold,
    indexed_text,
    is_term_char,
    query_terms,
    term_ranges,
)

__all__ = [
    "Span",
    "highlight_spans",
    "hit_spans",
    "indexed_prefix",
    "match_spans",
    "one_line",
    "snippet",
    "snippet_bounds",
    "snippet_with_spans",
    "with_spans",
]

#: ``(start, end)`` character offsets into a message's indexed text.
Span = tuple[int, int]

_TOKEN_RE = re.compile(r"\S+")
_SPACE_RE = re.compile(r"\s+")
# Lone surrogates (U+D800-U+DFFF) cannot be encoded: snippets show U+FFFD instead.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_PREFIX_CHUNK = 4_096


def highlight_spans(
    text: str, query: str | Iterable[str], *, substring: bool = False
) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of ``text``'s words that match the query: the one
    rule every surface marks with (the reference ``match_spans`` is held to).

    Spans index the ORIGINAL text, so a UI can wrap them untouched (after escaping).
    With ``substring=True`` a word matches when it contains a query term, as the
    SQLite LIKE fallback matches. Under ``CJK_BIGRAMS`` a word's terms are its pieces
    and bigrams: each matching one is a span (overlapping ones merged).
    """
    wanted = set(query_terms(query) if isinstance(query, str) else query)
    if not wanted or not isinstance(text, str):
        return []
    spans: list[tuple[int, int]] = []
    word: list[str] = []
    # the original position of each folded character of the word, and where it ends
    # (a mark or zero-width character after it belongs to it)
    starts: list[int] = []
    ends: list[int] = []
    for position, char in enumerate(text):
        folded = fold(char)
        if not folded:
            if word:  # a mark or zero-width character inside a word
                ends[-1] = position + 1
            continue
        # Folding is per character, so the words are those of the concatenated folded
        # text: e.g. "3½" folds to "31⁄2", whose first word "31" ends inside the "½".
        for folded_char in folded:
            if is_term_char(folded_char):
                word.append(folded_char)
                starts.append(position)
                ends.append(position + 1)
            elif word:
                _add_spans(spans, "".join(word), starts, ends, wanted, substring)
                word, starts, ends = [], [], []
    if word:
        _add_spans(spans, "".join(word), starts, ends, wanted, substring)
    return spans


def _add_spans(
    spans: list[tuple[int, int]],
    word: str,
    starts: list[int],
    ends: list[int],
    wanted: set[str],
    substring: bool,
) -> None:
    """The spans of one word's matching terms; overlapping bigrams make one span."""
    found: list[tuple[int, int]] = []
    for first, last in term_ranges(word):
        term = word[first:last]
        if term in wanted or (substring and any(query in term for query in wanted)):
            span = (starts[first], ends[last - 1])
            if found and span[0] < found[-1][1]:
                found[-1] = (found[-1][0], max(found[-1][1], span[1]))
            else:
                found.append(span)
    spans.extend(found)


def _folded_size(text: str) -> int:
    return len(fold(text).encode("utf-8"))


def indexed_prefix(text: str, limit: int = MAX_INDEXED_BYTES) -> str:
    """The longest prefix of ``text`` whose folded UTF-8 fits in ``limit`` bytes.

    Folding works on each character alone, so this is the original text of the
    indexed part; a character whose folded form crosses the limit is left out.
    """
    if len(text) * 4 * MAX_FOLD_GROWTH <= limit:
        return text
    head = text[:limit]
    if head.isascii():
        return head
    size = 0
    for start in range(0, len(text), _PREFIX_CHUNK):
        chunk = text[start : start + _PREFIX_CHUNK]
        grown = _folded_size(chunk)
        if size + grown <= limit:
            size += grown
            continue
        low, high = 0, len(chunk)  # fold is per character: size grows with the prefix
        while low < high:
            middle = (low + high + 1) // 2
            if size + _folded_size(chunk[:middle]) <= limit:
                low = middle
            else:
                high = middle - 1
        return text[: start + low]
    return text


@functools.lru_cache(maxsize=256)
def _ascii_word_pattern(terms: tuple[str, ...], substring: bool) -> re.Pattern[str]:
    """Finds, in lowered ASCII text, the words the rule marks: ASCII folds by ``lower()``
    one character for one, so its words are runs of ``[^\\W_]`` (``text``'s term rule)."""
    alternatives = "|".join(re.escape(term) for term in sorted(terms, key=len, reverse=True))
    if substring:
        return re.compile(rf"(?<![^\W_])[^\W_]*?(?:{alternatives})[^\W_]*")
    return re.compile(rf"(?<![^\W_])(?:{alternatives})(?![^\W_])")


def _token_spans(
    token: str, terms: tuple[str, ...], substring: bool, pattern: re.Pattern[str]
) -> tuple[Span, ...]:
    """The rule on one whitespace-free token, skipped when its fold holds no term."""
    if token.isascii():
        return tuple(found.span() for found in pattern.finditer(token.lower()))
    folded = fold(token)
    if not any(term in folded for term in terms):
        return ()
    return tuple(highlight_spans(token, terms, substring=substring))


def match_spans(
    text: str, terms: Sequence[str], *, substring: bool = False, enough: int = 0
) -> tuple[Span, ...]:
    """Spans of the words of ``text``'s indexed prefix that match ``terms`` (query terms).

    Equal to ``highlight_spans(indexed_prefix(text), terms, substring=substring)``;
    ``enough`` > 0 stops after that many spans (an excerpt needs only the first few).
    """
    if not terms or not isinstance(text, str) or not text:
        return ()
    wanted = tuple(dict.fromkeys(terms))
    pattern = _ascii_word_pattern(wanted, substring)
    prefix = indexed_prefix(text)
    if prefix.isascii():
        found = (match.span() for match in pattern.finditer(prefix.lower()))
        return tuple(itertools.islice(found, enough) if enough > 0 else found)
    spans: list[Span] = []
    seen: dict[str, tuple[Span, ...]] = {}
    for token in _TOKEN_RE.finditer(prefix):
        word = token.group()
        inside = seen.get(word)
        if inside is None:
            inside = seen[word] = _token_spans(word, wanted, substring, pattern)
        if inside:
            start = token.start()
            spans.extend((start + a, start + b) for a, b in inside)
            if 0 < enough <= len(spans):
                return tuple(spans[:enough])
    return tuple(spans)


def hit_spans(
    message: object, terms: Sequence[str], *, substring: bool = False
) -> tuple[Span, ...]:
    """The spans of a hit's message (``()`` for a message with no indexed text)."""
    return match_spans(indexed_text(message) or "", terms, substring=substring)


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


def snippet_bounds(text: str, spans: Sequence[Span], *, width: int = 160) -> tuple[int, int]:
    """Where ``snippet`` cuts ``text``: ``(start, end)`` (it then drops the whitespace at
    either edge). Lets a page mark the spans inside the very excerpt ``snippet`` shows."""
    if width < 1:
        raise ValueError("width must be at least 1")
    if not isinstance(text, str) or not text:
        return 0, 0
    usable = [(start, end) for start, end in spans if 0 <= start < end <= len(text)]
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
    usable = [(start, end) for start, end in spans if 0 <= start < end <= len(text)]
    start, end = snippet_bounds(text, usable, width=width)
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
