"""Searches on a real PostgreSQL hot standby: ``REPLICA_DATABASE_URL`` names it (made by
``.ci/pg_replica.sh``: 127.0.0.1:5433, streaming from the server ``DATABASE_URL`` names).

The "replica" alias is a test MIRROR of "default": the test database created on the
primary reaches the standby by replication. These tests run only when the standby answers;
with ``DEUZ_REQUIRE_REPLICA=1`` (set by ``.ci/run``) a missing standby fails them instead.
Everything is committed (``transaction=True``): a standby sees nothing else.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from deuz_transcripts import ChatRecord, MemorySourceRef, ReplicaUnavailable
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.backends.postgresql import wal
from deuz_transcripts.backends.postgresql.counts import choice, notes
from deuz_transcripts.models import CountingTerm, Message
from deuz_transcripts.sql import replica
from deuz_transcripts.stores import DjangoConditionalChatStore, DjangoTranscriptIndex

if "replica" not in settings.DATABASES and os.environ.get("DEUZ_REQUIRE_REPLICA") != "1":
    # no alias to name in the marker below (PostgreSQL without REPLICA_DATABASE_URL)
    pytest.skip(
        "no PostgreSQL standby configured (REPLICA_DATABASE_URL, with DATABASE_URL)",
        allow_module_level=True,
    )

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "replica"])

SCOPE = {"userId": "ada"}
#: Searches read the standby only (no fall-back), waiting as long as a test needs.
STANDBY_ONLY = {
    "SEARCH_DATABASE": "replica",
    "REPLICA_FALLBACK": "error",
    "REPLICA_WAIT_MS": 10_000,
}


def _standby_problem() -> str | None:
    """Why the standby cannot be tested, or ``None`` when it answers as a hot standby."""
    configured = settings.DATABASES.get("replica")
    if configured is None or not configured["ENGINE"].endswith("postgresql"):
        return "no PostgreSQL standby configured (REPLICA_DATABASE_URL, with DATABASE_URL)"
    try:
        with control() as standby:
            in_recovery = standby.execute("SELECT pg_is_in_recovery()").fetchone()
    except Exception as exc:  # any driver error: the standby is not there
        return f"the standby does not answer ({exc}); run .ci/pg_replica.sh"
    if not in_recovery or not in_recovery[0]:
        return "REPLICA_DATABASE_URL names a server that is not a standby"
    return None


@contextmanager
def control(dbname: str = "postgres") -> Iterator[Any]:
    """A plain autocommit psycopg connection to the standby (pause, resume, settings)."""
    import psycopg

    configured = settings.DATABASES["replica"]
    with psycopg.connect(
        host=configured["HOST"] or None,
        port=configured["PORT"] or None,
        user=configured["USER"] or None,
        dbname=dbname,
        autocommit=True,
        connect_timeout=3,
    ) as connection:
        yield connection


@pytest.fixture(autouse=True)
def standby() -> Iterator[None]:
    problem = _standby_problem()
    if problem is not None:
        if os.environ.get("DEUZ_REQUIRE_REPLICA") == "1":
            pytest.fail(f"DEUZ_REQUIRE_REPLICA=1 but {problem}")
        pytest.skip(problem)
    replica.forget_writes()
    yield
    replica.forget_writes()
    with control() as connection:  # whatever a test did, replay runs again
        if connection.execute("SELECT pg_is_wal_replay_paused()").fetchone()[0]:
            connection.execute("SELECT pg_wal_replay_resume()")
    caught_up()
    connections["replica"].close()


def caught_up(timeout: float = 30.0) -> None:
    """Wait until the standby has replayed everything the primary has written so far."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn()::text")
        target = wal.parse_lsn(cursor.fetchone()[0])
    deadline = time.monotonic() + timeout
    with control() as standby:
        while (
            wal.parse_lsn(standby.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()[0])
            < target
        ):
            assert time.monotonic() < deadline, "the standby did not catch up"
            time.sleep(0.02)


