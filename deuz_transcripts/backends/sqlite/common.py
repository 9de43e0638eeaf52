"""What the two SQLite backends share: the write lock, the FTS5 probe, the storage DDL,
erasing deleted text, and the legacy table's scope filter."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, cast

from django.db import DatabaseError, connections, router, transaction
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.backends.utils import CursorWrapper
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from ...conf import conf
from ...errors import SearchTimeout
from ...models import LegacyChat, Message, Tombstone
from ..batched import Statement
from ..chat_filter import table
from ..search_backend import SearchBackend
from ..search_cursor import SearchCursor
from ..search_rows import SearchRows

if TYPE_CHECKING:
    from ...records import Scope

__all__ = [
    "FTS_TABLE",
    "UPDATED_AT_TEXT",
    "SQLiteBackend",
    "SQLiteRows",
    "create_storage",
    "drop_storage",
    "fts5_available",
    "fts5_secure_delete_supported",
    "fts_table_exists",
    "secure_delete",
    "secure_delete_on_connect",
]

FTS_TABLE = "deuz_transcripts_fts"
#: A candidate's chat time (``{}``: the column) as Django's sortable text. As an expression
#: it has no declared type, so the connection's datetime converter (a parse per row) is
#: skipped, and every statement's candidates carry the same type.
UPDATED_AT_TEXT = "CAST({} AS TEXT)"

_tables: set[tuple[str, str]] = set()


def _key(alias: str) -> tuple[str, str]:
    return alias, str(connections[alias].settings_dict.get("NAME"))


@cache
def fts5_available() -> bool:
    """Whether the SQLite library (the ``sqlite3`` module Django uses) has FTS5; probed once.

    It asks a private in-memory database, so checks never touch a configured one. The
    module is imported here, not at the top, so a drop-in module the settings put in
    ``sys.modules["sqlite3"]`` (``pysqlite3``...) is the one probed, as Django uses it.
    """
    import sqlite3

    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE deuz_probe USING fts5(body)")
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()
    return True


#: FTS5's ``secure-delete`` option (removes a deleted row's entries from every segment).
FTS5_SECURE_DELETE_SINCE = (3, 42, 0)


def fts5_secure_delete_supported() -> bool:
    """Whether the SQLite library Django uses knows FTS5's ``secure-delete`` option (3.42+)."""
    import sqlite3  # here: see fts5_available

    return sqlite3.sqlite_version_info >= FTS5_SECURE_DELETE_SINCE


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


