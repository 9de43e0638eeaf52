"""PostgreSQL: a term past the counted-term threshold that the planner's statistics leave
out is marked by the first search that counts it in GIN, then stamped and counted by the
writes' folds, and read from the stored counts by the searches after (``counts.notes``).
Where nothing may be written nothing is, nobody waits, and the search answers."""

from __future__ import annotations

from collections.abc import Iterator
from unittest import mock

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from deuz_transcripts.backends.postgresql.counts import choice, notes
from deuz_transcripts.models import CountedTenant, CountedTerm
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.test_count_choice import (
    counting,
    due_write,
    holding,
    thresholds,
    write_until_counted,
)
from tests.test_count_deltas import other_connection
from tests.test_search_statements import big_plans, sent, statements_of
from tests.test_term_counts import chat, drift, stored, tenant_key

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's counts"),
    pytest.mark.usefixtures("big_plans"),  # n_t counted in GIN, as at production size
]

__all__ = ["big_plans"]  # a fixture

#: Two words in 30 messages each (past a threshold of 20), one in a single message.
QUERY = "zephyr note solo"


@pytest.fixture(autouse=True)
def fresh_notes() -> Iterator[None]:
    notes.forget_notes()
    yield
    notes.forget_notes()


@pytest.fixture
def store() -> Iterator[DjangoConditionalChatStore]:
    """Six small users' chats; terms counted from 20 rows, no tenant of its own counts,
    and no term counted or marked yet (no ``ANALYZE`` ran: the planner lists none)."""
    with tenant_key("userId"), thresholds(terms=20, tenants=10**9):
        store = DjangoConditionalChatStore()
        for n in range(6):
            texts = [f"zephyr note {n} {k}" for k in range(5)]
            store.write_chat(chat(f"s{n}", f"u{n}", *texts), expected_revision=0)
        store.write_chat(chat("solo", "u0", "solo"), expected_revision=0)
        assert not counting() and not CountedTerm.objects.exists()
        yield store


def gin_counted(statements: list[str], word: str) -> bool:
    """Whether a statement counts ``word``'s rows in GIN."""
    return any(
        statement.startswith("SELECT count(*) FROM") and f"''{word}''" in statement
        for statement in statements
    )


def marks_in(statements: list[str]) -> list[str]:
    return [statement for statement in statements if statement.startswith("INSERT INTO")]


def test_a_term_a_search_counts_in_gin_is_marked_then_counted_by_the_folds(store):
    """The search counts ``zephyr`` and ``note`` in GIN (30 rows each) and marks them in
    one statement after its ``COMMIT``; ``solo`` (1 row) is not. A second search sends
    what the first did, without the mark; after the folds, the counts are exact and the
    next search reads them instead of counting."""
    with sent() as first:
        page = store.transcript.search_page({}, QUERY)
    statements = statements_of(first)
    assert gin_counted(statements, "zephyr") and gin_counted(statements, "solo")
    assert first[-1] == [notes.mark_sql().replace("%s", "'{note,zephyr}'")]
    assert statements.index("COMMIT") == len(statements) - 2  # after the search's end
    assert counting() == {"note": False, "zephyr": False}
    with sent() as second:
        again = store.transcript.search_page({}, QUERY)
    assert second == first[:-1] and again.hits == page.hits and again.total == page.total

    due_write(store, "w1", "u7", "filler")  # a fold of every key stamps the marks
    assert counting() == {"note": True, "zephyr": True}
    write_until_counted(store, "zephyr", "u7")
    assert CountedTerm.objects.filter(lexeme="note").exists() and not counting()
    assert stored("zephyr") == holding("zephyr") == 30 and stored("note") == 30
    assert drift() == []
    call_command("backfill_transcripts", "--verify", verbosity=0)

    with sent() as after:
        counted = store.transcript.search_page({}, QUERY)
    statements = statements_of(after)
    assert not gin_counted(statements, "zephyr") and not gin_counted(statements, "note")
    assert gin_counted(statements, "solo") and not marks_in(statements)
    assert [hit.chat_id for hit in counted.hits] == [hit.chat_id for hit in page.hits]
    assert counted.total == page.total


