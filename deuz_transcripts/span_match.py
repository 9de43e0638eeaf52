"""Where the highlight rule must run: ``match_spans`` on a message's indexed prefix.

The rule (``span_rule.highlight_spans``) folds and classifies each character one by one;
a hit's indexed prefix holds up to 256 KiB, mostly words that hold no query term. Exact
matching finds the rule's spans on the whole folded prefix (``folded_spans``, in C).
Substring matching (the LIKE fallback's) cuts the prefix into *segments* at whitespace
and at ASCII characters that are no letter or digit: each folds to one character that
is no term character, so no word crosses it and the rule on a segment alone gives that
segment's spans. Only segments that may hold a term occurrence (in their fold) are
looked at:

* one within an ASCII run: ASCII folds by ``lower()``, one character for one, so a
  ``find`` of each ASCII term in the lowered prefix meets it;
* one involving a non-ASCII character: the first such character in it folds to nothing
  or to several characters (it is then looked at wherever it occurs), or to the term's
  ``j``-th character, after the term's first ``j`` characters in ASCII and before ASCII
  characters that go on with the term up to the next non-ASCII one. A character whose
  fold shares no character with a term is never part of an occurrence.

Folds are remembered per character, the rule's result per distinct segment (across a
page's hits); the indexed prefix is cut from the folded size of the non-ASCII characters
alone (folded in C). A short prefix (for a query of several terms) is looked at
segment by segment instead. The result is the rule's, span for span, on every path
(tests/test_span_match.py).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence

from .folded_spans import char_fold, folded_spans, non_ascii
from .span_rule import Span, highlight_spans
from .text import (
    MAX_FOLD_GROWTH,
    MAX_INDEXED_BYTES,
    cjk_bigrams_enabled,
    fold,
    folded_size,
    voiced_text,
)

__all__ = ["indexed_prefix", "match_spans"]

# Letters, digits and every non-ASCII character but whitespace.
_SEGMENT_CHAR = r"[^\s\x00-/:-@\[-`{-\x7f]"
_SEGMENT_REST = re.compile(_SEGMENT_CHAR + "*")
_SEGMENT = re.compile(_SEGMENT_CHAR + "+")
_TERM_RUN = re.compile(r"[^\W_]+")
_LOWER_ASCII_RUN = re.compile("[a-z0-9]*")
_PREFIX_CHUNK = 16_384
# A prefix of at most min(_SHORT_CAP, k * k * _SHORT_CHARS_PER_TERM_SQUARED) characters,
# for k terms, is looked at segment by segment. Measured crossovers on mixed Latin, accented
# and Greek prose: ~150 characters for 2 terms, ~500 for 5, ~1,500 for 10, ~7,000 for 20,
# past 24,000 for 32 (each term costs its searches in every hit, and each non-ASCII
# character folding to one of the terms' letters a check of what is around it).
_SHORT_CHARS_PER_TERM_SQUARED = 16
_SHORT_CAP = 16_384


def _segment_end(text: str, at: int) -> int:
    """Where the run of segment characters from ``at`` ends."""
    found = _SEGMENT_REST.match(text, at)
    return found.end() if found is not None else at


def _folded_size(text: str, others: str | None = None) -> int:
    """``len(fold(text).encode())``, from the non-ASCII characters only (``others`` when
    known): fold works on each character alone and lowers an ASCII one to one byte."""
    if text.isascii():
        return len(text)
    if others is None:
        others = non_ascii(text)
    return len(text) - len(others) + folded_size(others)


def indexed_prefix(text: str, limit: int = MAX_INDEXED_BYTES) -> str:
    """The longest prefix of ``text`` whose folded UTF-8 fits in ``limit`` bytes.

    Folding works on each character alone (of ``voiced_text(text)``, of the same
    length), so this is the original text of the indexed part; a character whose folded
    form crosses the limit is left out.
    """
    return text[: len(_indexed(voiced_text(text), limit)[0])]


def _indexed(text: str, limit: int = MAX_INDEXED_BYTES) -> tuple[str, str | None]:
    """``indexed_prefix`` of ``voiced_text`` and its non-ASCII characters when they were
    needed."""
    if len(text) * 4 * MAX_FOLD_GROWTH <= limit:
        return text, None
    head = text[:limit]
    if head.isascii():
        if len(text) <= limit or folded_size(text[limit]):
            return head, ""
        # characters folding to nothing (marks) right after the full head still fit
        return text[: limit + _fitting_length(text[limit:], limit, limit, _PREFIX_CHUNK)], None
    if len(text) <= 2 * limit:
        others = non_ascii(text)
        if _folded_size(text, others) <= limit:
            return text, others
    return text[: _fitting_length(text, 0, limit, _PREFIX_CHUNK)], None


def _fitting_length(text: str, size: int, limit: int, chunk: int) -> int:
    """How many characters of ``text`` fit with ``size`` bytes already used: whole chunks
    while they fit, then the chunk that does not, in chunks 16 times smaller, then by
    bisection (fold is per character: the size grows with the prefix)."""
    for start in range(0, len(text), chunk):
        piece = text[start : start + chunk]
        grown = _folded_size(piece)
        if size + grown <= limit:
            size += grown
            continue
        if chunk > 256:
            return start + _fitting_length(piece, size, limit, chunk // 16)
        low, high = 0, len(piece)
        while low < high:
            middle = (low + high + 1) // 2
            if size + _folded_size(piece[:middle]) <= limit:
                low = middle
            else:
                high = middle - 1
        return start + low
    return len(text)


class _SegmentRule:
    """The rule on one segment, remembered per distinct segment of a text."""

    def __init__(self, terms: tuple[str, ...]) -> None:
        self.terms = terms
        self.wanted = set(terms)
        self.known: dict[str, tuple[Span, ...]] = {}
        self.classified: set[str] = set()
        self.anywhere: set[str] = set()
        self.fitting: dict[str, tuple[list[int], dict[bytes, list[bytes]]]] = {}

    @functools.cached_property
    def term_chars(self) -> frozenset[str]:
        return frozenset("".join(self.terms))

    @functools.cached_property
    def fits_by_char(self) -> dict[str, tuple[list[int], dict[bytes, list[bytes]]]]:
        """For each character a term may hold at ``j`` with only ASCII before it: those
        ``j``, and the term's first ``j`` characters -> the rests of the terms after it
        (``?`` for non-ASCII). Built once per query, not per hit; a character is then
        checked once per ``j``, not once per term."""
        rests_by_char: dict[str, dict[bytes, list[bytes]]] = {}
        for term in self.terms:
            head = _LOWER_ASCII_RUN.match(term).end()  # type: ignore[union-attr]
            for j in range(min(head + 1, len(term))):
                rests_by_char.setdefault(term[j], {}).setdefault(
                    term[:j].encode("ascii"), []
                ).append(term[j + 1 :].encode("ascii", "replace"))
        return {
            char: (sorted({len(before) for before in rests}), rests)
            for char, rests in rests_by_char.items()
        }

    def looked_at(self, distinct: set[str]) -> tuple[set[str], set[str]]:
        """Of a text's distinct non-ASCII characters, those to look at wherever they occur
        (folding to nothing or to several characters sharing one with a term) and those
        folding to a single character of ``fits_by_char``; each character is classified
        once per query, the rest of a page's hits only intersect sets."""
        new = distinct - self.classified
        if new:
            term_chars = self.term_chars
            fits_by_char = self.fits_by_char
            for char in new:
                folded = char_fold(char)
                if folded and term_chars.isdisjoint(folded):
                    continue
                if len(folded) != 1:
                    self.anywhere.add(char)
                elif folded in fits_by_char:
                    self.fitting[char] = fits_by_char[folded]
            self.classified |= new
        return distinct & self.anywhere, distinct & self.fitting.keys()

    def __call__(self, segment: str) -> tuple[Span, ...]:
        spans = self.known.get(segment)
        if spans is None:
            spans = self.known[segment] = self._spans(segment)
        return spans

    def _spans(self, segment: str) -> tuple[Span, ...]:
        if segment.isascii():  # letters and digits only: one word, folded by lower()
            word = segment.lower()
            hit = any(term in word for term in self.terms)
            return ((0, len(segment)),) if hit else ()
        folded = fold(segment)
        if not any(term in folded for term in self.terms):
            return ()
        return tuple(highlight_spans(segment, self.wanted, substring=True))