def create_storage(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """The migration's SQLite step: a contentless FTS5 table, when the library has FTS5."""
    forget_probes()
    if fts5_available():
        schema_editor.execute(
            f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(body, content='', "
            "tokenize='ascii', detail=none, columnsize=0)"
        )


def drop_storage(schema_editor: BaseDatabaseSchemaEditor) -> None:
    schema_editor.execute(f"DROP TABLE IF EXISTS {FTS_TABLE}")
    forget_probes()


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


def secure_delete_on_connect(sender: object, connection: Any, **kwargs: object) -> None:
    """``connection_created`` handler: ``PRAGMA secure_delete = ON`` for the whole connection.

    With ``SQLITE_SECURE_DELETE``, on the SQLite databases this app is routed to. Text is
    freed by more than ``delete_chat``: FTS5's automatic merges free the segments they
    replace on every write, and a rewritten chat frees its old rows. Bytes freed while the
    pragma is off stay in the file, and a later delete cannot find them, so it is on for
    every statement of the connection (every table of that database: the setting's cost).
    """
    if (
        connection.vendor == "sqlite"
        and conf.SQLITE_SECURE_DELETE
        and router.allow_migrate_model(connection.alias, Message)
    ):
        with connection.wrap_database_errors:
            connection.connection.execute("PRAGMA secure_delete = ON")


class SQLiteRows(SearchRows):
    """SQLite's write lock, and deletes that leave no trace (``SQLITE_SECURE_DELETE``)."""

    def lock_sql(self, chat_id: str) -> Statement:
        # A write statement takes SQLite's RESERVED lock now, not at the first real
        # write, so a deferred transaction cannot fail to upgrade after reading.
        return f"UPDATE {table(Tombstone)} SET chat_id = chat_id WHERE chat_id = %s", [chat_id]

    def lock_chats(self, cursor: CursorWrapper, chat_ids: Sequence[str]) -> None:
        """SQLite's write lock covers the whole database: one statement takes it for all."""
        if chat_ids:
            self.lock_chat(cursor, chat_ids[0])

    def deleting(self) -> AbstractContextManager[None]:
        return self._erasing() if conf.SQLITE_SECURE_DELETE else super().deleting()

    @contextmanager
    def _erasing(self) -> Iterator[None]:
        """Freed pages zeroed; search structures erase in place, or are merged afterwards."""
        with secure_delete(self.alias):
            with connections[self.alias].cursor() as cursor:
                # The write lock first (see lock_chat): a read, or an FTS5 write (FTS5
                # reads its own tables before writing), as a deferred transaction's first
                # statement would make its first write fail at once in WAL mode.
                self.lock_chat(cursor, "")
                in_place = self.erase_in_place(cursor)
            yield
            if not in_place:
                with connections[self.alias].cursor() as cursor:
                    self.erase_deleted(cursor)

    def erase_in_place(self, cursor: CursorWrapper) -> bool:
        """Make the deletes to come remove their search data in place, when the library
        can; ``False``: ``erase_deleted`` must clean up after them."""
        return False

    def erase_deleted(self, cursor: CursorWrapper) -> None:
        """Drop what deleted rows left in search structures (nothing, without FTS5)."""


#: SQLite virtual-machine instructions between two looks at the clock (~0.1 ms).
_PROGRESS_STEPS = 10_000


@contextmanager
def interrupt_after(alias: str, timeout_ms: int) -> Iterator[None]:
    """A progress handler that interrupts the statement running past the deadline."""
    wrapper = connections[alias]
    wrapper.ensure_connection()
    raw = wrapper.connection
    deadline = time.monotonic() + timeout_ms / 1000
    expired = False

    def past_deadline() -> int:
        nonlocal expired
        expired = expired or time.monotonic() > deadline
        return int(expired)

    raw.set_progress_handler(past_deadline, _PROGRESS_STEPS)
    try:
        yield
    except DatabaseError as exc:
        if expired:
            raise SearchTimeout(timeout_ms) from exc
        raise
    finally:
        raw.set_progress_handler(None, 0)


class _BeginsIn(Protocol):
    """Django's SQLite connection since 5.1: ``BEGIN`` + this (``OPTIONS``), or ``None``
    (not in django-stubs yet)."""

    transaction_mode: str | None


@contextmanager
def read_snapshot(alias: str) -> Iterator[None]:
    """The statements inside read one snapshot of the database: a deferred transaction,
    which takes no write lock whatever the connection's ``transaction_mode`` says (a
    search must not queue behind writers, nor they behind it under WAL); inside the
    caller's transaction, that one, which holds its snapshot already. Outside a
    transaction each SQLite statement reads the database as it is when it starts."""
    wrapper = connections[alias]
    if wrapper.in_atomic_block:
        yield
        return
    wrapper.ensure_connection()  # connecting sets ``transaction_mode`` from the settings
    begins = cast(_BeginsIn, wrapper)
    mode = begins.transaction_mode
    begins.transaction_mode = "DEFERRED"
    try:
        with transaction.atomic(using=alias):
            yield
    finally:
        begins.transaction_mode = mode


class SQLiteBackend(SearchBackend):
    def search_cursor(self, timeout_ms: int) -> AbstractContextManager[SearchCursor]:
        """The base cursor inside one read transaction (``read_snapshot``): a page's
        total and its hits are read from the same database."""
        return self._snapshot_cursor(timeout_ms)

    @contextmanager
    def _snapshot_cursor(self, timeout_ms: int) -> Iterator[SearchCursor]:
        with read_snapshot(self.alias), self._limited_cursor(timeout_ms) as cursor:
            yield cursor

    def time_limit(self, timeout_ms: int) -> AbstractContextManager[None]:
        return interrupt_after(self.alias, timeout_ms) if timeout_ms else super().time_limit(0)

    def legacy_scope_filter(self, rows: QuerySet[Any], scope: Scope) -> QuerySet[Any]:
        """Rows whose scope has exactly each ``key`` set to its ``value``.

        The key is compared as a string, never compiled into a JSON path: Django's key
        transforms read ``"0"`` as an array index and SQLite's paths cannot quote ``"``.
        """
        legacy = connections[self.alias].ops.quote_name(table(LegacyChat))
        for position, (key, value) in enumerate(scope.items()):
            found = RawSQL(
                f"EXISTS (SELECT 1 FROM json_each({legacy}.scope) AS f "
                "WHERE f.key = %s AND f.type = 'text' AND f.value = %s)",
                (key, value),
                output_field=BooleanField(),
            )
            rows = rows.alias(**{f"_scope_{position}": found}).filter(
                **{f"_scope_{position}": True}
            )
        return rows


def empty_fts_after_flush(using: str, **kwargs: object) -> None:
    """``post_migrate`` handler: ``flush`` empties the model tables but not FTS5's.

    A contentless FTS5 table cannot be scanned or deleted from by SQL, so when no
    message row is left, the whole FTS5 index is dropped with ``delete-all``;
    otherwise stale rowids could attach old words to new messages. Databases the
    routers keep this app off are left alone.
    """
    connection = connections[using]
    if (
        connection.vendor != "sqlite"
        or not router.allow_migrate_model(using, Message)
        or not fts_table_exists(using)
    ):
        return
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {table(Message)} LIMIT 1")
        if cursor.fetchone() is None:
            cursor.execute(f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}) VALUES ('delete-all')")
