"""Migrations run forward and back on this vendor, and on SQLite without FTS5."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.test import override_settings

from deuz_transcripts.backends.postgresql.counts import refresh as count_refresh
from deuz_transcripts.backends.sqlite import common as sqlite_backend
from deuz_transcripts.checks import check_search_backends, check_search_index, check_settings
from deuz_transcripts.models import TermCount, TermCountDelta
from deuz_transcripts.stores import DjangoConditionalChatStore, DjangoTranscriptIndex
from deuz_transcripts.verify import Verifier
from tests.factories import ChatRecordFactory, MessageFactory
from tests.sql_support import vectors_holding_lexemes
from tests.test_count_deltas import counted_tenant_with_pending_deltas
from tests.test_term_counts import chat, drift, stored

pytestmark = pytest.mark.django_db(transaction=True)


def app_checks() -> list:
    """This app's checks only: Django's own may query every database alias."""
    return [*check_settings(), *check_search_backends()]


def tables() -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.table_names(cursor))


def has_vector_column() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM information_schema.columns "
            "WHERE table_name = 'deuz_transcripts_message' AND column_name = 'search_vector'"
        )
        return cursor.fetchone() is not None


def test_migrations_go_back_and_forth():
    call_command("migrate", "deuz_transcripts", "zero", verbosity=0)
    assert "deuz_transcripts_message" not in tables()
    assert sqlite_backend.FTS_TABLE not in tables()
    assert check_search_index(databases=["default"]) == []  # nothing to index yet
    call_command("migrate", "deuz_transcripts", verbosity=0)
    assert "deuz_transcripts_message" in tables()
    assert check_search_index(databases=["default"]) == []
    if connection.vendor == "postgresql":
        assert has_vector_column()
    else:
        assert sqlite_backend.FTS_TABLE in tables()
    store = DjangoConditionalChatStore()
    store.write_chat(ChatRecordFactory(chat_id="c1", texts=["hi"]), expected_revision=0)
    assert len(store.transcript.search({"userId": "ada"}, "hi")) == 1


def test_sqlite_without_fts5_migrates_and_falls_back(monkeypatch):
    if connection.vendor != "sqlite":
        pytest.skip("FTS5 is an SQLite matter")
    call_command("migrate", "deuz_transcripts", "zero", verbosity=0)
    monkeypatch.setattr(sqlite_backend, "fts5_available", lambda: False)
    try:
        call_command("migrate", "deuz_transcripts", verbosity=0)
        assert sqlite_backend.FTS_TABLE not in tables()
        index = DjangoTranscriptIndex()
        assert index.backend_name == "sqlite-like"
        assert "deuz_transcripts.W001" in [m.id for m in app_checks()]
        store = DjangoConditionalChatStore()
        store.write_chat(ChatRecordFactory(chat_id="c1", texts=["deploys"]), expected_revision=0)
        assert len(store.transcript.search({"userId": "ada"}, "deploy")) == 1  # substring
    finally:
        monkeypatch.undo()
        call_command("migrate", "deuz_transcripts", "zero", verbosity=0)
        call_command("migrate", "deuz_transcripts", verbosity=0)
    assert sqlite_backend.FTS_TABLE in tables()
    assert DjangoTranscriptIndex().backend_name == "sqlite-fts5"


class AppOnDefaultOnly:
    """A router that keeps deuz_transcripts on the ``default`` database only."""

    def allow_migrate(self, db: str, app_label: str, **hints: object) -> bool | None:
        return db == "default" if app_label == "deuz_transcripts" else None


def other_tables() -> set[str]:
    other = connections["other"]
    with other.cursor() as cursor:
        return set(other.introspection.table_names(cursor))


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
def test_a_router_that_keeps_the_app_off_a_database_is_honoured():
    """Neither the search storage nor the post-migrate FTS5 upkeep touches that database."""
    call_command("migrate", "deuz_transcripts", "zero", database="other", verbosity=0)
    assert "deuz_transcripts_message" not in other_tables()
    try:
        with override_settings(DATABASE_ROUTERS=[f"{__name__}.AppOnDefaultOnly"]):
            call_command("migrate", "deuz_transcripts", database="other", verbosity=0)
            assert "deuz_transcripts_message" not in other_tables()
            assert sqlite_backend.FTS_TABLE not in other_tables()
            call_command("migrate", "deuz_transcripts", database="default", verbosity=0)
            call_command("migrate", "deuz_transcripts", "zero", database="other", verbosity=0)
    finally:
        call_command("migrate", "deuz_transcripts", database="other", verbosity=0)
    assert "deuz_transcripts_message" in other_tables()


def test_the_scope_lexemes_migration_writes_what_python_writes():
    """0002 gives existing PostgreSQL vectors the very scope and chat lexemes a write adds."""
    if connection.vendor != "postgresql":
        pytest.skip("scope lexemes are PostgreSQL's (FTS5 rows had scope tokens from 0001)")
    store = DjangoConditionalChatStore()
    scope = {"userId": "ä'\\\"x", "agentId": "7"}
    for chat_id in ("c1", "c'2"):
        record = ChatRecordFactory(
            chat_id=chat_id, scope=scope, messages=[MessageFactory(text="hi")]
        )
        store.write_chat(record, expected_revision=0)
    assert [str(p) for p in Verifier().problems()] == []
    call_command("migrate", "deuz_transcripts", "0001", verbosity=0)
    # no scope or chat lexemes (raw SQL: the models now have columns 0004 adds)
    assert vectors_holding_lexemes("\ue000") == vectors_holding_lexemes("\ue002") == 0
    call_command("migrate", "deuz_transcripts", verbosity=0)
    assert [str(p) for p in Verifier().problems()] == []
    assert len(store.transcript.search(scope, "hi")) == 2
    assert len(store.transcript.search(scope, "hi", chat_ids=["c'2"])) == 1


def test_the_tenant_migration_fills_existing_rows_from_the_scope():
    """0004 run with ``TENANT_KEY`` set gives chats and messages stored before it their
    scope field's value; without the key every tenant is ""."""
    store = DjangoConditionalChatStore()
    for chat_id, scope in (("c1", {"userId": "ada"}), ("c2", {"agentId": "x"})):
        record = ChatRecordFactory(
            chat_id=chat_id, scope=scope, messages=[MessageFactory(text="hi")] * 2
        )
        store.write_chat(record, expected_revision=0)
    call_command("migrate", "deuz_transcripts", "0003", verbosity=0)
    try:
        with override_settings(DEUZ_TRANSCRIPTS={"TENANT_KEY": "userId"}):
            call_command("migrate", "deuz_transcripts", verbosity=0)
    finally:
        call_command("migrate", "deuz_transcripts", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.chat_id, c.tenant, m.tenant FROM deuz_transcripts_chat c "
            "JOIN deuz_transcripts_message m ON m.chat_id = c.id ORDER BY c.chat_id, m.position"
        )
        rows = cursor.fetchall()
    assert rows == [("c1", "ada", "ada"), ("c1", "ada", "ada"), ("c2", "", ""), ("c2", "", "")]


