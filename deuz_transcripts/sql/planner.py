"""Which rows one page of ranked hits needs, planned so cost follows the page.

Four exact plans (same hits, order and scores): the newest-first walk when enough
rows hold every query term (a probe counts them, or stored counts predict them); the
essential-terms plan (``essential``) when n_t are cheap to count; for big scopes the
mask histogram first and only the page's masks read; otherwise one statement ranking
every match. The thresholds are the backend's
``PlanPolicy``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from django.db.backends.utils import CursorWrapper

from .. import ranking
from ..backends.base import Candidate, SearchMatcher, sort_in_tie_order
from ..backends.chat_filter import ChatFilter
from ..paging import PageAfter, PinnedRanking
from ..search_request import SearchRequest
from .capped_page import RankedPage, capped_page
from .essential import EssentialTerms, order_page
from .guessed_walk import walk_if_dense

__all__ = ["CountedPage", "PlannedPage", "SearchPlanner", "order_page"]

PlannedPage = tuple[list[Candidate], ranking.RankPlan]


#: A counted page: its candidates, the plan scoring them, the pinned ranking and the
#: exact number of matches.
CountedPage = tuple[list[Candidate], ranking.RankPlan, PinnedRanking, int]


class SearchPlanner(EssentialTerms):
    """Plans and reads one page through a backend's matcher."""

    def __init__(self, matcher: SearchMatcher) -> None:
        self.matcher = matcher
        self.policy = matcher.policy
        self._density: tuple[ChatFilter, list[str], tuple[int, list[int]] | None] | None = None

    def stored_density(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> tuple[int, list[int]] | None:
        """The matcher's ``stored_density``, read once per search: the guessed walk and a
        capped page's ranking share it (unscoped, N sums a row per tenant: 3-4 ms at 10M)."""
        if self._density is not None:
            seen, seen_terms, density = self._density
            if seen == chats and seen_terms == list(terms):
                return density
        density = self.matcher.stored_density(cursor, chats, terms)
        self._density = (chats, list(terms), density)
        return density

    def _sized(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], size: int | None
    ) -> ChatFilter:
        """``chats`` with its N (``None``: past every size that picks a route), routed by
        the matcher as that N and the terms say."""
        return self.matcher.routed(cursor, replace(chats, size=size), terms)

    def chat_filter(self, request: SearchRequest) -> ChatFilter:
        """The SQL filter of the request's scope, chat ids, roles, window (and tenant)."""
        matcher = self.matcher
        return ChatFilter.of(
            request,
            matcher.alias,
            role_tokens=matcher.role_tokens,
            tenant=matcher.tested_tenant(request.scope),
        )

    def page(self, cursor: CursorWrapper, request: SearchRequest) -> PlannedPage | None:
        """The page's candidates (offset applied) and the plan that scores them."""
        ranked = self.ranked_page(cursor, request)
        return None if ranked is None else (ranked.page, ranked.plan)

    def ranked_page(
        self, cursor: CursorWrapper, request: SearchRequest, *, pin: bool = False
    ) -> RankedPage | None:
        """``page``, and with ``pin`` the ranking a cursor pins, where the plan read N and
        every n_t (``None``: a walk of rows holding every term, scored without them)."""
        matcher = self.matcher
        chats = self.chat_filter(request)
        depth = request.offset + request.limit
        terms = request.terms
        sized = chats.narrowed and (bool(chats.scope) or chats.chat_ids is not None)
        # a date window's N is a pass over its chats, which a guessed walk that fills the
        # page never needs: that walk first
        newest = self._guessed_walk(cursor, chats, terms, depth) if chats.windowed else None
        if newest is None:
            # N first where its size picks how the backend finds a scope's rows (a scan of
            # a small one); a window or roles over every chat are found in the index
            # whatever N, which a walk that fills the page never needs (SQLite at 1M: 35
            # ms for the newest half's N, unscoped). Past every size that picks a route,
            # the walk needs no N: the rest of it is read only if the walk cannot fill the
            # page.
            if sized:
                past = max(self.policy.walk_min_rows, depth)  # the walk's probe below it
                size, exact = matcher.total_past(cursor, chats, past)
                if not size:
                    return None
                chats = self._sized(cursor, chats, terms, size if exact else None)
            newest = self.newest_page(cursor, chats, terms, depth, guess=not chats.windowed)
        if newest is not None:  # N is not needed: every hit of the page scores 1.0
            if len(newest) <= request.offset:  # one term's few matches (or none) before it
                return None
            full = ranking.RankPlan(raws={newest[0].mask: 1.0}, best=1.0, page_masks=frozenset())
            return RankedPage(newest[request.offset :], full, chats, None)
        if sized and chats.size is None:
            chats = self._sized(cursor, chats, terms, matcher.total(cursor, chats))
        if len(terms) == 1 and chats.size is None and matcher.walks_newest_first:
            # One term: every hit scores 1.0 whatever N (raw / best), and the probe found
            # fewer rows holding it than a walk needs: one statement ranks them, N unread
            # (on the whole table, N is a pass over every chat).
            histogram, found = matcher.candidates(cursor, chats, terms, depth, 0)
            ranked = ranking.plan_page(histogram, 1, 0, request.offset, request.limit)
            if ranked is None:
                return None
            return RankedPage(order_page(found, ranked)[request.offset : depth], ranked, chats)
        total = matcher.total(cursor, chats) if chats.size is None else chats.size
        if not total:
            return None
        tried = self._tries_essential(chats, terms, total)
        if tried:
            essential = self._essential_page(cursor, chats, terms, request, total)
            if essential is not None:
                if essential.plan is None or essential.pinned is None:
                    return None
                return RankedPage(essential.page, essential.plan, chats, essential.pinned)
        masks_first = matcher.plans_masks(chats, terms, total)
        candidates: list[Candidate] = []
        if masks_first:
            histogram = self._histogram(cursor, chats, terms, total, over_budget=tried)
        else:
            histogram, candidates = matcher.candidates(cursor, chats, terms, depth, total)
        ranked = ranking.plan_page(histogram, len(terms), total, request.offset, request.limit)
        if ranked is None:
            return None
        if masks_first:
            candidates = self._page_rows(cursor, chats, terms, ranked, histogram, depth, total)
        page = order_page(candidates, ranked)[request.offset : depth]
        pinned = PinnedRanking.of(histogram, len(terms), total) if pin else None
        return RankedPage(page, ranked, chats, pinned)

    def counted_page(
        self,
        cursor: CursorWrapper,
        request: SearchRequest,
        after: PageAfter | None,
        total_cap: int | None = None,
    ) -> CountedPage | None:
        """``page`` with the exact match count (the mask histogram's sum, which the
        ranking needs anyway) and the ranking to pin in a cursor; with ``after``, the
        rows after the cursor's hit ranked by its pinned ranking. ``None``: no match.
        With ``total_cap``, matches past the cap are not counted (``capped_page``)."""
        if total_cap is not None:
            capped = capped_page(self, cursor, request, after, total_cap)
            if capped is not None:
                return capped
        matcher = self.matcher
        chats = self.chat_filter(request)
        depth = request.offset + request.limit
        terms = request.terms
        total = matcher.total(cursor, chats)
        if not total:
            return None
        if chats.narrowed:
            chats = self._sized(cursor, chats, terms, total)
        if after is not None:
            every = self._histogram(cursor, chats, terms, total)
            return self._page_after(cursor, chats, terms, every, after, request)
        tried = self._tries_essential(chats, terms, total)
        # counts alone may give every mask (the total): then the page is read by masks
        counted = matcher.subset_histogram(cursor, chats, terms, total) if tried else None
        if tried and counted is None:
            essential = None
            if matcher.stores_term_counts(chats):  # the total needs every mask: read once
                essential = self._essential_page(cursor, chats, terms, request, total, prune=False)
            if essential is None:
                essential = self._essential_page(cursor, chats, terms, request, total)
            if essential is not None:
                if essential.pinned is None:
                    return None
                count = (
                    sum(essential.histogram.values())
                    if essential.complete
                    else matcher.count_matches(
                        cursor, chats, terms, (essential.pinned.total, essential.pinned.matching)
                    )
                )
                plan = essential.plan or essential.pinned.plan({}, frozenset())
                return essential.page, plan, essential.pinned, count
        masks_first = counted is not None or matcher.plans_masks(chats, terms, total)
        candidates: list[Candidate] = []
        if counted is not None:
            histogram = counted
        elif masks_first:
            histogram = self._histogram(cursor, chats, terms, total, over_budget=tried)
        else:
            histogram, candidates = matcher.candidates(cursor, chats, terms, depth, total)
        pinned = PinnedRanking.of(histogram, len(terms), total)
        if pinned is None:
            return None
        count = sum(histogram.values())
        ranked = ranking.plan_page(histogram, len(terms), total, request.offset, request.limit)
        if ranked is None:  # the page is past the last match
            return [], pinned.plan(histogram, frozenset()), pinned, count
        if masks_first:
            candidates = self._page_rows(cursor, chats, terms, ranked, histogram, depth, total)
        return order_page(candidates, ranked)[request.offset : depth], ranked, pinned, count

    def _histogram(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        total: int,
        *,
        over_budget: bool = False,
    ) -> dict[int, int]:
        """Every match's mask histogram: from counts alone (``subset_histogram``) or stored
        counts and the rarer terms' rows (``_complete_histogram``) where it can, else read
        from every match (at once when the essential plan just found those rows
        ``over_budget``)."""
        complete = None
        if not over_budget:
            complete = self.matcher.subset_histogram(cursor, chats, terms, total)
            if complete is None:
                complete = self._complete_histogram(cursor, chats, terms, total)
        return self.matcher.mask_histogram(cursor, chats, terms) if complete is None else complete

    def _page_after(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        histogram: Mapping[int, int],
        after: PageAfter,
        request: SearchRequest,
    ) -> CountedPage | None:
        """Rows after the cursor's hit: of the masks tied with it, those after it in tie
        order; of the lower masks, the few that reach the page (read as ``page`` reads)."""
        histogram = {mask: count for mask, count in histogram.items() if mask and count}
        if not histogram:
            return None
        depth = request.offset + request.limit
        tied, lower = after.split_masks(histogram, depth)
        plan = after.pinned.plan(histogram, frozenset(tied | lower))
        total = after.pinned.total  # the first page's N: a walk's guess only
        rows: list[Candidate] = []
        if tied and depth:  # read (or walked) from the cursor's chat on
            beyond = chats.after_key(after.key, self.matcher.alias, self.matcher.chat_id_order)
            tied_plan = replace(plan, page_masks=frozenset(tied))
            rows.extend(self._page_rows(cursor, beyond, terms, tied_plan, histogram, depth, total))
        if lower and depth:
            lower_plan = replace(plan, page_masks=frozenset(lower))
            rows.extend(self._page_rows(cursor, chats, terms, lower_plan, histogram, depth, total))
        page = order_page(rows, plan)[request.offset : depth]
        return page, plan, after.pinned, sum(histogram.values())

    def newest_page(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        depth: int,
        *,
        guess: bool = True,
    ) -> list[Candidate] | None:
        """The first ``depth`` hits without ranking every match, when that is exact.

        A row holding every query term has the highest raw score whatever the idfs
        (every idf is positive), so when at least ``depth`` rows hold them all, the page
        is the first ``depth`` of those in tie order, each scoring 1.0; with one term
        that is every match, however few. A probe counts such rows up to
        ``walk_min_rows`` (it stops there): that many are walked newest chat first,
        visiting about ``depth * N / rows`` messages instead of every match, within a
        bound (``_probed_walk``); fewer are
        read and sorted, and nothing else is (no N, no n_t, no other mask). Where
        stored counts predict the page among the newest chats, a bounded walk of those
        goes first and the probe only follows one that ends short (``_guessed_walk``).
        """
        matcher = self.matcher
        cap = max(self.policy.walk_min_rows, depth)
        if (
            not matcher.walks_newest_first
            or len(terms) > self.policy.walk_max_terms
            or (chats.size is not None and chats.size < cap)  # the probe could not reach it
        ):
            return None
        guessed = self._guessed_walk(cursor, chats, terms, depth) if guess else None
        if guessed is not None:
            return guessed
        together = matcher.count_with_all_terms(cursor, chats, terms, cap)
        full = (1 << len(terms)) - 1
        if together >= cap:  # the walk comes out in tie order
            page = self._probed_walk(cursor, chats, terms, full, depth, together)
        elif len(terms) == 1:  # every match has the one mask: a short page is complete
            return self._read_in_tie_order(cursor, chats, terms, full, depth, together)
        elif together >= depth:
            page = self._read_in_tie_order(cursor, chats, terms, full, depth, together)
        else:
            return None
        return page if len(page) >= depth else None  # rows deleted meanwhile: rank them all

    def _guessed_walk(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], depth: int
    ) -> list[Candidate] | None:
        """The page walked at once, without the probe, where the stored counts predict
        that the newest chats hold it: ``walk_guess_margin`` pages of rows with every term
        expected among at most ``walk_guess_max_rows`` messages, as if the terms were
        independent. The walk is bounded to those chats, so words that rarely meet cost
        that walk and then the probe, never the whole scope. A date window is guessed as
        dense as its tenant's rows (``stored_density``), and a tenant without counts of its
        own as the whole index (``index_density``). ``None``: not tried, or the walk found
        less than a page."""
        policy = self.policy
        if not policy.walk_guess_max_rows or len(terms) > policy.walk_max_terms:
            return None
        density = self.stored_density(cursor, chats, terms)
        if density is None:  # a tenant without counts of its own: as dense as the index?
            density = self.matcher.index_density(cursor, chats, terms)
        if density is None or not density[0]:
            return None
        total, counts = density
        share = math.prod(min(count / total, 1.0) for count in counts)
        full = (1 << len(terms)) - 1
        return walk_if_dense(self.matcher, cursor, chats, terms, full, share, depth)

    def _probed_walk(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        full: int,
        depth: int,
        together: int,
    ) -> list[Candidate]:
        """The first ``depth`` rows of mask ``full`` (every term), at least ``together``
        of which exist: walked within the newest ``walk_probed_max_rows`` messages, else
        (those held less than a page: the rows gather in older chats) read and sorted, so
        the cost follows the bound or the rows, never the whole scope."""
        bound: int | None = self.policy.walk_probed_max_rows or None
        if bound is not None and chats.size is not None and chats.size <= bound:
            bound = None  # the scope is within the bound: nothing to bound
        page = self.matcher.newest_with_mask(cursor, chats, terms, full, depth, within_rows=bound)
        if len(page) >= depth or bound is None:
            return page
        return self._read_in_tie_order(cursor, chats, terms, full, depth, together)

    def _read_in_tie_order(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        mask: int,
        depth: int,
        rows: int,
    ) -> list[Candidate]:
        """The first ``depth`` of the ``rows`` rows of ``mask``, read and sorted (none
        read when the count says there are none)."""
        if not rows:
            return []
        page = self.matcher.mask_candidates(cursor, chats, terms, {mask}, depth, rows)
        sort_in_tie_order(page)
        return page
