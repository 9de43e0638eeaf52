"""Rows of one mask walked newest chat first, stopping after a page.

A row holding every query term has the highest raw score whatever the idfs (every
idf is positive), so when a page of such rows exists the page is their first rows in
tie order, each scoring 1.0, and no N or n_t is needed. A walk newest chat first costs
about ``depth / share`` messages for a mask held by a ``share`` of the rows, and the
whole scope when the mask is rarer than that near the newest chats; so a walk is
either bounded by a guess of the share (stored counts, as if the terms were
independent) or chosen by a probe that counts the rows holding every term up to
``small_read_rows``. A date window is not counted, but a walk that ends short in it
sizes it (``walked_whole``): a window within ``big_read_rows`` messages is then walked
whole, which costs the window, not the words' rows in the whole scope.
"""

from __future__ import annotations

import math

from ...backends.base import Candidate, sort_in_tie_order
from ...backends.matches import Matches
from .statistics import SearchStatistics

__all__ = ["NewestWalks", "walk_if_dense", "walked_whole"]


def walk_if_dense(matches: Matches, mask: int, share: float, depth: int) -> list[Candidate] | None:
    """The first ``depth`` rows of ``mask`` in tie order (fewer: every one), walked
    within the newest chats that ``share`` (the guessed fraction of rows holding exactly
    ``mask``) says hold ``walk_guess_margin`` pages of them among at most
    ``big_read_rows`` messages; a date window a walk found that small is walked whole,
    whatever the share. ``None``: no such guess (or no walk here), or the walk ended
    short before the filter's oldest chat, past ``big_read_rows`` messages."""
    policy = matches.policy
    margin, most = policy.walk_guess_margin, policy.big_read_rows
    if not depth or not matches.walks_newest_first:
        return None
    sized = matches.counts.walk_size(most, read=False)
    if sized is None and share * most >= margin * depth:
        within = math.ceil(margin * depth / share)
        rows = matches.newest_with_mask(mask, depth, within_rows=within)
        if len(rows) >= depth or walked_whole(matches, within):
            return rows
    if matches.counts.walk_size(most, read=False) is not None:  # a window sized small:
        return matches.newest_with_mask(mask, depth)  # the walk costs it at most
    return None


def walked_whole(matches: Matches, within: int | None) -> bool:
    """Whether a walk of ``matches`` bounded by ``within`` (``None``: unbounded) that
    ended short saw every chat of its date window, which is sized for it (once per
    search): then its rows are every such row, and a window within ``big_read_rows``
    is walked whole by every further walk of the search. Not a window: ``False``."""
    if not matches.windowed:
        return False
    size = matches.counts.walk_size(matches.policy.big_read_rows)
    return within is None or (size is not None and size <= within)


class NewestWalks:
    """The walks of rows holding every query term, for one search."""

    def __init__(self, statistics: SearchStatistics) -> None:
        self.statistics = statistics
        self.policy = statistics.policy
        #: the probe's counts so far, by filter and cap (a date window's search probes the
        #: search without it, which ranks it next)
        self._together: list[tuple[Matches, int, int]] = []

    def count_with_all_terms(self, matches: Matches, cap: int) -> int:
        """Rows of ``matches`` holding every term, counted up to ``cap``, once per search
        (N, once known, changes how the rows are found, not how many there are)."""
        unsized = matches.sized(None)
        for seen, seen_cap, together in self._together:
            if seen_cap == cap and seen == unsized:
                return together
        together = matches.count_with_all_terms(cap)
        self._together.append((unsized, cap, together))
        return together

    def holds_every_term(self, matches: Matches) -> bool | None:
        """Whether a row of ``matches`` holds every term, where a probe of this search
        counted them; ``None``: not counted."""
        unsized = matches.sized(None)
        for seen, _cap, together in self._together:
            if seen == unsized:
                return together > 0
        return None

    def guessed(self, matches: Matches, depth: int) -> list[Candidate] | None:
        """The page walked at once, without the probe, where the counts predict that
        the newest chats hold it (``walk_if_dense`` of the rows holding every term). A
        date window is guessed as dense as the search without it, and a tenant without
        counts of its own as the whole index. ``None``: not tried, or ended short."""
        policy = self.policy
        terms = matches.terms
        if not policy.big_read_rows or len(terms) > policy.few_terms:
            return None
        density = self.statistics.of(matches).guess()
        if density is None or not density[0]:
            return None
        total, counts = density
        share = math.prod(min(count / total, 1.0) for count in counts)
        full = (1 << len(terms)) - 1
        return walk_if_dense(matches, full, share, depth)

    def newest_page(
        self, matches: Matches, depth: int, *, guess: bool = True, probe: Matches | None = None
    ) -> list[Candidate] | None:
        """The first ``depth`` hits without ranking every match, when that is exact: the
        guessed walk (``guess``), else the probe's count of rows holding every term up to
        ``small_read_rows``; that many are walked (``probed``), fewer are read and sorted,
        and nothing else is (no N, no n_t, no other mask). ``None``: ranking is needed.

        ``probe``: the matches the probe counts instead, which hold ``matches`` (a date
        window's search without the window: counted in the index alone, where counting
        within the window reads every row of the terms; a window holds no more; a roles
        search's every role, whose count stops at the walk's size sooner)."""
        terms = matches.terms
        cap = max(self.policy.small_read_rows, depth)
        if (
            not matches.walks_newest_first
            or len(terms) > self.policy.few_terms
            or (matches.size is not None and matches.size < cap)  # the probe could not reach it
        ):
            return None
        guessed = self.guessed(matches, depth) if guess else None
        if guessed is not None:  # short: a window walked whole, which holds every match
            return guessed if len(guessed) >= depth or len(terms) == 1 else None  # of one term
        together = self.count_with_all_terms(probe or matches, cap)
        full = (1 << len(terms)) - 1
        if together >= cap:  # the walk comes out in tie order
            page = self.probed(matches, full, depth, together)
        elif len(terms) == 1:  # every match has the one mask: a short page is complete
            return self.read_in_tie_order(matches, full, depth, together)
        elif together >= depth:
            page = self.read_in_tie_order(matches, full, depth, together)
        else:
            return None
        if probe is not None and len(terms) == 1:  # the filter's every match, read
            return page
        return page if len(page) >= depth else None  # rows deleted meanwhile: rank them all

    def probed(self, matches: Matches, full: int, depth: int, together: int) -> list[Candidate]:
        """The first ``depth`` rows of mask ``full``, at least ``together`` of which
        exist: walked within the newest ``probed_walk_max_rows`` messages, else (those
        held less than a page: the rows gather in older chats) read and sorted, so the
        cost follows the bound or the rows, never the whole scope. A date window within
        the bound was walked whole: its short page is every such row."""
        bound: int | None = self.policy.probed_walk_max_rows or None
        if bound is not None and matches.size is not None and matches.size <= bound:
            bound = None  # the scope is within the bound: nothing to bound
        page = matches.newest_with_mask(full, depth, within_rows=bound)
        if len(page) >= depth or (bound is None and len(matches.terms) == 1):
            return page
        # short: a window is sized for the walks of the rest of its page
        if walked_whole(matches, bound) or bound is None:
            return page
        return self.read_in_tie_order(matches, full, depth, together)

    @staticmethod
    def read_in_tie_order(matches: Matches, mask: int, depth: int, rows: int) -> list[Candidate]:
        """The first ``depth`` of the ``rows`` rows of ``mask``, read and sorted (none
        read when the count says there are none)."""
        if not rows:
            return []
        page = matches.mask_candidates({mask}, depth, rows)
        sort_in_tie_order(page)
        return page
