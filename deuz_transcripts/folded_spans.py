"""Exact matching's spans found on a whole folded text, in C, with offsets mapped back.

Word by word in Python, the highlight rule costs more than folding the whole hit: the
text becomes ``separated_fold_aligned(text)`` (each character's fold, non-term characters as
spaces, two codec calls), and a query term is a span where it is a whole word of it
(found by ``find``, or by a remembered pattern for a term found often). Under
``CJK_BIGRAMS``, in text holding Han, Kana or Thai, the words holding a query term are
cut into their terms by the rule's own ``add_word_spans``.

Folding is per character, so the map back to the text's offsets needs only the
characters whose fold is not one character (``ß``, ``½``, marks that drop): the rest
keep their offsets, and a text whose fold codes hold none needs no map at all. It gives
the rule's spans exactly (``tests/test_span_match.py`` holds it to the rule): a span
starts at the character whose fold holds the word's first character, ends after the one
whose fold holds its last, and takes in the characters folding to nothing right after it
when the word ends where that character's fold ends.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable

from .span_rule import Span, add_word_spans
from .text import (
    cjk_bigrams_enabled,
    fold,
    holds_bigram_runs,
    separated_fold_aligned,
    voiced_text,
)

__all__ = ["char_fold", "folded_spans", "non_ascii"]

#: non-ASCII character -> its fold, one table per rule (``CJK_BIGRAMS`` keeps voiced kana
#: voiced); each emptied when it grows past the cap.
_RULE_FOLDS: tuple[dict[str, str], dict[str, str]] = ({}, {})
#: non-ASCII characters known to fold to exactly one character
_ONE_FOR_ONE: set[str] = set()
_KNOWN_CAP = 65_536
_ASCII_BYTES = bytes(range(128))
#: Up to this many terms, each is scanned for (~1 ms per MB); more, and one ``split`` of the
#: text (~10 ms per MB) first keeps those the text holds.
_SCANS_BEFORE_SPLIT = 8
#: A term's first occurrences in a text are found by ``find``; past this many, by a
#: compiled pattern (remembered: a query's terms recur across a page and across queries).
_FINDS_BEFORE_PATTERN = 16


def char_fold(char: str) -> str:
    """``fold(char)``, remembered (a text repeats few distinct non-ASCII characters)."""
    known = _RULE_FOLDS[cjk_bigrams_enabled()]
    folded = known.get(char)
    if folded is None:
        if len(known) > _KNOWN_CAP:
            known.clear()
        folded = known[char] = fold(char)
    return folded


def _odd_lengths(text: str, others: str | None) -> dict[str, int]:
    """Of the non-ASCII characters of ``text`` (``others``, when known), those whose fold
    is not one character, with its length (the others are found in C against those known
    already)."""
    if others is None:
        if text.isascii():
            return {}
        others = non_ascii(text)
    new = set(others).difference(_ONE_FOR_ONE)
    if len(_ONE_FOR_ONE) > _KNOWN_CAP:
        _ONE_FOR_ONE.clear()
    odd: dict[str, int] = {}
    for char in new:
        length = len(char_fold(char))
        if length == 1:
            _ONE_FOR_ONE.add(char)
        else:
            odd[char] = length
    return odd


class _OffsetMap:
    """Folded offsets -> the text's offsets, from the odd characters' occurrences."""

    def __init__(self, text: str, odd: dict[str, int]) -> None:
        places = sorted(
            (at, length) for char, length in odd.items() for at in _occurrences(text, char)
        )
        self.text_at = [at for at, _ in places]
        self.lengths = [length for _, length in places]
        self.folded_at: list[int] = []
        shift = 0
        for at, length in places:
            self.folded_at.append(at + shift)
            shift += length - 1
        self.dropped = {at for at, length in places if length == 0}

    def char_of(self, folded: int) -> tuple[int, bool]:
        """The text offset of the character whose fold holds folded offset ``folded``, and
        whether ``folded`` is that fold's last character."""
        index = bisect.bisect_right(self.folded_at, folded) - 1
        if index >= 0:
            start = self.folded_at[index]
            length = self.lengths[index]
            if folded < start + length:
                return self.text_at[index], folded == start + length - 1
            return self.text_at[index] + 1 + folded - (start + length), True
        return folded, True

    def span(self, start: int, end: int) -> Span:
        first, _ = self.char_of(start)
        last, fold_ends = self.char_of(end - 1)
        end = last + 1
        if fold_ends:  # characters folding to nothing right after the word belong to it
            while end in self.dropped:
                end += 1
        return first, end

    def spans(self, spans: list[Span]) -> list[Span]:
        """``span`` of each of ``spans`` (sorted, apart): those between two odd characters
        moved by one shift together, the few touching one mapped alone."""
        ends = [end for _, end in spans]
        out: list[Span] = []
        index = shift = 0
        for start, length in zip(self.folded_at, self.lengths, strict=True):
            # before this character's fold (a word ending where a dropped one stands takes it in)
            block = bisect.bisect_left(ends, start + 1 if length else start, index)
            out.extend([(low - shift, high - shift) for low, high in spans[index:block]])
            index = block
            # holding part of the character's fold, or (dropped) ending at it or around it
            while index < len(spans) and spans[index][0] < start + length:
                out.append(self.span(*spans[index]))
                index += 1
            shift += length - 1
        out.extend([(low - shift, high - shift) for low, high in spans[index:]])
        return out


