"""Faults: a failure anywhere inside a write leaves the store exactly as it was.

A fault is injected at the 1st, 2nd, ... SQL statement of an operation until the
operation gets through: each failed attempt must raise (``TranscriptError`` for a
database error, the original exception otherwise), change nothing a caller or SQL can
see, and leave the search data exact; the final, unfaulted attempt must then work.
Faults: disk-full errors raised by the cursor (before or after the statement ran), a
failing COMMIT, the backend killed with ``pg_terminate_backend`` mid-transaction, a
statement timeout, and a backfill killed with SIGKILL and run again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import OperationalError, connection, connections, transaction

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex, TranscriptError
from deuz_transcripts.backfill import Backfill
from deuz_transcripts.models import Chat, ChatScope, LegacyChat, Message, Tombstone
from deuz_transcripts.stores import DjangoChatStore, DjangoConditionalChatStore
from tests.sql_support import assert_consistent, other_connection, sqlite_file_database

pytestmark = pytest.mark.django_db(transaction=True)
ADA = {"userId": "ada"}
BOB = {"userId": "bob"}
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "fresh", "moved", "replayed"]
ROOT = Path(__file__).resolve().parent.parent


def chat(chat_id: str, *texts: str, scope: dict | None = None) -> ChatRecord:
    return ChatRecord(
        chat_id, ADA if scope is None else scope, [{"role": "user", "content": t} for t in texts]
    )


def seed(store: DjangoConditionalChatStore, p: str) -> None:
    """Chats prefixed ``p``, so one test sweeps every operation on one database."""
    store.write_chat(chat(f"{p}c1", "alpha one", "beta two", "gamma three"), expected_revision=0)
    store.write_chat(chat(f"{p}c2", "alpha other"), expected_revision=0)
    store.transcript.index(chat(f"{p}indexed-only", "delta legacy"))  # a backfilled chat


def snapshot(store: DjangoConditionalChatStore, p: str) -> dict[str, Any]:
    """What a caller and SQL can observe: records, revisions, searches, row counts."""
    ids = [f"{p}{name}" for name in ("c1", "c2", "c3", "indexed-only")]
    chats = {
        chat_id: (loaded[0].to_json(), loaded[1]) if loaded else None
        for chat_id in ids
        for loaded in [store.load_chat(chat_id)]
    }
    searches = {
        word: [
            (h.chat_id, h.message_id, round(h.score, 9))
            for h in store.transcript.search({}, word, chat_ids=ids)
        ]
        for word in WORDS
    }
    rows = {
        model.__name__: model.objects.count()
        for model in (Chat, ChatScope, Message, Tombstone, LegacyChat)
    }
    return {"chats": chats, "searches": searches, "rows": rows}


OPERATIONS: dict[str, Callable[[DjangoConditionalChatStore, str], Any]] = {
    "create": lambda s, p: s.write_chat(chat(f"{p}c3", "fresh words"), expected_revision=0),
    "rewrite": lambda s, p: s.write_chat(
        chat(f"{p}c1", "alpha one", "beta changed", "gamma three", "fresh appended"),
        expected_revision=1,
    ),
    "rescope": lambda s, p: s.write_chat(
        chat(f"{p}c1", "alpha one", "moved", scope=BOB), expected_revision=1
    ),
    "delete": lambda s, p: s.delete_chat(f"{p}c1"),
    "backfill": lambda s, p: s.transcript.index(chat(f"{p}indexed-only", "delta replayed")),
    "remove": lambda s, p: s.transcript.remove(f"{p}c2"),
}


_CONTROL = ("BEGIN", "SAVEPOINT", "RELEASE", "ROLLBACK")


class Fault:
    """An execute wrapper raising ``error()`` at statement number ``at`` (1-based)."""

    def __init__(self, at: int, when: str, error: Callable[[], BaseException]) -> None:
        self.at, self.when, self.error = at, when, error
        self.count = 0
        self.fired = False

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if self.when == "after" and sql.lstrip().upper().startswith(_CONTROL):
            # A BEGIN or SAVEPOINT that ran cannot fail afterwards; Django (rightly)
            # does not expect it to, so no real fault looks like that.
            return execute(sql, params, many, context)
        self.count += 1
        if self.count == self.at and self.when == "before":
            self.fired = True
            raise self.error()
        result = execute(sql, params, many, context)
        if self.count == self.at and self.when == "after":
            self.fired = True
            raise self.error()
        return result


def disk_full() -> BaseException:
    if connection.vendor == "postgresql":
        return OperationalError('could not extend file "base/16384/24576": No space left on device')
    return OperationalError("database or disk is full")


def sweep(
    operation: str,
    make_fault: Callable[[int], Any],
    expect: Callable[[BaseException], None],
) -> int:
    """Fault statement 1, 2, ... of ``operation`` until it succeeds; returns the count."""
    store = DjangoConditionalChatStore()
    p = f"{operation}-"
    seed(store, p)
    before = snapshot(store, p)
    at = 0
    while True:
        at += 1
        assert at < 200, "the operation never got through"
        fault = make_fault(at)
        try:
            with connection.execute_wrapper(fault):
                OPERATIONS[operation](store, p)
        except BaseException as exc:
            assert fault.fired, f"{operation}: failed without a fault: {exc!r}"
            expect(exc)
            assert snapshot(store, p) == before, f"{operation}: statement {at} left a change"
            assert_consistent()
            continue
        assert not fault.fired
        break
    assert snapshot(store, p) != before  # the last, unfaulted attempt did its work
    assert_consistent()
    return at - 1


def is_transcript_error_from_database(exc: BaseException) -> None:
    assert type(exc) is TranscriptError, repr(exc)
    assert isinstance(exc.__cause__, OperationalError)
    assert "database error" in str(exc)


@pytest.mark.parametrize("when", ["before", "after"])
def test_disk_full_at_any_statement_changes_nothing(when):
    """Every operation, each statement in turn raising the engine's disk-full error."""
    for operation in OPERATIONS:
        statements = sweep(
            operation, lambda at: Fault(at, when, disk_full), is_transcript_error_from_database
        )
        assert statements >= 1