#: The rule of the last query (a page's hits share it), with the segments it has seen.
_LAST_RULE: list[tuple[tuple[tuple[str, ...], bool], _SegmentRule]] = []
_KNOWN_SEGMENTS_CAP = 65_536


def _rule(terms: tuple[str, ...]) -> _SegmentRule:
    """The segment rule for ``terms``, kept from the previous text when it was the same."""
    key = (terms, cjk_bigrams_enabled())
    last = _LAST_RULE[-1][1] if _LAST_RULE and _LAST_RULE[-1][0] == key else None
    if last is not None and len(last.known) + len(last.classified) < _KNOWN_SEGMENTS_CAP:
        return last  # what it remembers stays bounded
    rule = _SegmentRule(terms)
    _LAST_RULE[:] = [(key, rule)]
    return rule


def _occurrence_starts(prefix: str, lowered: bytes, others: str, rule: _SegmentRule) -> list[int]:
    """Offsets of the non-ASCII characters that may be the first non-ASCII character of a
    term occurrence (in fold) that no ASCII run holds.

    A character folding to nothing (a mark inside a word) or to several characters sharing
    one with a term always may. One folding to a single character may only where that
    character is the term's ``j``-th, the ``j`` characters before it are the term's first
    ones in ASCII (lowered), and the ASCII characters after it, up to the next non-ASCII
    one, go on with the term. Any other character cannot be part of an occurrence.
    """
    anywhere, fitting = rule.looked_at(set(others))
    starts: list[int] = []
    for char in anywhere:
        at = prefix.find(char)
        while at >= 0:
            starts.append(at)
            at = prefix.find(char, at + 1)
    for char in fitting:
        lengths, rests_after = rule.fitting[char]
        at = prefix.find(char)
        while at >= 0:
            for length in lengths:  # the term's first characters, just before ``at``
                if length > at:
                    break
                rests = rests_after.get(lowered[at - length : at])
                if rests is not None and _goes_on(lowered, at + 1, rests):
                    starts.append(at)
                    break
            at = prefix.find(char, at + 1)
    return starts


