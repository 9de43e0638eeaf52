"""The essential-terms plan: a page, or the whole mask histogram, from the rows of the
rarest terms and every term's n_t, without reading the most common term's rows.

Every term's n_t is counted first (the index counts; the rarest terms' rows are read
at once where the backend can: ``_rare_terms_rows``), which fixes every idf. Terms are
then read rarest first, each row with its full mask. A page stops there once at least a
page of rows is read and the raw score of the page's last row beats every row holding
none of the terms read (the sum of the other terms' idfs, in ``mask_raw``'s order: a row
of a subset of them never sums higher). A score is a sum of idfs, so this pruning is
exact (MaxScore with "essential" terms). When only the most common term is left and it
holds more rows than a page (or more than ``essential_max_rows`` allows), it is not
read: its rows that hold no other term are one mask whose count is known (n_t minus
the rows read holding it), the histogram is complete, and that mask's page rows are
walked newest chat first (``small_read_rows`` of them or more) or read, if it reaches
the page.

Read without pruning, the same steps give the complete histogram (what a counted page's
total and a cursor's next page need) from stored counts and the rarer terms' rows,
instead of reading every match (``complete_histogram``).

When two or more terms are left, each with too many rows to read, a page (not the
histogram) is still exact from their masks' rows, best raw score first
(``unread_masks``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import NamedTuple

from ... import ranking
from ...backends.base import Candidate
from ...backends.matches import IndexCappedCounts, Matches
from ...paging import PinnedRanking
from .page_rows import order_page, page_rows
from .statistics import SearchStatistics
from .unread_masks import unread_mask_rows

__all__ = ["EssentialPage", "EssentialTerms", "rarest_terms"]


class EssentialPage(NamedTuple):
    """What the essential-terms plan found: the page and the plan scoring it (``None``:
    past the last match), the ranking to pin (``None``: nothing matches), and the mask
    histogram, every match's when ``complete`` (no term left unread by pruning)."""

    page: list[Candidate]
    plan: ranking.RankPlan | None
    pinned: PinnedRanking | None
    histogram: dict[int, int]
    complete: bool


class _Read(NamedTuple):
    """The rows read, every term's n_t and idf, the term counted but not read, and the
    terms left unread because each holds more rows than the plan may read."""

    rows: list[Candidate]
    counts: list[int]
    idfs: list[float]
    last: int | None
    complete: bool
    unread: tuple[int, ...] = ()

    def histogram(self) -> dict[int, int]:
        histogram: dict[int, int] = {}
        for row in self.rows:
            histogram[row.mask] = histogram.get(row.mask, 0) + 1
        if self.last is not None:  # rows read never have this mask: each holds a term read
            alone = self.counts[self.last] - sum(
                1 for row in self.rows if row.mask >> self.last & 1
            )
            histogram[1 << self.last] = max(alone, 0)
        return histogram