class NotADatabaseError(Exception):
    pass


def test_other_errors_from_the_cursor_propagate_unchanged():
    """Only database errors become TranscriptError; anything else keeps its type."""

    def expect(exc: BaseException) -> None:
        assert type(exc) is NotADatabaseError

    for operation in ("create", "rewrite", "delete"):
        sweep(operation, lambda at: Fault(at, "before", NotADatabaseError), expect)


def test_failing_commit_changes_nothing():
    store = DjangoConditionalChatStore()
    wrapper = connections["default"]

    def commit() -> None:
        raise OperationalError("disk I/O error")

    for operation in ("create", "rewrite", "delete", "backfill"):
        p = f"{operation}-"
        seed(store, p)
        before = snapshot(store, p)
        wrapper._commit = commit  # type: ignore[method-assign]
        try:
            with pytest.raises(TranscriptError) as caught:
                OPERATIONS[operation](store, p)
        finally:
            del wrapper._commit
        assert isinstance(caught.value.__cause__, OperationalError)
        assert snapshot(store, p) == before
        OPERATIONS[operation](store, p)
        assert snapshot(store, p) != before
        assert_consistent()


# ---------------------------------------------------------------- PostgreSQL only


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend and statement_timeout are PostgreSQL's")


def terminate(pid: int) -> None:
    with other_connection() as killer:
        killer.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])


class Kill(Fault):
    """Before statement ``at``, another connection kills this one's backend."""

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        if self.count == self.at:
            self.fired = True
            terminate(context["connection"].connection.info.backend_pid)
        return execute(sql, params, many, context)


def is_dropped_connection(exc: BaseException) -> None:
    assert type(exc) is TranscriptError, repr(exc)
    assert isinstance(exc.__cause__, OperationalError)


def test_backend_killed_at_any_statement_changes_nothing(postgres):
    for operation in ("create", "rewrite", "delete"):  # (disk-full sweeps cover all six)
        statements = sweep(
            operation, lambda at: Kill(at, "before", disk_full), is_dropped_connection
        )
        assert statements >= 2  # a new chat: its lock and read, then its rows (one trip each)


def test_a_connection_killed_between_calls_recovers_on_the_next_call(postgres):
    """Outside a transaction a dead connection is closed at once, so only one call fails."""
    store = DjangoConditionalChatStore()
    seed(store, "")
    terminate(connection.connection.info.backend_pid)
    with pytest.raises(TranscriptError):
        store.transcript.search(ADA, "alpha")
    assert len(store.transcript.search(ADA, "alpha")) == 2
    terminate(connection.connection.info.backend_pid)
    with pytest.raises(TranscriptError):
        store.load_chat("c1")
    assert store.write_chat(chat("c3", "fresh"), expected_revision=0) == 1


@contextmanager
def statement_timeout(limit: str) -> Iterator[None]:
    """``statement_timeout`` on every statement of the session (a lock's wait too)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('statement_timeout', %s, false)", [limit])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET statement_timeout")


def test_statement_timeout_while_waiting_for_the_chat_lock(postgres):
    """A writer stuck behind another session's lock is cancelled cleanly, then succeeds."""
    store = DjangoConditionalChatStore()
    seed(store, "")
    before = snapshot(store, "")
    with other_connection() as holder:
        holder.execute("SELECT pg_advisory_lock(733120, hashtext('c1'))")
        for operation in ("rewrite", "delete"):  # each stopped by its statement_timeout
            with statement_timeout("200ms"), pytest.raises(TranscriptError) as caught:
                OPERATIONS[operation](store, "")
            assert "QueryCanceled" in repr(caught.value.__cause__.__cause__)
        assert snapshot(store, "") == before
        with statement_timeout("5s"):
            assert OPERATIONS["create"](store, "") == 1  # other chats are not blocked
        holder.execute("SELECT pg_advisory_unlock(733120, hashtext('c1'))")
    assert OPERATIONS["rewrite"](store, "") == 2
    assert_consistent()


