"""SQLite without FTS5: substring matches in ``Message.search_text``.

The haystack is the message's distinct terms separated by spaces, so a query
term (letters and digits only) matches exactly the words that contain it.
``instr`` is used rather than ``LIKE`` so no character of a term is a wildcard.
Writes still keep an existing FTS5 table current (``Fts5Upkeep``), so switching
back to FTS5 needs no re-index.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.backends.utils import CursorWrapper

from ..models import Chat, Message
from ..ranking import RankPlan
from .base import ChatFilter, mask_sql, order_sql, table
from .sqlite_fts5 import Fts5Upkeep

__all__ = ["SQLiteLikeBackend"]


class SQLiteLikeBackend(Fts5Upkeep):
    name = "sqlite-like"
    substring_matching = True

    @staticmethod
    def _conditions(terms: Sequence[str]) -> list[str]:
        return ["instr(m.search_text, %s) > 0" for _ in terms]

    def histogram(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> dict[int, int]:
        pks_sql, pks_params = chats.chat_pks_sql()
        cursor.execute(
            f"SELECT mask, count(*) FROM (SELECT {mask_sql(self._conditions(terms))} AS mask "
            f"FROM {table(Message)} m WHERE m.chat_id IN ({pks_sql}) AND m.has_terms) "
            "WHERE mask > 0 GROUP BY mask",
            [*terms, *pks_params],
        )
        return dict(cursor.fetchall())

    def page(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        plan: RankPlan,
        offset: int,
        limit: int,
    ) -> list[tuple[int, int]]:
        pks_sql, pks_params = chats.chat_pks_sql()
        where, raw, raw_params = order_sql(plan, "h.mask")
        cursor.execute(
            f"SELECT h.id, h.mask FROM (SELECT m.id, m.position, c.updated_at, c.chat_id, "
            f"{mask_sql(self._conditions(terms))} AS mask FROM {table(Message)} m "
            f"JOIN {table(Chat)} c ON c.id = m.chat_id "
            f"WHERE m.chat_id IN ({pks_sql}) AND m.has_terms) AS h WHERE {where} "
            f"ORDER BY {raw} DESC, h.updated_at DESC, h.chat_id, h.position LIMIT %s OFFSET %s",
            [*terms, *pks_params, *raw_params, limit, offset],
        )
        return [(pk, mask) for pk, mask in cursor.fetchall()]