def test_the_term_counts_migration_counts_the_rows_already_there():
    """0005 on a filled table: N (and any common term) counted from the vectors there,
    so ``verify`` finds no drift and searches read a true N."""
    if connection.vendor != "postgresql":
        pytest.skip("stored term counts are PostgreSQL's (FTS5 counts)")
    store = DjangoConditionalChatStore()
    for chat_id in ("c1", "c2"):
        record = ChatRecordFactory(chat_id=chat_id, messages=[MessageFactory(text="hi")] * 3)
        store.write_chat(record, expected_revision=0)
    call_command("migrate", "deuz_transcripts", "0004", verbosity=0)
    call_command("migrate", "deuz_transcripts", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT sum(rows) FROM deuz_transcripts_termcount WHERE lexeme = ''")
        assert cursor.fetchone() == (6,)
    assert [str(p) for p in Verifier().problems()] == []


def term_rows(lexeme: str) -> dict[str, int]:
    """Each tenant's stored count of ``lexeme`` (summed over shards)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tenant, sum(rows) FROM deuz_transcripts_termcount WHERE lexeme = %s "
            "GROUP BY tenant",
            [lexeme],
        )
        return {str(tenant): int(rows) for tenant, rows in cursor.fetchall()}


def test_the_counted_tenants_migration_keeps_own_counts_for_big_tenants_only(monkeypatch):
    """0006 on counts 0005 kept for every tenant: a small tenant's term counts move under
    tenant ``""``, a big one keeps its own, nothing drifts; backwards, every tenant's
    counts are its own again."""
    if connection.vendor != "postgresql":
        pytest.skip("stored term counts are PostgreSQL's (FTS5 counts)")
    monkeypatch.setattr(count_refresh, "COUNTED_MIN_ROWS", 2)
    monkeypatch.setattr(count_refresh, "COUNTED_TENANT_MIN_ROWS", 4)
    with override_settings(DEUZ_TRANSCRIPTS={"TENANT_KEY": "userId"}):
        store = DjangoConditionalChatStore()
        for chat_id, user, size in (("c1", "ada", 4), ("c2", "bob", 2)):
            messages = [MessageFactory(text="alpha beta")] * size
            record = ChatRecordFactory(chat_id=chat_id, scope={"userId": user}, messages=messages)
            store.write_chat(record, expected_revision=0)
        try:
            call_command("migrate", "deuz_transcripts", "0004", verbosity=0)
            call_command("migrate", "deuz_transcripts", "0005", verbosity=0)
            assert term_rows("alpha") == {"ada": 4, "bob": 2}
            call_command("migrate", "deuz_transcripts", verbosity=0)
            assert term_rows("alpha") == {"ada": 4, "": 2} and term_rows("") == {"ada": 4, "bob": 2}
            assert [str(p) for p in Verifier().problems()] == []
            call_command("migrate", "deuz_transcripts", "0005", verbosity=0)
            assert term_rows("alpha") == {"ada": 4, "bob": 2}
        finally:
            call_command("migrate", "deuz_transcripts", verbosity=0)


@override_settings(DEUZ_TRANSCRIPTS={"TENANT_KEY": "userId"})
def test_migration_0009_sums_the_shards_and_back_folds_the_deltas():
    """Forward, the locked counts' shards become one row per count and the triggers
    append deltas; backwards, the deltas are added into the rows and the locked triggers
    count again; nothing drifts either way."""
    if connection.vendor != "postgresql":
        pytest.skip("stored term counts are PostgreSQL's (FTS5 counts)")
    store = DjangoConditionalChatStore()
    counted_tenant_with_pending_deltas(store)
    try:
        call_command("migrate", "deuz_transcripts", "0008", verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('deuz_transcripts_termcountdelta')")
            assert cursor.fetchone() == (None,)
        for chat_id in ("locked1", "locked2"):  # consecutive pks: two shards
            store.write_chat(chat(chat_id, "", "alpha"), expected_revision=0)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(DISTINCT shard), sum(rows) FROM deuz_transcripts_termcount "
                "WHERE lexeme = '' AND tenant = ''"
            )
            assert cursor.fetchone() == (2, 2)
        assert drift_without_deltas() == []
        call_command("migrate", "deuz_transcripts", verbosity=0)
        assert set(TermCount.objects.values_list("shard", flat=True)) == {0}
        assert not TermCountDelta.objects.exists()
        store.write_chat(chat("appended", "", "alpha"), expected_revision=0)
        assert TermCountDelta.objects.filter(tenant="").exists()
        assert stored("", "") == 3 and drift() == []
    finally:
        call_command("migrate", "deuz_transcripts", verbosity=0)


@override_settings(DEUZ_TRANSCRIPTS={"TENANT_KEY": "userId"})
def test_migration_0010_files_deltas_by_owner_and_back_by_where_they_count():
    """Forward, a delta names its message's tenant and the folds decide where it counts;
    backwards, every delta is added where its tenant's counts live (an uncounted
    tenant's terms under tenant ``""``) and 0009's triggers come back; nothing drifts."""
    if connection.vendor != "postgresql":
        pytest.skip("stored term counts are PostgreSQL's (FTS5 counts)")
    store = DjangoConditionalChatStore()
    counted_tenant_with_pending_deltas(store)
    store.write_chat(chat("small", "bob", "alpha beta"), expected_revision=0)
    assert TermCountDelta.objects.filter(tenant="bob", lexeme="alpha").exists()
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO deuz_transcripts_countingterm VALUES ('gamma', 1, FALSE)")
    try:
        call_command("migrate", "deuz_transcripts", "0009", verbosity=0)
        assert not TermCountDelta.objects.exists()
        assert stored("alpha", "") == 1 and stored("alpha", "ada") == 3 and drift() == []
        store.write_chat(chat("bucketed", "bob", "alpha"), expected_revision=0)
        assert TermCountDelta.objects.filter(tenant="", lexeme="alpha").exists()
        assert drift() == []
        call_command("migrate", "deuz_transcripts", verbosity=0)
        store.write_chat(chat("owned", "bob", "alpha"), expected_revision=0)
        assert TermCountDelta.objects.filter(tenant="bob", lexeme="alpha").exists()
        assert stored("alpha", "") == 3 and stored("alpha") == 6 and drift() == []
    finally:
        call_command("migrate", "deuz_transcripts", verbosity=0)


def drift_without_deltas() -> list[tuple[str, str, str, int, int]]:
    """``count_drift`` before migration 0009: the count rows alone against the vectors."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM (SELECT tenant, role, lexeme, sum(rows) AS n "
            "FROM deuz_transcripts_termcount GROUP BY 1, 2, 3) s "
            "WHERE s.lexeme = '' AND s.n <> (SELECT count(*) FROM deuz_transcripts_message m "
            "WHERE m.search_vector IS NOT NULL AND m.tenant = s.tenant AND m.role = s.role)"
        )
        return cursor.fetchall()
