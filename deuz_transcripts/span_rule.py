"""The one highlight rule: the spans of a text's words that match a query.

Every surface marks with it (hits, the admin, the chat page); ``span_match`` finds the
same spans without running it over every character of a long text.
"""

from __future__ import annotations

from collections.abc import Iterable

from .text import fold, is_term_char, query_terms, term_ranges, voiced_text

__all__ = ["Span", "add_word_spans", "highlight_spans"]

#: ``(start, end)`` character offsets into a message's indexed text.
Span = tuple[int, int]


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
    for position, char in enumerate(voiced_text(text)):  # same offsets, folds per character
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
                add_word_spans(spans, "".join(word), starts, ends, wanted, substring)
                word, starts, ends = [], [], []
    if word:
        add_word_spans(spans, "".join(word), starts, ends, wanted, substring)
    return spans


def add_word_spans(
    spans: list[tuple[int, int]],
    word: str,
    starts: list[int],
    ends: list[int],
    wanted: set[str],
    substring: bool,
) -> None:
    """The spans of one word's matching terms; overlapping bigrams make one span.

    ``starts[i]``/``ends[i]``: where the word's ``i``-th (folded) character stands in the
    text, and where it ends (a mark after it included)."""
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
