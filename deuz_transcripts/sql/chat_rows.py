"""A chat's own row and its scope lookup rows, read and written by plain SQL.

A store write reads one chat row and writes it with its scope rows; through the ORM
(``raw()``, ``create()``, ``save()``, ``bulk_create()``) that was a fifth of the write's
time, spent compiling four statements a write runs every time. The values still go
through the model fields (``get_db_prep_save`` in, the backend's converters out), so
what is stored and read is what the ORM stores and reads. No model signal is sent for
these rows, as ``bulk_create`` sends none for the message rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connections
from django.db.backends.utils import CursorWrapper

from ..backends.chat_filter import table
from ..backends.search_rows import rows_per_statement
from ..models import Chat, ChatScope, Tombstone

__all__ = ["insert_chat", "insert_chats", "insert_scope_rows", "load_chat", "update_chat"]

_FIELDS = [field for field in Chat._meta.concrete_fields if not field.primary_key]
_COLUMNS = ", ".join(f'c."{field.column}"' for field in Chat._meta.concrete_fields)
_INSERTED = ", ".join(f'"{field.column}"' for field in _FIELDS)
_BY_NAME = {field.name: field for field in _FIELDS}


def load_chat(cursor: CursorWrapper, using: str, chat_id: str) -> tuple[bool, Chat | None]:
    """Whether ``chat_id`` has a tombstone, and its chat row (``None``: none), in one
    statement."""
    cursor.execute(
        f"SELECT {_COLUMNS}, EXISTS (SELECT 1 FROM {table(Tombstone)} t WHERE t.chat_id = %s) "
        f"FROM (SELECT 1) AS one LEFT JOIN {table(Chat)} c ON c.chat_id = %s",
        [chat_id, chat_id],
    )
    *values, tombstoned = cursor.fetchone()
    if values[0] is None:  # no chat row: every column NULL
        return bool(tombstoned), None
    connection = connections[using]
    fields = Chat._meta.concrete_fields
    converted = []
    for field, value in zip(fields, values, strict=True):
        column = field.get_col(table(Chat))
        for convert in (
            *connection.ops.get_db_converters(column),
            *column.get_db_converters(connection),
        ):
            value = convert(value, column, connection)
        converted.append(value)
    return bool(tombstoned), Chat.from_db(using, [field.attname for field in fields], converted)


def insert_chat(cursor: CursorWrapper, using: str, values: Mapping[str, Any]) -> Chat:
    """A new chat row of ``values`` (field defaults for the rest); its key is read back."""
    return insert_chats(cursor, using, [values])[0]


def insert_chats(
    cursor: CursorWrapper, using: str, chats: Sequence[Mapping[str, Any]]
) -> list[Chat]:
    """New chat rows (distinct chat ids), in as few statements as the engine's parameter
    limit allows; rows in the order given, each with its key (matched by chat id: the
    order of ``RETURNING`` rows is not promised)."""
    connection = connections[using]
    rows = [Chat(**values) for values in chats]
    per_statement = rows_per_statement(using, len(_FIELDS))
    row_sql = "(" + ", ".join(["%s"] * len(_FIELDS)) + ")"
    keys: dict[str, int] = {}
    for start in range(0, len(rows), per_statement):
        chunk = rows[start : start + per_statement]
        cursor.execute(
            f"INSERT INTO {table(Chat)} ({_INSERTED}) VALUES {', '.join([row_sql] * len(chunk))} "
            "RETURNING id, chat_id",
            [
                field.get_db_prep_save(getattr(row, field.attname), connection)
                for row in chunk
                for field in _FIELDS
            ],
        )
        keys.update((chat_id, pk) for pk, chat_id in cursor.fetchall())
    for row in rows:
        row.pk = keys[row.chat_id]
        row._state.adding = False
        row._state.db = using
    return rows


def update_chat(cursor: CursorWrapper, using: str, row: Chat, values: Mapping[str, Any]) -> None:
    """Set ``values`` on chat row ``row`` and in database ``using``."""
    connection = connections[using]
    fields = [_BY_NAME[name] for name in values]
    for name, value in values.items():
        setattr(row, name, value)
    assignments = ", ".join(f'"{field.column}" = %s' for field in fields)
    cursor.execute(
        f"UPDATE {table(Chat)} SET {assignments} WHERE id = %s",
        [
            *(field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields),
            row.pk,
        ],
    )


def insert_scope_rows(cursor: CursorWrapper, rows: Sequence[Chat]) -> None:
    """The ``ChatScope`` lookup rows of each chat's scope (one statement for a chat)."""
    values = [(row.pk, key, value) for row in rows for key, value in row.scope.items()]
    per_statement = rows_per_statement(cursor.db.alias, 3)
    for start in range(0, len(values), per_statement):
        chunk = values[start : start + per_statement]
        cursor.execute(
            f'INSERT INTO {table(ChatScope)} ("chat_id", "key", "value") VALUES '
            + ", ".join(["(%s, %s, %s)"] * len(chunk)),
            [value for row in chunk for value in row],
        )
