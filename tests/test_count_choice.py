"""PostgreSQL's counted terms and tenants follow the data with no command run: writes'
folds give a tenant past the threshold its own counts and count a term the planner's
statistics find common, exactly, while other connections write (``counts.choice``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.management import call_command
from django.db import connection

from deuz_transcripts.backends.postgresql.counts import choice
from deuz_transcripts.backends.postgresql.counts.deltas import FOLD_EVERY, sequence_name
from deuz_transcripts.backends.postgresql.counts.stored import replace_function
from deuz_transcripts.models import (
    Chat,
    CountedTenant,
    CountedTerm,
    CountingTerm,
    Message,
    TermCount,
    TermCountDelta,
)
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.test_count_deltas import other_connection
from tests.test_term_counts import chat, count_terms, drift, stored, tenant_key

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's counts"),
]

MESSAGES = Message._meta.db_table


@contextmanager
def thresholds(terms: int, tenants: int) -> Iterator[None]:
    """The folds' thresholds lowered (their functions created again), restored after."""
    saved = choice.COUNTED_MIN_ROWS, choice.COUNTED_TENANT_MIN_ROWS
    choice.COUNTED_MIN_ROWS, choice.COUNTED_TENANT_MIN_ROWS = terms, tenants
    try:
        with connection.cursor() as cursor:
            replace_function(cursor)
        yield
    finally:
        choice.COUNTED_MIN_ROWS, choice.COUNTED_TENANT_MIN_ROWS = saved
        with connection.cursor() as cursor:
            replace_function(cursor)


def due_write(store: DjangoConditionalChatStore, chat_id: str, user: str, *texts: str) -> None:
    """A write whose deltas pass a multiple of ``FOLD_EVERY`` (a fold of every key)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(%s)", [sequence_name()])
        serial = int(cursor.fetchone()[0])
        cursor.execute(
            "SELECT setval(%s, %s)", [sequence_name(), (serial // FOLD_EVERY + 1) * FOLD_EVERY - 1]
        )
    store.write_chat(chat(chat_id, user, *texts), expected_revision=0)


def write_until_counted(store: DjangoConditionalChatStore, lexeme: str, user: str) -> int:
    """Writes past a fold until ``lexeme`` is counted; how many. Every transaction of the
    database older than the term's stamp must end first."""
    for n in range(1, 600):
        due_write(store, f"until-{lexeme}-{n}", user, "filler")
        if CountedTerm.objects.filter(lexeme=lexeme).exists():
            return n
        time.sleep(0.05)
    raise AssertionError(f"{lexeme} never counted: a transaction stays open on the server")


def analyze() -> None:
    """What autovacuum's ANALYZE does by itself once enough rows changed."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {MESSAGES}")


def zephyr_in_30_messages(store: DjangoConditionalChatStore) -> int:
    """Six chats of ada's whose 30 messages hold "zephyr", analysed so that the next fold
    marks it; the first chat's key."""
    for n in range(6):
        store.write_chat(
            chat(f"s{n}", "ada", *[f"zephyr {n} {k}" for k in range(5)]), expected_revision=0
        )
    analyze()
    return Chat.objects.get(chat_id="s0").pk


def holding(lexeme: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {MESSAGES} WHERE search_vector @@ %s::tsquery", [lexeme]
        )
        return int(cursor.fetchone()[0])


def counting() -> dict[str, bool]:
    return dict(CountingTerm.objects.values_list("lexeme", "observed"))


