"""What every SQL search backend provides, and the SQL they share.

A backend only knows how to store a message's terms and how to answer two
questions about a scope: the histogram of query-term masks, and the ordered rows
of the masks a page needs (see ``deuz_transcripts.ranking``). Everything else
(rows, around, scores) is done once, in ``deuz_transcripts.sql_index``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.backends.utils import CursorWrapper

from ..models import Chat, ChatScope, Message
from ..ranking import RankPlan

__all__ = ["ChatFilter", "SearchBackend", "StoredRow", "mask_sql"]


def table(model: type) -> str:
    return model._meta.db_table  # type: ignore[attr-defined, no-any-return]


@dataclass(frozen=True)
class StoredRow:
    """A message row whose search data is written or deleted."""

    pk: int
    search_text: str  # distinct terms, space separated ("" when none)


@dataclass(frozen=True)
class ChatFilter:
    """The chats a search may return: scope fields and an optional chat id list."""

    scope: Mapping[str, str]
    chat_ids: frozenset[str] | None

    def chat_pks_sql(self) -> tuple[str, list[Any]]:
        """``SELECT id FROM chat ...`` of the searchable chats this filter admits."""
        sql = [f"SELECT c.id FROM {table(Chat)} c WHERE c.is_indexed"]
        params: list[Any] = []
        if self.chat_ids is not None:
            ids = sorted(self.chat_ids)
            sql.append(f"AND c.chat_id IN ({', '.join(['%s'] * len(ids))})")
            params.extend(ids)
        for key, value in sorted(self.scope.items()):
            sql.append(
                f"AND c.id IN (SELECT s.chat_id FROM {table(ChatScope)} s "
                "WHERE s.key = %s AND s.value = %s)"
            )
            params.extend([key, value])
        return " ".join(sql), params

    def total_sql(self) -> tuple[str, list[Any]]:
        """N: the number of indexed messages the search may return."""
        pks, params = self.chat_pks_sql()
        return (
            f"SELECT COALESCE(SUM(indexed_count), 0) FROM {table(Chat)} WHERE id IN ({pks})",
            params,
        )


def mask_sql(conditions: Sequence[str]) -> str:
    """``CASE WHEN cond_i THEN 2^i ELSE 0 END + ...``: which query terms a row holds."""
    return " + ".join(
        f"(CASE WHEN {condition} THEN {1 << bit} ELSE 0 END)"
        for bit, condition in enumerate(conditions)
    )


def order_sql(plan: RankPlan, mask_column: str) -> tuple[str, str, list[Any]]:
    """The mask filter and the ``ORDER BY raw DESC`` expression for a page, with params."""
    masks = sorted(plan.page_masks)
    where = f"{mask_column} IN ({', '.join(str(mask) for mask in masks)})"
    cases = " ".join(f"WHEN {mask} THEN CAST(%s AS DOUBLE PRECISION)" for mask in masks)
    return where, f"CASE {mask_column} {cases} END", [plan.raws[mask] for mask in masks]


class SearchBackend(ABC):
    """One database engine's way of storing and matching terms."""

    name: str
    #: True when a query term matches any word containing it (the LIKE fallback).
    substring_matching = False

    def __init__(self, alias: str) -> None:
        self.alias = alias

    # writing

    @abstractmethod
    def lock_chat(self, cursor: CursorWrapper, chat_id: str) -> None:
        """Serialize writers of one chat id until the transaction ends."""

    def stores_search_text(self) -> bool:
        """Whether ``Message.search_text`` is kept (SQLite: LIKE haystack, FTS5 delete key)."""
        return True

    def write_rows(  # noqa: B027  (optional hook)
        self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]
    ) -> None:
        """Add search data for freshly inserted message rows (default: the column is enough)."""

    def delete_rows(  # noqa: B027  (optional hook)
        self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]
    ) -> None:
        """Remove search data of rows about to be deleted or rewritten, with ``chat``'s old scope."""

    def clear_rows(self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]) -> None:
        """Remove search data of rows that stay (``remove()`` of a chat a store owns)."""
        self.delete_rows(cursor, chat, rows)

    # reading

    @abstractmethod
    def histogram(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> dict[int, int]:
        """``{mask: number of matching rows}`` over the filter's chats."""

    @abstractmethod
    def page(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        plan: RankPlan,
        offset: int,
        limit: int,
    ) -> list[tuple[int, int]]:
        """``(message pk, mask)`` of one page, best first with the shared tie rules."""

    def message_table(self) -> str:
        return table(Message)
