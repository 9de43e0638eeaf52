"""PostgreSQL message rows: each written with its ``tsvector`` in one ``INSERT``.

The vector is built with ``array_to_tsvector`` from the terms Python extracted (never by
PostgreSQL's parser), plus the chat's scope and chat lexemes and the message's role lexeme
(``postgresql.storage``), so GIN filters a search's scope with its terms. A chat's writers
queue on a transaction-scoped advisory lock. A write's chat row statements travel in the
round trip of its message rows' ``INSERT`` (``backends.batched``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.db.backends.utils import CursorWrapper

from ...models import Chat, Message
from ...text import stored_terms_text
from ..batched import Statement, run_batched
from ..chat_filter import table
from ..search_rows import NewRows, SearchRows, StoredRow
from .storage import VECTOR_COLUMN, role_lexeme, scope_lexemes, tsquery_operand

__all__ = ["PostgresRows", "array_literal", "tsvector_text"]

_LOCK_NAMESPACE = 733_120  # the advisory-lock key space of this app


def array_literal(values: Sequence[str | int | bool | None]) -> str:
    """An array's text form (``{"a","b\\"c",NULL,1,t}``), for a ``%s::type[]`` parameter.

    psycopg's list dumper escapes each element's quotes and backslashes with a regex
    substitution per match, which cost a write's JSON payloads (a quote every few
    characters) more than the rest of the write's Python; ``str.replace`` does it in C.
    """
    texts = [value for value in values if isinstance(value, str)]
    if texts and len(texts) == len(values):  # payloads, ids: one pass, no test per element
        escaped = [text.replace("\\", "\\\\").replace('"', '\\"') for text in texts]
        return '{"' + '","'.join(escaped) + '"}'
    return "{" + ",".join(_element(value) for value in values) + "}"


def _element(value: str | int | bool | None) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


#: The message columns both writes fill, in the order of ``_rows``.
_COLUMNS = (
    "tenant",
    "chat_id",
    "position",
    "message_id",
    "role",
    "payload",
    "digest",
    "visible_position",
    "has_terms",
    VECTOR_COLUMN,
)


def _rows(batches: Sequence[NewRows], vector: Callable[[str], str]) -> Iterator[tuple[Any, ...]]:
    """Each new row's ``_COLUMNS`` values, its vector's lexemes given to ``vector`` (``None``
    for a message without terms)."""
    for batch in batches:
        tokens = " ".join(scope_lexemes(batch.chat.scope, batch.chat.chat_id))
        chat = batch.chat.pk
        for message, terms in zip(batch.messages, batch.terms, strict=True):
            yield (
                message.tenant,
                chat,
                message.position,
                message.message_id,
                message.role,
                message.payload,
                message.digest,
                message.visible_position,
                message.has_terms,
                vector(f"{stored_terms_text(terms)} {tokens} {role_lexeme(message.role)}")
                if terms
                else None,
            )


def _as_is(lexemes: str) -> str:
    """The ``INSERT``'s form: the lexemes separated by spaces (it splits them itself)."""
    return lexemes


def tsvector_text(lexemes: str) -> str:
    """The ``tsvector`` input text of space-separated lexemes (``'a' 'b'``): the vector
    ``array_to_tsvector(string_to_array(lexemes, ' '))`` builds, each lexeme quoted."""
    if "'" in lexemes or "\\" in lexemes:  # terms have neither: tokens are hex
        return " ".join(tsquery_operand(lexeme) for lexeme in lexemes.split(" "))
    return "'" + lexemes.replace(" ", "' '") + "'"


class PostgresRows(SearchRows):
    keeps_search_text = False  # the tsvector is the search data
    new_chat_key_sql = f"nextval(pg_get_serial_sequence('{table(Chat)}', 'id'))"

    def lock_sql(self, chat_id: str) -> Statement:
        return "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [_LOCK_NAMESPACE, chat_id]

    def lock_chats(self, cursor: CursorWrapper, chat_ids: Sequence[str]) -> None:
        """Every lock in one round trip, taken in the order given."""
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(%s, hashtext(t.id))) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS t(id, n)",
            [_LOCK_NAMESPACE, list(chat_ids)],
        )

    def insert(
        self,
        cursor: CursorWrapper,
        batches: Sequence[NewRows],
        *,
        before: Sequence[Statement] = (),
    ) -> None:
        """One INSERT that writes each row and its tsvector together (no second tuple),
        for the rows of one chat (a write) or of many (a backfill's new chats), sent with
        ``before`` in one round trip."""
        rows = list(_rows(batches, _as_is))
        if not rows:
            run_batched(cursor, before)
            return
        columns = list(zip(*rows, strict=True))
        run_batched(
            cursor,
            [
                *before,
                (
                    f"INSERT INTO {table(Message)} ({', '.join(_COLUMNS)}) "
                    "SELECT v.tenant, v.chat_id, v.position, v.message_id, v.role, v.payload, "
                    "v.digest, v.visible_position, v.has_terms, "
                    "array_to_tsvector(string_to_array(v.terms, ' ')) "
                    "FROM unnest(%s::text[], %s::bigint[], %s::int[], %s::text[], %s::text[], "
                    "%s::text[], %s::text[], %s::int[], %s::bool[], %s::text[]) AS v(tenant, "
                    "chat_id, position, message_id, role, payload, digest, visible_position, "
                    "has_terms, terms)",
                    [array_literal(column) for column in columns],
                ),
            ],
        )

    def insert_new_chats(self, cursor: CursorWrapper, batches: Sequence[NewRows]) -> None:
        """The rows of a backfill group's new chats by one ``COPY`` (psycopg 3), each
        vector in its text form: no array literal to build and quote, nothing for the
        server to parse but the rows, and heap pages filled several rows at a time. The
        statement triggers see the ``COPY`` as one statement. Other drivers: ``insert``."""
        copy = getattr(cursor.cursor, "copy", None)
        if copy is None:  # pragma: no cover - psycopg2
            self.insert(cursor, batches)
            return
        with copy(f"COPY {table(Message)} ({', '.join(_COLUMNS)}) FROM STDIN") as rows:
            for row in _rows(batches, tsvector_text):
                rows.write_row(row)

    def clear(self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]) -> None:
        """The vector lives on the row: NULL it, so nothing searchable stays behind."""
        cursor.execute(
            f"UPDATE {table(Message)} SET {VECTOR_COLUMN} = NULL WHERE tenant = %s AND chat_id = %s",
            [chat.tenant, chat.pk],
        )