# ---------------------------------------------------------------- backfill killed mid-run


def legacy_records(count: int) -> list[ChatRecord]:
    return [
        ChatRecord(
            f"legacy-{n:04d}",
            {"userId": f"u{n % 7}"},
            [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": f"question {n} about topic{n % 13}"},
                {"role": "assistant", "content": [{"type": "text", "text": f"answer{n} shared"}]},
            ],
            message_ids=["sys", None, None],
            updated_at=1_700_000_000_000 + n,
        )
        for n in range(count)
    ]


def state(using: str) -> list[Any]:
    """The app's data without surrogate keys: chats, scope rows, messages, search data."""
    chats = sorted(
        Chat.objects.using(using).values_list(
            "chat_id", "revision", "is_indexed", "indexed_count", "message_count", "scope"
        ),
        key=str,
    )
    messages = sorted(
        Message.objects.using(using).values_list(
            "chat__chat_id",
            "position",
            "message_id",
            "payload",
            "digest",
            "visible_position",
            "search_text",
            "has_terms",
        ),
        key=str,
    )
    scopes = sorted(ChatScope.objects.using(using).values_list("chat__chat_id", "key", "value"))
    vectors: list[Any] = []
    if connections[using].vendor == "postgresql":
        with connections[using].cursor() as cursor:
            cursor.execute(
                "SELECT c.chat_id, m.position, m.search_vector::text FROM "
                "deuz_transcripts_message m JOIN deuz_transcripts_chat c ON c.id = m.chat_id "
                "ORDER BY 1, 2"
            )
            vectors = cursor.fetchall()
    return [chats, messages, scopes, vectors]


def searches(using: str) -> list[Any]:
    index = DjangoConditionalChatStore(using).transcript
    return [
        [
            (h.chat_id, h.message_id, round(h.score, 9))
            for h in index.search(scope, query, limit=500)
        ]
        for scope in ({}, {"userId": "u3"})
        for query in ("question", "topic5 answer17", "shared alpha", "brief")
    ]


def manage(*args: str, url: str) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
    env.pop("DEUZ_REQUIRE_POSTGRES", None)
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "backfill_transcripts", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(*args: str, url: str) -> str:
    process = manage(*args, url=url)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, out + err
    return out


def backfill_killed_and_rerun(using: str, url: str) -> None:
    records = legacy_records(100)
    legacy = DjangoChatStore(using)
    with transaction.atomic(using=using):
        for record in records:
            legacy.save_chat(record)
    store = DjangoConditionalChatStore(using)
    store.write_chat(chat("stored", "alpha stored"), expected_revision=0)
    store.delete_chat("legacy-0003")  # tombstoned: no run may index it
    legacy.save_chat(records[3])  # a stale legacy copy of the deleted chat

    run = manage("--batch-size", "5", url=url)
    for line in run.stderr:  # well into the run, then SIGKILL
        if line.startswith("legacy:") and int(line.split(":")[1].split("/")[0]) >= 20:
            break
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=30)
    assert run.returncode == -signal.SIGKILL
    assert 0 < Chat.objects.using(using).filter(revision=0).count() < 99  # stopped midway

    finish("--batch-size", "7", url=url)
    assert "no problems found" in finish("--verify", url=url)
    assert Backfill(using).run().indexed == 0  # nothing left to do
    interrupted = state(using), searches(using)

    # The uninterrupted run, on the same data: drop what backfills wrote, run once.
    with transaction.atomic(using=using):
        for chat_id in (
            Chat.objects.using(using).filter(revision=0).values_list("chat_id", flat=True)
        ):
            store.transcript.remove(chat_id)
    assert Chat.objects.using(using).filter(revision=0).count() == 0
    assert Backfill(using).run().indexed == 99
    assert (state(using), searches(using)) == interrupted

    memory = InMemoryTranscriptIndex()  # and that state is the right one
    for record in records:
        if record.chat_id != "legacy-0003":
            memory.index(record)
    memory.index(chat("stored", "alpha stored"))
    assert searches(using) == [
        [
            (h.chat_id, h.message_id, round(h.score, 9))
            for h in memory.search(scope, query, limit=500)
        ]
        for scope in ({}, {"userId": "u3"})
        for query in ("question", "topic5 answer17", "shared alpha", "brief")
    ]
    assert_consistent(using)


def test_backfill_killed_mid_run_and_rerun_postgres(postgres):
    settings = connection.settings_dict
    host, port = settings["HOST"] or "127.0.0.1", settings["PORT"] or 5432
    backfill_killed_and_rerun(
        "default", f"postgres://{settings['USER']}@{host}:{port}/{settings['NAME']}"
    )


def test_backfill_killed_mid_run_and_rerun_sqlite(tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite file variant runs in the SQLite run")
    with sqlite_file_database(tmp_path) as database:
        backfill_killed_and_rerun(database.alias, f"sqlite:///{database.path}")
