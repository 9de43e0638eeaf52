"""Rarity-weighted ranking, pure Python, shared by the memory index and SQL backends.

A hit's raw score depends only on WHICH query terms its message holds, so every
backend describes a message by a bit mask (bit ``i`` set when it holds query term
``i``). A histogram of masks gives every term's match count, hence every idf,
and tells which masks can reach the requested page: only rows of those masks are
ever fetched and ordered, instead of scoring every match.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = [
    "RankPlan",
    "idf",
    "mask_raw",
    "masks_from_subset_counts",
    "normalized",
    "plan_page",
    "plan_page_by_idfs",
    "sort_key",
    "term_counts",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICROSECOND = timedelta(microseconds=1)


def idf(total: int, matching: int) -> float:
    """``ln(1 + (N - n + 0.5) / (n + 0.5))``: rarer terms weigh more, never zero."""
    return math.log(1.0 + (total - matching + 0.5) / (matching + 0.5))


def normalized(raw: float, best: float) -> float:
    """``raw / best``, a score in (0, 1]; 1.0 for every hit when no term weighs anything
    (``best`` 0: every raw is 0, all hits tie), never a division by zero."""
    return raw / best if best > 0 else 1.0


def mask_raw(mask: int, idfs: list[float]) -> float:
    """Sum of the idfs of the terms in ``mask``, always added in term order.

    A fixed order keeps the float sum bit-identical in every backend.
    """
    raw = 0.0
    for position, weight in enumerate(idfs):
        if mask >> position & 1:
            raw += weight
    return raw


@dataclass(frozen=True)
class RankPlan:
    """What a backend needs to fetch one page of ranked hits."""

    raws: dict[int, float]
    best: float
    page_masks: frozenset[int]

    def score(self, mask: int) -> float:
        return normalized(self.raws[mask], self.best)


def plan_page(
    histogram: Mapping[int, int], term_count: int, total: int, offset: int, limit: int
) -> RankPlan | None:
    """Plan a page from ``{mask: rows}``; ``None`` when the page is empty.

    ``total`` is N, the number of indexed messages the search may return.
    """
    histogram = {mask: count for mask, count in histogram.items() if mask and count}
    if not histogram or limit <= 0:
        return None
    total, matching = term_counts(histogram, term_count, total)
    return plan_page_by_idfs(histogram, [idf(total, n) for n in matching], offset, limit)


def plan_page_by_idfs(
    histogram: Mapping[int, int], idfs: list[float], offset: int, limit: int
) -> RankPlan | None:
    """``plan_page`` with the idfs known (counted apart from the histogram, which then
    needs to hold only the masks that can reach the page, each complete)."""
    histogram = {mask: count for mask, count in histogram.items() if mask and count}
    if not histogram or limit <= 0:
        return None
    raws = {mask: mask_raw(mask, idfs) for mask in histogram}
    ordered = sorted(histogram, key=lambda mask: -raws[mask])
    needed = offset + limit
    seen = 0
    floor = None
    for mask in ordered:
        seen += histogram[mask]
        if seen >= needed:
            floor = raws[mask]
            break
    if floor is None:  # the page reaches past the last match
        if seen <= offset:
            return None
        floor = raws[ordered[-1]]
    page_masks = frozenset(mask for mask in ordered if raws[mask] >= floor)
    return RankPlan(raws=raws, best=raws[ordered[0]], page_masks=page_masks)


def term_counts(histogram: Mapping[int, int], term_count: int, total: int) -> tuple[int, list[int]]:
    """``(N, [n_t, ...])`` from ``{mask: rows}``: N is never below any n_t (a row deleted
    between two counts must not make an idf negative)."""
    matching = [0] * term_count
    for mask, count in histogram.items():
        for position in range(term_count):
            if mask >> position & 1:
                matching[position] += count
    return max(total, *matching), matching


def masks_from_subset_counts(together: Mapping[int, int], term_count: int) -> dict[int, int]:
    """``{mask: rows holding exactly those terms}`` from ``{subset: rows holding at least
    that subset}`` of every non-empty subset (inclusion-exclusion).

    Engines that count "rows with all of these terms" cheaply (FTS5 merges doclists)
    get the exact mask histogram without listing any row.
    """
    full = (1 << term_count) - 1
    exact: dict[int, int] = {}
    for mask in range(1, full + 1):
        count = 0
        rest = full & ~mask
        extra = rest
        while True:  # every superset: mask | (each subset of the other terms)
            sign = -1 if bin(extra).count("1") % 2 else 1
            count += sign * together.get(mask | extra, 0)
            if extra == 0:
                break
            extra = (extra - 1) & rest
        if count > 0:  # < 0 only from counts of two snapshots a write came between
            exact[mask] = count
    return exact


def sort_key(
    raw: float, updated_at: datetime, chat_id: str, index: int
) -> tuple[float, int, str, int]:
    """Best first; ties: newer chat, then chat id (code points), then lower index."""
    micros = (updated_at - _EPOCH) // _ONE_MICROSECOND
    return (-raw, -micros, chat_id, index)