@contextmanager
def replay_paused() -> Iterator[None]:
    """Replay paused once the standby has replayed everything the primary committed, so
    no replayed lock of an earlier test's transaction (a flush's ``TRUNCATE``) is held
    while paused: a search would wait on it until its timeout."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        primary_lsn = cursor.fetchone()[0]
    with control() as standby:
        while not standby.execute(
            "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [primary_lsn]
        ).fetchone()[0]:
            time.sleep(0.01)
        standby.execute("SELECT pg_wal_replay_pause()")
        while standby.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()[0] != "paused":
            time.sleep(0.01)
        try:
            yield
        finally:
            standby.execute("SELECT pg_wal_replay_resume()")


def resume_after(seconds: float) -> threading.Timer:
    def resume() -> None:
        with control() as standby:
            standby.execute("SELECT pg_wal_replay_resume()")

    timer = threading.Timer(seconds, resume)
    timer.start()
    return timer


def chat(chat_id: str, word: str) -> ChatRecord:
    return ChatRecord(chat_id, SCOPE, [{"role": "user", "content": f"about {word}"}])


def found(index: DjangoTranscriptIndex, word: str) -> list[str]:
    return [hit.chat_id for hit in index.search(SCOPE, word)]


def written_elsewhere(record: ChatRecord) -> None:
    """A write by another caller (a thread of its own: its WAL position is not ours)."""

    def write() -> None:
        try:
            DjangoConditionalChatStore().write_chat(record, expected_revision=0)
        finally:
            connections.close_all()  # the thread's own connections

    thread = threading.Thread(target=write)
    thread.start()
    thread.join()


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_DATABASE": "replica", "REPLICA_FALLBACK": "error"})
def test_searches_read_the_standby_and_writes_go_to_the_primary():
    store = DjangoConditionalChatStore()
    assert store.transcript.search_database == "replica"
    written_elsewhere(chat("c1", "lisbon"))
    caught_up()
    assert found(store.transcript, "lisbon") == ["c1"]
    with replay_paused():
        written_elsewhere(chat("c2", "porto"))
        # another caller's write the standby has not replayed: not found there, by any read
        assert found(store.transcript, "porto") == []
        assert store.transcript.search_page(SCOPE, "porto").total == 0
        assert [r.chat_id for r in store.list_chats(SCOPE)] == ["c1"]
        ref = MemorySourceRef(kind="user", chat_id="c2", message_id="c2:0", digest="x")
        assert store.transcript.resolve_source(SCOPE, ref) is None
        # ... but on the primary, where revision checks read
        assert store.load_chat("c2")[1] == 1
        assert found(DjangoTranscriptIndex(search_using="default"), "porto") == ["c2"]
    caught_up()
    assert found(store.transcript, "porto") == ["c2"]


@override_settings(DEUZ_TRANSCRIPTS=STANDBY_ONLY)
def test_a_caller_reads_its_own_write_on_the_standby_once_replayed():
    store = DjangoConditionalChatStore()
    with replay_paused():
        store.write_chat(chat("c1", "lisbon"), expected_revision=0)
        assert replica.written_position("default") is not None
        timer = resume_after(0.4)
        # the fall-back is "error": this hit can only come from the standby, after replay
        with CaptureQueriesContext(connections["replica"]) as queries:
            assert found(store.transcript, "lisbon") == ["c1"]
        timer.join()
        polls = [q for q in queries if "pg_last_wal_replay_lsn" in q["sql"]]
        assert len(polls) >= 2  # it asked again while the standby was behind
    assert replica.written_position("default") is None  # seen replayed: no more waits
    store.delete_chat("c1")
    assert found(store.transcript, "lisbon") == []  # a delete is waited for alike


@override_settings(DEUZ_TRANSCRIPTS=STANDBY_ONLY)
def test_reads_after_a_write_in_the_callers_transaction_go_to_the_primary():
    """Inside the caller's ``transaction.atomic()`` (a view under ``ATOMIC_REQUESTS``) a
    write is on no standby until it commits: the transaction's later reads (search,
    counted page, source refs, ``list_chats``) run on the primary, inside it, with the
    fall-back set to "error"; before it writes, the transaction reads the standby."""
    store = DjangoConditionalChatStore()
    store.write_chat(chat("old", "lisbon"), expected_revision=0)
    caught_up()
    replica.forget_writes()
    ref = MemorySourceRef(kind="user", chat_id="new", message_id="new:0", digest="x")
    with transaction.atomic():
        with CaptureQueriesContext(connections["replica"]) as on_standby:
            assert found(store.transcript, "lisbon") == ["old"]
        assert on_standby.captured_queries  # no write yet: the standby answered
        store.write_chat(chat("new", "lisbon"), expected_revision=0)
        store.delete_chat("old")
        with CaptureQueriesContext(connections["replica"]) as on_standby:
            assert found(store.transcript, "lisbon") == ["new"]
            assert store.transcript.search_page(SCOPE, "lisbon").total == 1
            assert store.transcript.resolve_source(SCOPE, ref) is not None
            assert [r.chat_id for r in store.list_chats(SCOPE)] == ["new"]
        assert on_standby.captured_queries == []  # all of it on the primary
    # committed: the caller's next read waits for the standby to replay it, then reads it
    with CaptureQueriesContext(connections["replica"]) as on_standby:
        assert found(store.transcript, "lisbon") == ["new"]
    assert on_standby.captured_queries


@override_settings(DEUZ_TRANSCRIPTS=STANDBY_ONLY)
def test_a_write_rolled_back_to_a_savepoint_leaves_reads_on_the_standby():
    store = DjangoConditionalChatStore()
    with transaction.atomic():
        try:
            with transaction.atomic():
                store.write_chat(chat("gone", "lisbon"), expected_revision=0)
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        with CaptureQueriesContext(connections["replica"]) as on_standby:
            assert found(store.transcript, "lisbon") == []
        assert on_standby.captured_queries


class WaitClock:
    """The clock and sleep the replay wait reads: a sleep moves it, nothing else does."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_DATABASE": "replica", "REPLICA_WAIT_MS": 200})
