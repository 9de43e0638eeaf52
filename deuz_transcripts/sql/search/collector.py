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
pays off is its ``PlanPolicy``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from django.db.backends.utils import CursorWrapper

from ... import ranking
from ...backends.base import Candidate, Ranked, RowSource
from ...backends.chat_filter import ChatFilter, after_key, request_filter
from ...backends.engine_counts import EngineCounts
from ...paging import PageAfter, PinnedRanking
from ...search_request import SearchRequest
from .essential import EssentialTerms
from .page_rows import order_page, page_rows
from .statistics import SearchStatistics
from .walks import NewestWalks, walk_if_dense

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
    """What a search asks, read from its request once: the chats it may return (the
    engine's filter), the terms it ranks and the page (offset, limit)."""

    chats: ChatFilter
    terms: tuple[str, ...]
    offset: int
    limit: int

    @property
    def depth(self) -> int:
        """Rows of the page and before it: no mask puts more on it."""
        return self.offset + self.limit


class _Ranked(NamedTuple):
    """A page ranked by masks, with the filter it was read from (N known)."""

    page: list[Candidate]
    plan: ranking.RankPlan
    chats: ChatFilter
    pinned: PinnedRanking | None
    total: int | None = None


class Collector:
    """Collects one search's page from an engine's row source, scored by the search's
    statistics (the engine's stored counts, else its ``counts``)."""

    def __init__(self, source: RowSource, counts: EngineCounts, cursor: CursorWrapper) -> None:
        self.source = source
        self.cursor = cursor
        self.policy = source.policy
        self.statistics = SearchStatistics(counts, cursor)
        self.counts = counts
        self.walks = NewestWalks(source, self.statistics)
        self.essential = EssentialTerms(source, self.statistics)

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
        source = self.source
        asked = _Asked(  # the request read once: every route below takes this
            request_filter(
                request,
                source.alias,
                role_tokens=source.role_tokens,
                tenant=source.tested_tenant(request.scope),
            ),
            tuple(request.terms),
            request.offset,
            request.limit,
        )
        chats = asked.chats
        if chats.windowed and after is None:
            return self._windowed(chats, asked, count, cap)
        if count == "capped":
            if cap is None:
                raise ValueError("a capped count needs its cap")
            if source.matches_more_than(self.cursor, chats, asked.terms, cap):
                collected = self._past_cap(chats, asked, after, cap)
                if collected is not None:
                    return collected
            count = "exact"  # within the cap, counting costs about the cap
        if count == "exact":
            return self._counted(chats, asked, after)
        if after is not None:
            raise ValueError("a cursor's page is counted")
        ranked = self._first_page(chats, asked, pin=False)
        return None if ranked is None else Collected(ranked.page, ranked.plan, ranked.pinned, None)

    # the pages that need no exact count

    def _first_page(self, chats: ChatFilter, asked: _Asked, *, pin: bool) -> _Ranked | None:
        """The page without a total: every term first, then statistics, then masks;
        with ``pin``, the ranking a cursor pins where the route read it."""
        statistics = self.statistics
        depth = asked.depth
        terms = asked.terms
        sized = _narrowed(chats) and (bool(chats.scope) or chats.chat_ids is not None)
        # N first where its size picks how the engine finds a scope's rows (a scan of a
        # small one); past every size that picks a route, the walk needs no N
        if sized:
            past = max(self.policy.walk_min_rows, depth)  # the walk's probe below it
            sized_read = self._sized_first(chats, terms, depth, past - 1)
            if sized_read is None:
                size, exact, read = (*statistics.total_past(chats, past), None)
            else:
                size, exact, read = sized_read
            if not size:
                return None
            chats = statistics.sized(chats, terms, size if exact else None)
            if read is not None:  # too small to walk: ranked with N, in its statement
                return self._by_masks(chats, asked, size, exact=False, pin=pin, read=read)
        newest = self.walks.newest_page(chats, terms, depth)
        if newest is not None:  # N is not needed: every hit of the page scores 1.0
            if len(newest) <= asked.offset:  # one term's few matches (or none) before it
                return None
            full = ranking.RankPlan(raws={newest[0].mask: 1.0}, best=1.0, page_masks=frozenset())
            return _Ranked(newest[asked.offset :], full, chats, None)
        if sized and chats.size is None:
            chats = statistics.sized(chats, terms, statistics.total(chats))
        if len(terms) == 1 and chats.size is None and self.source.walks_newest_first:
            # One term: every hit scores 1.0 whatever N, and the probe found fewer rows
            # holding it than a walk needs: one statement ranks them, N unread
            histogram, found = self.source.candidates(self.cursor, chats, terms, depth, 0)
            ranked = ranking.plan_page(histogram, 1, 0, asked.offset, asked.limit)
            if ranked is None:
                return None
            return _Ranked(order_page(found, ranked)[asked.offset : depth], ranked, chats, None)
        total = statistics.total(chats)
        if not total:
            return None
        return self._by_masks(chats, asked, total, exact=False, pin=pin)

    def _sized_first(
        self, chats: ChatFilter, terms: Sequence[str], depth: int, most: int
    ) -> tuple[int, bool, _Read | None] | None:
        """N of a scope (exact), and where N is at most ``most`` and one statement ranks
        such a scope, that statement's mask histogram and candidates, read with N in one
        statement (``sized_candidates``). ``None``: N is to be read alone."""
        if chats.windowed:
            return None
        most = min(most, self.source.one_statement_scope_max())
        sized = self.source.sized_candidates(self.cursor, chats, terms, depth, most)
        return None if sized is None else (sized[0], True, sized[1])

    def _past_cap(
        self, chats: ChatFilter, asked: _Asked, after: PageAfter | None, cap: int
    ) -> Collected | None:
        """The page when more than ``cap`` rows match: planned as ``search()`` plans it,
        the total "more than the cap", the ranking pinned as an exact page pins it.
        ``None``: the exact route instead (the page needs every mask's count)."""
        more = cap + 1
        terms = asked.terms
        if after is not None:
            rows = self._full_rows_after(chats, terms, after, asked)
            if rows is None:
                return None
            full = (1 << len(terms)) - 1
            plan = after.pinned.plan({full: len(rows)}, frozenset({full}))
            return Collected(rows[asked.offset :], plan, after.pinned, more)
        ranked = self._first_page(chats, asked, pin=True)
        if ranked is None:  # the page is past the last match: the exact route says so
            return None
        pinned = ranked.pinned or self.statistics.pin_every_term(ranked.chats, terms)
        return Collected(ranked.page, ranked.plan, pinned, more)

    def _full_rows_after(
        self, chats: ChatFilter, terms: Sequence[str], after: PageAfter, asked: _Asked
    ) -> list[Candidate] | None:
        """A cursor's next page when its last hit held every term and at least a page of
        such rows follows it: those rows are the page, found by the walk ``search()``
        would take. ``None``: fewer follow, or no walk here."""
        pinned, key = after.pinned, after.key
        full = (1 << len(terms)) - 1
        if key.mask != full or not _only_full_scores_best(pinned, len(terms)):
            return None
        depth = asked.depth
        source = self.source
        beyond = after_key(chats, key, source.alias, source.chat_id_order)
        # as if the terms were independent (the first page's guess): a bounded walk
        share = math.prod(min(count / pinned.total, 1.0) for count in pinned.matching)
        rows = walk_if_dense(source, self.cursor, beyond, terms, full, share, depth)
        if rows is None:  # a probe, then the walk, as for a first page
            rows = self.walks.newest_page(beyond, terms, depth, guess=False)
        if rows is None or (len(rows) < depth and len(terms) > 1):
            return None
        return rows[:depth]

    # a date window: hits filtered, ranked as without it

    def _windowed(
        self, chats: ChatFilter, asked: _Asked, count: Count, cap: int | None
    ) -> Collected | None:
        """The first page of a windowed search: ranked by the search without the window,
        its rows read within the window. Rows holding every term, where they outscore the
        rest, are walked newest first from the window's upper bound, stopping after the
        page (or at its lower bound); else the window's masks are counted and their page
        rows read, best first."""
        pinned = self._unwindowed_ranking(chats, asked)
        if pinned is None:  # nothing matches without the window: nothing within it
            return None
        if count == "capped":
            if cap is None:
                raise ValueError("a capped count needs its cap")
            if not self.source.matches_more_than(self.cursor, chats, asked.terms, cap):
                count = "exact"  # within the cap, counting costs about the cap
        if count != "exact":
            rows = self._every_term_rows(chats, asked, pinned)
            if rows is not None and len(rows) > asked.offset:
                full = (1 << len(asked.terms)) - 1
                plan = pinned.plan({full: len(rows)}, frozenset({full}))
                total = None if count == "none" else (cap or 0) + 1
                return Collected(rows[asked.offset :], plan, pinned, total)
            if rows is not None and count == "none":  # the page is past the last match
                return None
        return self._window_by_masks(chats, asked, pinned, counted=count != "none")

    def _unwindowed_ranking(self, chats: ChatFilter, asked: _Asked) -> PinnedRanking | None:
        """N, every n_t and the best mask of the search without the window, as its own
        first page pins them (its first hit, by whichever route that search takes);
        ``None``: nothing matches it."""
        whole = chats.without_window()
        first = replace(asked, chats=whole, offset=0, limit=1)
        ranked = self._first_page(whole, first, pin=True)
        if ranked is None:
            return None
        return ranked.pinned or self.statistics.pin_every_term(ranked.chats, asked.terms)

    def _every_term_rows(
        self, chats: ChatFilter, asked: _Asked, pinned: PinnedRanking
    ) -> list[Candidate] | None:
        """The window's first rows holding every term, in tie order, where such rows
        outscore every other under ``pinned`` (the walk of a first page without a
        window); ``None``: the page needs the window's masks."""
        terms = asked.terms
        full = (1 << len(terms)) - 1
        if pinned.best_mask != full or not _only_full_scores_best(pinned, len(terms)):
            return None
        depth = asked.depth
        rows = self.walks.newest_page(chats, terms, depth)
        return None if rows is None else rows[:depth]

    def _window_by_masks(
        self, chats: ChatFilter, asked: _Asked, pinned: PinnedRanking, *, counted: bool
    ) -> Collected | None:
        """The window's page from its mask histogram, each mask scored by ``pinned``: only
        the masks reaching the page are read (``counted``: the total is the window's
        matches)."""
        terms = asked.terms
        total = self.statistics.total(chats)  # the window's messages: how to read them
        if not total:
            return None
        if _narrowed(chats):
            chats = self.statistics.sized(chats, terms, total)
        histogram = self._histogram(chats, terms, total)
        histogram = {mask: rows for mask, rows in histogram.items() if mask and rows}
        if not histogram:
            return None
        matches = sum(histogram.values()) if counted else None
        planned = ranking.plan_page_by_idfs(histogram, pinned.idfs, asked.offset, asked.limit)
        if planned is None:  # past the last match
            if not counted:
                return None
            return Collected([], pinned.plan(histogram, frozenset()), pinned, matches)
        plan = pinned.plan(histogram, planned.page_masks)  # the best raw: without the window
        depth = asked.depth
        rows = page_rows(self.source, self.cursor, chats, terms, plan, histogram, depth, total)
        return Collected(order_page(rows, plan)[asked.offset : depth], plan, pinned, matches)

    # exact totals

    def _counted(
        self, chats: ChatFilter, asked: _Asked, after: PageAfter | None
    ) -> Collected | None:
        """The page with every match counted (the mask histogram's sum, which the
        ranking needs anyway) and the ranking to pin; with ``after``, the rows after
        the cursor's hit ranked by its pinned ranking."""
        terms = asked.terms
        sized = None
        if after is None and (chats.scope or chats.chat_ids is not None):
            depth = asked.depth
            sized = self._sized_first(chats, terms, depth, self.policy.single_statement_max)
        total, _, read = (self.statistics.total(chats), True, None) if sized is None else sized
        if not total:
            return None
        if _narrowed(chats):
            chats = self.statistics.sized(chats, terms, total)
        if after is not None:
            every = self._histogram(chats, terms, total)
            return self._page_after(chats, terms, every, after, asked)
        ranked = self._by_masks(chats, asked, total, exact=True, pin=True, read=read)
        if ranked is None or ranked.pinned is None:
            return None
        return Collected(ranked.page, ranked.plan, ranked.pinned, ranked.total)

    # masks best first, N known

    def _by_masks(
        self,
        chats: ChatFilter,
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
        source, cursor = self.source, self.cursor
        depth = asked.depth
        terms = asked.terms
        tried = read is None and self.essential.tried(chats, terms, total)
        # counts alone may give every mask (the total): then the page is read by masks
        counts = self.counts
        counted = counts.subset_histogram(cursor, chats, terms, total) if exact and tried else None
        if tried and counted is None:
            essential = None
            if exact and self.statistics.stores_term_counts(chats):  # the total needs every mask
                essential = self.essential.page(
                    chats, terms, asked.offset, asked.limit, total, prune=False
                )
            if essential is None:
                essential = self.essential.page(chats, terms, asked.offset, asked.limit, total)
            if essential is not None:
                pinned = essential.pinned
                if pinned is None or (not exact and essential.plan is None):
                    return None
                plan = essential.plan or pinned.plan({}, frozenset())
                if not exact:
                    return _Ranked(essential.page, plan, chats, pinned)
                matches = (
                    sum(essential.histogram.values())
                    if essential.complete
                    else counts.count_matches(cursor, chats, terms, (pinned.total, pinned.matching))
                )
                return _Ranked(essential.page, plan, chats, pinned, matches)
        masks_first = read is None and (
            counted is not None or source.plans_masks(chats, terms, total)
        )
        candidates: list[Candidate] = []
        if counted is not None:
            histogram = counted
        elif read is not None:
            histogram, candidates = read
        elif masks_first:
            histogram = self._histogram(chats, terms, total, over_budget=tried)
        else:
            histogram, candidates = source.candidates(cursor, chats, terms, depth, total)
        pinned = PinnedRanking.of(histogram, len(terms), total) if pin else None
        if exact and pinned is None:
            return None
        counted_matches = sum(histogram.values()) if exact else None
        ranked = ranking.plan_page(histogram, len(terms), total, asked.offset, asked.limit)
        if ranked is None:
            if not exact or pinned is None:
                return None
            plan = pinned.plan(histogram, frozenset())
            return _Ranked([], plan, chats, pinned, counted_matches)
        if masks_first:
            candidates = page_rows(source, cursor, chats, terms, ranked, histogram, depth, total)
        page = order_page(candidates, ranked)[asked.offset : depth]
        return _Ranked(page, ranked, chats, pinned, counted_matches)

    def _histogram(
        self, chats: ChatFilter, terms: Sequence[str], total: int, *, over_budget: bool = False
    ) -> dict[int, int]:
        """Every match's mask histogram: from counts alone, or stored counts and the
        rarer terms' rows, where it can; else read from every match (at once when the
        essential-terms plan just found those rows ``over_budget``)."""
        counts, cursor = self.counts, self.cursor
        complete = None
        if not over_budget:
            complete = counts.subset_histogram(cursor, chats, terms, total)
            if complete is None:
                complete = self.essential.complete_histogram(chats, terms, total)
        return counts.mask_histogram(cursor, chats, terms) if complete is None else complete

    def _page_after(
        self,
        chats: ChatFilter,
        terms: Sequence[str],
        histogram: Mapping[int, int],
        after: PageAfter,
        asked: _Asked,
    ) -> Collected | None:
        """Rows after the cursor's hit: of the masks tied with it, those after it in tie
        order; of the lower masks, the few that reach the page."""
        histogram = {mask: count for mask, count in histogram.items() if mask and count}
        if not histogram:
            return None
        source, cursor = self.source, self.cursor
        depth = asked.depth
        tied, lower = after.split_masks(histogram, depth)
        plan = after.pinned.plan(histogram, frozenset(tied | lower))
        total = after.pinned.total  # the first page's N: a walk's guess only
        rows: list[Candidate] = []
        if tied and depth:  # read (or walked) from the cursor's chat on
            beyond = after_key(chats, after.key, source.alias, source.chat_id_order)
            tied_plan = replace(plan, page_masks=frozenset(tied))
            rows.extend(
                page_rows(source, cursor, beyond, terms, tied_plan, histogram, depth, total)
            )
        if lower and depth:
            lower_plan = replace(plan, page_masks=frozenset(lower))
            rows.extend(
                page_rows(source, cursor, chats, terms, lower_plan, histogram, depth, total)
            )
        page = order_page(rows, plan)[asked.offset : depth]
        return Collected(page, plan, after.pinned, sum(histogram.values()))


def _only_full_scores_best(pinned: PinnedRanking, term_count: int) -> bool:
    """Whether the mask of every term outscores every other mask under ``pinned``: a
    float sum of positive idfs only ties when an idf vanishes beside the others."""
    full = (1 << term_count) - 1
    best = pinned.raw(full)
    return all(pinned.raw(full & ~(1 << position)) < best for position in range(term_count))


def _narrowed(chats: ChatFilter) -> bool:
    """Whether a scope field, a chat id list or another filter narrows the chats (so N
    is theirs to count, not the index's)."""
    return bool(chats.scope) or chats.chat_ids is not None or not chats.tokens_suffice
