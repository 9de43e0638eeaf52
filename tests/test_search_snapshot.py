"""A search reads one snapshot: a write that commits between two of its reads is seen by
none of them, so a page's total is never short of its hits (the soak's ``count``
invariant, broken under load by plans that counted in one statement and read the page in
another: on PostgreSQL under ``READ COMMITTED``, and on SQLite, whose statements each read
their own snapshot outside a transaction)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections, transaction

from bench.statements import split
from deuz_transcripts import ChatRecord
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.sent_statements import reads as reads_of
from tests.sql_support import FileDatabase, sqlite_file_database

ADA = {"userId": "ada"}


def chat(chat_id: str, hours: int) -> ChatRecord:
    return ChatRecord(
        chat_id=chat_id,
        scope=ADA,
        messages=[{"role": "user", "content": f"quokka sighting {chat_id}"}],
        updated_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=hours),
    )


def write_elsewhere(record: ChatRecord, database: FileDatabase | None) -> None:
    """``record`` written and committed by another thread, on its own connection."""
    failures: list[BaseException] = []

    def write() -> None:
        using = database.attach() if database is not None else "default"
        try:
            DjangoConditionalChatStore(using).write_chat(record, expected_revision=0)
        except BaseException as exc:  # reported in the test's thread
            failures.append(exc)
        finally:
            if database is not None:
                database.detach()
            else:
                connections.close_all()

    thread = threading.Thread(target=write)
    thread.start()
    thread.join()
    assert not failures, failures


@contextmanager
def engine_database(engine: str, tmp_path: Path) -> Iterator[FileDatabase | None]:
    """``None``: the suite's PostgreSQL database; else a SQLite file in WAL mode (the
    suite's own SQLite database is in memory, where tables lock, not snapshots)."""
    if engine == "postgresql":
        if connection.vendor != "postgresql":
            pytest.skip("the PostgreSQL run of the suite")
        yield None
        return
    if connection.vendor != "sqlite":
        pytest.skip("SQLite files run in the SQLite run of the suite")
    with sqlite_file_database(
        tmp_path, timeout=2.0, init_command="PRAGMA journal_mode=WAL"
    ) as database:
        yield database


def after_first_read(write: Callable[[], None], reads: list[str]) -> Callable[..., Any]:
    def between(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        if reads_of(split(sql)):  # not transaction control or settings alone
            reads.append(sql)
            if len(reads) == 1:  # after the search's first read, before its others
                write()
        return result

    return between


@pytest.mark.parametrize("engine", ["postgresql", "sqlite"])
@pytest.mark.django_db(transaction=True)
def test_a_write_committed_between_a_searchs_reads_is_seen_by_none(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with engine_database(engine, tmp_path) as database:
        using = "default" if database is None else database.alias
        store = DjangoConditionalChatStore(using)
        for number in range(6):
            store.write_chat(chat(f"c{number}", number), expected_revision=0)
        # masks counted first, then the page's rows read: two reads at least
        monkeypatch.setattr(
            policy,
            "FORCED",
            forced_policies(single_statement_max=0, lexeme_scope_min=0, small_read_rows=10**9),
        )
        reads: list[str] = []
        newest = after_first_read(lambda: write_elsewhere(chat("newest", 100), database), reads)
        with connections[using].execute_wrapper(newest):
            page = store.transcript.search_page(ADA, "quokka", limit=10)
        assert len(reads) > 1
        assert sorted(hit.chat_id for hit in page.hits) == [f"c{n}" for n in range(6)]
        assert page.total == 6
        after = store.transcript.search_page(ADA, "quokka", limit=10)
        assert after.total == 7 and after.hits[0].chat_id == "newest"


@pytest.mark.django_db(transaction=True)
def test_a_sqlite_search_opens_a_read_transaction_or_reads_the_callers(tmp_path: Path) -> None:
    """Its own transaction is deferred whatever ``transaction_mode`` says (the suite's is
    ``IMMEDIATE``; the test above would wait on the write lock otherwise) and ends with
    the search; inside the caller's transaction the search reads that one, uncommitted
    writes included."""
    with engine_database("sqlite", tmp_path) as database:
        assert database is not None
        using = database.alias
        store = DjangoConditionalChatStore(using)
        store.write_chat(chat("c0", 0), expected_revision=0)
        reads: list[str] = []
        begun: list[bool] = []
        peek = after_first_read(lambda: begun.append(connections[using].in_atomic_block), reads)
        with connections[using].execute_wrapper(peek):
            assert store.transcript.search_page(ADA, "quokka", limit=10).total == 1
        assert begun == [True]
        assert connections[using].transaction_mode == "IMMEDIATE"
        assert not connections[using].in_atomic_block
        with transaction.atomic(using=using):
            store.write_chat(chat("c1", 1), expected_revision=0)
            page = store.transcript.search_page(ADA, "quokka", limit=10)
            assert page.total == 2 and page.hits[0].chat_id == "c1"
        write_elsewhere(chat("c2", 2), database)  # no lock left behind
        assert store.transcript.search_page(ADA, "quokka", limit=10).total == 3
