"""PostgreSQL's stored term counts as appended deltas (``TermCountDelta``): writers of one
counted tenant never wait for each other, folds neither wait nor lose a delta, every
snapshot reads exactly its counts, and ``verify``, ``--fix``, a partition conversion and
migration 0009 both ways (``tests/test_migrations.py``) keep them true."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction

from deuz_transcripts.backends.postgresql.counts.deltas import (
    FOLD_EVERY,
    FOLD_FUNCTION,
    counts_relation,
    fold_function_sql,
    sequence_name,
)
from deuz_transcripts.backends.postgresql.partitions import partition_info, partition_messages
from deuz_transcripts.models import CountedTerm, TermCount, TermCountDelta
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.verify import Verifier
from tests.test_term_counts import chat, count_terms, drift, stored, tenant_key

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's counts"),
]


@contextmanager
def other_connection() -> Iterator[psycopg.Connection[Any]]:
    """A connection of its own to the test database (a transaction open until closed)."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params) as other:
        yield other


def fold(cursor: Any, lexemes: list[str] | None = None, tenant: str = "ada") -> int:
    """Fold the pending deltas of ``lexemes`` in ``tenant`` (role ``user``), or of every key."""
    if lexemes is None:
        cursor.execute(f"SELECT {FOLD_FUNCTION}(NULL, NULL, NULL)")
    else:
        cursor.execute(
            f"SELECT {FOLD_FUNCTION}(%s::text[], %s::text[], %s::text[])",
            [lexemes, [tenant] * len(lexemes), ["user"] * len(lexemes)],
        )
    return int(cursor.fetchone()[0])


def counted_tenant_with_pending_deltas(store: DjangoConditionalChatStore) -> None:
    """Tenant ``ada`` counted (terms ``alpha``, ``beta``), and deltas pending for it."""
    store.write_chat(chat("seed", "ada", "alpha beta", "alpha"), expected_revision=0)
    count_terms(1)
    assert set(CountedTerm.objects.values_list("lexeme", flat=True)) == {"alpha", "beta"}
    with connection.cursor() as cursor:
        # the serials run on across tests: no fold falls due in this test's few writes
        cursor.execute(
            f"SELECT setval(%s, (last_value / {FOLD_EVERY} + 1) * {FOLD_EVERY} + 1) "
            f"FROM {sequence_name()}",
            [sequence_name()],
        )
    store.write_chat(chat("more", "ada", "alpha", "beta"), expected_revision=0)
    assert TermCountDelta.objects.filter(tenant="ada").exists()


def test_a_writer_of_a_counted_tenant_commits_while_another_holds_its_write_and_fold():
    """One transaction writes a chat of tenant ``ada`` and folds (holding every key it
    took, and the count rows it changed, to COMMIT); a writer of another chat of ``ada``
    writes, folds and commits meanwhile, with no lock wait allowed (``lock_timeout``:
    the locked counts' advisory lock per tenant made it wait for the first)."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        counted_tenant_with_pending_deltas(store)
        written, release = threading.Event(), threading.Event()
        errors: list[BaseException] = []

        def first() -> None:
            try:
                with transaction.atomic(), connection.cursor() as cursor:
                    store.write_chat(chat("held", "ada", "alpha beta"), expected_revision=0)
                    assert fold(cursor) > 0  # the committed deltas, and its own
                    written.set()
                    assert release.wait(30)
            except BaseException as exc:
                errors.append(exc)
                written.set()
            finally:
                connection.close()

        thread = threading.Thread(target=first, daemon=True)
        thread.start()
        assert written.wait(30) and not errors
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '2s'")
            store.write_chat(chat("other", "ada", "alpha", "beta alpha"), expected_revision=0)
            assert fold(cursor) == 0  # every key is the first one's until it commits
        # committed while the first transaction is still open
        assert stored("alpha", "ada") == 5 and stored("", "ada") == 6
        release.set()
        thread.join(30)
        assert not errors
        assert stored("alpha", "ada") == 6 and stored("", "ada") == 7
        assert drift() == []


def test_every_snapshot_reads_exactly_its_counts_across_a_fold():
    """A REPEATABLE READ reader sums rows and deltas: a fold committed after its snapshot
    (deltas deleted, rows added) changes nothing it reads; a new snapshot reads the
    same counts from the rows."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        counted_tenant_with_pending_deltas(store)
        query = (
            f"SELECT t.lexeme, sum(t.rows) FROM {counts_relation()} t "
            "WHERE t.tenant = 'ada' GROUP BY t.lexeme ORDER BY t.lexeme"
        )
        with other_connection() as reader:
            reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            before = reader.execute(query).fetchall()
            assert before == [("", 4), ("alpha", 3), ("beta", 2)]
            with connection.cursor() as cursor:
                assert fold(cursor) > 0  # autocommit: committed at once
            assert not TermCountDelta.objects.exists()
            store.write_chat(chat("late", "ada", "alpha"), expected_revision=0)
            assert reader.execute(query).fetchall() == before
            reader.execute("COMMIT")
            assert reader.execute(query).fetchall() == [("", 5), ("alpha", 4), ("beta", 2)]
        assert drift() == []


