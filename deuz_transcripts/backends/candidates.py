"""The rows a search plan passes around (``Candidate``) and the small helpers every
row source shares; ``base`` exports them with ``RowSource``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.backends.utils import CursorWrapper

__all__ = [
    "Candidate",
    "Known",
    "MaskTier",
    "TermStats",
    "fetch_int",
    "mask_sql",
    "more_than_by_counts",
    "sort_in_tie_order",
]


@dataclass(frozen=True)
class Candidate:
    """A matching message that may reach the page: the best of its mask by the tie rules."""

    pk: int
    mask: int
    chat_pk: int
    chat_id: str
    #: The chat's time as the row source's ``_updated_at_sql`` reads it: microseconds since
    #: the epoch on PostgreSQL, Django's sortable text (UTC) on SQLite.
    updated_at: int | str
    position: int
    visible_position: int


@dataclass(frozen=True)
class MaskTier:
    """The masks holding every term of one of ``least`` and no term of ``none_of``: every
    mask whose raw score reaches a bound, named by its least members (a row source finds
    their rows in one index search instead of one per mask)."""

    least: tuple[int, ...]
    none_of: int

    def holds(self, mask: int) -> bool:
        return any(mask & each == each for each in self.least) and not mask & self.none_of


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


def more_than_by_counts(counts: Sequence[int], cap: int) -> bool | None:
    """Whether more than ``cap`` rows hold any of the terms, from each term's rows
    (counted up to past ``cap``): yes when one term passes it, no when all of them together
    stay within it; ``None`` in between."""
    if max(counts) > cap:
        return True
    if sum(counts) <= cap:  # the union holds at most every term's rows
        return False
    return None