def test_a_search_in_the_callers_transaction_marks_once_it_commits(store):
    """Nothing is written in the caller's transaction (a read-only one searches as any
    other); the mark follows its commit, in a transaction of its own, and a rolled back
    one leaves none."""
    with transaction.atomic():
        store.transcript.search_page({}, QUERY)
        transaction.set_rollback(True)
    assert not counting()
    notes.forget_notes()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION READ ONLY")
        with sent() as trips:
            store.transcript.search_page({}, QUERY)
        assert not marks_in(statements_of(trips)) and not counting()
    assert counting() == {"note": False, "zephyr": False}


def test_a_search_in_a_transaction_managed_by_hand_marks_nothing(store):
    """Autocommit off: nothing says when the caller's transaction ends, so no mark."""
    transaction.set_autocommit(False)
    try:
        with sent() as trips:
            store.transcript.search_page({}, QUERY)
        transaction.commit()
    finally:
        transaction.set_autocommit(True)
    assert not marks_in(statements_of(trips)) and not counting()


def test_a_read_only_session_searches_and_marks_nothing(store):
    """``default_transaction_read_only`` (as on a hot standby, which reports
    ``in_hot_standby``): the server reported it, so no mark is even tried."""
    with connection.cursor() as cursor:
        cursor.execute("SET default_transaction_read_only = on")
    try:
        with sent() as trips:
            page = store.transcript.search_page({}, QUERY)
        assert page.total == 30 + 1 and trips[-1][-1] == "COMMIT"
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET default_transaction_read_only")
    assert not counting() and not notes._refused_until


def test_a_mark_that_fails_is_skipped_and_not_tried_again_for_a_while(store):
    """An error (here a statement the server rejects) never reaches the search; that
    database is not tried again until ``NOTE_AGAIN_SECONDS`` have passed."""
    with mock.patch.object(notes, "mark_sql", return_value="INSERT INTO nowhere VALUES (%s)"):
        page = store.transcript.search_page({}, QUERY)
    assert page.total == 31 and not counting() and "default" in notes._refused_until
    with sent() as trips:
        store.transcript.search_page({}, QUERY + " other")
    assert not marks_in(statements_of(trips)) and not counting()


def test_a_mark_skips_while_a_choice_holds_its_lock_instead_of_waiting(store):
    """A choice (another write's fold) holds ``CHOICE_LOCK`` alone: the mark is skipped at
    once (a lock timeout would have been an error, remembered as one), not waited for."""
    with other_connection() as other, other.cursor() as cursor:
        cursor.execute(f"SELECT pg_advisory_xact_lock({choice.CHOICE_LOCK})")
        with connection.cursor() as mine:
            mine.execute("SET lock_timeout = '2s'")
        try:
            store.transcript.search_page({}, QUERY)
        finally:
            with connection.cursor() as mine:
                mine.execute("RESET lock_timeout")
        other.rollback()
    assert not counting() and not notes._refused_until


def test_a_counted_tenants_search_marks_and_a_small_tenants_does_not():
    """``big`` has counts of its own: its search marks the words it counts in GIN past
    the threshold. ``small`` (N under the tenant threshold, no counts of its own) counts
    every word in GIN however many are counted: its search marks nothing."""
    with tenant_key("userId"), thresholds(terms=20, tenants=40):
        store = DjangoConditionalChatStore()
        for n in range(9):
            texts = [f"zephyr note {n} {k}" for k in range(5)]
            store.write_chat(chat(f"b{n}", "big", *texts), expected_revision=0)
        store.write_chat(chat("small", "small", *["quill"] * 25), expected_revision=0)
        due_write(store, "w0", "other", "filler")  # a fold of every key: big is counted
        assert CountedTenant.objects.filter(tenant="big").exists()
        assert not CountedTenant.objects.filter(tenant="small").exists()
        assert not counting()
        with sent() as trips:
            assert store.transcript.search_page({"userId": "small"}, "quill").total == 25
        assert gin_counted(statements_of(trips), "quill") and not marks_in(statements_of(trips))
        assert not counting()
        with sent() as trips:
            assert store.transcript.search_page({"userId": "big"}, "zephyr quill").total == 45
        assert gin_counted(statements_of(trips), "zephyr") and marks_in(statements_of(trips))
        assert counting() == {"zephyr": False}  # quill: 0 rows in big
