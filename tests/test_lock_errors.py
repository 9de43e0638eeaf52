"""Lock errors are told apart by the driver's error code, never by the message text.

Each test raises the real error: a PostgreSQL deadlock between two sessions (40P01), a
serialization failure (40001), ``NOWAIT`` on a held row (55P03); SQLite's SQLITE_BUSY
from a file another connection holds, and SQLITE_LOCKED from a table a statement of the
same connection is reading. And errors whose text merely holds "locked" (a table named
so) are ordinary database errors, not lock conflicts to retry.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings

from deuz_transcripts import ChatRecord, TranscriptError
from deuz_transcripts.backends.postgresql.errors import sqlstate
from deuz_transcripts.backfill import Backfill
from deuz_transcripts.models import Chat
from deuz_transcripts.sql.errors import database_errors, is_lock_conflict
from deuz_transcripts.stores import (
    DjangoChatStore,
    DjangoConditionalChatStore,
    DjangoTranscriptIndex,
)
from tests.sql_support import other_connection, sqlite_file_database

ADA = {"userId": "ada"}
LOCK_NAMESPACE = 733_120  # the app's advisory-lock key space (backends/postgresql/rows.py)


def user_chat(chat_id: str, text: str) -> ChatRecord:
    return ChatRecord(chat_id, ADA, [{"role": "user", "content": text}])


# ---------------------------------------------------------------- every backend


@pytest.mark.django_db
def test_an_error_that_only_mentions_locked_is_an_ordinary_database_error() -> None:
    """SQLite's 'no such table: locked_rows' (PostgreSQL's 'relation "locked_rows" does
    not exist') used to be reported, and retried, as a lock."""
    with (
        pytest.raises(TranscriptError) as raised,
        transaction.atomic(),
        database_errors("default"),
        connection.cursor() as cursor,
    ):
        cursor.execute("SELECT * FROM locked_rows")
    assert "locked_rows" in str(raised.value.__cause__)
    assert not is_lock_conflict(raised.value.__cause__)
    assert "locked" not in str(raised.value).replace("locked_rows", "")
    assert str(raised.value).startswith("the database is not migrated")


# ---------------------------------------------------------------- SQLite


@pytest.fixture
def sqlite_run() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite file locking runs in the SQLite run of the suite")