def test_a_term_becomes_counted_after_enough_writes_with_no_command_run():
    """2,050 messages of small tenants hold ``zephyr``: after autovacuum's ANALYZE, three
    writes past a fold mark it, stamp it and count it, exactly (``--verify`` agrees), and
    searches read its stored count from then on."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        for n in range(205):
            texts = [f"zephyr note {n} part {k}" for k in range(10)]
            store.write_chat(chat(f"z{n}", f"u{n % 7}", *texts), expected_revision=0)
        assert choice.COUNTED_MIN_ROWS == 2_000 and holding("zephyr") == 2_050
        assert not CountedTerm.objects.filter(lexeme="zephyr").exists()
        analyze()
        due_write(store, "w1", "u1", "zephyr one")
        assert counting().get("zephyr") is False  # marked: writers count it from now on
        due_write(store, "w2", "u2", "zephyr two")
        assert counting().get("zephyr") is True  # seen by a later transaction
        due_write(store, "w3", "u3", "zephyr three")
        write_until_counted(store, "zephyr", "u3")
        assert "zephyr" not in counting()
        assert stored("zephyr") == holding("zephyr") == 2_053
        assert drift() == []
        call_command("backfill_transcripts", "--verify", verbosity=0)
        store.write_chat(chat("w4", "u4", "zephyr four"), expected_revision=0)
        assert stored("zephyr") == 2_054 and drift() == []


def test_a_writer_that_missed_the_mark_holds_the_count_back_until_it_ends():
    """The race: another connection's write decided which terms it counts before the mark
    committed and is still open; the term is not counted until it ends, and then its row
    is in the count."""
    with tenant_key("userId"), thresholds(terms=20, tenants=10**9):
        store = DjangoConditionalChatStore()
        chat_pk = zephyr_in_30_messages(store)
        with other_connection() as other, other.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {MESSAGES} (chat_id, position, message_id, role, payload, "
                "digest, visible_position, has_terms, tenant, search_vector) "
                "VALUES (%s, 99, 'late', 'user', '{}', '', 99, TRUE, 'ada', "
                "'zephyr late'::tsvector)",
                [chat_pk],
            )  # its trigger ran: zephyr was not counted, so no delta
            due_write(store, "w1", "bob", "zephyr one")
            due_write(store, "w2", "bob", "zephyr two")
            assert counting().get("zephyr") is True
            due_write(store, "w3", "bob", "zephyr three")
            due_write(store, "w4", "bob", "zephyr four")
            assert counting().get("zephyr") is True  # the open writer is older than the stamp
            assert not CountedTerm.objects.filter(lexeme="zephyr").exists()
            other.commit()
        due_write(store, "w5", "bob", "zephyr five")
        write_until_counted(store, "zephyr", "bob")
        assert stored("zephyr") == holding("zephyr") == 30 + 1 + 5
        assert drift() == []


def test_a_repeatable_read_writer_whose_snapshot_predates_the_mark_holds_the_count_back():
    """A ``REPEATABLE READ`` transaction took its snapshot before the mark and writes after
    the stamp (its transaction id is younger than the stamp, its trigger still reads the
    terms as they were): the term waits for it too, and its row is in the count."""
    with tenant_key("userId"), thresholds(terms=20, tenants=10**9):
        store = DjangoConditionalChatStore()
        chat_pk = zephyr_in_30_messages(store)
        with other_connection() as other, other.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute(f"SELECT count(*) FROM {MESSAGES}")  # its snapshot
            due_write(store, "w1", "bob", "zephyr one")
            due_write(store, "w2", "bob", "zephyr two")
            assert counting().get("zephyr") is True
            cursor.execute(
                f"INSERT INTO {MESSAGES} (chat_id, position, message_id, role, payload, "
                "digest, visible_position, has_terms, tenant, search_vector) "
                "VALUES (%s, 99, 'late', 'user', '{}', '', 99, TRUE, 'ada', "
                "'zephyr late'::tsvector)",
                [chat_pk],
            )  # its trigger reads the terms of its snapshot: no delta for zephyr
            due_write(store, "w3", "bob", "zephyr three")
            due_write(store, "w4", "bob", "zephyr four")
            assert not CountedTerm.objects.filter(lexeme="zephyr").exists()
            other.commit()
        write_until_counted(store, "zephyr", "bob")
        assert stored("zephyr") == holding("zephyr") == 30 + 1 + 4
        assert drift() == []


def test_a_tenant_past_its_threshold_gets_its_own_counts_while_another_writes_it():
    """``bob`` grows past the tenant threshold: a fold gives him his own counts; a write
    of his open in another connection meanwhile (its delta names him) lands in them."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        store.write_chat(chat("seed", "ada", "alpha beta", "alpha"), expected_revision=0)
        count_terms(1, tenant_min_rows=10**9)
        assert not CountedTenant.objects.exists()
        with thresholds(terms=10**9, tenants=8):
            for n in range(3):
                store.write_chat(chat(f"b{n}", "bob", "alpha", "beta gamma"), expected_revision=0)
            chat_pk = Chat.objects.get(chat_id="b0").pk
            with other_connection() as other, other.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {MESSAGES} (chat_id, position, message_id, role, payload, "
                    "digest, visible_position, has_terms, tenant, search_vector) "
                    "VALUES (%s, 99, 'late', 'user', '{}', '', 99, TRUE, 'bob', "
                    "'alpha late'::tsvector)",
                    [chat_pk],
                )
                due_write(store, "b3", "bob", "alpha", "beta")  # N 8: past the threshold
                assert CountedTenant.objects.filter(tenant="bob").exists()
                assert stored("alpha", "bob") == 4 and stored("beta", "bob") == 4
                assert stored("alpha", "") == 2 and drift() == []
                other.commit()
            assert stored("alpha", "bob") == 5 and stored("", "bob") == 9
            assert stored("alpha") == 7 and drift() == []
            store.write_chat(chat("b4", "bob", "alpha"), expected_revision=0)
            due_write(store, "a1", "ada", "beta")  # folds bob's deltas into his own rows
            assert not TermCountDelta.objects.exists()
            assert stored("alpha", "bob") == 6 and drift() == []


