"""N and every n_t of one search: the statistics its scores are made of.

One place decides where they come from, in this order: the stored counts (read
without visiting a match, where the engine keeps them for the filter), else the
engine's own counts (an index count, or the mask histogram of every match), else "not
known yet" (a walk that fills the page scores 1.0 without them). Each lookup runs at
most once per search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from django.db.backends.utils import CursorWrapper

from ... import ranking
from ...backends.chat_filter import ChatFilter
from ...backends.engine_counts import Density, EngineCounts
from ...paging import PinnedRanking

__all__ = ["Density", "SearchStatistics"]


class SearchStatistics:
    """The statistics of one search: its engine's stored counts, else its counts."""

    def __init__(self, counts: EngineCounts, cursor: CursorWrapper) -> None:
        self.counts = counts
        self.cursor = cursor
        self.policy = counts.policy
        self._stored = counts.stored
        self._totals: list[tuple[ChatFilter, int]] = []  # a scope is a dict: not hashable
        self._densities: list[tuple[ChatFilter, list[str], Density | None]] = []
        self._term_counts: list[tuple[ChatFilter, dict[str, int]]] = []

    def stores_term_counts(self, chats: ChatFilter) -> bool:
        """Whether the filter's N and common terms' n_t are stored counts, read without
        visiting a match (PostgreSQL's ``TermCount``)."""
        return self._stored is not None and self._stored.covers(chats)

    def total(self, chats: ChatFilter) -> int:
        """N: the filter's indexed messages (its known size, else stored, else counted),
        read once per filter."""
        if chats.size is not None:
            return chats.size
        for seen, size in self._totals:
            if seen == chats:
                return size
        if self._stored is not None and self._stored.covers(chats):
            size = self._stored.total(self.cursor, chats)
        else:
            size = self.counts.total(self.cursor, chats)
        self._totals.append((chats, size))
        return size

    def total_past(self, chats: ChatFilter, past: int) -> tuple[int, bool]:
        """N and ``True``, or a number past ``past`` and every size that routes a scope
        and ``False`` (where counting can stop there)."""
        stopped = None
        if not self.stores_term_counts(chats):
            stopped = self.counts.total_past(self.cursor, chats, past)
        return (self.total(chats), True) if stopped is None else stopped

    def sized(self, chats: ChatFilter, terms: Sequence[str], size: int | None) -> ChatFilter:
        """``chats`` with its N (``None``: past every size that routes it), routed by the
        engine as that N and the terms say."""
        return self.counts.routed(self.cursor, replace(chats, size=size), terms)

    def term_counts(self, chats: ChatFilter, terms: Sequence[str]) -> list[int]:
        """n_t of each term: its stored count, else counted in the engine's index (each
        term once per filter and search)."""
        counts: list[int | None] = [None] * len(terms)
        if self.stores_term_counts(chats):
            assert self._stored is not None
            counts = list(self._stored.term_counts(self.cursor, chats, terms))
        counted = self._counted(chats)
        missing = [
            position
            for position, count in enumerate(counts)
            if count is None and terms[position] not in counted
        ]
        if missing:
            found = self.counts.term_counts(self.cursor, chats, [terms[p] for p in missing])
            counted.update((terms[p], count) for p, count in zip(missing, found, strict=True))
        return [
            counted[term] if count is None else count
            for term, count in zip(terms, counts, strict=True)
        ]

    def _counted(self, chats: ChatFilter) -> dict[str, int]:
        """The n_t counted in the engine's index for ``chats`` so far."""
        for seen, counted in self._term_counts:
            if seen == chats:
                return counted
        self._term_counts.append((chats, {}))
        return self._term_counts[-1][1]

    def essential_min_terms(self, chats: ChatFilter) -> int:
        """The shortest query that tries the essential-terms plan: how short pays off
        depends on whether its n_t are read or counted."""
        if self.stores_term_counts(chats):
            return self.policy.essential_min_terms_stored
        return self.policy.essential_min_terms

    def histogram_from_term_counts(self, chats: ChatFilter, terms: Sequence[str]) -> bool:
        """Whether a mask histogram costs less built from the n_t and the rarer terms'
        rows than read from every match: where the counts are stored, or the engine
        says so."""
        return self.stores_term_counts(chats) or self.counts.histogram_from_term_counts(
            chats, terms
        )

    def stored(self, chats: ChatFilter, terms: Sequence[str]) -> Density | None:
        """N and every n_t where all are stored counts, else ``None``: one statement for
        the n_t (a term not counted, rare or new, ends it there), and one for N unless the
        filter knows it. A date window gets the figures of the search without it (a
        window filters hits only, SPEC §8): as a walk's guess, they only bound a walk of
        the window's rows."""
        for seen, seen_terms, density in self._densities:
            if seen == chats and seen_terms == list(terms):
                return density
        density = None
        whole = chats.without_window() if chats.windowed else chats
        if self._stored is not None and self._stored.covers(whole):
            counts = self._stored.term_counts(self.cursor, whole, terms)
            known = [count for count in counts if count is not None]
            if len(known) == len(counts):
                density = self.total(whole), known
        self._densities.append((chats, list(terms), density))
        return density

    def guess(self, chats: ChatFilter, terms: Sequence[str]) -> Density | None:
        """How dense the terms are, to bound a walk (never a score): the filter's stored
        counts, else the whole index's (a tenant without counts of its own)."""
        density = self.stored(chats, terms)
        if density is None and self._stored is not None:
            density = self._stored.index_density(self.cursor, chats, terms)
        return density

    def pin_every_term(self, chats: ChatFilter, terms: Sequence[str]) -> PinnedRanking:
        """The ranking of a walked page, whose best rows hold every term: N and every n_t
        as the exact route reads them (stored counts, else counted in the index, else
        from every match's mask)."""
        full = (1 << len(terms)) - 1
        density = self.stored(chats, terms)
        if density is not None:
            total, counts = density
            return PinnedRanking(max(total, *counts), tuple(counts), full)
        total = self.total(chats)
        if self.counts.counts_terms(chats, total):
            counts = self.term_counts(chats, terms)
        else:
            histogram = self.counts.mask_histogram(self.cursor, chats, terms)
            total, counts = ranking.term_counts(histogram, len(terms), total)
        return PinnedRanking(max(total, *counts), tuple(counts), full)
