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
from ...backends.policy import PlanPolicy
from ...paging import PinnedRanking

__all__ = ["Density", "SearchStatistics"]


class SearchStatistics:
    """The statistics of one search: its engine's stored counts, else its counts, of
    each filter the search binds (``Matches``)."""

    def __init__(self, policy: PlanPolicy) -> None:
        self.policy = policy
        self._totals: list[tuple[Matches, int]] = []  # a scope is a dict: not hashable
        self._densities: list[tuple[Matches, Density | None]] = []
        self._term_counts: list[tuple[Matches, dict[str, int]]] = []

    def stores_term_counts(self, matches: Matches) -> bool:
        """Whether the filter's N and common terms' n_t are stored counts, read without
        visiting a match (PostgreSQL's ``TermCount``)."""
        return matches.counts.stored_cover()

    def total(self, matches: Matches) -> int:
        """N: the filter's indexed messages (its known size, else stored, else counted),
        read once per filter."""
        if matches.size is not None:
            return matches.size
        for seen, size in self._totals:
            if seen == matches:
                return size
        counts = matches.counts
        size = counts.stored_total() if counts.stored_cover() else counts.total()
        self._totals.append((matches, size))
        return size

    def term_counts(self, matches: Matches, terms: Sequence[str]) -> list[int]:
        """n_t of each term: its stored count, else counted in the engine's index (each
        term once per filter and search)."""
        counts: list[int | None] = [None] * len(terms)
        if self.stores_term_counts(matches):
            counts = list(matches.counts.stored_term_counts(terms))
        counted = self._counted(matches)
        missing = [
            position
            for position, count in enumerate(counts)
            if count is None and terms[position] not in counted
        ]
        if missing:
            found = matches.counts.term_counts([terms[p] for p in missing])
            counted.update((terms[p], count) for p, count in zip(missing, found, strict=True))
        return [
            counted[term] if count is None else count
            for term, count in zip(terms, counts, strict=True)
        ]

    def _counted(self, matches: Matches) -> dict[str, int]:
        """The n_t counted in the engine's index for the filter so far."""
        for seen, counted in self._term_counts:
            if seen == matches:
                return counted
        self._term_counts.append((matches, {}))
        return self._term_counts[-1][1]

    def essential_min_terms(self, matches: Matches) -> int:
        """The shortest query that tries the essential-terms plan: how short pays off
        depends on whether its n_t are read or counted."""
        if self.stores_term_counts(matches):
            return self.policy.essential_min_terms_stored
        return self.policy.essential_min_terms

    def stored(self, matches: Matches) -> Density | None:
        """N and every n_t where all are stored counts, else ``None``: one statement for
        the n_t (a term not counted, rare or new, ends it there), and one for N unless the
        filter knows it. A date window gets the figures of the search without it (a
        window filters hits only, SPEC §8): as a walk's guess, they only bound a walk of
        the window's rows."""
        for seen, density in self._densities:
            if seen == matches:
                return density
        density = None
        whole = matches.without_window() if matches.windowed else matches
        if whole.counts.stored_cover():
            counts = whole.counts.stored_term_counts(whole.terms)
            known = [count for count in counts if count is not None]
            if len(known) == len(counts):
                density = self.total(whole), known
        self._densities.append((matches, density))
        return density

    def guess(self, matches: Matches) -> Density | None:
        """How dense the terms are, to bound a walk (never a score): the filter's stored
        counts, else the whole index's (a tenant without counts of its own)."""
        density = self.stored(matches)
        if density is None:
            density = matches.counts.index_density()
        return density

    def pin_every_term(self, matches: Matches) -> PinnedRanking:
        """The ranking of a walked page, whose best rows hold every term: N and every n_t
        as the exact route reads them (stored counts, else counted in the index, else
        from every match's mask)."""
        terms = matches.terms
        full = (1 << len(terms)) - 1
        density = self.stored(matches)
        if density is not None:
            total, counts = density
            return PinnedRanking(max(total, *counts), tuple(counts), full)
        total = self.total(matches)
        if matches.counts.counts_terms(total):
            counts = self.term_counts(matches, terms)
        else:
            histogram = matches.counts.mask_histogram()
            total, counts = ranking.term_counts(histogram, len(terms), total)
        return PinnedRanking(max(total, *counts), tuple(counts), full)
