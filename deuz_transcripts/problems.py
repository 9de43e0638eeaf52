"""``Problem``: one thing ``verify`` found wrong with a chat's search data."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Problem"]


@dataclass(frozen=True)
class Problem:
    """One chat whose search data is ``missing``, ``stale`` or ``orphaned``, or whose legacy
    row is ``unreadable``; ``chat_id`` is ``""`` for search data of a chat no longer known
    and for stored term ``counts`` that differ from the search data (PostgreSQL)."""

    chat_id: str
    kind: str
    detail: str
    source: str = "stored"  # what --fix repairs: "stored", "legacy", "fts" or "sweep"
    rowids: tuple[int, ...] = ()

    def __str__(self) -> str:
        if self.kind == "counts":
            return f"{self.kind}: {self.detail}"
        return f"{self.kind}: {self.chat_id or '(unknown chat)'}: {self.detail}"
