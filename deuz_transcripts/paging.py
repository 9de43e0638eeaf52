"""Counted pages and what their cursors pin, pure Python, shared by every index.

A cursor (``cursors`` holds its format) pins the ranking of the search's first page (N and every n_t, so every idf)
and names the last hit served by its sort key. The next page is the hits that sort
after that key under the pinned ranking, read from the data as it is now. A hit whose
chat is not written in between keeps its key, so it is served exactly once, whatever
else is written meanwhile (see ``docs/guarantees.md``).

"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property

from . import ranking
from .records import TranscriptHit

__all__ = ["HitKey", "PageAfter", "PinnedRanking", "SearchPage", "from_micros", "to_micros"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICROSECOND = timedelta(microseconds=1)


def to_micros(value: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (the tie order's first key)."""
    return (value - _EPOCH) // _ONE_MICROSECOND


def from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


@dataclass(frozen=True)
class SearchPage:
    """One page of a counted search.

    ``hits``: best first, as ``search()`` returns them. ``total``: the exact number of
    messages matching the search (scope, terms and filters) when the page was read; with
    ``total_cap=C``, at most ``C``: when more match, ``total`` is ``C`` and
    ``total_exact`` is False ("more than C"). ``next_cursor``: pass it as ``cursor=`` for
    the next page; ``None`` when no hit follows this page.
    """

    hits: list[TranscriptHit]
    total: int
    next_cursor: str | None = None
    total_exact: bool = True

    @property
    def has_next(self) -> bool:
        return self.next_cursor is not None


@dataclass(frozen=True)
class PinnedRanking:
    """N and every n_t of a search's first page: the idfs every later page ranks by."""

    total: int
    matching: tuple[int, ...]
    best_mask: int

    @classmethod
    def of(cls, histogram: Mapping[int, int], term_count: int, total: int) -> PinnedRanking | None:
        """The ranking ``ranking.plan_page`` uses for this histogram; ``None`` without a
        match."""
        histogram = {mask: count for mask, count in histogram.items() if mask and count}
        if not histogram:
            return None
        total, matching = ranking.term_counts(histogram, term_count, total)
        idfs = [ranking.idf(total, n) for n in matching]
        best = max(histogram, key=lambda mask: ranking.mask_raw(mask, idfs))
        return cls(total, tuple(matching), best)

    @cached_property
    def idfs(self) -> list[float]:
        return [ranking.idf(self.total, n) for n in self.matching]

    def raw(self, mask: int) -> float:
        return ranking.mask_raw(mask, self.idfs)

    @cached_property
    def best(self) -> float:
        return self.raw(self.best_mask)

    def score(self, mask: int) -> float:
        return ranking.normalized(self.raw(mask), self.best)

    def plan(self, masks: Mapping[int, int], page_masks: frozenset[int]) -> ranking.RankPlan:
        """A ``RankPlan`` scoring ``masks`` by the pinned idfs."""
        return ranking.RankPlan(
            raws={mask: self.raw(mask) for mask in masks}, best=self.best, page_masks=page_masks
        )


@dataclass(frozen=True)
class HitKey:
    """Where a hit sits in the order: which query terms it holds (its raw score under a
    ranking), then the tie rules' keys (newer chat, chat id, lower index)."""

    mask: int
    updated_micros: int
    chat_id: str
    index: int

    def sort_key(self, pinned: PinnedRanking) -> tuple[float, int, str, int]:
        return (-pinned.raw(self.mask), -self.updated_micros, self.chat_id, self.index)


@dataclass(frozen=True)
class PageAfter:
    """A decoded cursor: the pinned ranking and the last hit served."""

    pinned: PinnedRanking
    key: HitKey

    def admits(self, key: HitKey) -> bool:
        """Whether a hit of ``key`` sorts after the cursor's hit."""
        return key.sort_key(self.pinned) > self.key.sort_key(self.pinned)

    def split_masks(self, masks: Mapping[int, int], depth: int) -> tuple[set[int], set[int]]:
        """``(tied, lower)``: masks scoring as the cursor's hit (their rows must sort after
        it by the tie rules), and the lower masks that can reach a page of ``depth`` rows
        (best first until ``depth`` rows, plus every mask tied with the last one)."""
        cut = self.pinned.raw(self.key.mask)
        tied = {mask for mask in masks if self.pinned.raw(mask) == cut}
        lower = sorted(
            (mask for mask in masks if self.pinned.raw(mask) < cut),
            key=lambda mask: -self.pinned.raw(mask),
        )
        picked: set[int] = set()
        seen = 0
        floor = None
        for mask in lower:
            raw = self.pinned.raw(mask)
            if floor is not None and raw < floor:
                break
            picked.add(mask)
            seen += masks[mask]
            if seen >= depth and floor is None:
                floor = raw
        return tied, picked