def test_a_fold_skips_while_a_choice_holds_the_lock_instead_of_waiting():
    """A choice holds ``CHOICE_LOCK`` alone: another write's fold does not wait for it
    (a lock timeout would fail the write), it leaves its deltas for a later fold."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        store.write_chat(chat("seed", "ada", "alpha"), expected_revision=0)
        count_terms(1)
        with other_connection() as other, other.cursor() as cursor:
            cursor.execute(f"SELECT pg_advisory_xact_lock({choice.CHOICE_LOCK})")
            with connection.cursor() as mine:
                mine.execute("SET lock_timeout = '2s'")
            try:
                due_write(store, "held", "ada", "alpha")
            finally:
                with connection.cursor() as mine:
                    mine.execute("RESET lock_timeout")
            assert TermCountDelta.objects.filter(tenant="ada").exists()
            other.rollback()
        due_write(store, "free", "ada", "alpha")
        assert not TermCountDelta.objects.exists()
        assert stored("alpha", "ada") == 3 and drift() == []


def test_the_repairs_count_a_term_being_counted_or_leave_it_to_be_chosen_again():
    """A term being counted has partial counts no search reads: ``--fix`` (rebuilding a
    drift) counts it from the rows at once; ``--count-terms`` counts it when it is
    common, else drops it with its partial counts."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        store.write_chat(chat("seed", "ada", "alpha beta", "alpha"), expected_revision=0)
        count_terms(1)
        for lexeme in ("gamma", "delta"):
            CountingTerm.objects.create(lexeme=lexeme, marked_by=1)
        store.write_chat(chat("after", "ada", "gamma delta", "gamma"), expected_revision=0)
        store.write_chat(chat("before", "ada", "gamma"), expected_revision=0)
        TermCountDelta.objects.filter(lexeme="gamma", rows=1).delete()  # one writer missed it
        assert drift() == []  # not read by searches, not checked
        TermCount.objects.filter(lexeme="alpha").update(rows=7)  # a drift --fix rebuilds
        assert [(lexeme, stored_rows) for _, _, lexeme, stored_rows, _ in drift()] == [("alpha", 7)]
        call_command("backfill_transcripts", "--fix", verbosity=0)
        assert not CountingTerm.objects.exists()
        assert {"gamma", "delta"} <= set(CountedTerm.objects.values_list("lexeme", flat=True))
        assert stored("gamma", "ada") == 3 and stored("delta", "ada") == 1 and drift() == []

        CountingTerm.objects.create(lexeme="alpha2", marked_by=1)
        CountingTerm.objects.create(lexeme="rare", marked_by=1)
        store.write_chat(chat("more", "ada", "alpha2 rare", "alpha2"), expected_revision=0)
        TermCountDelta.objects.filter(lexeme="alpha2").delete()
        count_terms(2)
        assert not CountingTerm.objects.exists()
        counted = set(CountedTerm.objects.values_list("lexeme", flat=True))
        assert "alpha2" in counted and "rare" not in counted
        assert stored("alpha2", "ada") == 2 and stored("rare") == 0 and drift() == []


def test_a_word_being_counted_leaves_every_table_with_its_last_messages():
    """The privacy delete for a term being counted: the delete's own fold drops it with
    its counts when no message holds it; a choice finding a seen term no message holds
    drops it and its partial counts instead of counting it."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        store.write_chat(chat("seed", "ada", "alpha"), expected_revision=0)
        count_terms(1)
        CountingTerm.objects.create(lexeme="zephyr", marked_by=1)
        store.write_chat(chat("secret", "ada", "zephyr alpha", "zephyr"), expected_revision=0)
        assert TermCountDelta.objects.filter(lexeme="zephyr").exists()
        store.delete_chat("secret")
        assert not CountingTerm.objects.filter(lexeme="zephyr").exists()
        assert not TermCount.objects.filter(lexeme="zephyr").exists()
        assert not TermCountDelta.objects.filter(lexeme="zephyr").exists()

        CountingTerm.objects.create(lexeme="ghost", marked_by=1)
        CountingTerm.objects.filter(lexeme="ghost").update(observed=True)  # stamped
        TermCount.objects.create(lexeme="ghost", tenant="", role="user", shard=0, rows=-1)
        due_write(store, "later", "bob", "beta")
        assert (
            not CountingTerm.objects.exists()
            and not CountedTerm.objects.filter(lexeme="ghost").exists()
        )
        assert not TermCount.objects.filter(lexeme="ghost").exists() and drift() == []
