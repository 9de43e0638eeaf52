"""N and every n_t of one search: the statistics its scores are made of.

One place decides where they come from, in this order: the stored counts (read
without visiting a match), else the engine's own counts (an index count, or the mask
histogram of every match), else "not known yet" (a walk that fills the page scores
1.0 without them). Each lookup runs at most once per search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from django.db.backends.utils import CursorWrapper

from ... import ranking
from ...backends.base import SearchMatcher
from ...backends.chat_filter import ChatFilter
from ...paging import PinnedRanking

__all__ = ["Density", "SearchStatistics"]

#: N and each term's n_t, where both are read without visiting a match.
Density = tuple[int, list[int]]


class SearchStatistics:
    """The statistics of one search through one engine's row source."""

    def __init__(self, source: SearchMatcher, cursor: CursorWrapper) -> None:
        self.source = source
        self.cursor = cursor
        self._stored: list[tuple[ChatFilter, list[str], Density | None]] = []

    def total(self, chats: ChatFilter) -> int:
        """N: the filter's indexed messages (its known size, else counted)."""
        if chats.size is not None:
            return chats.size
        return self.source.total(self.cursor, chats)

    def total_past(self, chats: ChatFilter, past: int) -> tuple[int, bool]:
        """N and ``True``, or a number past ``past`` and every size that routes a scope
        and ``False`` (where counting can stop there)."""
        return self.source.total_past(self.cursor, chats, past)

    def sized(self, chats: ChatFilter, terms: Sequence[str], size: int | None) -> ChatFilter:
        """``chats`` with its N (``None``: past every size that routes it), routed by the
        engine as that N and the terms say."""
        return self.source.routed(self.cursor, replace(chats, size=size), terms)

    def stored(self, chats: ChatFilter, terms: Sequence[str]) -> Density | None:
        """N and every n_t where all are stored counts, else ``None``."""
        for seen, seen_terms, density in self._stored:  # a scope is a dict: not hashable
            if seen == chats and seen_terms == list(terms):
                return density
        density = self.source.stored_density(self.cursor, chats, terms)
        self._stored.append((chats, list(terms), density))
        return density

    def guess(self, chats: ChatFilter, terms: Sequence[str]) -> Density | None:
        """How dense the terms are, to bound a walk (never a score): the filter's stored
        counts, else the whole index's (a tenant without counts of its own)."""
        density = self.stored(chats, terms)
        if density is None:
            density = self.source.index_density(self.cursor, chats, terms)
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
        source = self.source
        total = self.total(chats)
        if source.counts_terms(chats, total):
            counts = source.term_counts(self.cursor, chats, terms)
        else:
            histogram = source.mask_histogram(self.cursor, chats, terms)
            total, counts = ranking.term_counts(histogram, len(terms), total)
        return PinnedRanking(max(total, *counts), tuple(counts), full)