def _goes_on(lowered: bytes, at: int, rests: list[bytes]) -> bool:
    """Whether the ASCII characters from ``at``, up to the next non-ASCII one, go on with
    one of ``rests`` (``?`` in both stands for a non-ASCII character)."""
    for rest in rests:
        after = lowered[at : at + len(rest)]
        other = after.find(b"?")  # the next non-ASCII character (or a real "?")
        if (after == rest) if other < 0 else (after[:other] == rest[:other]):
            return True
    return False


def _segment_spans(prefix: str, others: str, terms: tuple[str, ...]) -> list[Span]:
    """The rule's spans on ``prefix``, looking only at the segments that may hold a term."""
    size = len(prefix)
    backwards = prefix[::-1]
    rule = _rule(terms)
    visited: dict[int, tuple[Span, ...]] = {}  # segment start -> its spans in ``prefix``

    def visit(at: int) -> int:
        """Runs the rule on the segment around ``at``; returns where the segment ends."""
        end = _segment_end(prefix, at)
        start = size - _segment_end(backwards, size - at)
        if start not in visited:
            inside = rule(prefix[start:end])
            if inside:
                inside = tuple((start + low, start + high) for low, high in inside)
            visited[start] = inside
        return end

    # ASCII letters and digits lowered, anything else "?": offsets stay those of ``prefix``
    lowered = prefix.encode("ascii", "replace").lower()
    for term in terms:
        if not term.isascii():
            continue
        needle = term.encode("ascii")
        at = lowered.find(needle)
        while at >= 0:
            at = lowered.find(needle, visit(at))

    for at in _occurrence_starts(prefix, lowered, others, rule):
        visit(at)

    return list(itertools.chain.from_iterable(visited[start] for start in sorted(visited)))


