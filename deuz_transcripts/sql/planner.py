"""Which rows one page of ranked hits needs, planned so cost follows the page.

Three exact plans (same hits, order and scores): the newest-first walk when enough
rows hold every query term; for big scopes the mask histogram first and only the
page's masks read; otherwise one statement ranking every match. The thresholds
are the backend's ``PlanPolicy``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from django.db.backends.utils import CursorWrapper

from .. import ranking
from ..backends.base import Candidate, SearchMatcher
from ..backends.chat_filter import ChatFilter
from ..paging import PageAfter, PinnedRanking
from ..search_request import SearchRequest

__all__ = ["CountedPage", "PlannedPage", "SearchPlanner", "order_page"]

PlannedPage = tuple[list[Candidate], ranking.RankPlan]
#: A counted page: its candidates, the plan scoring them, the pinned ranking and the
#: exact number of matches.
CountedPage = tuple[list[Candidate], ranking.RankPlan, PinnedRanking, int]


def order_page(candidates: Sequence[Candidate], plan: ranking.RankPlan) -> list[Candidate]:
    """Candidates of the plan's masks, best first with the shared tie rules.

    Three stable sorts (chat id and index, then newer chat, then raw score) because
    ``updated_at`` may be Django's sortable SQLite text, which cannot be negated.
    """
    found = [c for c in candidates if c.mask in plan.page_masks]
    found.sort(key=lambda c: (c.chat_id, c.position))
    found.sort(key=lambda c: c.updated_at, reverse=True)
    found.sort(key=lambda c: plan.raws[c.mask], reverse=True)
    return found


class SearchPlanner:
    """Plans and reads one page through a backend's matcher."""

    def __init__(self, matcher: SearchMatcher) -> None:
        self.matcher = matcher
        self.policy = matcher.policy

    def page(self, cursor: CursorWrapper, request: SearchRequest) -> PlannedPage | None:
        """The page's candidates (offset applied) and the plan that scores them."""
        matcher = self.matcher
        chats = ChatFilter.of(request, matcher.alias, role_tokens=matcher.role_tokens)
        depth = request.offset + request.limit
        terms = request.terms
        if chats.narrowed:  # N first: its size picks how the backend finds the scope's rows
            chats = replace(chats, size=matcher.total(cursor, chats))
            if not chats.size:
                return None
        newest = self._newest_page(cursor, chats, terms, depth)
        if newest is not None:  # N is not needed: every hit of the page scores 1.0
            full = ranking.RankPlan(raws={newest[0].mask: 1.0}, best=1.0, page_masks=frozenset())
            return newest[request.offset :], full
        total = matcher.total(cursor, chats) if chats.size is None else chats.size
        if not total:
            return None
        masks_first = matcher.plans_masks(chats, terms, total)
        candidates: list[Candidate] = []
        if masks_first:
            histogram = matcher.mask_histogram(cursor, chats, terms)
        else:
            histogram, candidates = matcher.candidates(cursor, chats, terms, depth, total)
        ranked = ranking.plan_page(histogram, len(terms), total, request.offset, request.limit)
        if ranked is None:
            return None
        if masks_first:
            candidates = self._page_rows(cursor, chats, terms, ranked, histogram, depth)
        return order_page(candidates, ranked)[request.offset : depth], ranked

    def counted_page(
        self, cursor: CursorWrapper, request: SearchRequest, after: PageAfter | None
    ) -> CountedPage | None:
        """``page`` with the exact match count (the mask histogram's sum, which the
        ranking needs anyway) and the ranking to pin in a cursor; with ``after``, the
        rows after the cursor's hit ranked by its pinned ranking. ``None``: no match."""
        matcher = self.matcher
        chats = ChatFilter.of(request, matcher.alias, role_tokens=matcher.role_tokens)
        depth = request.offset + request.limit
        terms = request.terms
        total = matcher.total(cursor, chats)
        if not total:
            return None
        if chats.narrowed:
            chats = replace(chats, size=total)
        if after is not None:
            histogram = matcher.mask_histogram(cursor, chats, terms)
            return self._page_after(cursor, chats, terms, histogram, after, request)
        masks_first = matcher.plans_masks(chats, terms, total)
        if masks_first:
            histogram = matcher.mask_histogram(cursor, chats, terms)
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
            candidates = self._page_rows(cursor, chats, terms, ranked, histogram, depth)
        return order_page(candidates, ranked)[request.offset : depth], ranked, pinned, count

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
        rows: list[Candidate] = []
        if tied and depth:  # read (or walked) from the cursor's chat on
            beyond = chats.after_key(after.key, self.matcher.alias, self.matcher.chat_id_order)
            tied_plan = replace(plan, page_masks=frozenset(tied))
            rows.extend(self._page_rows(cursor, beyond, terms, tied_plan, histogram, depth))
        if lower and depth:
            lower_plan = replace(plan, page_masks=frozenset(lower))
            rows.extend(self._page_rows(cursor, chats, terms, lower_plan, histogram, depth))
        page = order_page(rows, plan)[request.offset : depth]
        return page, plan, after.pinned, sum(histogram.values())

    def _page_rows(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        plan: ranking.RankPlan,
        histogram: Mapping[int, int],
        depth: int,
    ) -> list[Candidate]:
        """The rows a page needs, once the histogram has told which masks reach it.

        Masks with few rows are read in one statement through the index; a mask with
        many (at least ``walk_min_rows``) is walked newest chat first, stopping after
        ``depth`` rows, instead of sorting all of them.
        """
        matcher = self.matcher
        walked = {
            mask
            for mask in plan.page_masks
            if matcher.walks_newest_first
            and histogram[mask] >= max(self.policy.walk_min_rows, depth)
        }
        few = plan.page_masks - walked
        rows = matcher.mask_candidates(cursor, chats, terms, few, depth) if few else []
        for mask in walked:  # order_page orders the rows of every mask
            rows.extend(matcher.newest_with_mask(cursor, chats, terms, mask, depth))
        return rows

    def _newest_page(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], depth: int
    ) -> list[Candidate] | None:
        """The first ``depth`` hits without ranking every match, when that is exact.

        A row holding every query term has the highest raw score whatever the idfs,
        so when at least ``depth`` rows hold them all, the page is the first ``depth``
        of those in tie order (newest chat first), each scoring 1.0. A probe counts
        such rows up to ``walk_min_rows`` (it stops there); only then does the walk
        run, visiting about ``depth * N / rows`` messages instead of every match.
        """
        matcher = self.matcher
        cap = max(self.policy.walk_min_rows, depth)
        if (
            not matcher.walks_newest_first
            or len(terms) > self.policy.walk_max_terms
            or (chats.size is not None and chats.size < cap)  # the probe could not reach it
            or matcher.count_with_all_terms(cursor, chats, terms, cap) < cap
        ):
            return None
        full = (1 << len(terms)) - 1
        page = matcher.newest_with_mask(cursor, chats, terms, full, depth)
        return page if len(page) >= depth else None  # rows deleted meanwhile: rank them all
