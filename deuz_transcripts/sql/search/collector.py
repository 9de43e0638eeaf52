"""The top hits of one search, collected the way a search engine prunes a top-k.

One decision tree serves ``search``, ``search_page`` with an exact or a capped total,
and a cursor's next page; what differs is a parameter (``count``, ``cap``, ``after``):

1. **Every term first.** A row holding every query term outscores any other row
   whatever N and n_t, so where a page of such rows exists it is walked newest chat
   first and scored 1.0 without statistics (``walks``). A total, exact or past its
   cap, needs more than the page: this step serves only the pages that need no exact
   count.
2. **Statistics.** N and every n_t (``statistics``): they fix every idf, and so the
   raw score of every mask (set of query terms held).
3. **Masks best first.** With MaxScore over the masks (``essential``: the rarest
   terms' rows, until no row holding none of them can reach the page), or from the
   mask histogram, reading only the page's masks (``page_rows``), or, for a small
   scope, ranking every match in one statement.

A date window filters hits only (SPEC §8): its search is ranked by the search without
it (N, every n_t and the best raw score, pinned by that search's first hit), and its
rows are read within the window: the rows holding every term walked newest first where
they outscore the rest, else the window's masks, best first.

Every route is exact: the same hits, order and scores (``tests/test_backend_parity``).
How the engine finds rows is its row source's business (``backends``); which route
pays off is its engine's policy (``backends.policy``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from django.db.backends.utils import CursorWrapper

from ... import ranking
from ...backends.base import Candidate, Ranked
from ...backends.matches import Matches, SubsetHistograms
from ...backends.search_backend import SearchBackend
from ...paging import PageAfter, PinnedRanking
from ...search_request import SearchRequest
from .essential import EssentialTerms
from .page_rows import order_page, page_rows
from .statistics import SearchStatistics
from .walks import NewestWalks, walk_if_dense
from .window_masks import window_page

__all__ = ["Collected", "Collector", "Count"]

#: What a page counts: nothing (``search``), every match, or matches up to a cap.
Count = Literal["none", "exact", "capped"]


class Collected(NamedTuple):
    """A collected page: its candidates (offset applied), the plan scoring them, the
    ranking a cursor pins (``None``: a walk of rows holding every term, scored without
    N, when no pin was asked) and the matches counted (``None``: not counted; past a
    cap: ``cap + 1``)."""

    page: list[Candidate]
    plan: ranking.RankPlan
    pinned: PinnedRanking | None
    total: int | None


#: A mask histogram and the first rows of each mask (``RowSource.candidates``).
_Read = Ranked


@dataclass(frozen=True)
class _Asked:
    """What a search asks of its matches, read from its request once: the page (offset,
    limit)."""

    offset: int
    limit: int

    @property
    def depth(self) -> int:
        """Rows of the page and before it: no mask puts more on it."""
        return self.offset + self.limit


class _Ranked(NamedTuple):
    """A page ranked by masks, with the matches it was read from (N known)."""

    page: list[Candidate]
    plan: ranking.RankPlan
    matches: Matches
    pinned: PinnedRanking | None
    total: int | None = None


class Collector:
    """Collects one search's page from an engine's row source, scored by the search's
    statistics (the engine's stored counts, else its ``counts``)."""

    def __init__(self, backend: SearchBackend, cursor: CursorWrapper) -> None:
        self.backend = backend
        self.cursor = cursor
        self.policy = backend.source.policy
        self.statistics = SearchStatistics(self.policy)
        self.walks = NewestWalks(self.statistics)
        self.essential = EssentialTerms(self.statistics)

    def collect(
        self,
        request: SearchRequest,
        *,
        count: Count = "none",
        cap: int | None = None,
        after: PageAfter | None = None,
    ) -> Collected | None:
        """The page of ``request`` (after the cursor's hit, with ``after``), counted as
        ``count`` says (``"capped"``: exactly up to ``cap`` matches, past it ``cap + 1``).
        ``None``: nothing matches (or, uncounted, the page is past the last match)."""
        # the request read once: every route below takes its matches and its page
        matches = self.backend.matches(self.cursor, request)
        asked = _Asked(request.offset, request.limit)
        if matches.windowed and after is None:
            return self._windowed(matches, asked, count, cap)
        if count == "capped":
            if cap is None:
                raise ValueError("a capped count needs its cap")
            if matches.more_than(cap):
                collected = self._past_cap(matches, asked, after, cap)
                if collected is not None:
                    return collected
            count = "exact"  # within the cap, counting costs about the cap
        if count == "exact":
            return self._counted(matches, asked, after)
        if after is not None:
            raise ValueError("a cursor's page is counted")
        ranked = self._first_page(matches, asked, pin=False)
        return None if ranked is None else Collected(ranked.page, ranked.plan, ranked.pinned, None)

    # the pages that need no exact count

    def _first_page(self, matches: Matches, asked: _Asked, *, pin: bool) -> _Ranked | None:
        """The page without a total: every term first, then statistics, then masks;
        with ``pin``, the ranking a cursor pins where the route read it."""
        statistics = self.statistics
        depth = asked.depth
        terms = matches.terms
        sized = matches.narrowed and matches.scoped
        # N first where its size picks how the engine finds a scope's rows (a scan of a
        # small one); past every size that picks a route, the walk needs no N
        if sized:
            past = max(self.policy.small_read_rows, depth)  # the walk's probe below it
            counted = statistics.of(matches).total
            size, exact, read = matches.first_size(depth, past - 1, past, counted)
            if not size:
                return None
            matches = matches.sized(size if exact else None)
            if read is not None:  # too small to walk: ranked with N, in its statement
                return self._by_masks(matches, asked, size, exact=False, pin=pin, read=read)
        # a roles search's probe may count every role's rows: it stops at the walk's size
        # where the roles' own rows, fewer, would run it to the end and then be read
        # whole; the walk tests the role first, so the roles' sparser rows cost it visits
        every_role = matches.without(roles=self.policy.probes_every_role)
        probe = None if every_role == matches else every_role
        newest = self.walks.newest_page(matches, depth, probe=probe)
        if newest is not None:  # N is not needed: every hit of the page scores 1.0
            if len(newest) <= asked.offset:  # one term's few matches (or none) before it
                return None
            return _Ranked(newest[asked.offset :], _walked_plan(newest), matches, None)
        if sized and matches.size is None:
            matches = matches.sized(statistics.of(matches).total())
        if len(terms) == 1 and matches.size is None and matches.walks_newest_first:
            # One term: every hit scores 1.0 whatever N, and the probe found fewer rows
            # holding it than a walk needs: one statement ranks them, N unread
            histogram, found = matches.candidates(depth, 0)
            ranked = ranking.plan_page(histogram, 1, 0, asked.offset, asked.limit)
            if ranked is None:
                return None
            return _Ranked(order_page(found, ranked)[asked.offset : depth], ranked, matches, None)
        total = statistics.of(matches).total()
        if not total:
            return None
        return self._by_masks(matches, asked, total, exact=False, pin=pin)

    def _past_cap(
        self, matches: Matches, asked: _Asked, after: PageAfter | None, cap: int
    ) -> Collected | None:
        """The page when more than ``cap`` rows match: planned as ``search()`` plans it,
        the total "more than the cap", the ranking pinned as an exact page pins it.
        ``None``: the exact route instead (the page needs every mask's count)."""
        more = cap + 1
        terms = matches.terms
        if after is not None:
            rows = self._full_rows_after(matches, after, asked)
            if rows is None:
                return None
            full = (1 << len(terms)) - 1
            plan = after.pinned.plan({full: len(rows)}, frozenset({full}))
            return Collected(rows[asked.offset :], plan, after.pinned, more)
        ranked = self._first_page(matches, asked, pin=True)
        if ranked is None:  # the page is past the last match: the exact route says so
            return None
        pinned = ranked.pinned or self.statistics.of(ranked.matches).pin_every_term()
        return Collected(ranked.page, ranked.plan, pinned, more)

    def _full_rows_after(
        self, matches: Matches, after: PageAfter, asked: _Asked
    ) -> list[Candidate] | None:
        """A cursor's next page when its last hit held every term and at least a page of
        such rows follows it: those rows are the page, found by the walk ``search()``
        would take. ``None``: fewer follow, or no walk here."""
        pinned, key = after.pinned, after.key
        terms = matches.terms
        full = (1 << len(terms)) - 1
        if key.mask != full or not _only_full_scores_best(pinned, len(terms)):
            return None
        depth = asked.depth
        beyond = matches.after(key)
        # as if the terms were independent (the first page's guess): a bounded walk
        share = math.prod(min(count / pinned.total, 1.0) for count in pinned.matching)
        rows = walk_if_dense(beyond, full, share, depth)
        if rows is None:  # a probe, then the walk, as for a first page
            rows = self.walks.newest_page(beyond, depth, guess=False)
        return _page_of_every_term(rows, depth, len(terms))

    # a date window: hits filtered, ranked as without it

    def _windowed(
        self, matches: Matches, asked: _Asked, count: Count, cap: int | None
    ) -> Collected | None:
        """The first page of a windowed search: ranked by the search without the window,
        its rows read within the window. Rows holding every term, where a page of them
        exists, are walked newest first from the window's upper bound and stopping after
        the page (or at its lower bound), scored 1.0 without N as without a window; else
        the window's masks, best first under the unwindowed ranking."""
        if count == "none":
            # counted without the window (a window holds no more), and every role's rows
            probe = matches.without(window=True, roles=self.policy.probes_every_role)
            newest = self.walks.newest_page(matches, asked.depth, probe=probe)
            if newest is not None:  # the best mask without the window: 1.0 whatever N
                if len(newest) <= asked.offset:
                    return None
                return Collected(newest[asked.offset :], _walked_plan(newest), None, None)
        pinned = self._unwindowed_ranking(matches)
        if pinned is None:  # nothing matches without the window: nothing within it
            return None
        if count == "capped":
            if cap is None:
                raise ValueError("a capped count needs its cap")
            if not matches.more_than(cap):
                count = "exact"  # within the cap, counting costs about the cap
        if count == "capped":  # past the cap: the page as ``search()`` reads it
            rows = self._every_term_rows(matches, asked, pinned)
            if rows is not None and len(rows) > asked.offset:
                full = (1 << len(matches.terms)) - 1
                plan = pinned.plan({full: len(rows)}, frozenset({full}))
                return Collected(rows[asked.offset :], plan, pinned, (cap or 0) + 1)
        return self._window_by_masks(matches, asked, pinned, count, cap)

    def _unwindowed_ranking(self, matches: Matches) -> PinnedRanking | None:
        """N, every n_t and the best mask of the search without the window: where a row
        holds every term (the walk's probe said so), that mask and the counts; else as
        that search's own first page pins them (its first hit, by whichever route it
        takes). ``None``: nothing matches it."""
        whole = matches.without(window=True)
        if self.walks.holds_every_term(whole):
            return self.statistics.of(whole).pin_every_term()
        ranked = self._first_page(whole, _Asked(offset=0, limit=1), pin=True)
        if ranked is None:
            return None
        return ranked.pinned or self.statistics.of(ranked.matches).pin_every_term()

    def _every_term_rows(
        self, matches: Matches, asked: _Asked, pinned: PinnedRanking
    ) -> list[Candidate] | None:
        """The window's first rows holding every term, in tie order, where such rows
        outscore every other under ``pinned`` (the walk of a first page without a
        window); ``None``: the page needs the window's masks."""
        terms = matches.terms
        full = (1 << len(terms)) - 1
        if pinned.best_mask != full or not _only_full_scores_best(pinned, len(terms)):
            return None
        depth = asked.depth
        # the window guessed as dense as the search without it, whose counts are known:
        # walked from its upper bound at once, without a probe counting within it
        share = math.prod(min(count / pinned.total, 1.0) for count in pinned.matching)
        rows = walk_if_dense(matches, full, share, depth)
        if rows is None:
            probe = matches.without(window=True, roles=self.policy.probes_every_role)
            rows = self.walks.newest_page(matches, depth, probe=probe)
        return _page_of_every_term(rows, depth, len(terms))

    def _window_by_masks(
        self, matches: Matches, asked: _Asked, pinned: PinnedRanking, count: Count, cap: int | None
    ) -> Collected | None:
        """The window's page, each mask scored by ``pinned``: unless every match is
        counted, its masks read best first, each only up to what the page still needs
        (``window_masks``); else from the window's mask histogram (whose sum is the
        total), reading only the masks reaching the page."""
        counted = count != "none"
        if count != "exact":
            found = window_page(matches, pinned, asked.offset, asked.limit)
            if found is not None and found.plan is not None and found.page:
                total = None if count == "none" else (cap or 0) + 1
                return Collected(found.page, found.plan, pinned, total)
            if found is not None and count == "none":  # past the window's last match
                return None
        total = self.statistics.of(matches).total()  # the window's messages: how to read them
        if not total:
            return None
        if matches.narrowed:
            matches = matches.sized(total)
        histogram = self._histogram(matches, total)
        histogram = {mask: rows for mask, rows in histogram.items() if mask and rows}
        if not histogram:
            return None
        total_matches = sum(histogram.values()) if counted else None
        planned = ranking.plan_page_by_idfs(histogram, pinned.idfs, asked.offset, asked.limit)
        if planned is None:  # past the last match
            if not counted:
                return None
            return Collected([], pinned.plan(histogram, frozenset()), pinned, total_matches)
        plan = pinned.plan(histogram, planned.page_masks)  # the best raw: without the window
        depth = asked.depth
        rows = page_rows(matches, plan, histogram, depth, total)
        return Collected(order_page(rows, plan)[asked.offset : depth], plan, pinned, total_matches)

    # exact totals

    def _counted(
        self, matches: Matches, asked: _Asked, after: PageAfter | None
    ) -> Collected | None:
        """The page with every match counted (the mask histogram's sum, which the
        ranking needs anyway) and the ranking to pin; with ``after``, the rows after
        the cursor's hit ranked by its pinned ranking."""
        read = None
        if after is None and matches.scoped:
            most = self.policy.single_statement_max
            counted = self.statistics.of(matches).total
            total, _, read = matches.first_size(asked.depth, most, None, counted)
        else:
            total = self.statistics.of(matches).total()
        if not total:
            return None
        if matches.narrowed:
            matches = matches.sized(total)
        if after is not None:
            every = self._histogram(matches, total)
            return self._page_after(matches, every, after, asked)
        ranked = self._by_masks(matches, asked, total, exact=True, pin=True, read=read)
        if ranked is None or ranked.pinned is None:
            return None
        return Collected(ranked.page, ranked.plan, ranked.pinned, ranked.total)

    # masks best first, N known

    def _by_masks(
        self,
        matches: Matches,
        asked: _Asked,
        total: int,
        *,
        exact: bool,
        pin: bool,
        read: _Read | None = None,
    ) -> _Ranked | None:
        """The page ranked mask by mask once N is known: MaxScore over the essential
        terms where n_t are cheap, else the mask histogram and the page's masks (big
        scopes), else every match ranked in one statement (``read`` with N already, for
        a small scope). ``exact``: the total too (so every mask's count); an uncounted
        page past the last match is ``None``, a counted one is empty."""
        depth = asked.depth
        terms = matches.terms
        tried = read is None and self.essential.tried(matches, total)
        # counts alone may give every mask (the total): then the page is read by masks
        counts = matches.counts
        counted = None
        if exact and tried and isinstance(counts, SubsetHistograms):
            counted = counts.subset_histogram(total)
        if tried and counted is None:
            essential = None
            if (
                exact and self.statistics.of(matches).stores_term_counts()
            ):  # the total needs every mask
                essential = self.essential.page(
                    matches, asked.offset, asked.limit, total, prune=False
                )
            if essential is None:
                essential = self.essential.page(matches, asked.offset, asked.limit, total)
            if essential is not None:
                pinned = essential.pinned
                if pinned is None or (not exact and essential.plan is None):
                    return None
                plan = essential.plan or pinned.plan({}, frozenset())
                if not exact:
                    return _Ranked(essential.page, plan, matches, pinned)
                total_matches = (
                    sum(essential.histogram.values())
                    if essential.complete
                    else counts.count_matches((pinned.total, pinned.matching))
                )
                return _Ranked(essential.page, plan, matches, pinned, total_matches)
        masks_first = read is None and (counted is not None or matches.plans_masks(total))
        candidates: list[Candidate] = []
        if counted is not None:
            histogram = counted
        elif read is not None:
            histogram, candidates = read
        elif masks_first:
            histogram = self._histogram(matches, total, over_budget=tried)
        else:
            histogram, candidates = matches.candidates(depth, total)
        pinned = PinnedRanking.of(histogram, len(terms), total) if pin else None
        if exact and pinned is None:
            return None
        counted_matches = sum(histogram.values()) if exact else None
        ranked = ranking.plan_page(histogram, len(terms), total, asked.offset, asked.limit)
        if ranked is None:
            if not exact or pinned is None:
                return None
            plan = pinned.plan(histogram, frozenset())
            return _Ranked([], plan, matches, pinned, counted_matches)
        if masks_first:
            candidates = page_rows(matches, ranked, histogram, depth, total)
        page = order_page(candidates, ranked)[asked.offset : depth]
        return _Ranked(page, ranked, matches, pinned, counted_matches)

    def _histogram(
        self, matches: Matches, total: int, *, over_budget: bool = False
    ) -> dict[int, int]:
        """Every match's mask histogram: from counts alone, or stored counts and the
        rarer terms' rows, where it can; else read from every match (at once when the
        essential-terms plan just found those rows ``over_budget``)."""
        complete = None
        if not over_budget:
            counts = matches.counts
            if isinstance(counts, SubsetHistograms):
                complete = counts.subset_histogram(total)
            if complete is None:
                complete = self.essential.complete_histogram(matches, total)
        return matches.counts.mask_histogram() if complete is None else complete

    def _page_after(
        self,
        matches: Matches,
        histogram: Mapping[int, int],
        after: PageAfter,
        asked: _Asked,
    ) -> Collected | None:
        """Rows after the cursor's hit: of the masks tied with it, those after it in tie
        order; of the lower masks, the few that reach the page."""
        histogram = {mask: count for mask, count in histogram.items() if mask and count}
        if not histogram:
            return None
        depth = asked.depth
        tied, lower = after.split_masks(histogram, depth)
        plan = after.pinned.plan(histogram, frozenset(tied | lower))
        total = after.pinned.total  # the first page's N: a walk's guess only
        rows: list[Candidate] = []
        if tied and depth:  # read (or walked) from the cursor's chat on
            tied_plan = replace(plan, page_masks=frozenset(tied))
            rows.extend(page_rows(matches.after(after.key), tied_plan, histogram, depth, total))
        if lower and depth:
            lower_plan = replace(plan, page_masks=frozenset(lower))
            rows.extend(page_rows(matches, lower_plan, histogram, depth, total))
        page = order_page(rows, plan)[asked.offset : depth]
        return Collected(page, plan, after.pinned, sum(histogram.values()))


def _walked_plan(page: list[Candidate]) -> ranking.RankPlan:
    """The plan of a walked page: every hit holds every term, the best mask, scoring 1.0
    whatever N."""
    return ranking.RankPlan(raws={page[0].mask: 1.0}, best=1.0, page_masks=frozenset())


def _only_full_scores_best(pinned: PinnedRanking, term_count: int) -> bool:
    """Whether the mask of every term outscores every other mask under ``pinned``: a
    float sum of positive idfs only ties when an idf vanishes beside the others."""
    full = (1 << term_count) - 1
    best = pinned.raw(full)
    return all(pinned.raw(full & ~(1 << position)) < best for position in range(term_count))


def _page_of_every_term(
    rows: list[Candidate] | None, depth: int, term_count: int
) -> list[Candidate] | None:
    """The first ``depth`` of ``rows`` holding every term, where they are the page:
    ``None`` when not found, or fewer than a page of a longer query (other masks reach
    it; a one-term query's short page is every match)."""
    if rows is None or (len(rows) < depth and term_count > 1):
        return None
    return rows[:depth]