def test_a_standby_behind_the_callers_write_fails_or_falls_back_by_setting():
    store = DjangoConditionalChatStore()
    with replay_paused():
        store.write_chat(chat("c1", "lisbon"), expected_revision=0)
        with override_settings(
            DEUZ_TRANSCRIPTS={**settings.DEUZ_TRANSCRIPTS, "REPLICA_FALLBACK": "error"}
        ):
            clock = WaitClock()
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(replica, "time", clock)
                with pytest.raises(ReplicaUnavailable) as caught:
                    store.transcript.search(SCOPE, "lisbon")
            assert caught.value.reason == "behind" and caught.value.alias == "replica"
            # it waited out REPLICA_WAIT_MS by its clock, polling between sleeps, no more
            assert clock.now == pytest.approx(0.2) and len(clock.slept) > 3
        # "primary" (the default): the caller's write is found, on the primary
        assert found(store.transcript, "lisbon") == ["c1"]
        assert [r.chat_id for r in store.list_chats(SCOPE)] == ["c1"]
        # a caller that did not write reads the standby as it is (no wait, no hit yet)
        replica.forget_writes()
        assert found(store.transcript, "lisbon") == []


@override_settings(DEUZ_TRANSCRIPTS=STANDBY_ONLY)
def test_async_twins_carry_the_callers_write_position():
    store = DjangoConditionalChatStore()

    async def write_then_search() -> list[str]:
        await store.awrite_chat(chat("c1", "lisbon"), expected_revision=0)
        resume_after(0.3)
        hits = await store.transcript.asearch(SCOPE, "lisbon")
        return [hit.chat_id for hit in hits]

    try:
        with replay_paused():
            assert asyncio.run(write_then_search()) == ["c1"]
    finally:  # the worker thread's connections
        asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