def test_concurrent_folds_skip_what_the_other_holds_and_lose_no_delta():
    """Two open transactions fold: the second skips the keys the first took (no wait)
    and folds the others; whichever commits, every count stays exact."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        counted_tenant_with_pending_deltas(store)
        store.write_chat(chat("third", "ada", "beta"), expected_revision=0)
        pending = TermCountDelta.objects.count()
        with other_connection() as first, other_connection() as second:
            first.execute("BEGIN")
            assert fold(first.cursor(), ["alpha"]) == 1
            second.execute("BEGIN")
            second.execute("SET LOCAL lock_timeout = '2s'")
            assert fold(second.cursor()) == pending - 1  # all but alpha's
            assert fold(second.cursor(), ["alpha"]) == 0
            second.execute("COMMIT")
            assert stored("alpha", "ada") == 3 and stored("beta", "ada") == 3
            first.execute("COMMIT")
        assert not TermCountDelta.objects.exists()
        assert stored("alpha", "ada") == 3 and stored("beta", "ada") == 3
        assert drift() == []


def test_many_writers_and_folds_of_one_tenant_end_exact():
    """Eight threads write, rewrite and delete chats of one counted tenant and fold after
    each write: no deadlock, no lost delta, no count row left at 0."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        counted_tenant_with_pending_deltas(store)
        from tests.sql_support import run_threads

        def work(n: int) -> None:
            for k in range(4):
                chat_id = f"t{n}-{k}"
                revision = store.write_chat(
                    chat(chat_id, "ada", f"alpha w{n}", "beta"), expected_revision=0
                )
                with connection.cursor() as cursor:
                    fold(cursor)
                store.write_chat(chat(chat_id, "ada", "alpha"), expected_revision=revision)
                if k % 2:
                    store.delete_chat(chat_id)

        results = run_threads(8, work)
        assert [r for r in results if r is not None] == []
        assert drift() == []
        assert stored("alpha", "ada") == 8 * 2 + 3 and stored("", "ada") == 8 * 2 + 4
        assert not TermCount.objects.filter(rows__lte=0).exists()


def test_a_write_past_a_multiple_of_fold_every_folds_every_pending_delta():
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        counted_tenant_with_pending_deltas(store)
        with connection.cursor() as cursor:
            cursor.execute("SELECT setval(%s, %s)", [sequence_name(), 1000 * FOLD_EVERY - 3])
        # bob is no counted tenant: N under bob, alpha under "", two deltas short of it
        store.write_chat(chat("one", "bob", "alpha"), expected_revision=0)
        assert TermCountDelta.objects.count() > 1
        store.write_chat(chat("two", "bob", "alpha"), expected_revision=0)  # takes the multiple
        assert not TermCountDelta.objects.exists()
        assert stored("alpha", "ada") == 3 and stored("", "bob") == 2 and drift() == []


