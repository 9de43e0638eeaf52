"""Counted pages whose total stops at a cap (``search_page(total_cap=...)``).

An exact total counts every match: for two words each in most messages that visits
most of the table, past any time budget at 10M messages. When more rows match than the
cap, the total is only "more than the cap", so the page is planned as ``search()``
plans it (for common words, a walk of the newest chats) and the cursor pins the ranking
an exact page pins (N, every n_t, the best mask). Hits, scores and cursors are the same
as without the cap; only the count is bounded, and falls back to the exact route where
this module cannot read the page without every mask's count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from django.db.backends.utils import CursorWrapper

from .. import ranking
from ..backends.base import Candidate
from ..backends.chat_filter import ChatFilter
from ..paging import PageAfter, PinnedRanking
from ..search_request import SearchRequest
from .guessed_walk import walk_if_dense

if TYPE_CHECKING:
    from .planner import CountedPage, SearchPlanner

__all__ = ["RankedPage", "capped_page"]


class RankedPage(NamedTuple):
    """A planned page, the filter it was read from (with N where the plan read it) and
    the ranking it was scored by; ``pinned`` is ``None`` where the page is a walk of rows
    holding every term, scored 1.0 without N or any n_t (and, unless ``pin`` was asked,
    where building it from the mask histogram would be extra work)."""

    page: list[Candidate]
    plan: ranking.RankPlan
    chats: ChatFilter
    pinned: PinnedRanking | None = None


def capped_page(
    planner: SearchPlanner,
    cursor: CursorWrapper,
    request: SearchRequest,
    after: PageAfter | None,
    cap: int,
) -> CountedPage | None:
    """The page, its ranking and ``cap + 1`` ("more than the cap") when more than ``cap``
    rows match; ``None``: the exact route instead (at most ``cap`` rows match, so counting
    them costs at most about that, or n_t say so without a count; or the page needs
    every mask's count)."""
    matcher = planner.matcher
    chats = planner.chat_filter(request)
    terms = request.terms
    if not matcher.matches_more_than(cursor, chats, terms, cap):
        return None
    more = cap + 1
    if after is not None:
        rows = _full_rows_after(planner, cursor, chats, terms, after, request)
        if rows is None:
            return None
        full = (1 << len(terms)) - 1
        plan = after.pinned.plan({full: len(rows)}, frozenset({full}))
        return rows[request.offset :], plan, after.pinned, more
    ranked = planner.ranked_page(cursor, request, pin=True)
    if ranked is None:  # the page is past the last match: the exact route says so
        return None
    pinned = ranked.pinned or _pin_every_term(planner, cursor, ranked.chats, terms)
    return ranked.page, ranked.plan, pinned, more


def _pin_every_term(
    planner: SearchPlanner, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
) -> PinnedRanking:
    """The ranking of a walked page (its best rows hold every term): N and every n_t,
    read as the exact route reads them (stored counts, else counted in the index); the
    stored ones the walk's guess already read, unless a date window made them a guess."""
    full = (1 << len(terms)) - 1
    density = None if chats.windowed else planner.stored_density(cursor, chats, terms)
    if density is not None:  # the filter's own N and n_t: exact
        total, counts = density
        return PinnedRanking(max(total, *counts), tuple(counts), full)
    matcher = planner.matcher
    total = matcher.total(cursor, chats) if chats.size is None else chats.size
    if matcher.counts_terms(chats, total):
        counts = matcher.term_counts(cursor, chats, terms)
    else:
        histogram = matcher.mask_histogram(cursor, chats, terms)
        total, counts = ranking.term_counts(histogram, len(terms), total)
    return PinnedRanking(max(total, *counts), tuple(counts), full)


def _full_rows_after(
    planner: SearchPlanner,
    cursor: CursorWrapper,
    chats: ChatFilter,
    terms: Sequence[str],
    after: PageAfter,
    request: SearchRequest,
) -> list[Candidate] | None:
    """A cursor's next page when its last hit held every term and at least a page of
    such rows follows it: those rows are the page (no other mask scores as high), found
    by the walk ``search()`` would take. ``None``: fewer follow, or no walk here."""
    pinned, key = after.pinned, after.key
    full = (1 << len(terms)) - 1
    if key.mask != full or not _only_full_scores_best(pinned, len(terms)):
        return None
    depth = request.offset + request.limit
    matcher = planner.matcher
    beyond = chats.after_key(key, matcher.alias, matcher.chat_id_order)
    # as if the terms were independent (the first page's guess): a bounded walk
    share = math.prod(min(count / pinned.total, 1.0) for count in pinned.matching)
    rows = walk_if_dense(matcher, cursor, beyond, terms, full, share, depth)
    if rows is None:  # a probe, then the walk, as for a first page
        rows = planner.newest_page(cursor, beyond, terms, depth, guess=False)
    if rows is None or (len(rows) < depth and len(terms) > 1):
        return None
    return rows[:depth]


def _only_full_scores_best(pinned: PinnedRanking, term_count: int) -> bool:
    """Whether the mask of every term outscores every other mask under ``pinned``: a
    float sum of positive idfs only ties when an idf vanishes beside the others."""
    full = (1 << term_count) - 1
    best = pinned.raw(full)
    return all(pinned.raw(full & ~(1 << position)) < best for position in range(term_count))
