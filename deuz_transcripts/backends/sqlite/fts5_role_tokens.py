"""Migration 0003 on SQLite: every FTS5 row gets (or loses) its message's role token.

A contentless FTS5 table cannot be read back or updated in place, so the table is
emptied (``delete-all``) and refilled from the message rows, which hold everything a
body is made of (``search_text``, the chat's scope and id, the role). Rows FTS5 held
for no searchable message are dropped on the way, as ``verify --repair`` would.
"""

from __future__ import annotations

from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from ...models import Chat, Message
from .common import FTS_TABLE, forget_probes, fts_table_exists
from .fts5_expressions import fts_body

__all__ = ["add_role_tokens", "drop_role_tokens"]

_BATCH = 2_000


def add_role_tokens(schema_editor: BaseDatabaseSchemaEditor) -> None:
    _refill(schema_editor, with_roles=True)


def drop_role_tokens(schema_editor: BaseDatabaseSchemaEditor) -> None:
    _refill(schema_editor, with_roles=False)


def _refill(schema_editor: BaseDatabaseSchemaEditor, *, with_roles: bool) -> None:
    """Rewrite every FTS row from its message row, by pk ranges (memory stays bounded)."""
    alias = schema_editor.connection.alias
    forget_probes()
    if not fts_table_exists(alias):  # SQLite without FTS5: the LIKE fallback reads rows
        return
    schema_editor.execute(f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}) VALUES ('delete-all')")
    rows = Message.objects.using(alias).filter(has_terms=True, chat__is_indexed=True)
    last = 0
    with schema_editor.connection.cursor() as cursor:
        while batch := list(
            rows.filter(pk__gt=last)
            .order_by("pk")
            .values_list("pk", "chat_id", "role", "search_text")[:_BATCH]
        ):
            chats = {
                pk: (chat_id, scope)
                for pk, chat_id, scope in Chat.objects.using(alias)
                .filter(pk__in={row[1] for row in batch})
                .values_list("pk", "chat_id", "scope")
            }
            cursor.executemany(
                f"INSERT INTO {FTS_TABLE} (rowid, body) VALUES (%s, %s)",
                [
                    (
                        pk,
                        fts_body(
                            text, chats[chat_pk][1], chats[chat_pk][0], role if with_roles else None
                        ),
                    )
                    for pk, chat_pk, role, text in batch
                    if text
                ],
            )
            last = batch[-1][0]
        cursor.execute(f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}) VALUES ('optimize')")
