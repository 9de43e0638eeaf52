"""PostgreSQL message rows: each written with its ``tsvector`` in one ``INSERT``.

The vector is built with ``array_to_tsvector`` from the terms Python extracted (never by
PostgreSQL's parser), plus the chat's scope and chat lexemes and the message's role lexeme
(``postgresql.storage``), so GIN filters a search's scope with its terms. A chat's writers
queue on a transaction-scoped advisory lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.backends.utils import CursorWrapper

from ...models import Chat, Message
from ...text import stored_terms_text
from ..chat_filter import table
from ..search_rows import NewMessage, NewRows, SearchRows, StoredRow
from .storage import VECTOR_COLUMN, role_lexeme, scope_lexemes

__all__ = ["PostgresRows"]

_LOCK_NAMESPACE = 733_120  # the advisory-lock key space of this app


class PostgresRows(SearchRows):
    keeps_search_text = False  # the tsvector is the search data

    def lock_chat(self, cursor: CursorWrapper, chat_id: str) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [_LOCK_NAMESPACE, chat_id])

    def lock_chats(self, cursor: CursorWrapper, chat_ids: Sequence[str]) -> None:
        """Every lock in one round trip, taken in the order given."""
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(%s, hashtext(t.id))) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS t(id, n)",
            [_LOCK_NAMESPACE, list(chat_ids)],
        )

    def insert(self, cursor: CursorWrapper, batches: Sequence[NewRows]) -> None:
        """One INSERT that writes each row and its tsvector together (no second tuple),
        for the rows of one chat (a write) or of many (a backfill's new chats)."""
        pairs: list[tuple[int, NewMessage, str]] = []
        for batch in batches:
            tokens = " ".join(scope_lexemes(batch.chat.scope, batch.chat.chat_id))
            pairs.extend(
                (
                    batch.chat.pk,
                    message,
                    f"{stored_terms_text(terms)} {tokens} {role_lexeme(message.role)}"
                    if terms
                    else "",
                )
                for message, terms in zip(batch.messages, batch.terms, strict=True)
            )
        if not pairs:
            return
        cursor.execute(
            f"INSERT INTO {table(Message)} (tenant, chat_id, position, message_id, role, payload, "
            f"digest, visible_position, has_terms, {VECTOR_COLUMN}) "
            "SELECT v.tenant, v.chat_id, v.position, v.message_id, v.role, v.payload, v.digest, "
            "v.visible_position, v.has_terms, CASE WHEN v.terms = '' THEN NULL "
            "ELSE array_to_tsvector(string_to_array(v.terms, ' ')) END "
            "FROM unnest(%s::text[], %s::bigint[], %s::int[], %s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::int[], %s::bool[], %s::text[]) AS v(tenant, chat_id, position, "
            "message_id, role, payload, digest, visible_position, has_terms, terms)",
            [
                [m.tenant for _, m, _ in pairs],
                [chat_pk for chat_pk, _, _ in pairs],
                [m.position for _, m, _ in pairs],
                [m.message_id for _, m, _ in pairs],
                [m.role for _, m, _ in pairs],
                [m.payload for _, m, _ in pairs],
                [m.digest for _, m, _ in pairs],
                [m.visible_position for _, m, _ in pairs],
                [m.has_terms for _, m, _ in pairs],
                [lexemes for _, _, lexemes in pairs],
            ],
        )

    def clear(self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]) -> None:
        """The vector lives on the row: NULL it, so nothing searchable stays behind."""
        cursor.execute(
            f"UPDATE {table(Message)} SET {VECTOR_COLUMN} = NULL WHERE tenant = %s AND chat_id = %s",
            [chat.tenant, chat.pk],
        )