@contextmanager
def standby_stopped() -> Iterator[None]:
    version, cluster = os.environ.get("DEUZ_REPLICA_CLUSTER", "15/replica").split("/")
    command = ["pg_ctlcluster", "--skip-systemctl-redirect", version, cluster]
    subprocess.run([*command, "stop", "-m", "fast"], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run([*command, "start"], check=True, capture_output=True)
        deadline = time.monotonic() + 60
        while _standby_problem() is not None:
            assert time.monotonic() < deadline, "the standby did not come back"
            time.sleep(0.2)


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_DATABASE": "replica"})
def test_a_stopped_standby_fails_or_falls_back_by_setting():
    store = DjangoConditionalChatStore()
    written_elsewhere(chat("c1", "lisbon"))
    caught_up()
    assert found(store.transcript, "lisbon") == ["c1"]  # a live connection to the standby
    with standby_stopped():
        with override_settings(
            DEUZ_TRANSCRIPTS={"SEARCH_DATABASE": "replica", "REPLICA_FALLBACK": "error"}
        ):
            with pytest.raises(ReplicaUnavailable) as caught:
                store.transcript.search(SCOPE, "lisbon")
            assert caught.value.reason == "unreachable"
            with pytest.raises(ReplicaUnavailable):
                store.list_chats(SCOPE)
        assert found(store.transcript, "lisbon") == ["c1"]  # "primary" reads the primary
    assert found(store.transcript, "lisbon") == ["c1"]  # back on the standby


@contextmanager
def standby_setting(name: str, value: str) -> Iterator[None]:
    with control() as standby:
        standby.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        standby.execute("SELECT pg_reload_conf()")
        try:
            yield
        finally:
            standby.execute(f"ALTER SYSTEM RESET {name}")
            standby.execute("SELECT pg_reload_conf()")


def lock_conflicts(dbname: str) -> int:
    with control() as standby:
        row = standby.execute(
            "SELECT confl_lock FROM pg_stat_database_conflicts WHERE datname = %s", [dbname]
        ).fetchone()
    return int(row[0])


def lock_messages_on_the_primary() -> None:
    """A committed ACCESS EXCLUSIVE lock on the message table: WAL the standby must replay."""
    from tests.sql_support import other_connection

    with other_connection() as primary:
        primary.execute(f"BEGIN; LOCK TABLE {Message._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        primary.execute("COMMIT")


@pytest.mark.parametrize("moment", ["between statements", "during a statement"])
@pytest.mark.parametrize("fallback", ["error", "primary"])
def test_a_search_cancelled_by_replay_is_the_apps_error(monkeypatch, fallback, moment):
    """The standby cancels a search whose transaction holds a lock that replay needs.

    The search runs in one transaction on the standby. The primary takes an ACCESS
    EXCLUSIVE lock on the message table; replaying it waits ``max_standby_streaming_delay``
    (50 ms here) for the search's ACCESS SHARE lock, then cancels the search: between its
    statements the standby ends the session ("terminating connection due to conflict with
    recovery"), during one it cancels the statement ("canceling statement ..."; a
    ``pg_sleep`` on the search's cursor stands for a slow statement). Both are SQLSTATE
    40001, psycopg's ``SerializationFailure``.
    """
    import deuz_transcripts.sql.index as index_module

    store = DjangoConditionalChatStore()
    written_elsewhere(chat("c1", "lisbon"))
    caught_up()
    dbname = connections["replica"].settings_dict["NAME"]
    real_read_hits = index_module.read_hits

    def read_hits_after_a_conflict(cursor: Any, *args: Any, **kwargs: Any) -> Any:
        if cursor.db.alias == "replica":
            before = lock_conflicts(dbname)
            if moment == "during a statement":
                threading.Timer(0.3, lock_messages_on_the_primary).start()
                cursor.execute("SELECT pg_sleep(60)")  # cancelled long before
            else:
                lock_messages_on_the_primary()
            # the reload of max_standby_streaming_delay may come late: then 30 s, the default
            deadline = time.monotonic() + 45
            while lock_conflicts(dbname) == before:
                assert time.monotonic() < deadline, "the standby never cancelled the search"
                time.sleep(0.02)
        return real_read_hits(cursor, *args, **kwargs)

    monkeypatch.setattr(index_module, "read_hits", read_hits_after_a_conflict)
    # a time limit puts the search in a transaction (which holds the lock); a long one
    settings_now = {
        "SEARCH_DATABASE": "replica",
        "REPLICA_FALLBACK": fallback,
        "SEARCH_TIMEOUT_MS": 120_000,
    }
    with (
        standby_setting("max_standby_streaming_delay", "50ms"),
        override_settings(DEUZ_TRANSCRIPTS=settings_now),
    ):
        if fallback == "error":
            with pytest.raises(ReplicaUnavailable) as caught:
                store.transcript.search(SCOPE, "lisbon")
            assert caught.value.reason == "conflict"
            assert "recovery conflict" in str(caught.value)
            cause = caught.value.__cause__
            assert type(cause.__cause__).__name__ == "SerializationFailure"
            said = "canceling statement" if moment == "during a statement" else "terminating"
            assert str(cause.__cause__).startswith(f"{said} ") and "conflict with recovery" in str(
                cause.__cause__
            )
        else:
            assert found(store.transcript, "lisbon") == ["c1"]  # read again on the primary
    monkeypatch.setattr(index_module, "read_hits", real_read_hits)
    with override_settings(DEUZ_TRANSCRIPTS={"SEARCH_DATABASE": "replica"}):
        assert found(store.transcript, "lisbon") == ["c1"]  # the next search reconnects


@override_settings(DEUZ_TRANSCRIPTS=STANDBY_ONLY)
def test_a_search_on_the_standby_marks_no_term_for_counting_and_answers():
    """A term the standby's search counts in GIN past the counted-term threshold would be
    marked on a primary (``counts.notes``); the standby reports itself (``in_hot_standby``),
    so nothing is tried there: no statement after the search's, no error."""
    store = DjangoConditionalChatStore()
    for n in range(3):
        store.write_chat(chat(f"c{n}", "lisbon"), expected_revision=0)
    big = forced_policies(single_statement_max=0, lexeme_scope_min=0, small_read_rows=1_000)
    notes.forget_notes()
    with (
        mock.patch.object(policy, "FORCED", big),
        mock.patch.object(choice, "COUNTED_MIN_ROWS", 2),
        CaptureQueriesContext(connections["replica"]) as queries,
    ):
        assert store.transcript.search_page({}, "lisbon about").total == 3
    sent = [query["sql"] for query in queries.captured_queries]
    assert any("count(*)" in statement and "lisbon" in statement for statement in sent)
    assert sent[-1].endswith("COMMIT") and not any("INSERT" in statement for statement in sent)
    assert not CountingTerm.objects.exists() and not notes._refused_until
    with connections["replica"].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery()")
        assert cursor.fetchone() == (True,)
    notes.forget_notes()
