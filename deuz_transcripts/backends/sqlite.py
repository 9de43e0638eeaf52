"""What the two SQLite backends share: the write lock and the FTS5 probe."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache

from django.db import connections
from django.db.backends.utils import CursorWrapper

from ..models import Message, Tombstone
from .base import SearchBackend, table

__all__ = [
    "FTS_TABLE",
    "SQLiteBackend",
    "fts5_available",
    "fts_table_exists",
    "secure_delete",
]

FTS_TABLE = "deuz_transcripts_fts"

_tables: set[tuple[str, str]] = set()


def _key(alias: str) -> tuple[str, str]:
    return alias, str(connections[alias].settings_dict.get("NAME"))


@cache
def fts5_available() -> bool:
    """Whether the SQLite library (the ``sqlite3`` module Django uses) has FTS5; probed once.

    It asks a private in-memory database, so checks never touch a configured one.
    """
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE deuz_probe USING fts5(body)")
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()
    return True


def fts_table_exists(alias: str) -> bool:
    """Whether migrations created the FTS5 table; a found table is remembered."""
    key = _key(alias)
    if key in _tables:
        return True
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s", [FTS_TABLE]
        )
        found = cursor.fetchone() is not None
    if found:
        _tables.add(key)
    return found


def forget_probes() -> None:
    """Forget which FTS5 tables were seen: after migrations change them."""
    _tables.clear()


@contextmanager
def secure_delete(alias: str) -> Iterator[None]:
    """``PRAGMA secure_delete = ON`` inside: SQLite zeroes the bytes of what is deleted.

    Without it (the library's default unless built with SQLITE_SECURE_DELETE) a
    deleted row's text stays in free space of the file until the page is reused.
    Pages are zeroed when freed, so this runs inside the delete's transaction. The
    pragma is a connection setting, not transactional: it is set and restored on the
    raw connection, so the restore also runs when the transaction failed.
    """
    wrapper = connections[alias]
    wrapper.ensure_connection()
    raw = wrapper.connection
    with wrapper.wrap_database_errors:
        previous = int(raw.execute("PRAGMA secure_delete").fetchone()[0])
        raw.execute("PRAGMA secure_delete = 1")
    try:
        yield
    finally:
        with wrapper.wrap_database_errors:
            raw.execute(f"PRAGMA secure_delete = {previous}")


class SQLiteBackend(SearchBackend):
    # Without the hint SQLite sorts every row of the scope before the LIMIT; with it, it
    # walks chats newest first (sorting only ties) and stops at the LIMIT.
    walk_join = "INDEXED BY deuz_chat_updated CROSS JOIN"

    def lock_chat(self, cursor: CursorWrapper, chat_id: str) -> None:
        # A write statement takes SQLite's RESERVED lock now, not at the first real
        # write, so a deferred transaction cannot fail to upgrade after reading.
        cursor.execute(
            f"UPDATE {table(Tombstone)} SET chat_id = chat_id WHERE chat_id = %s", [chat_id]
        )

    def lock_chats(self, cursor: CursorWrapper, chat_ids: Sequence[str]) -> None:
        """SQLite's write lock covers the whole database: one statement takes it for all."""
        if chat_ids:
            self.lock_chat(cursor, chat_ids[0])

    def erase_deleted(self, cursor: CursorWrapper) -> None:
        """Drop what deleted rows left in search structures (nothing, without FTS5)."""


def empty_fts_after_flush(using: str, **kwargs: object) -> None:
    """``post_migrate`` handler: ``flush`` empties the model tables but not FTS5's.

    A contentless FTS5 table cannot be scanned or deleted from by SQL, so when no
    message row is left, the whole FTS5 index is dropped with ``delete-all``;
    otherwise stale rowids could attach old words to new messages.
    """
    connection = connections[using]
    if connection.vendor != "sqlite" or not fts_table_exists(using):
        return
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {table(Message)} LIMIT 1")
        if cursor.fetchone() is None:
            cursor.execute(f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}) VALUES ('delete-all')")