def _every_segment_spans(prefix: str, terms: tuple[str, ...]) -> list[Span]:
    """The rule's spans on ``prefix`` segment by segment: for a short prefix, and for the
    empty term (which is in every word)."""
    rule = _rule(terms)
    known = rule.known
    spans: list[Span] = []
    for found in _SEGMENT.finditer(prefix):
        segment = found.group()
        inside = known.get(segment)
        if inside is None:
            inside = rule(segment)
        if inside:
            start = found.start()
            spans.extend((start + low, start + high) for low, high in inside)
    return spans


@functools.lru_cache(maxsize=256)
def _useful_terms(terms: tuple[str, ...], substring: bool) -> tuple[str, ...]:
    """``terms`` once each, without those that can match nothing: a term holding anything
    but letters and digits equals no word and is in none. Remembered: every hit of a page
    asks with the same terms (32 terms: ~15 us a hit)."""
    return tuple(
        term
        for term in dict.fromkeys(terms)
        if _TERM_RUN.fullmatch(term) or (substring and term == "")
    )


def match_spans(
    text: str, terms: Sequence[str], *, substring: bool = False, enough: int = 0
) -> tuple[Span, ...]:
    """Spans of the words of ``text``'s indexed prefix that match ``terms`` (query terms).

    Equal to ``highlight_spans(indexed_prefix(text), terms, substring=substring)``;
    ``enough`` > 0 gives only the first ``enough`` of them, reading no further into the
    text than they lie (an excerpt needs only the first few: ``_first_spans``).
    """
    if not terms or not isinstance(text, str) or not text:
        return ()
    useful = _useful_terms(tuple(terms), substring)
    if not useful:
        return ()
    if enough > 0:
        return tuple(_first_spans(text, useful, substring, enough))
    prefix, others = _indexed(voiced_text(text))  # offsets are the text's
    return tuple(_spans_in(prefix, others, useful, substring))


def _spans_in(
    prefix: str, others: str | None, useful: tuple[str, ...], substring: bool
) -> list[Span]:
    """The rule's spans on an indexed ``prefix`` (or a piece of one no word crosses), of
    ``voiced_text``."""
    short = min(_SHORT_CAP, _SHORT_CHARS_PER_TERM_SQUARED * len(useful) ** 2)
    if not substring:  # exact: on the whole folded prefix
        return folded_spans(prefix, useful, others)
    if len(prefix) <= short or "" in useful:
        return _every_segment_spans(prefix, useful)
    return _segment_spans(prefix, non_ascii(prefix) if others is None else others, useful)


#: Text of at most this many characters (4 UTF-8 bytes each, folding to 11 characters at
#: most) is indexed whole.
_NEVER_CUT_CHARS = MAX_INDEXED_BYTES // (4 * MAX_FOLD_GROWTH)
#: ``_first_spans`` reads this many characters first, then twice as many each time.
_FIRST_PIECE = 2_048
#: No word crosses an ASCII whitespace character (it folds to itself, no term character).
_WORD_GAP = re.compile("[ \t\n\r\x0b\x0c]")


def _first_spans(text: str, useful: tuple[str, ...], substring: bool, enough: int) -> list[Span]:
    """The first ``enough`` spans of ``text``'s indexed prefix, read in pieces cut at ASCII
    whitespace, each twice the size of the one before, stopping once they hold ``enough``:
    a 256 KiB message full of the query's words costs its first few KiB. The indexed
    prefix is worked out only when a piece reaches past what is never cut."""
    spans: list[Span] = []
    start, size = 0, _FIRST_PIECE
    end_of_text = len(text)
    prefixed = end_of_text <= _NEVER_CUT_CHARS
    while start < end_of_text:
        cut = start + size
        if cut < end_of_text:
            gap = _WORD_GAP.search(text, cut)
            cut = end_of_text if gap is None else gap.start()
        if cut > _NEVER_CUT_CHARS and not prefixed:
            text = indexed_prefix(text)  # a prefix: the gap found is still one
            end_of_text, prefixed = len(text), True
            cut = min(cut, end_of_text)
        # a kana and its voicing mark are never cut apart: pieces end at ASCII whitespace
        found = _spans_in(voiced_text(text[start:cut]), None, useful, substring)
        spans.extend((start + low, start + high) for low, high in found)
        if len(spans) >= enough:
            return spans[:enough]
        start, size = cut, size * 2
    return spans