class EssentialTerms:
    """The essential-terms plan of one search."""

    def __init__(self, statistics: SearchStatistics) -> None:
        self.statistics = statistics
        self.policy = statistics.policy
        #: rows already read in this search, by filter (and terms) and what was read: a
        #: counted page that gives up reading every term prunes the same rows again
        self._read_rows: list[tuple[Matches, Hashable, list[Candidate]]] = []

    def _rows_once(
        self, matches: Matches, what: Hashable, read: Callable[[], list[Candidate]]
    ) -> list[Candidate]:
        """``read()``'s rows, read once per search for the same filter, terms and ``what``
        (a copy: callers extend it)."""
        for seen, seen_what, rows in self._read_rows:
            if seen_what == what and seen == matches:
                return list(rows)
        rows = read()
        self._read_rows.append((matches, what, rows))
        return list(rows)

    def tried(self, matches: Matches, total: int) -> bool:
        """Whether the query is long enough, the scope big enough and n_t cheap enough
        for the plan to pay off."""
        return (
            len(matches.terms) >= self.statistics.of(matches).essential_min_terms()
            and total > self.policy.single_statement_max
            and matches.counts.counts_terms(total)
        )

    def complete_histogram(self, matches: Matches, total: int) -> dict[int, int] | None:
        """Every match's mask histogram from the terms' n_t and the rows of all but the
        most common term, where the counts are stored (PostgreSQL's common terms: no
        match of that term is read) or counted in FTS5 (``histogram_from_term_counts``);
        ``None``: read the matches instead (no such counts, or more rows than
        ``essential_max_rows`` to read)."""
        if (
            not matches.counts.histogram_from_term_counts()
            or total <= self.policy.single_statement_max
        ):
            return None
        read = self._read(matches, total, depth=0, prune=False)
        return None if read is None else read.histogram()

    def page(
        self,
        matches: Matches,
        offset: int,
        limit: int,
        total: int,
        *,
        prune: bool = True,
    ) -> EssentialPage | None:
        """The page from the rows of the rarest terms alone, when that is exact (module
        docstring); without ``prune``, every term but the most common is read, so the
        histogram is complete. Two or more terms left with too many rows to read: the page
        from their masks, best first (``unread_masks``; pruning only). ``None``: ranking
        every match is the cheaper plan."""
        depth = offset + limit
        read = self._read(matches, total, depth=depth, prune=prune)
        if read is None:
            return None
        rows, idfs, last = read.rows, read.idfs, read.last
        histogram = read.histogram()
        if read.unread:
            unread, counts = read.unread, read.counts
            fetched = unread_mask_rows(matches, rows, unread, counts, idfs, total, depth)
            if fetched is None:
                return None
            rows.extend(fetched)
            for row in fetched:  # a mask's count up to the depth: enough to plan the page
                histogram[row.mask] = histogram.get(row.mask, 0) + 1
        plan = ranking.plan_page_by_idfs(histogram, idfs, offset, limit)
        if plan is not None and last is not None and 1 << last in plan.page_masks:
            alone_plan = replace(plan, page_masks=frozenset({1 << last}))
            rows.extend(page_rows(matches, alone_plan, histogram, depth, total))
        page = [] if plan is None else order_page(rows, plan)[offset:depth]
        best = max(histogram, key=lambda mask: ranking.mask_raw(mask, idfs), default=0)
        total = max(total, *read.counts)
        pinned = PinnedRanking(total, tuple(read.counts), best) if best else None
        return EssentialPage(page, plan, pinned, histogram, read.complete)

    def _read(
        self,
        matches: Matches,
        total: int,
        *,
        depth: int,
        prune: bool,
    ) -> _Read | None:
        """The rarest terms' rows until (``prune``) the page of ``depth`` rows is read,
        or until only the most common term is left to count, or (``prune``) until the
        terms left hold too many rows to read (``unread``); ``None``: over budget."""
        rows, counts, rare = self._rare_terms_rows(matches)
        idfs = [ranking.idf(max(total, *counts), count) for count in counts]
        rarest_first = sorted(
            (position for position, count in enumerate(counts) if count and position not in rare),
            key=lambda position: (counts[position], position),
        )
        raw_of = functools.cache(lambda mask: ranking.mask_raw(mask, idfs))

        def page_is_read(unread: Sequence[int]) -> bool:
            if not prune or len(rows) < depth:
                return False
            raws = sorted((raw_of(row.mask) for row in rows), reverse=True)
            return raw_of(sum(1 << other for other in unread)) < raws[depth - 1]

        last: int | None = None  # the one term left unread
        complete = True
        budget = self.policy.essential_max_rows - len(rows)
        if rare and page_is_read(rarest_first):
            complete, rarest_first = not rarest_first, []
        for step, position in enumerate(rarest_first):
            budget -= counts[position]
            if step == len(rarest_first) - 1 and (budget < 0 or counts[position] > depth):
                # counted, not read: of its rows holding no term read (one mask, counted
                # by difference), only a page is walked or read, and only if it reaches
                # the page; reading them all here cost their transfer and rows in Python
                last = position
                break
            if budget < 0:  # two or more terms left: their masks' rows, best first
                if not prune or not depth:
                    return None
                return _Read(rows, counts, idfs, None, False, tuple(rarest_first[step:]))
            skipped = [*rare, *rarest_first[:step]]
            expected = counts[position]
            rows.extend(
                self._rows_once(
                    matches,
                    ("term", position, tuple(skipped)),
                    functools.partial(matches.rows_with_terms, position, skipped, expected),
                )
            )
            if page_is_read(rarest_first[step + 1 :]):
                complete = step == len(rarest_first) - 1
                break
        return _Read(rows, counts, idfs, last, complete)

    def _rare_terms_rows(
        self, matches: Matches
    ) -> tuple[list[Candidate], list[int], frozenset[int]]:
        """The rows of the rare terms, every term's n_t, and which terms were read.

        The rarest terms, up to ``essential_rare_rows`` rows in all, are read in one
        statement with their masks where the backend can. SQLite FTS5 picks them by
        their rows in the whole index, counted up to that cap (reading them counts them
        in the filter) and counts the other terms in the index (``term_counts``);
        PostgreSQL counts every term in the filter first (stored counts or GIN) and
        picks by those counts.
        """
        cap = self.policy.essential_rare_rows
        statistics = self.statistics
        terms = matches.terms
        rare_terms = matches.counts.rare_terms
        if cap and rare_terms == "by_filter_counts":
            counts = statistics.of(matches).term_counts(terms)
            rare = rarest_terms(counts, cap)
            held = [position for position in rare if counts[position]]
            expected = sum(counts[position] for position in held)
            rows = (
                self._rows_once(
                    matches,
                    ("any", tuple(held)),
                    lambda: matches.rows_with_any_terms(held, expected),
                )
                if held
                else []
            )
            return rows, counts, frozenset(rare)
        rare = []
        if cap and rare_terms == "by_index_counts":
            counted = matches.counts
            assert isinstance(counted, IndexCappedCounts)
            rare = rarest_terms(counted.capped_term_counts(cap + 1), cap)
        rows = (
            self._rows_once(
                matches,
                ("any", tuple(rare)),
                lambda: matches.rows_with_any_terms(rare),
            )
            if rare
            else []
        )
        counts = [0] * len(terms)
        for row in rows:
            for position in rare:
                counts[position] += row.mask >> position & 1
        others = [position for position in range(len(terms)) if position not in rare]
        if others:
            found = statistics.of(matches).term_counts([terms[position] for position in others])
            for position, count in zip(others, found, strict=True):
                counts[position] = count
        return rows, counts, frozenset(rare)


def rarest_terms(counts: Sequence[int], cap: int) -> list[int]:
    """Positions of the rarest terms whose ``counts`` sum to at most ``cap``."""
    rare: list[int] = []
    room = cap
    for position in sorted(range(len(counts)), key=lambda p: (counts[p], p)):
        if counts[position] > room:
            break
        room -= counts[position]
        rare.append(position)
    return rare
