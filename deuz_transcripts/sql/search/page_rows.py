"""The rows a page needs once the masks reaching it are known, and their order.

Masks with few rows are read in one statement through the index; a mask with many
(at least ``small_read_rows``) is walked newest chat first, stopping after the page,
instead of sorting all of them. A mask dense enough that a walk bounded by the guess
visits no more messages than it holds rows is walked within that bound first, so its
cost does not jump at ``small_read_rows``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ... import ranking
from ...backends.base import Candidate, sort_in_tie_order
from ...backends.matches import Matches
from .walks import walk_if_dense

__all__ = ["order_page", "page_rows"]


def order_page(candidates: Sequence[Candidate], plan: ranking.RankPlan) -> list[Candidate]:
    """Candidates of the plan's masks, best first with the shared tie rules (stable
    sorts: the tie rules, then raw score)."""
    found = [c for c in candidates if c.mask in plan.page_masks]
    sort_in_tie_order(found)
    found.sort(key=lambda c: plan.raws[c.mask], reverse=True)
    return found


def page_rows(
    matches: Matches,
    plan: ranking.RankPlan,
    histogram: Mapping[int, int],
    depth: int,
    total: int = 0,
) -> list[Candidate]:
    """The first ``depth`` rows of each of the plan's page masks (``total``: the
    filter's N, where known, for the bounded walks)."""
    policy = matches.policy
    walked = {
        mask
        for mask in plan.page_masks
        if matches.walks_newest_first and histogram[mask] >= max(policy.small_read_rows, depth)
    }
    few = set(plan.page_masks - walked)
    rows: list[Candidate] = []
    for mask in sorted(few):
        # the walk's bound (margin x its expected depth / share visits) is at most the
        # mask's rows, which reading it costs
        if total and depth and histogram[mask] ** 2 >= policy.walk_guess_margin * depth * total:
            share = histogram[mask] / total
            found = walk_if_dense(matches, mask, share, depth)
            if found is not None:
                rows.extend(found)
                few.discard(mask)
    if few:
        count = sum(histogram[mask] for mask in few)
        rows.extend(matches.mask_candidates(few, depth, count))
    for mask in walked:  # order_page orders the rows of every mask
        # bounded first: an unbounded walk may sort every row of the mask when the
        # mask gathers in old chats
        found = None
        if total:
            share = histogram[mask] / total
            found = walk_if_dense(matches, mask, share, depth)
        if found is None:
            found = matches.newest_with_mask(mask, depth)
        rows.extend(found)
    return rows
