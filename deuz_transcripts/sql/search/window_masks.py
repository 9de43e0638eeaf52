"""A date window's page read mask by mask, best raw score first, without counting the
window.

A window filters hits only (SPEC §8): N, every n_t and the best raw score are the
search's without the window (``PinnedRanking``), so every mask's raw score is known
before a row is read, and the window's page is the first rows of its best masks. They
are read as the essential-terms plan reads a page: the rarest terms' rows within the
window at once (each with its full mask), then the masks of the common terms alone,
best raw first, each walked newest chat first from the window's upper bound and
stopping after the rows the page still needs (``unread_masks``). Nothing counts a term
within the window: that count was what a window's mask histogram cost.
"""

from __future__ import annotations

from typing import NamedTuple

from ... import ranking
from ...backends.base import Candidate
from ...backends.matches import Matches
from ...paging import PinnedRanking
from .essential import rarest_terms
from .page_rows import order_page
from .unread_masks import reads_unread_masks, unread_mask_rows

__all__ = ["WindowPage", "window_page"]


class WindowPage(NamedTuple):
    """The window's page (offset applied) and the plan scoring it under the pinned
    ranking; ``plan`` is ``None`` when the window holds no match up to the page."""

    page: list[Candidate]
    plan: ranking.RankPlan | None


def window_page(
    matches: Matches, pinned: PinnedRanking, offset: int, limit: int
) -> WindowPage | None:
    """The page of the windowed ``matches`` ranked by ``pinned`` (the search without the
    window); ``None``: not read this way (an engine that neither walks nor reads the
    rarest terms at once, or more common terms than ``tiered_terms_max``: too many masks
    to enumerate), so the window's masks are counted instead."""
    depth = offset + limit
    counts, idfs = pinned.matching, pinned.idfs
    if not depth or not matches.walks_newest_first or matches.counts.rare_terms == "none":
        return None
    held = [position for position, count in enumerate(counts) if count]
    rare = [p for p in rarest_terms(counts, matches.policy.essential_rare_rows) if counts[p]]
    common = [position for position in held if position not in rare]
    if not reads_unread_masks(matches.policy, len(common)):
        return None
    # a term's rows in the whole search bound its rows in the window
    rows = matches.rows_with_any_terms(rare, sum(counts[p] for p in rare)) if rare else []
    if common:
        fetched = unread_mask_rows(matches, rows, common, counts, idfs, pinned.total, depth)
        if fetched is None:
            return None
        rows.extend(fetched)
    histogram: dict[int, int] = {}
    for row in rows:  # each mask's rows up to what the page can hold: enough to plan it
        histogram[row.mask] = histogram.get(row.mask, 0) + 1
    planned = ranking.plan_page_by_idfs(histogram, idfs, offset, limit)
    if planned is None:
        return WindowPage([], None)
    plan = pinned.plan(histogram, planned.page_masks)  # the best raw: without the window
    return WindowPage(order_page(rows, plan)[offset:depth], plan)