@pytest.mark.django_db
def test_sqlite_busy_is_a_lock_conflict_and_retried(tmp_path: Any, sqlite_run: None, sleeps):
    with (
        override_settings(DEUZ_TRANSCRIPTS={"LOCK_RETRIES": 2}),
        sqlite_file_database(tmp_path, timeout=0.05) as database,
    ):
        store = DjangoConditionalChatStore(database.alias)
        holder = sqlite3.connect(database.path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(TranscriptError) as raised:
                store.write_chat(user_chat("c1", "busyword"), expected_revision=0)
        finally:
            holder.rollback()
            holder.close()
        driver_error = raised.value.__cause__.__cause__
        assert isinstance(driver_error, sqlite3.OperationalError)
        assert driver_error.sqlite_errorname == "SQLITE_BUSY"
        assert is_lock_conflict(raised.value.__cause__)
        assert str(raised.value) == "the database is locked by another writer; try again"
        assert sleeps == [0.05]
        assert store.write_chat(user_chat("c1", "busyword"), expected_revision=0) == 1


def _write_lock_held(path: Any) -> sqlite3.Connection:
    """Another connection holding the file's write lock until it rolls back."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def _legacy_chats(alias: str, count: int) -> None:
    store = DjangoChatStore(alias)
    for n in range(count):
        store.save_chat(user_chat(f"legacy{n}", f"backfillword number{n}"))


@pytest.mark.django_db
def test_a_backfill_group_stopped_by_another_writer_is_tried_again_and_counted_once(
    tmp_path: Any, sqlite_run: None, sleeps: list[float]
) -> None:
    """Found by the soak: a backfill worker waiting past the busy timeout for a writer's
    lock stopped the whole command with a raw ``OperationalError``. The group's
    transaction is tried again, and its chats are counted and reported once."""
    with (
        override_settings(DEUZ_TRANSCRIPTS={"LOCK_RETRIES": 3}),
        sqlite_file_database(tmp_path, timeout=0.05) as database,
    ):
        _legacy_chats(database.alias, 3)
        holder = _write_lock_held(database.path)
        release = threading.Timer(0.08, holder.rollback)  # after the first attempt gave up
        release.start()
        failures: list[str] = []
        try:
            stats = Backfill(
                database.alias, on_failure=lambda chat_id, exc: failures.append(chat_id)
            ).run("legacy")
        finally:
            release.join()
            holder.close()
        assert sleeps, "the group's first attempt met the lock"
        assert (stats.indexed, stats.failed, failures) == (3, 0, [])
        hits = DjangoTranscriptIndex(database.alias).search(ADA, "backfillword", limit=10)
        assert sorted(hit.chat_id for hit in hits) == ["legacy0", "legacy1", "legacy2"]


@pytest.mark.django_db
def test_a_backfill_that_never_gets_the_lock_stops_with_the_apps_error(
    tmp_path: Any, sqlite_run: None, sleeps: list[float]
) -> None:
    with (
        override_settings(DEUZ_TRANSCRIPTS={"LOCK_RETRIES": 2}),
        sqlite_file_database(tmp_path, timeout=0.05) as database,
    ):
        _legacy_chats(database.alias, 2)
        holder = _write_lock_held(database.path)
        try:
            with pytest.raises(TranscriptError) as raised:
                Backfill(database.alias).run("legacy")
        finally:
            holder.rollback()
            holder.close()
        assert str(raised.value) == "the database is locked by another writer; try again"
        assert sleeps == [0.05]
        assert Backfill(database.alias).run("legacy").indexed == 2  # a rerun converges


def test_sqlite_locked_by_a_statement_of_the_same_connection_is_a_lock_conflict() -> None:
    database = sqlite3.connect(":memory:")
    database.executescript("CREATE TABLE t (x); INSERT INTO t VALUES (1), (2);")
    reading = database.execute("SELECT x FROM t")
    reading.fetchone()  # the statement is still open on the table
    with pytest.raises(sqlite3.OperationalError) as raised:
        database.execute("DROP TABLE t")
    assert raised.value.sqlite_errorname == "SQLITE_LOCKED"
    assert is_lock_conflict(raised.value)
    database.close()


def test_other_sqlite_errors_are_not_lock_conflicts() -> None:
    database = sqlite3.connect(":memory:")
    for sql in ("SELECT * FROM locked", "CREATE TABLE locked (x); CREATE TABLE locked (x);"):
        with pytest.raises(sqlite3.Error) as raised:
            database.executescript(sql)
        assert "locked" in str(raised.value)
        assert not is_lock_conflict(raised.value)
    database.close()


# ---------------------------------------------------------------- PostgreSQL


@pytest.fixture
def postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLSTATEs are PostgreSQL's")


@pytest.fixture
def deadlock_timeout() -> Iterator[None]:
    """This session checks for deadlocks after 1 s (the other one after 20 s), so this
    session is the one PostgreSQL picks as the victim."""
    with connection.cursor() as cursor:
        cursor.execute("SET deadlock_timeout = '1s'")
    yield
    with connection.cursor() as cursor:
        cursor.execute("RESET deadlock_timeout")


def wait_until_blocked(pid: int) -> None:
    pause = threading.Event()  # not time.sleep: the ``sleeps`` fixture records those
    with other_connection() as watcher:
        for _ in range(1000):
            row = watcher.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
            ).fetchone()
            if row and row[0] == "Lock":
                return
            pause.wait(0.01)
    raise AssertionError(f"backend {pid} never waited for a lock")


def deadlock_the_store_write(store: DjangoConditionalChatStore) -> tuple[Any, list[Any]]:
    """Another session holds chat c1's row, then (once the store's write holds c1's
    advisory lock and waits for that row) asks for the advisory lock: a real deadlock.
    Returns what the write returned or raised, and what the other session saw."""
    other = other_connection()
    other.execute("SET deadlock_timeout = '20s'")
    other.execute("BEGIN")
    other.execute(f"SELECT id FROM {Chat._meta.db_table} WHERE chat_id = 'c1' FOR UPDATE")
    seen: list[Any] = []
    pid = connection.connection.info.backend_pid if connection.connection else None
    assert pid is not None

    def close_the_cycle() -> None:
        try:
            wait_until_blocked(pid)
            other.execute("SELECT pg_advisory_xact_lock(%s, hashtext('c1'))", [LOCK_NAMESPACE])
            other.execute("COMMIT")
            seen.append("committed")
        except Exception as exc:  # reported to the test
            seen.append(exc)
        finally:
            other.close()

    thread = threading.Thread(target=close_the_cycle, daemon=True)
    thread.start()
    try:
        result: Any = store.write_chat(user_chat("c1", "afterword"), expected_revision=1)
    except Exception as exc:
        result = exc
    thread.join(30)
    return result, seen


@pytest.mark.django_db(transaction=True)
def test_a_real_deadlock_is_a_lock_conflict_and_the_write_is_retried(
    postgres: None, deadlock_timeout: None, sleeps: list[float]
) -> None:
    store = DjangoConditionalChatStore()
    store.write_chat(user_chat("c1", "beforeword"), expected_revision=0)
    connection.ensure_connection()
    result, seen = deadlock_the_store_write(store)
    assert seen == ["committed"]
    assert result == 2
    assert sleeps == [0.05]  # one deadlock, one retry
    assert [h.chat_id for h in store.transcript.search(ADA, "afterword")] == ["c1"]


@pytest.mark.django_db(transaction=True)
def test_a_real_deadlock_past_the_retries_names_it(postgres: None, deadlock_timeout: None) -> None:
    import psycopg

    store = DjangoConditionalChatStore()
    store.write_chat(user_chat("c1", "beforeword"), expected_revision=0)
    connection.ensure_connection()
    with override_settings(DEUZ_TRANSCRIPTS={"LOCK_RETRIES": 1}):
        result, seen = deadlock_the_store_write(store)
    assert seen == ["committed"]
    assert type(result) is TranscriptError
    assert isinstance(result.__cause__.__cause__, psycopg.errors.DeadlockDetected)
    assert sqlstate(result.__cause__) == "40P01"
    assert "deadlock detected, SQLSTATE 40P01" in str(result)
    assert store.load_chat("c1")[1] == 1
    assert store.transcript.search(ADA, "afterword") == []


@pytest.mark.django_db(transaction=True)
def test_nowait_on_a_held_row_is_a_lock_conflict(postgres: None) -> None:
    DjangoConditionalChatStore().write_chat(user_chat("c1", "word"), expected_revision=0)
    with other_connection() as other:
        other.execute("BEGIN")
        other.execute(f"SELECT id FROM {Chat._meta.db_table} FOR UPDATE")
        with (
            pytest.raises(TranscriptError) as raised,
            transaction.atomic(),
            database_errors("default"),
            connection.cursor() as cursor,
        ):
            cursor.execute(f"SELECT id FROM {Chat._meta.db_table} FOR UPDATE NOWAIT")
        other.execute("ROLLBACK")
    assert sqlstate(raised.value.__cause__) == "55P03"
    assert is_lock_conflict(raised.value.__cause__)
    assert "lock not available, SQLSTATE 55P03" in str(raised.value)


@pytest.mark.django_db(transaction=True)
def test_a_serialization_failure_is_a_lock_conflict(postgres: None) -> None:
    DjangoConditionalChatStore().write_chat(user_chat("c1", "word"), expected_revision=0)
    chats = Chat._meta.db_table
    with (
        pytest.raises(TranscriptError) as raised,
        transaction.atomic(),
        database_errors("default"),
        connection.cursor() as cursor,
    ):
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cursor.execute(f"SELECT revision FROM {chats} WHERE chat_id = 'c1'")
        with other_connection() as other:
            other.execute(f"UPDATE {chats} SET revision = 7 WHERE chat_id = 'c1'")
        cursor.execute(f"UPDATE {chats} SET revision = 8 WHERE chat_id = 'c1'")
    assert sqlstate(raised.value.__cause__) == "40001"
    assert is_lock_conflict(raised.value.__cause__)
    assert "serialization failure, SQLSTATE 40001" in str(raised.value)
