"""N and every n_t of one search: the statistics its scores are made of.

One place decides where they come from, in this order: the stored counts (read
without visiting a match, where the engine keeps them for the filter), else the
engine's own counts (an index count, or the mask histogram of every match), else "not
known yet" (a walk that fills the page scores 1.0 without them). Each lookup runs at
most once per search.
"""

from __future__ import annotations

from collections.abc import Sequence

from ... import ranking
from ...backends.engine_counts import Density
from ...backends.matches import Matches
from ...backends.policy import SearchPolicy
from ...paging import PinnedRanking

__all__ = ["Density", "FilterStatistics", "SearchStatistics"]


class SearchStatistics:
    """The statistics of one search: one ``FilterStatistics`` per filter it binds."""

    def __init__(self, policy: SearchPolicy) -> None:
        self.policy = policy
        self._bound: list[FilterStatistics] = []  # a scope is a dict: not hashable

    def of(self, matches: Matches) -> FilterStatistics:
        """The statistics of the filter ``matches`` binds, bound once per search."""
        for bound in self._bound:
            if bound.matches == matches:
                return bound
        bound = FilterStatistics(self, matches)
        self._bound.append(bound)
        return bound


class FilterStatistics:
    """N and each n_t of one filter of a search (a tantivy ``Weight``): its engine's
    stored counts, else its counts, each read at most once."""

    def __init__(self, search: SearchStatistics, matches: Matches) -> None:
        self._search = search
        self.matches = matches
        self.policy = search.policy
        self._total: int | None = None
        self._counted: dict[str, int] = {}  # n_t counted in the engine's index so far
        self._density: Density | None = None
        self._density_read = False

    def stores_term_counts(self) -> bool:
        """Whether the filter's N and common terms' n_t are stored counts, read without
        visiting a match (PostgreSQL's ``TermCount``)."""
        return self.matches.counts.stored_cover()

    def total(self) -> int:
        """N: the filter's indexed messages (its known size, else stored, else counted),
        read once."""
        matches = self.matches
        if matches.size is not None:
            return matches.size
        if self._total is None:
            counts = matches.counts
            self._total = counts.stored_total() if counts.stored_cover() else counts.total()
        return self._total

    def term_counts(self, terms: Sequence[str]) -> list[int]:
        """n_t of each term: its stored count, else counted in the engine's index (each
        term once)."""
        counts: list[int | None] = [None] * len(terms)
        if self.stores_term_counts():
            counts = list(self.matches.counts.stored_term_counts(terms))
        counted = self._counted
        missing = [
            position
            for position, count in enumerate(counts)
            if count is None and terms[position] not in counted
        ]
        if missing:
            found = self.matches.counts.term_counts([terms[p] for p in missing])
            counted.update((terms[p], count) for p, count in zip(missing, found, strict=True))
        return [
            counted[term] if count is None else count
            for term, count in zip(terms, counts, strict=True)
        ]

    def essential_min_terms(self) -> int:
        """The shortest query that tries the essential-terms plan: how short pays off
        depends on whether its n_t are read or counted."""
        return self.policy.essential_terms_from(stored=self.stores_term_counts())

    def stored(self) -> Density | None:
        """N and every n_t where all are stored counts, else ``None``: one statement for
        the n_t (a term not counted, rare or new, ends it there), and one for N unless the
        filter knows it. A date window gets the figures of the search without it (a
        window filters hits only, SPEC §8): as a walk's guess, they only bound a walk of
        the window's rows."""
        if self._density_read:
            return self._density
        matches = self.matches
        whole = matches.without(window=True) if matches.windowed else matches
        if whole.counts.stored_cover():
            counts = whole.counts.stored_term_counts(whole.terms)
            known = [count for count in counts if count is not None]
            if len(known) == len(counts):
                self._density = self._search.of(whole).total(), known
        self._density_read = True
        return self._density

    def guess(self) -> Density | None:
        """How dense the terms are, to bound a walk (never a score): the filter's stored
        counts, else the whole index's (a tenant without counts of its own)."""
        density = self.stored()
        if density is None:
            density = self.matches.counts.index_density()
        return density

    def pin_every_term(self) -> PinnedRanking:
        """The ranking of a walked page, whose best rows hold every term: N and every n_t
        as the exact route reads them (stored counts, else counted in the index, else
        from every match's mask)."""
        terms = self.matches.terms
        full = (1 << len(terms)) - 1
        density = self.stored()
        if density is not None:
            total, counts = density
            return PinnedRanking(max(total, *counts), tuple(counts), full)
        total = self.total()
        if self.matches.counts.counts_terms(total):
            counts = self.term_counts(terms)
        else:
            histogram = self.matches.counts.mask_histogram()
            total, counts = ranking.term_counts(histogram, len(terms), total)
        return PinnedRanking(max(total, *counts), tuple(counts), full)
