"""Filtered searches against the unfiltered search of the same scope and queries (SPEC §8).

Each variant is an engine of ``measures.run_cell``, so all of them answer the same
queries in shuffled order and share the machine's noise; the ratio of a filtered
variant to ``plain`` is the cost of the filter.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from deuz_transcripts.base import BaseTranscriptIndex
from deuz_transcripts.errors import SearchTimeout
from deuz_transcripts.models import Chat

from .measures import Engine

__all__ = [
    "FILTER_CLASSES",
    "VARIANTS",
    "newest_cutoff",
    "ratios",
    "variant_engines",
]

#: Query classes measured with filters (the same queries as the search phase).
FILTER_CLASSES = ("1-common", "2-common", "2-mixed", "5-mixed")
#: What each variant runs; every one with ``limit=20, around=1``.
VARIANTS = {
    "plain": "search(scope, q)",
    "roles": 'search(scope, q, roles=["user"])',
    "window": "search(scope, q, updated_after=T): T keeps the newest half of the scope's chats",
    "window90": "search(scope, q, updated_after=T90): T90 keeps the newest 90% of its chats",
    "roles+window": 'search(scope, q, roles=["user"], updated_after=T)',
    "page_first": "search_page(scope, q).hits: the first page with its exact total",
    "page_next": "search_page(scope, q, cursor=first page's next_cursor).hits",
    "capped_first": "page_first with total_cap=10,000 (SEARCH_TOTAL_CAP, what the admin asks)",
    "capped_next": "page_next with total_cap=10,000 (the cursor read with the cap too)",
}
#: The surfaces' default ``SEARCH_TOTAL_CAP``.
CAP = 10_000


def newest_cutoff(user: str | None, share: float = 0.5) -> datetime:
    """``updated_at`` of the scope's chat at ``share`` of them, newest first: strictly
    after it lies that share of the chats (0.5: the newest half)."""
    chats = Chat.objects.all()
    if user is not None:
        chats = chats.filter(scope_fields__key="userId", scope_fields__value=user)
    count = chats.count()
    ordered = chats.order_by("-updated_at").values_list("updated_at", flat=True)
    return ordered[min(int(count * share), count - 1)]


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
    index: BaseTranscriptIndex, user: str | None, cutoff: datetime, cutoff_90: datetime
) -> dict[str, Engine]:
    """One engine per variant, over the scope of ``user`` (``None``: unscoped);
    ``cutoff`` keeps the newest half of its chats, ``cutoff_90`` the newest 90%."""
    scope = {} if user is None else {"userId": user}

    def plain(_: str | None, q: str) -> list[Any]:
        return index.search(scope, q, limit=20, around=1)

    def roles(_: str | None, q: str) -> list[Any]:
        return index.search(scope, q, limit=20, around=1, roles=["user"])

    def window(_: str | None, q: str) -> list[Any]:
        return index.search(scope, q, limit=20, around=1, updated_after=cutoff)

    def window_90(_: str | None, q: str) -> list[Any]:
        return index.search(scope, q, limit=20, around=1, updated_after=cutoff_90)

    def roles_window(_: str | None, q: str) -> list[Any]:
        return index.search(scope, q, limit=20, around=1, roles=["user"], updated_after=cutoff)

    def page_first(_: str | None, q: str) -> list[Any]:
        return index.search_page(scope, q, limit=20, around=1).hits

    def capped_first(_: str | None, q: str) -> list[Any]:
        return index.search_page(scope, q, limit=20, around=1, total_cap=CAP).hits

    return {
        "plain": plain,
        "roles": roles,
        "window": window,
        "window90": window_90,
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