def non_ascii(text: str) -> str:
    """The non-ASCII characters of ``text``, in order (lone surrogates included)."""
    # dropping the ASCII bytes leaves whole UTF-8 sequences
    return (
        text.encode("utf-8", "surrogatepass")
        .translate(None, _ASCII_BYTES)
        .decode("utf-8", "surrogatepass")
    )


def _occurrences(text: str, char: str) -> Iterable[int]:
    at = text.find(char)
    while at >= 0:
        yield at
        at = text.find(char, at + 1)


def _whole_word_places(separated: str, term: str) -> list[Span]:
    """Where ``term`` is a whole word of ``separated``: the first occurrences (as a word or
    inside one) by ``find``, with no pattern to compile (~30 us a term, more than a short
    text costs); a term found more often than that, by its remembered pattern, in C."""
    places: list[Span] = []
    size = len(term)
    at = separated.find(term)
    for _ in range(_FINDS_BEFORE_PATTERN):
        if at < 0:
            return places
        end = at + size
        if (not at or separated[at - 1] == " ") and (
            end == len(separated) or separated[end] == " "
        ):
            places.append((at, end))
        at = separated.find(term, at + 1)
    if at >= 0:
        places.extend(found.span() for found in _whole_word(term).finditer(separated, at))
    return places


@functools.lru_cache(maxsize=256)
def _whole_word(term: str) -> re.Pattern[str]:
    """``term`` as a whole word of separated folded text (the pattern opens with the term
    itself, so ``re`` scans for it as fast as ``find``)."""
    word = re.escape(term)
    return re.compile(word + "(?<![^ ]" + word + ")(?![^ ])")


def _piece_spans(
    text: str, others: str | None, separated: str, aligned: bool, wanted: set[str]
) -> list[Span]:
    """``CJK_BIGRAMS`` text: the words holding a query term anywhere (found in C), each
    cut into its terms by the rule itself (``add_word_spans``), its characters' places
    mapped back one by one (overlapping bigrams merge where the text's characters do)."""
    words: dict[int, int] = {}  # start -> end, in ``separated``
    for term in wanted:
        at = separated.find(term)
        while at >= 0:
            start = separated.rfind(" ", 0, at) + 1
            end = separated.find(" ", at + len(term))
            end = len(separated) if end < 0 else end
            words[start] = end
            at = separated.find(term, end)
    odd = _odd_lengths(text, others) if words and not aligned else {}
    offsets = _OffsetMap(text, odd) if odd else None
    spans: list[Span] = []
    for start in sorted(words):
        end = words[start]
        if offsets is None:
            starts, ends = list(range(start, end)), list(range(start + 1, end + 1))
        else:
            starts = [offsets.char_of(place)[0] for place in range(start, end)]
            ends = [offsets.span(place, place + 1)[1] for place in range(start, end)]
        add_word_spans(spans, separated[start:end], starts, ends, wanted, False)
    return spans


def folded_spans(text: str, terms: Iterable[str], others: str | None = None) -> list[Span]:
    """The rule's spans of ``terms`` (exact matching) in ``text``: where a term is a whole
    word of the folded text, or (text whose terms ``CJK_BIGRAMS`` cuts into pieces) one of
    the pieces of a word holding it. ``others``: the text's non-ASCII characters, when
    known; else found only when a span needs the offset map."""
    voiced = voiced_text(text)  # what folds character by character, the text's offsets
    if voiced is not text:
        text, others = voiced, None
    separated, aligned = separated_fold_aligned(text)
    if cjk_bigrams_enabled() and holds_bigram_runs(separated):
        return _piece_spans(text, others, separated, aligned, set(terms))
    wanted = set(terms)
    if len(wanted) > _SCANS_BEFORE_SPLIT:  # which terms the text holds, from one split
        wanted.intersection_update(separated.split())
    spans: list[Span] = []
    for term in wanted:
        spans.extend(_whole_word_places(separated, term))
    if not spans:
        return spans
    spans.sort()
    if aligned:  # the folded offsets are the text's
        return spans
    odd = _odd_lengths(text, others)
    return _OffsetMap(text, odd).spans(spans) if odd else spans
