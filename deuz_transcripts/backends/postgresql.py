"""PostgreSQL: a ``tsvector`` of Python's terms per message, searched through GIN.

The vector is built with ``array_to_tsvector`` from the terms Python extracted,
never by PostgreSQL's parser, so it holds exactly the in-memory index's terms
(``simple`` semantics: no stemming, no stop words). A query term becomes a
quoted tsquery lexeme; terms are letters and digits only, so no input can reach
tsquery syntax.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.backends.utils import CursorWrapper

from ..models import Chat, Message
from ..ranking import RankPlan
from ..text import stored_term
from .base import ChatFilter, SearchBackend, StoredRow, mask_sql, order_sql, table

__all__ = ["PostgresBackend"]

VECTOR_COLUMN = "search_vector"
_LOCK_NAMESPACE = 733_120  # the advisory-lock key space of this app


def tsquery_literal(term: str) -> str:
    """A single quoted lexeme; terms never hold quotes or backslashes, escape anyway."""
    lexeme = stored_term(term).replace("\\", "\\\\").replace("'", "''")
    return f"'{lexeme}'"


class PostgresBackend(SearchBackend):
    name = "postgresql"

    def stores_search_text(self) -> bool:
        return False  # the tsvector is the search data

    def lock_chat(self, cursor: CursorWrapper, chat_id: str) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [_LOCK_NAMESPACE, chat_id])

    def write_vectors(
        self, cursor: CursorWrapper, pks: Sequence[int], search_texts: Sequence[str]
    ) -> None:
        if not pks:
            return
        cursor.execute(
            f"UPDATE {table(Message)} AS m SET {VECTOR_COLUMN} = "
            "array_to_tsvector(string_to_array(v.terms, ' ')) "
            "FROM unnest(%s::bigint[], %s::text[]) AS v(id, terms) WHERE m.id = v.id",
            [
                list(pks),
                [" ".join(stored_term(t) for t in text.split(" ")) for text in search_texts],
            ],
        )

    def write_rows(self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]) -> None:
        rows = [row for row in rows if row.search_text]
        self.write_vectors(cursor, [row.pk for row in rows], [row.search_text for row in rows])

    def clear_rows(self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]) -> None:
        """The vector lives on the row: NULL it, so nothing searchable stays behind."""
        cursor.execute(
            f"UPDATE {table(Message)} SET {VECTOR_COLUMN} = NULL WHERE chat_id = %s", [chat.pk]
        )

    def _matches(self, terms: Sequence[str]) -> tuple[list[str], list[str]]:
        conditions = [f"m.{VECTOR_COLUMN} @@ %s::tsquery" for _ in terms]
        return conditions, [tsquery_literal(term) for term in terms]

    def histogram(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> dict[int, int]:
        pks_sql, pks_params = chats.chat_pks_sql()
        conditions, literals = self._matches(terms)
        cursor.execute(
            f"SELECT mask, count(*) FROM (SELECT {mask_sql(conditions)} AS mask "
            f"FROM {table(Message)} m WHERE m.chat_id IN ({pks_sql}) "
            f"AND m.{VECTOR_COLUMN} @@ %s::tsquery) AS h GROUP BY mask",
            [*literals, *pks_params, " | ".join(literals)],
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
        conditions, literals = self._matches(terms)
        needed = 0
        for mask in plan.page_masks:
            needed |= mask
        wanted = [lit for bit, lit in enumerate(literals) if needed >> bit & 1]
        where, raw, raw_params = order_sql(plan, "h.mask")
        cursor.execute(
            f"SELECT h.id, h.mask FROM (SELECT m.id, m.position, c.updated_at, c.chat_id, "
            f"{mask_sql(conditions)} AS mask FROM {table(Message)} m "
            f"JOIN {table(Chat)} c ON c.id = m.chat_id "
            f"WHERE m.chat_id IN ({pks_sql}) AND m.{VECTOR_COLUMN} @@ %s::tsquery) AS h "
            f"WHERE {where} "
            f'ORDER BY {raw} DESC, h.updated_at DESC, h.chat_id COLLATE "C", h.position '
            "LIMIT %s OFFSET %s",
            [*literals, *pks_params, " | ".join(wanted), *raw_params, limit, offset],
        )
        return [(pk, mask) for pk, mask in cursor.fetchall()]
