"""Filtered searches against the unfiltered search of the same scope and queries (SPEC §8).

Each variant is an engine of ``measures.run_cell``, so all of them answer the same
queries in shuffled order and share the machine's noise; the ratio of a filtered
variant to ``plain`` is the cost of the filter.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from deuz_transcripts.base import BaseTranscriptIndex
from deuz_transcripts.errors import SearchTimeout
from deuz_transcripts.models import Chat

from .measures import Engine

__all__ = [
    "FILTER_CLASSES",
    "VARIANTS",
    "WINDOWS",
    "Window",
    "ratios",
    "variant_engines",
    "windows",
]

#: Query classes measured with filters (the same queries as the search phase).
FILTER_CLASSES = ("1-common", "2-common", "2-mixed", "5-mixed")
#: What each variant runs; every one with ``limit=20, around=1``.
VARIANTS = {
    "plain": "search(scope, q)",
    "roles": 'search(scope, q, roles=["user"])',
    "window_latest": "search(scope, q, updated_after=L): L is the scope's 6th newest chat's "
    "time, so the window holds its 5 newest chats: fewer rows of a common word than a page",
    "window_day": "search(scope, q, updated_after=D): D is a day before the scope's newest chat",
    "window10": "search(scope, q, updated_after=T10): T10 keeps the newest 10% of its chats",
    "window": "search(scope, q, updated_after=T): T keeps the newest half of the scope's chats",
    "window90": "search(scope, q, updated_after=T90): T90 keeps the newest 90% of its chats",
    "window_old_month": "search(scope, q, updated_after=A, updated_before=B): a closed window "
    "holding 1/12 of the scope's chats two thirds of the way back (the corpus spans about six "
    "weeks, so a calendar month would be most of it)",
    "roles+window": 'search(scope, q, roles=["user"], updated_after=T)',
    "page_first": "search_page(scope, q).hits: the first page with its exact total",
    "page_next": "search_page(scope, q, cursor=first page's next_cursor).hits",
    "capped_first": "page_first with total_cap=10,000 (SEARCH_TOTAL_CAP, what the admin asks)",
    "capped_next": "page_next with total_cap=10,000 (the cursor read with the cap too)",
}
#: The surfaces' default ``SEARCH_TOTAL_CAP``.
CAP = 10_000


def _newest_first(user: str | None) -> list[datetime]:
    """The ``updated_at`` of every chat of the scope of ``user``, newest first."""
    chats = Chat.objects.all()
    if user is not None:
        chats = chats.filter(scope_fields__key="userId", scope_fields__value=user)
    return list(chats.order_by("-updated_at").values_list("updated_at", flat=True))


def _at_share(newest_first: list[datetime], share: float) -> datetime:
    return newest_first[min(int(len(newest_first) * share), len(newest_first) - 1)]


#: A date window of a variant: ``(updated_after, updated_before)``, either may be ``None``.
Window = tuple[datetime | None, datetime | None]
#: The window variants, newest and narrowest first.
WINDOWS = ("window_latest", "window_day", "window10", "window", "window90", "window_old_month")


def windows(user: str | None) -> dict[str, Window]:
    """Each window variant's bounds over the scope of ``user`` (``None``: unscoped)."""
    dates = _newest_first(user)  # read once for every bound
    return {
        "window_latest": (dates[min(5, len(dates) - 1)], None),
        "window_day": (dates[0] - timedelta(days=1), None),
        "window10": (_at_share(dates, 0.1), None),
        "window": (_at_share(dates, 0.5), None),
        "window90": (_at_share(dates, 0.9), None),
        "window_old_month": (_at_share(dates, 2 / 3 + 1 / 12), _at_share(dates, 2 / 3)),
    }


class _NextPage:
    """The page after the first: the cursor is read in ``prepare``, outside the timing. A
    first page stopped by ``SEARCH_TIMEOUT_MS`` there is this variant's error when timed
    (it ended the whole run at 10M before)."""

    def __init__(
        self, index: BaseTranscriptIndex, scope: dict[str, str], total_cap: int | None = None
    ) -> None:
        self.index = index
        self.scope = scope
        self.total_cap = total_cap
        self.cursors: dict[str, str | None] = {}
        self.failed: dict[str, SearchTimeout] = {}

    def prepare(self, user: str | None, q: str) -> None:
        try:
            page = self.index.search_page(
                self.scope, q, limit=20, around=1, total_cap=self.total_cap
            )
        except SearchTimeout as exc:
            self.failed[q] = exc
            return
        self.cursors[q] = page.next_cursor

    def __call__(self, user: str | None, q: str) -> list[Any]:
        if q in self.failed:
            raise self.failed[q]
        if q not in self.cursors:
            self.prepare(user, q)
        cursor = self.cursors[q]
        if cursor is None:  # one page holds every hit: nothing after it
            return []
        return self.index.search_page(
            self.scope, q, limit=20, around=1, cursor=cursor, total_cap=self.total_cap
        ).hits


def variant_engines(
    index: BaseTranscriptIndex, user: str | None, bounds: dict[str, Window]
) -> dict[str, Engine]:
    """One engine per variant, over the scope of ``user`` (``None``: unscoped); ``bounds``
    are the window variants' (``windows``)."""
    scope = {} if user is None else {"userId": user}

    def plain(_: str | None, q: str) -> list[Any]:
        return index.search(scope, q, limit=20, around=1)

    def roles(_: str | None, q: str) -> list[Any]:
        return index.search(scope, q, limit=20, around=1, roles=["user"])

    def windowed(after: datetime | None, before: datetime | None) -> Engine:
        def search(_: str | None, q: str) -> list[Any]:
            return index.search(
                scope, q, limit=20, around=1, updated_after=after, updated_before=before
            )

        return search

    def roles_window(_: str | None, q: str) -> list[Any]:
        after = bounds["window"][0]
        return index.search(scope, q, limit=20, around=1, roles=["user"], updated_after=after)

    def page_first(_: str | None, q: str) -> list[Any]:
        return index.search_page(scope, q, limit=20, around=1).hits

    def capped_first(_: str | None, q: str) -> list[Any]:
        return index.search_page(scope, q, limit=20, around=1, total_cap=CAP).hits

    return {
        "plain": plain,
        "roles": roles,
        **{name: windowed(*bounds[name]) for name in WINDOWS},
        "roles+window": roles_window,
        "page_first": page_first,
        "page_next": _NextPage(index, scope),
        "capped_first": capped_first,
        "capped_next": _NextPage(index, scope, CAP),
    }


def ratios(cell: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Each variant's p50 and p95 over ``plain``'s."""
    base = cell.get("plain", {})
    out: dict[str, dict[str, float | None]] = {}
    for name, stats in cell.items():
        if name == "plain":
            continue
        out[name] = {
            key: round(stats[key] / base[key], 3) if stats.get(key) and base.get(key) else None
            for key in ("p50", "p95")
        }
    return out
