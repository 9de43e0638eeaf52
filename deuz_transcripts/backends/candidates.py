"""The rows a search plan passes around (``Candidate``) and the small SQL helpers every
matcher shares; ``base`` exports them with ``SearchMatcher``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.backends.utils import CursorWrapper

__all__ = ["Candidate", "Known", "TermStats", "fetch_int", "mask_sql", "sort_in_tie_order"]


@dataclass(frozen=True)
class Candidate:
    """A matching message that may reach the page: the best of its mask by the tie rules."""

    pk: int
    mask: int
    chat_pk: int
    chat_id: str
    updated_at: datetime | str  # datetime on PostgreSQL, Django's sortable text on SQLite
    position: int
    visible_position: int


#: N and every query term's n_t in a filter, where a caller has them.
TermStats = tuple[int, Sequence[int]]
Known = TermStats | None


def sort_in_tie_order(candidates: list[Candidate]) -> None:
    """Sort in place by the tie rules (newer chat, chat id by code point, lower index):
    two stable sorts, because ``updated_at`` may be Django's sortable SQLite text, which
    cannot be negated."""
    candidates.sort(key=lambda c: (c.chat_id, c.position))
    candidates.sort(key=lambda c: c.updated_at, reverse=True)


def mask_sql(conditions: Sequence[str]) -> str:
    """``CASE WHEN cond_i THEN 2^i ELSE 0 END + ...``: which query terms a row holds."""
    return " + ".join(
        f"(CASE WHEN {condition} THEN {1 << bit} ELSE 0 END)"
        for bit, condition in enumerate(conditions)
    )


def fetch_int(cursor: CursorWrapper) -> int:
    row = cursor.fetchone()
    return 0 if row is None else int(row[0])