def _fold_locks(cursor: Any) -> int:
    """The fold locks this connection holds (``pg_try_advisory_xact_lock(733122, key)``)."""
    cursor.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 733122 "
        "AND pid = pg_backend_pid()"
    )
    return int(cursor.fetchone()[0])


def test_a_fold_of_every_key_claims_at_most_its_share_of_a_backlog():
    """A backlog of deltas (a tenant given its own counts appends one per term and role:
    15,918 at 1M) is folded a claim at a time: a fold of every key takes at most that
    many delta rows, so at most that many fold locks (a lock per key of the whole
    backlog ran the server's shared lock table out and failed the write that folded),
    and the next folds take the rest; every count stays exact."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        counted_tenant_with_pending_deltas(store)
        store.write_chat(chat("third", "ada", "alpha beta", "beta"), expected_revision=0)
        pending = TermCountDelta.objects.count()
        assert pending > 2
        want = (stored("alpha", "ada"), stored("beta", "ada"), stored("", "ada"))
        try:
            with connection.cursor() as cursor:
                cursor.execute(fold_function_sql(claim_max=2))
                folds = []
                while pending:
                    with transaction.atomic():
                        folds.append(fold(cursor))
                        assert _fold_locks(cursor) <= 2
                    assert 0 < folds[-1] <= 2
                    assert (
                        stored("alpha", "ada"),
                        stored("beta", "ada"),
                        stored("", "ada"),
                    ) == want
                    pending -= folds[-1]
                    assert TermCountDelta.objects.count() == pending
                assert len(folds) >= 2 and drift() == []
        finally:
            with connection.cursor() as cursor:
                cursor.execute(fold_function_sql())


def test_a_delete_takes_a_word_only_it_held_out_of_every_count_table():
    """The privacy delete: its own keys are folded at once, so neither the deltas nor
    ``CountedTerm`` keep a counted word no remaining message holds."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        store.write_chat(chat("c1", "ada", "zebulon alpha"), expected_revision=0)
        store.write_chat(chat("c2", "ada", "alpha"), expected_revision=0)
        count_terms(1)
        store.write_chat(chat("c3", "ada", "zebulon"), expected_revision=0)
        assert TermCountDelta.objects.filter(lexeme="zebulon").exists()
        store.delete_chat("c1")
        store.delete_chat("c3")
        for model in (TermCount, TermCountDelta, CountedTerm):
            assert not model.objects.filter(lexeme="zebulon").exists(), model
        assert stored("alpha", "ada") == 1 and drift() == []


def test_verify_finds_a_wrong_delta_and_fix_rebuilds_without_one():
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        counted_tenant_with_pending_deltas(store)
        TermCountDelta.objects.filter(lexeme="alpha").update(rows=5)
        assert [p.kind for p in Verifier().problems()] == ["counts"]
        with pytest.raises(CommandError):
            call_command("backfill_transcripts", "--verify", stdout=mock.Mock())
        call_command("backfill_transcripts", "--fix", stdout=mock.Mock())
        assert not TermCountDelta.objects.exists()
        assert stored("alpha", "ada") == 3 and drift() == []


def test_count_terms_folds_the_pending_deltas():
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        counted_tenant_with_pending_deltas(store)
        call_command("backfill_transcripts", "--count-terms", stdout=mock.Mock())
        assert not TermCountDelta.objects.exists()
        assert drift() == []


@pytest.mark.django_db  # the conversion is rolled back with the test's transaction
def test_a_partition_conversion_keeps_the_deltas_and_the_triggers():
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        counted_tenant_with_pending_deltas(store)
        if partition_info("default") is None:
            partition_messages("default", 3)
        assert TermCountDelta.objects.exists() and drift() == []
        store.write_chat(chat("after", "ada", "alpha beta"), expected_revision=0)
        store.delete_chat("more")
        assert stored("alpha", "ada") == 3 and stored("", "ada") == 3
        with connection.cursor() as cursor:
            fold(cursor)
        assert drift() == []
