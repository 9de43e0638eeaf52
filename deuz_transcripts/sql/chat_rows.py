"""A chat's own row and its scope lookup rows, read and written by plain SQL.

A store write reads one chat row and writes it with its scope rows; through the ORM
(``raw()``, ``create()``, ``save()``, ``bulk_create()``) that was a fifth of the write's
time, spent compiling four statements a write runs every time. The values still go
through the model fields (``get_db_prep_save`` in, the backend's converters out), so
what is stored and read is what the ORM stores and reads. No model signal is sent for
these rows, as ``bulk_create`` sends none for the message rows. The ``*_sql`` functions
return their statement for the writer to send with the message rows' ``INSERT`` in one
round trip; a new chat's key, reserved by the read that found no row (``load_chat``'s
``new_key``: PostgreSQL), lets its row go there too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connections
from django.db.backends.utils import CursorWrapper

from ..backends.batched import Statement, run_batched
from ..backends.chat_filter import table
from ..backends.search_rows import rows_per_statement
from ..models import Chat, ChatScope, Tombstone

__all__ = [
    "insert_chat",
    "insert_chats",
    "insert_scope_rows",
    "load_chat",
    "new_chat_sql",
    "scope_rows_sql",
    "update_chat_sql",
]

_FIELDS = [field for field in Chat._meta.concrete_fields if not field.primary_key]
_COLUMNS = ", ".join(f'c."{field.column}"' for field in Chat._meta.concrete_fields)
_INSERTED = ", ".join(f'"{field.column}"' for field in _FIELDS)
_ALL_COLUMNS = ", ".join(f'"{field.column}"' for field in Chat._meta.concrete_fields)
_BY_NAME = {field.name: field for field in _FIELDS}


def load_chat(
    cursor: CursorWrapper,
    using: str,
    chat_id: str,
    *,
    before: Sequence[Statement] = (),
    new_key: str | None = None,
) -> tuple[bool, Chat | None, int | None]:
    """Whether ``chat_id`` has a tombstone, and its chat row (``None``: none), in one
    statement, sent in one round trip after ``before`` (the chat's lock); ``new_key``, an
    SQL expression of a new chat key, is evaluated only when there is no row, and its
    value returned (the key a write of a new chat inserts with), else ``None``."""
    key = f"CASE WHEN c.id IS NULL THEN {new_key} END" if new_key else "NULL"
    run_batched(
        cursor,
        [
            *before,
            (
                f"SELECT {_COLUMNS}, EXISTS (SELECT 1 FROM {table(Tombstone)} t "
                f"WHERE t.chat_id = %s), {key} "
                f"FROM (SELECT 1) AS one LEFT JOIN {table(Chat)} c ON c.chat_id = %s",
                [chat_id, chat_id],
            ),
        ],
    )
    *values, tombstoned, reserved = cursor.fetchone()
    if values[0] is None:  # no chat row: every column NULL
        return bool(tombstoned), None, reserved
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
    row = Chat.from_db(using, [field.attname for field in fields], converted)
    return bool(tombstoned), row, None


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


def new_chat_sql(using: str, values: Mapping[str, Any], key: int) -> tuple[Chat, Statement]:
    """A new chat row of ``values`` (field defaults for the rest) under the key ``key``
    reserved for it, and the ``INSERT`` that writes it (run by the caller, with others)."""
    connection = connections[using]
    row = Chat(id=key, **values)
    row._state.adding = False
    row._state.db = using
    fields = Chat._meta.concrete_fields
    placeholders = ", ".join(["%s"] * len(fields))
    return row, (
        f"INSERT INTO {table(Chat)} ({_ALL_COLUMNS}) VALUES ({placeholders})",
        [field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields],
    )


def update_chat_sql(using: str, row: Chat, values: Mapping[str, Any]) -> Statement:
    """Set ``values`` on chat row ``row``; the ``UPDATE`` that sets them in database
    ``using`` (run by the caller)."""
    connection = connections[using]
    fields = [_BY_NAME[name] for name in values]
    for name, value in values.items():
        setattr(row, name, value)
    assignments = ", ".join(f'"{field.column}" = %s' for field in fields)
    return (
        f"UPDATE {table(Chat)} SET {assignments} WHERE id = %s",
        [
            *(field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields),
            row.pk,
        ],
    )


def insert_scope_rows(cursor: CursorWrapper, rows: Sequence[Chat]) -> None:
    """The ``ChatScope`` lookup rows of each chat's scope (one statement for a chat)."""
    for statement in scope_rows_sql(cursor.db.alias, rows):
        cursor.execute(*statement)


def scope_rows_sql(using: str, rows: Sequence[Chat], *, replace: bool = False) -> list[Statement]:
    """The statements that write the ``ChatScope`` lookup rows of each chat's scope (one
    for a chat; ``replace``: after deleting the ones they had)."""
    statements: list[Statement] = []
    if replace:
        statements.append(
            (
                f'DELETE FROM {table(ChatScope)} WHERE "chat_id" IN '
                f"({', '.join(['%s'] * len(rows))})",
                [row.pk for row in rows],
            )
        )
    values = [(row.pk, key, value) for row in rows for key, value in row.scope.items()]
    per_statement = rows_per_statement(using, 3)
    for start in range(0, len(values), per_statement):
        chunk = values[start : start + per_statement]
        statements.append(
            (
                f'INSERT INTO {table(ChatScope)} ("chat_id", "key", "value") VALUES '
                + ", ".join(["(%s, %s, %s)"] * len(chunk)),
                [value for row in chunk for value in row],
            )
        )
    return statements
