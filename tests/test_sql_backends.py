"""What only the SQL side has: backend choice, stored form, rollback, engine limits, using=.

And a chat of 100,000 messages: searched, appended to with a constant number of statements
(one row inserted, none rewritten) and loaded, with the memory store checked alongside.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from deuz_transcripts import (
    ChatDeleted,
    ChatRecord,
    InMemoryConditionalChatStore,
    InMemoryTranscriptIndex,
    InvalidRecord,
    RevisionConflict,
    TranscriptError,
)
from deuz_transcripts.backends import backend_name_for, forced_policies
from deuz_transcripts.backends.sqlite.common import FTS_TABLE
from deuz_transcripts.checks import check_search_backends, check_settings
from deuz_transcripts.models import Chat, ChatScope, Message, Tombstone
from deuz_transcripts.stores import DjangoConditionalChatStore, DjangoTranscriptIndex
from deuz_transcripts.text import stored_term
from tests.sql_support import backend_settings, spy_search_parts

pytestmark = pytest.mark.django_db
ADA = {"userId": "ada"}
WHEN = datetime(2025, 3, 1, tzinfo=UTC)


def app_checks() -> list:
    """This app's checks only: Django's own may query every database alias."""
    return [*check_settings(), *check_search_backends()]


def record(chat_id: str = "chat-1", *texts: str, scope: dict | None = None) -> ChatRecord:
    return ChatRecord(
        chat_id=chat_id,
        scope=ADA if scope is None else scope,
        messages=[{"role": "user", "content": text} for text in texts or ("hello world",)],
        updated_at=WHEN,
    )


def raw_matches(term: str, using: str = "default") -> int:
    """Rows of the backend's own search storage holding ``term``, bypassing chats."""
    backend = DjangoTranscriptIndex(using).backend_name
    with connections[using].cursor() as cursor:
        if backend == "postgresql":
            cursor.execute(
                "SELECT count(*) FROM deuz_transcripts_message WHERE search_vector @@ %s::tsquery",
                [f"'{stored_term(term)}'"],
            )
        elif backend == "sqlite-fts5":
            cursor.execute(
                f"SELECT count(*) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s",
                [f'"{stored_term(term)}"'],
            )
        else:
            cursor.execute(
                "SELECT count(*) FROM deuz_transcripts_message WHERE instr(search_text, %s) > 0",
                [term],
            )
        return cursor.fetchone()[0]


def test_backend_follows_the_vendor_and_the_setting():
    name = DjangoTranscriptIndex().backend_name
    if connection.vendor == "postgresql":
        assert name == "postgresql"
    else:
        assert name == "sqlite-fts5"
        with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "like"}):
            assert DjangoTranscriptIndex().backend_name == "sqlite-like"
        with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "fts5"}):
            assert DjangoTranscriptIndex().backend_name == "sqlite-fts5"


def test_unsupported_vendor_is_a_clear_configuration_error(monkeypatch):
    monkeypatch.setattr(connections["default"], "vendor", "mysql")
    with pytest.raises(ImproperlyConfigured, match="PostgreSQL and SQLite"):
        backend_name_for("default")


def test_bad_sqlite_backend_setting_is_reported():
    with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "elastic"}):
        ids = [message.id for message in app_checks()]
    assert "deuz_transcripts.E002" in ids


@pytest.mark.parametrize("value", [-1, "2000", True, 2.5])
def test_bad_scan_scope_setting_is_reported(value):
    with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SCAN_SCOPE_MAX": value}):
        ids = [message.id for message in app_checks()]
    assert "deuz_transcripts.E006" in ids


@pytest.mark.parametrize("value", [0, 50_000])
def test_good_scan_scope_setting_passes(value):
    with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SCAN_SCOPE_MAX": value}):
        ids = [message.id for message in app_checks()]
    assert "deuz_transcripts.E006" not in ids


def test_fts5_scans_small_scopes_for_long_queries_and_matches_the_rest_in_the_index():
    """A long query in a small scope reads the scope's rows (no MATCH); a short query is
    matched in FTS5 (in a small scope in one pass, each row's mask by ``instr``), as is
    any query in a bigger scope. Same hits either way."""
    if connection.vendor != "sqlite":
        pytest.skip("the scan route is SQLite FTS5's")
    store = DjangoConditionalChatStore()
    for n in range(4):
        chat = record(f"c{n}", f"quokka sighting {n}", f"noted {n} quokka")
        store.write_chat(chat, expected_revision=0)
    store.write_chat(
        record("other", "quokka sighting 2", scope={"userId": "bob"}), expected_revision=0
    )
    long_query = "quokka sighting 2 noted wombat emu dingo numbat"  # 8 terms
    routes, results = {}, {}
    for query in ("quokka sighting 2", long_query):
        for limit in (0, 8, 7):  # ada has 8 indexed messages
            scan = override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SCAN_SCOPE_MAX": limit})
            with scan, CaptureQueriesContext(connection) as queries:
                hits = store.transcript.search(ADA, query, limit=20)
            statement = queries.captured_queries[-2]["sql"]
            route = ("MATCH" in statement, "instr(" in statement)  # FTS5, masks by instr
            routes[len(query.split()), limit] = route
            results[len(query.split()), limit] = [(h.chat_id, h.message_id, h.score) for h in hits]
    # a small scope: one FTS5 pass, each matched row's mask by instr (not a subquery per
    # term); 8 terms: the scope's rows read, masks in Python
    assert routes == {(3, 0): (True, False), (3, 8): (True, True), (3, 7): (True, False)} | {
        (8, 0): (True, False),
        (8, 8): (False, False),
        (8, 7): (True, False),
    }
    assert results[3, 0] == results[3, 8] == results[3, 7]
    assert results[3, 0][0] == ("c2", "c2:0", 1.0) and len(results[3, 0]) == 8
    assert results[8, 0] == results[8, 8] == results[8, 7] and len(results[8, 0]) == 8


def test_fts5_counts_masks_first_in_smaller_scopes_than_postgresql(monkeypatch):
    """FTS5 ranks in one statement only the scopes that scan their own rows
    (``scan_scope_max``: a subquery per term seeks each term's doclist to every row of the
    scope); past them, masks are counted first; same hits either way."""
    if backend_name_for("default") != "sqlite-fts5":
        pytest.skip("FTS5's threshold")
    from deuz_transcripts.backends import get_backend, policy
    from deuz_transcripts.backends.policy import current_policy
    from deuz_transcripts.backends.sqlite.fts5_policy import Fts5Policy

    assert get_backend("default").source.policy.single_statement_max == (
        current_policy(Fts5Policy).scan_scope_max
    )
    store = DjangoConditionalChatStore()
    for n in range(4):
        chat = record(f"c{n}", f"quokka sighting {n}", f"noted {n} quokka")
        store.write_chat(chat, expected_revision=0)
    calls = spy_search_parts(monkeypatch, get_backend("default"), ("candidates",))
    monkeypatch.setattr(policy, "FORCED", forced_policies(single_statement_max=5_000))
    one_statement: dict[int, bool] = {}
    results = {}
    for scan_max in (5_000, 3):
        calls.clear()
        with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SCAN_SCOPE_MAX": scan_max}):
            assert get_backend("default").source.policy.single_statement_max == scan_max
            hits = store.transcript.search(ADA, "quokka sighting", limit=3)
        one_statement[scan_max] = calls == ["candidates"]  # every match ranked at once
        results[scan_max] = [(h.chat_id, h.message_id, h.score) for h in hits]
    assert one_statement == {5_000: True, 3: False}
    assert results[5_000] == results[3] and len(results[3]) == 3


def six_dated_chats(third_of_c2: str, third: str) -> DjangoConditionalChatStore:
    """Chats c0..c5 of ADA, a day apart (c5 newest): "common words here N", "common
    again", then ``third_of_c2`` in c2 and ``third`` in the others."""
    store = DjangoConditionalChatStore()
    for n in range(6):
        texts = [f"common words here {n}", "common again", third_of_c2 if n == 2 else third]
        chat = record(f"c{n}", *texts)
        chat.updated_at = datetime(2025, 1, 1 + n, tzinfo=UTC)
        store.write_chat(chat, expected_revision=0)
    return store


def test_common_terms_walk_newest_chats_and_rare_terms_rank_every_match(monkeypatch):
    """The walk runs only when enough rows hold every term; both routes give one answer."""
    from deuz_transcripts.backends import policy

    store = six_dated_chats("rare", "filler")

    def search(query: str, walk_from: int) -> tuple[list[tuple], bool]:
        monkeypatch.setattr(policy, "FORCED", forced_policies(small_read_rows=walk_from))
        with CaptureQueriesContext(connection) as queries:
            hits = store.transcript.search(ADA, query, limit=3, offset=1)
        walked = any(
            "ORDER BY c.updated_at DESC" in q["sql"]
            and "LIMIT" in q["sql"]
            and "row_number" not in q["sql"]
            for q in queries.captured_queries
        )
        return [(h.chat_id, h.message_id, h.score) for h in hits], walked

    monkeypatch.setattr(policy, "FORCED", forced_policies(small_read_rows=5))
    with CaptureQueriesContext(connection) as queries:  # a page of 5: the 18 rows may hold it
        store.transcript.search(ADA, "common", limit=5)
    probe = next(  # counted in the index, no message row read (after the time budget and N)
        q["sql"]
        for q in queries.captured_queries
        if not any(
            s in q["sql"] for s in ("statement_timeout", "SAVEPOINT", "indexed_count", "termcount")
        )
    )
    assert ("tsquery" if connection.vendor == "postgresql" else "MATCH") in probe
    common, walked = search("common", 5)
    assert walked and common == [("c5", "c5:1", 1.0), ("c4", "c4:0", 1.0), ("c4", "c4:1", 1.0)]
    assert search("common", 10_000) == (common, False)  # too few rows to walk: ranked
    assert search("common again", 5)[1]  # 6 rows hold both terms
    assert search("rare", 5) == ([], False)  # one row: page 2 is empty, never walked
    assert not search("common rare", 5)[1]  # one row holds both: every match is ranked


def test_a_page_of_rows_holding_every_term_is_read_without_ranking_the_others(monkeypatch):
    """Fewer rows hold every term than a walk needs, but a page of them: the page is
    theirs (each scores 1.0), read after the probe with no n_t and no other mask; with
    one term every match is on the page or behind it, however few."""
    from deuz_transcripts.backends import policy

    store = six_dated_chats("rare common", "x")
    if not store.transcript.backend.source.walks_newest_first:
        pytest.skip("the LIKE fallback's probe is a scan: it ranks every match")
    calls = spy_search_parts(
        monkeypatch,
        store.transcript.backend,
        ("mask_histogram", "candidates", "term_counts", "mask_candidates"),
    )

    def search(query: str, walk_from: int, limit: int = 3) -> list[tuple]:
        calls.clear()
        monkeypatch.setattr(policy, "FORCED", forced_policies(small_read_rows=walk_from))
        hits = store.transcript.search(ADA, query, limit=limit, offset=1)
        return [(h.chat_id, h.message_id, h.score) for h in hits]

    read = search("common again", 8)  # 6 rows hold both terms: a page of 4, fewer than 8
    assert calls == ["mask_candidates"]
    assert read == [("c4", "c4:1", 1.0), ("c3", "c3:1", 1.0), ("c2", "c2:1", 1.0)]
    assert search("common again", 10**6) == read and "mask_candidates" not in calls
    assert search("rare", 8) == [] and calls == ["mask_candidates"]  # one row, page 2
    assert search("rare", 8, limit=1) == [] and calls == ["mask_candidates"]
    assert search("absent", 8) == [] and calls == []  # the probe found none: nothing read
    ranked = search("rare common", 8)  # one row holds both: every match is ranked
    assert ranked[0][2] < 1.0 and calls != ["mask_candidates"]
    assert search("rare common", 10**6) == ranked


def test_an_append_extracts_the_terms_of_the_new_messages_only(monkeypatch):
    """A rewrite keeps unchanged rows by digest and never folds their text again."""
    from deuz_transcripts import prepared

    store = DjangoConditionalChatStore()
    texts = [f"message number {n}" for n in range(50)]
    revision = store.write_chat(record("long", *texts), expected_revision=0)
    calls = []
    original = prepared.message_terms
    monkeypatch.setattr(prepared, "message_terms", lambda m: calls.append(m) or original(m))
    store.write_chat(record("long", *texts, "appended quokka"), expected_revision=revision)
    assert calls == [{"role": "user", "content": "appended quokka"}]
    chat = Chat.objects.get(chat_id="long")
    assert (chat.message_count, chat.indexed_count) == (51, 51)
    assert [h.index for h in store.transcript.search(ADA, "quokka")] == [50]
    assert len(store.transcript.search(ADA, "number", limit=100)) == 50


def test_system_check_warns_only_for_the_like_fallback():
    ids = [message.id for message in app_checks()]
    assert "deuz_transcripts.W001" not in ids
    if connection.vendor == "sqlite":
        with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "like"}):
            ids = [message.id for message in app_checks()]
        assert "deuz_transcripts.W001" in ids


class Boom(Exception):
    pass


def test_failed_indexing_leaves_no_chat_message_or_search_row(monkeypatch):
    store = DjangoConditionalChatStore()
    original = store.transcript.index

    def index_then_fail(chat: ChatRecord) -> None:
        original(chat)  # rows written inside the transaction...
        raise Boom("index failed")  # ...then the write must roll them all back

    monkeypatch.setattr(store.transcript, "index", index_then_fail)
    with pytest.raises(Boom):
        store.write_chat(record("c1", "quokka sighting"), expected_revision=0)
    assert not Chat.objects.exists()
    assert not Message.objects.exists()
    assert not ChatScope.objects.exists()
    assert raw_matches("quokka") == 0


def _chat_reads(queries: CaptureQueriesContext) -> int:
    """Statements that read a chat's row with its tombstone (``ChatWriter.lock``)."""
    return sum("FROM (SELECT 1) AS one" in query["sql"] for query in queries.captured_queries)


def test_a_store_write_reads_the_chat_row_once():
    store = DjangoConditionalChatStore()
    with CaptureQueriesContext(connection) as first:
        store.write_chat(record("c1", "quokka sighting"), expected_revision=0)
    with CaptureQueriesContext(connection) as second:
        store.write_chat(record("c1", "quokka sighting", "wombat"), expected_revision=1)
    assert _chat_reads(first) == _chat_reads(second) == 1
    row = Chat.objects.get(chat_id="c1")
    assert (row.revision, row.message_count, row.indexed_count) == (2, 2, 2)
    assert [hit.chat_id for hit in store.transcript.search(ADA, "wombat")] == ["c1"]


class CountingIndex(DjangoTranscriptIndex):
    calls = 0

    def index(self, record: Any) -> None:
        type(self).calls += 1
        super().index(record)


def test_a_store_calls_an_overridden_index():
    store = DjangoConditionalChatStore()
    store.transcript = CountingIndex()
    CountingIndex.calls = 0
    assert store.write_chat(record("c1", "quokka sighting"), expected_revision=0) == 1
    assert CountingIndex.calls == 1
    assert Chat.objects.get(chat_id="c1").revision == 1
    assert [hit.chat_id for hit in store.transcript.search(ADA, "quokka")] == ["c1"]


def test_chat_rows_written_by_sql_read_back_as_the_orm_reads_them():
    from deuz_transcripts.sql.chat_rows import load_chat

    store = DjangoConditionalChatStore()
    store.write_chat(
        record("c1", "hello", scope={"userId": "ada", "team": "x"}), expected_revision=0
    )
    moved = ChatRecord(
        "c1",
        {"userId": "ada", "team": "y"},
        [{"role": "user", "content": "hi"}],
        updated_at=datetime(2025, 4, 2, 3, 4, 5, 678000, tzinfo=UTC),
    )
    store.write_chat(moved, expected_revision=1)
    orm = Chat.objects.get(chat_id="c1")
    with connection.cursor() as cursor:
        tombstoned, loaded, key = load_chat(cursor, "default", "c1")
        assert load_chat(cursor, "default", "nothing") == (False, None, None)
    assert not tombstoned and loaded is not None and key is None
    fields = [field.attname for field in Chat._meta.concrete_fields]
    assert [getattr(loaded, name) for name in fields] == [getattr(orm, name) for name in fields]
    assert orm.scope == {"userId": "ada", "team": "y"}
    assert orm.updated_at == moved.updated_at and orm.is_indexed is True
    assert dict(ChatScope.objects.filter(chat=orm).values_list("key", "value")) == orm.scope
    store.delete_chat("c1")
    with connection.cursor() as cursor:
        assert load_chat(cursor, "default", "c1") == (True, None, None)


def test_a_new_chat_key_is_reserved_only_for_a_chat_with_no_row():
    """PostgreSQL reserves the key of a new chat's row in the round trip of its lock."""
    from deuz_transcripts.backends import get_search_rows
    from deuz_transcripts.sql.chat_rows import load_chat

    new_key = get_search_rows("default").new_chat_key_sql
    store = DjangoConditionalChatStore()
    store.write_chat(record("c1", "hello"), expected_revision=0)
    with connection.cursor() as cursor:
        _, row, kept = load_chat(cursor, "default", "c1", new_key=new_key)
        _, none, reserved = load_chat(cursor, "default", "c2", new_key=new_key)
    assert row is not None and kept is None and none is None
    if new_key is None:  # SQLite: the chat row's INSERT returns its key
        assert reserved is None
        return
    assert isinstance(reserved, int) and reserved > row.pk
    store.write_chat(record("c2", "world"), expected_revision=0)
    assert Chat.objects.get(chat_id="c2").pk > reserved  # a key is never handed out twice


def test_tombstoned_chat_is_never_reindexed():
    store = DjangoConditionalChatStore()
    store.write_chat(record("c1", "secret plans"), expected_revision=0)
    store.delete_chat("c1")
    store.transcript.index(record("c1", "secret plans"))  # a backfill replaying old data
    assert store.transcript.search(ADA, "secret") == []
    assert not Message.objects.exists()
    assert raw_matches("secret") == 0
    assert Tombstone.objects.filter(chat_id="c1").exists()
    with pytest.raises(ChatDeleted):
        store.write_chat(record("c1", "again"), expected_revision=0)


def test_appending_a_message_keeps_the_other_rows():
    store = DjangoConditionalChatStore()
    first = record("c1", *(f"message number {i}" for i in range(50)))
    store.write_chat(first, expected_revision=0)
    before = dict(Message.objects.values_list("position", "pk"))
    longer = record("c1", *(f"message number {i}" for i in range(50)), "the appended one")
    store.write_chat(longer, expected_revision=1)
    after = dict(Message.objects.values_list("position", "pk"))
    assert {p: after[p] for p in before} == before  # no row rewritten
    assert len(after) == 51
    assert [h.index for h in store.transcript.search(ADA, "appended")] == [50]


def _terms_read(queries: CaptureQueriesContext) -> list[str]:
    """The statements that read stored terms (``search_text``) back."""
    return [
        sql
        for sql in (query["sql"] for query in queries)
        if sql.startswith("SELECT") and "search_text" in sql.split(" FROM ")[0]
    ]


def test_an_append_reads_no_stored_terms_of_the_rows_it_keeps():
    """Only the changed rows' terms are read (to take them out of the index): an append
    to a long chat costs its digests, not its stored text."""
    store = DjangoConditionalChatStore()
    texts = [f"message number {i}" for i in range(30)]
    store.write_chat(record("c1", *texts), expected_revision=0)
    with CaptureQueriesContext(connection) as queries:
        store.write_chat(record("c1", *texts, "the appended one"), expected_revision=1)
    assert not _terms_read(queries)
    with CaptureQueriesContext(connection) as queries:
        store.write_chat(record("c1", "changed", *texts[1:]), expected_revision=2)
    assert len(_terms_read(queries)) == (
        1 if DjangoTranscriptIndex().backend.rows.keeps_search_text else 0
    )
    assert raw_matches("changed") == 1
    assert store.transcript.search(ADA, "message number zero") != []


def test_an_append_encodes_and_writes_the_new_messages_only(monkeypatch):
    """``append_messages`` validates, encodes and inserts the new messages alone, in as
    many statements for a long chat as for a short one, and reads no stored payload."""
    from deuz_transcripts import prepared

    store = DjangoConditionalChatStore()
    original = prepared.encoded_message
    statements = []
    for size in (10, 200):
        chat_id = f"c{size}"
        texts = (f"message {i}" for i in range(size))
        store.write_chat(record(chat_id, *texts), expected_revision=0)
        before = dict(Message.objects.filter(chat__chat_id=chat_id).values_list("position", "pk"))
        encoded: list[str] = []
        monkeypatch.setattr(
            prepared, "encoded_message", lambda m, f, seen=encoded: seen.append(f) or original(m, f)
        )
        new = [
            {"role": "user", "content": f"appended{size}"},
            {"role": "assistant", "content": "ok"},
        ]
        with CaptureQueriesContext(connection) as queries:
            assert store.append_messages(chat_id, new, expected_revision=1) == 2
        monkeypatch.undo()
        assert encoded == ["messages[0]", "messages[1]"]  # named as the append names them
        read = [q["sql"] for q in queries if q["sql"].startswith("SELECT")]
        assert not [sql for sql in read if "payload" in sql]
        statements.append(len(queries))
        after = dict(Message.objects.filter(chat__chat_id=chat_id).values_list("position", "pk"))
        assert {p: after[p] for p in before} == before and len(after) == size + 2
        chat = Chat.objects.get(chat_id=chat_id)
        assert (chat.message_count, chat.indexed_count, chat.revision) == (size + 2, size + 2, 2)
        assert [h.index for h in store.transcript.search(ADA, f"appended{size}")] == [size]
    assert statements[0] == statements[1]


def test_an_append_through_an_overridden_index_writes_the_whole_chat():
    """An ``index`` of the caller's own sees every write as a whole chat, appends too."""
    seen = []

    class Recording(DjangoTranscriptIndex):
        def index(self, record):
            seen.append(len(record.messages))
            super().index(record)

    store = DjangoConditionalChatStore()
    store.transcript = Recording()
    store.write_chat(record("c1", "one", "two"), expected_revision=0)
    store.append_messages("c1", [{"role": "user", "content": "three"}], expected_revision=1)
    assert seen == [2, 3]
    assert [h.index for h in store.transcript.search(ADA, "three")] == [2]


def _store_statements(store: DjangoConditionalChatStore) -> list[int]:
    """Statements of a write, then of an append, of a 20-message chat through ``store``."""
    counts = []
    texts = [f"message {i}" for i in range(20)]
    with CaptureQueriesContext(connection) as queries:
        store.write_chat(record("c1", *texts), expected_revision=0)
    counts.append(len(queries))
    with CaptureQueriesContext(connection) as queries:
        store.append_messages("c1", [{"role": "user", "content": "later"}], expected_revision=1)
    counts.append(len(queries))
    return counts


def test_an_index_override_calling_the_stock_index_costs_what_the_stock_index_costs():
    """The store's lock and the row it read are handed to ``index()``, overridden or not:
    an override that calls ``super().index`` reads the chat row once per write, writes
    the revision with it, and an append through it reads no stored message."""
    calls = []

    class Auditing(DjangoTranscriptIndex):
        def index(self, record):
            calls.append(record.chat_id)  # reads no message: an append stays an append
            super().index(record)

    stock = _store_statements(DjangoConditionalChatStore())
    Chat.objects.all().delete()
    store = DjangoConditionalChatStore()
    store.transcript = Auditing()
    with CaptureQueriesContext(connection) as queries:
        assert _store_statements(store) == stock
    assert _chat_reads(queries) == 2 and calls == ["c1", "c1"]
    row = Chat.objects.get(chat_id="c1")
    assert (row.revision, row.message_count, row.indexed_count) == (2, 21, 21)
    assert [h.index for h in store.transcript.search(ADA, "later")] == [20]


def test_an_index_override_indexing_twice_writes_the_chat_once():
    """The handed-over lock serves one write: a second ``super().index`` in the same
    ``index`` reads the row the first wrote, so nothing is written twice."""

    class Twice(DjangoTranscriptIndex):
        def index(self, record):
            super().index(record)
            super().index(record)

    store = DjangoConditionalChatStore()
    store.transcript = Twice()
    store.write_chat(record("c1", "one", "two"), expected_revision=0)
    store.append_messages("c1", [{"role": "user", "content": "three"}], expected_revision=1)
    assert store.load_chat("c1")[1] == 2
    assert Message.objects.count() == 3 and raw_matches("three") == 1
    assert [h.index for h in store.transcript.search(ADA, "three")] == [2]


def test_a_store_sets_the_revision_when_its_index_does_not_write_the_chat():
    """An ``index`` that leaves a write out (here: while ``frozen``) never takes the
    store's lock: the store still writes the revision, after ``index()``."""

    class Freezable(DjangoTranscriptIndex):
        frozen = False

        def index(self, record):
            if not self.frozen:
                super().index(record)

    store = DjangoConditionalChatStore()
    store.transcript = Freezable()
    store.write_chat(record("c1", "before"), expected_revision=0)
    store.transcript.frozen = True
    assert store.write_chat(record("c1", "after"), expected_revision=1) == 2
    assert store.load_chat("c1")[0].messages == [{"role": "user", "content": "before"}]
    assert Chat.objects.get(chat_id="c1").revision == 2
    with pytest.raises(RevisionConflict):
        store.write_chat(record("c1", "again"), expected_revision=1)


@pytest.mark.parametrize("by_pk", [0, 500])
def test_a_rewrite_takes_every_changed_row_out_of_the_index(monkeypatch, by_pk):
    """Changed rows' terms are read by primary key, or past ``_STALE_BY_PK`` with the
    rest of the chat's rows: either way each changed row leaves the index, none else."""
    from deuz_transcripts.sql import writer

    monkeypatch.setattr(writer, "_STALE_BY_PK", by_pk)
    store = DjangoConditionalChatStore()
    texts = [f"kept {i}" if i % 2 else f"gone{i} words" for i in range(12)]
    store.write_chat(record("c1", *texts), expected_revision=0)
    rewritten = [text if i % 2 else f"new{i} words" for i, text in enumerate(texts)]
    store.write_chat(record("c1", *rewritten), expected_revision=1)
    assert [raw_matches(f"gone{i}") for i in range(0, 12, 2)] == [0] * 6
    assert [raw_matches(f"new{i}") for i in range(0, 12, 2)] == [1] * 6
    assert raw_matches("words") == 6 and raw_matches("kept") == 6
    assert len(store.transcript.search(ADA, "kept words", limit=20)) == 12


def test_changing_the_scope_moves_every_message():
    store = DjangoConditionalChatStore()
    store.write_chat(record("c1", "alpha", "beta"), expected_revision=0)
    store.write_chat(record("c1", "alpha", "beta", scope={"userId": "bob"}), expected_revision=1)
    assert store.transcript.search(ADA, "alpha beta") == []
    assert len(store.transcript.search({"userId": "bob"}, "alpha beta")) == 2
    assert raw_matches("alpha") == 1


def test_nul_and_lone_surrogates_round_trip_exactly():
    store = DjangoConditionalChatStore()
    messages = [
        {"role": "user", "content": "nul\x00inside and \ud800 surrogate"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "x\x00y"}],
            "extra": {"a": None},
        },
    ]
    chat = ChatRecord("c1", ADA, messages, ["m\u00e9-1", "m-2"], WHEN)
    store.write_chat(chat, expected_revision=0)
    loaded, revision = store.load_chat("c1")
    assert revision == 1
    assert loaded.messages == messages
    assert [h.message_id for h in store.transcript.search(ADA, "surrogate")] == ["m\u00e9-1"]
    assert [h.message_id for h in store.transcript.search(ADA, "inside")] == ["m\u00e9-1"]


def test_nul_in_ids_and_scope_is_an_invalid_record():
    store = DjangoConditionalChatStore()
    with pytest.raises(InvalidRecord, match="chat_id"):
        store.write_chat(record("c\x001"), expected_revision=0)
    with pytest.raises(InvalidRecord, match="scope"):
        store.write_chat(record("c1", scope={"userId": "a\x00"}), expected_revision=0)
    assert not Chat.objects.exists()


def test_huge_message_and_huge_term():
    store = DjangoConditionalChatStore()
    long_term = "ab" * 2_500  # 5,000 characters: past PostgreSQL's lexeme limit
    dump = "early " + "lorem ipsum " * 900_000 + " lateword"  # ~10 MB
    store.write_chat(record("c1", dump, f"x {long_term} y"), expected_revision=0)
    assert [h.index for h in store.transcript.search(ADA, "early")] == [0]
    assert store.transcript.search(ADA, "lateword") == []  # past the 256 KiB cut
    assert [h.index for h in store.transcript.search(ADA, long_term)] == [1]
    assert store.transcript.search(ADA, long_term[:-1]) == []  # whole terms only
    loaded, _ = store.load_chat("c1")
    assert loaded.messages[0]["content"] == dump


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "NEAR(",
        "*",
        ":*",
        "!",
        "'",
        "\\",
        "%",
        "_",
        "-- x",
        "/* x */",
        "\x00",
        "a OR b",
        "a' OR '1'='1",
        "hello:* & !world",
        'hello" OR "x',
        "^hello",
        "hello*",
    ],
)
def test_hostile_queries_are_just_text(query):
    store = DjangoConditionalChatStore()
    store.write_chat(record("c1", "hello world", "a b 1"), expected_revision=0)
    hits = store.transcript.search(ADA, query)
    terms = {"hello", "world", "a", "b", "1", "x", "or"}
    for hit in hits:  # only real words can match
        assert terms & set(hit.message["content"].split())


def test_database_errors_surface_as_transcript_errors(monkeypatch):
    store = DjangoConditionalChatStore()
    store.write_chat(record("c1", "hello"), expected_revision=0)

    monkeypatch.setattr(
        "deuz_transcripts.backends.base.ChatFilter.chat_counts_sql",
        lambda self: ("SELECT no_such_column AS n FROM deuz_transcripts_chat", []),
    )
    with pytest.raises(TranscriptError):  # a scope wider than a tenant: N is counted
        store.transcript.search({**ADA, "team": "x"}, "hello")


@pytest.mark.django_db(databases=["default", "other"])
def test_every_store_honours_using():
    other = DjangoConditionalChatStore(using="other")
    other.write_chat(record("c1", "only elsewhere"), expected_revision=0)
    assert DjangoConditionalChatStore().load_chat("c1") is None
    assert DjangoTranscriptIndex().search(ADA, "elsewhere") == []
    assert [h.chat_id for h in other.transcript.search(ADA, "elsewhere")] == ["c1"]
    assert raw_matches("elsewhere", using="other") == 1
    assert raw_matches("elsewhere") == 0
    other.delete_chat("c1")
    assert Tombstone.objects.using("other").count() == 1
    assert not Tombstone.objects.exists()


def test_like_writes_keep_fts5_current_so_switching_back_is_safe():
    if connection.vendor != "sqlite":
        pytest.skip("SQLITE_BACKEND is an SQLite setting")
    store = DjangoConditionalChatStore()
    with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "like"}):
        store.write_chat(record("c1", "written under like"), expected_revision=0)
        store.write_chat(record("c1", "rewritten under like"), expected_revision=1)
    assert [h.index for h in store.transcript.search(ADA, "rewritten")] == [0]
    assert raw_matches("written") == 0
    store.delete_chat("c1")
    assert raw_matches("rewritten") == 0


def test_remove_of_a_stored_chat_drops_its_search_data_but_keeps_the_chat():
    store = DjangoConditionalChatStore()
    store.write_chat(record("c1", "removable words"), expected_revision=0)
    store.transcript.remove("c1")
    assert store.transcript.search(ADA, "removable") == []
    assert raw_matches("removable") == 0
    assert store.load_chat("c1")[0].messages[0]["content"] == "removable words"
    store.write_chat(record("c1", "removable words"), expected_revision=1)  # re-indexed
    assert len(store.transcript.search(ADA, "removable")) == 1
    assert raw_matches("removable") == 1


def test_delete_chats_deletes_several_in_one_go():
    store = DjangoConditionalChatStore()
    for number in range(3):
        store.write_chat(record(f"c{number}", f"batch{number} words"), expected_revision=0)
    store.delete_chats(["c0", "c2", "never-written"])
    assert [h.chat_id for h in store.transcript.search(ADA, "words")] == ["c1"]
    assert raw_matches("batch0") == raw_matches("batch2") == 0
    assert set(Tombstone.objects.values_list("chat_id", flat=True)) == {"c0", "c2", "never-written"}


# 100,000 messages in one chat (the memory store alongside)


HUGE = 100_000


def huge_chat() -> list[dict[str, Any]]:
    return [
        {"role": "assistant" if n % 2 else "user", "content": f"message {n} word{n % 1000}"}
        for n in range(HUGE)
    ]


@pytest.mark.parametrize("kind", ["memory", "database"])
def test_100000_messages_in_one_chat(kind):
    """Written once, searched (on SQLite with FTS5 and LIKE), appended to cheaply, loaded."""
    if kind == "memory" and connection.vendor != "sqlite":
        pytest.skip("the memory variant runs once, in the SQLite run")
    store = (
        InMemoryConditionalChatStore(InMemoryTranscriptIndex())
        if kind == "memory"
        else DjangoConditionalChatStore()
    )
    messages = huge_chat()
    started = time.monotonic()
    store.write_chat(ChatRecord("huge", ADA, messages), expected_revision=0)
    first_write = time.monotonic() - started
    backends = (
        ["database", "like"] if kind == "database" and connection.vendor == "sqlite" else [kind]
    )
    for backend in backends:
        with backend_settings(backend):
            hits = store.transcript.search(ADA, "word7 message", around=1, limit=5)
            assert [h.index for h in hits][:1] == [7]
            assert [m.index for m in hits[0].around] == [6, 8]
            assert len(store.transcript.search(ADA, "word999", limit=1000)) == 100
            assert (
                store.transcript.search(ADA, "message", offset=99_990, limit=50)[-1].index == 99_999
            )
    pks = None if kind == "memory" else set(Message.objects.values_list("pk", flat=True))
    messages.append({"role": "user", "content": "appended needle"})
    started = time.monotonic()
    with CaptureQueriesContext(connection) as queries:
        assert store.write_chat(ChatRecord("huge", ADA, messages), expected_revision=1) == 2
    append = time.monotonic() - started
    print(f"100,000 messages, {kind}: write {first_write:.1f} s, append one {append:.1f} s")
    if pks is not None:  # the database work of an append does not grow with the chat
        assert len(queries) < 30
        after = set(Message.objects.values_list("pk", flat=True))
        assert pks < after and len(after - pks) == 1  # one row inserted, none rewritten
    assert [h.index for h in store.transcript.search(ADA, "needle")] == [HUGE]
    loaded, revision = store.load_chat("huge")
    assert (len(loaded.messages), revision) == (HUGE + 1, 2)


def test_a_scope_smaller_than_the_walk_threshold_is_never_probed(monkeypatch):
    """N is counted first: a scope holding fewer messages than the probe's cap cannot
    have that many rows with every term, so it is ranked at once."""
    from deuz_transcripts.backends import policy

    store = DjangoConditionalChatStore()
    for n in range(3):
        store.write_chat(record(f"c{n}", "common words", "common again"), expected_revision=0)
    monkeypatch.setattr(policy, "FORCED", forced_policies(small_read_rows=7))
    with CaptureQueriesContext(connection) as queries:
        hits = store.transcript.search(ADA, "common", limit=3)
    assert [h.score for h in hits] == [1.0, 1.0, 1.0]
    probe = "SELECT count(*) FROM (SELECT 1 FROM"
    assert not any(probe in q["sql"] for q in queries.captured_queries)
    monkeypatch.setattr(policy, "FORCED", forced_policies(small_read_rows=6))
    with CaptureQueriesContext(connection) as queries:
        assert store.transcript.search(ADA, "common", limit=3) == hits
    assert any(probe in q["sql"] for q in queries.captured_queries)


def test_long_queries_read_only_the_rarest_terms_rows_when_that_is_exact(monkeypatch):
    """The essential-terms plan: every n_t counted in the index, then the rarest terms'
    rows only, while no row holding none of them can reach the page; same hits and scores
    as the memory index, and as the mask plans it gives up for."""
    from deuz_transcripts.backends import policy

    if DjangoTranscriptIndex().backend_name == "sqlite-like":
        pytest.skip("the LIKE fallback counts nothing in an index")
    store = DjangoConditionalChatStore()
    index = InMemoryTranscriptIndex()
    memory = InMemoryConditionalChatStore(index)
    for n in range(30):
        words = ["common", *(["alpha"] * (n < 25)), *(["mid"] * (n < 10))]
        words += [f"rare{k}" for k in (1, 2, 3) if n < 4 - k]
        chat = record(f"c{n:02}", " ".join(words), "common filler")
        chat.updated_at = datetime(2025, 1, 1 + n, tzinfo=UTC)
        store.write_chat(chat, expected_revision=0)
        memory.write_chat(chat, expected_revision=0)
    read: list[str] = []
    source_class = type(store.transcript.backend.source)
    original = source_class.rows_with_terms

    def spy(self, cursor, chats, terms, wanted, skipped, *expected):
        read.append(terms[wanted])
        return original(self, cursor, chats, terms, wanted, skipped, *expected)

    monkeypatch.setattr(source_class, "rows_with_terms", spy)
    query = "common alpha mid rare1 rare2 rare3"

    def search(
        max_rows: int, limit: int, small_read_rows: int = 2_048, rare_rows: int = 0
    ) -> list[tuple]:
        read.clear()
        forced = forced_policies(
            single_statement_max=0,
            lexeme_scope_min=0,
            essential_max_rows=max_rows,
            essential_rare_rows=rare_rows,
            small_read_rows=small_read_rows,
        )
        monkeypatch.setattr(policy, "FORCED", forced)
        with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SCAN_SCOPE_MAX": 0}):
            hits = store.transcript.search(ADA, query, limit=limit)
        return [(h.chat_id, h.message_id, h.score) for h in hits]

    expected = [(h.chat_id, h.message_id, h.score) for h in index.search(ADA, query, limit=3)]
    assert search(10_000, 3) == expected
    assert read == ["rare3", "rare2", "rare1"]  # 3 rows beat any row of the other terms
    assert search(2, 3) == expected  # rare3 + rare2 hold 3 > 2 rows: the mask plans rank
    assert read == ["rare3"]
    deep = [(h.chat_id, h.score) for h in index.search(ADA, query, limit=40)]
    assert [(chat_id, score) for chat_id, _, score in search(10_000, 40)] == deep
    # the most common term holds more rows (60) than the page (40), or is over the
    # budget: its rows holding no other term are one mask of known count, read (or
    # walked newest first) only for the page
    assert read == ["rare3", "rare2", "rare1", "mid", "alpha"]
    everything = [(h.chat_id, h.message_id, h.score) for h in index.search(ADA, query, limit=70)]
    assert len(everything) == 60
    assert search(10_000, 70) == everything  # a page as deep as every match reads them all
    assert read == ["rare3", "rare2", "rare1", "mid", "alpha", "common"]
    assert search(45, 40) == everything[:40]
    assert read == ["rare3", "rare2", "rare1", "mid", "alpha"]
    assert search(45, 40, small_read_rows=1) == everything[:40]
    assert search(40, 40) == everything[:40] and read == ["rare3", "rare2", "rare1", "mid"]
    # the terms of at most 3 rows (rare3: 1, rare2: 2) are read first in one statement;
    # then term by term, rarest first
    assert search(10_000, 3, rare_rows=3) == expected and read == ["rare1"]
    assert search(10_000, 3, rare_rows=6) == expected and read == []
    assert [(chat_id, score) for chat_id, _, score in search(10_000, 40, rare_rows=6)] == deep
    store.write_chat(
        record("bob-1", "rare3 rare2 rare1", scope={"userId": "bob"}), expected_revision=0
    )
    if store.transcript.backend.counts.rare_terms == "by_filter_counts":
        # PostgreSQL picks them by their rows in the filter: another user's rows are not ADA's
        assert search(10_000, 3, rare_rows=3) == expected and read == ["rare1"]
        return
    # FTS5 picks them by their rows in the whole index, then counts them in the scope
    assert search(10_000, 3, rare_rows=3) == expected and read == ["rare2", "rare1"]
    assert search(10_000, 3, rare_rows=6) == expected and read == ["rare1"]


@pytest.mark.parametrize("secure", [True, False])
def test_each_terms_count_is_exact_after_deletes_and_rewrites(secure):
    """The essential-terms plan's n_t (FTS5: its vocabulary when unfiltered; GIN counts)
    equals the rows holding the term, whatever deletes and rewrites left in the index."""
    from deuz_transcripts.backends.chat_filter import ChatFilter
    from deuz_transcripts.backends.matches import Matches
    from deuz_transcripts.sql.search.statistics import SearchStatistics

    if DjangoTranscriptIndex().backend_name == "sqlite-like":
        pytest.skip("the LIKE fallback counts nothing in an index")
    with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SECURE_DELETE": secure}):
        store = DjangoConditionalChatStore()
        revisions = {}
        for n in range(8):
            texts = ["alpha beta", f"gamma {n}", "alpha delta" if n % 2 else "beta"]
            revisions[n] = store.write_chat(record(f"c{n}", *texts), expected_revision=0)
        for n in (1, 4):
            store.delete_chat(f"c{n}")
        for n in (2, 5):  # rewritten: one message changed, one dropped
            store.write_chat(record(f"c{n}", "alpha omega"), expected_revision=revisions[n])
        terms = ["alpha", "beta", "gamma", "delta", "omega", "absent", "2", "4"]
        backend = store.transcript.backend
        role_tokens = backend.source.role_tokens
        with connection.cursor() as cursor:
            statistics = SearchStatistics(backend.source.policy)

            def matches(scope: dict[str, str]) -> Matches:
                chats = ChatFilter(scope, role_tokens=role_tokens)
                return Matches(backend.source, backend.counts, cursor, chats, terms)

            unfiltered = statistics.of(matches({})).term_counts(terms)
            scoped = statistics.of(matches(ADA)).term_counts(terms)
    expected = [raw_matches(term) for term in terms]
    assert unfiltered == scoped == expected == [8, 6, 4, 2, 2, 0, 0, 0]


def test_postgresql_counts_raise_work_mem_inside_and_put_it_back():
    """GIN counts run with an exact bitmap (``BITMAP_WORK_MEM``) and leave the session's
    settings as they were, in a transaction or not."""
    from django.db import transaction

    from deuz_transcripts.backends.postgresql.session import BITMAP_WORK_MEM
    from deuz_transcripts.backends.postgresql.session import bitmap_scans as _bitmap_scans

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's planner settings")
    store = DjangoConditionalChatStore()
    store.write_chat(record("c1", "alpha beta"), expected_revision=0)
    with connection.cursor() as cursor:
        cursor.execute("SET work_mem = '2MB'")
        with _bitmap_scans("default", cursor):
            cursor.execute("SELECT current_setting('work_mem'), current_setting('enable_seqscan')")
            assert cursor.fetchone() == (BITMAP_WORK_MEM, "off")
        store.transcript.search(ADA, "alpha beta gamma delta epsilon")  # every plan's counts
        with transaction.atomic():
            store.transcript.search(ADA, "alpha")
            cursor.execute("SELECT current_setting('work_mem'), current_setting('enable_seqscan')")
            assert cursor.fetchone() == ("2MB", "on")
        cursor.execute("SELECT current_setting('work_mem'), current_setting('enable_seqscan')")
        assert cursor.fetchone() == ("2MB", "on")
        cursor.execute("SET work_mem = '1GB'")  # never lowered
        with _bitmap_scans("default", cursor):
            cursor.execute("SELECT current_setting('work_mem')")
            assert cursor.fetchone() == ("1GB",)
        cursor.execute("RESET work_mem")


def test_a_small_scope_finds_a_long_querys_masks_in_python(monkeypatch):
    """A scanned scope and a query of ``scan_python_min_terms`` terms or more: each row's
    mask comes from its ``search_text`` in Python, and each mask keeps its first rows in
    tie order (newer chat, chat id by code point, lower index); same page as the memory
    index at every offset."""
    from deuz_transcripts.backends.sqlite import scope_scan

    if DjangoTranscriptIndex().backend_name != "sqlite-fts5":
        pytest.skip("the scan of small scopes is SQLite FTS5's")
    store = DjangoConditionalChatStore()
    memory = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
    for n, chat_id in enumerate(["b", "a", "é", "c-10", "c-9", "Z"]):
        chat = record(chat_id, "alpha beta", "beta alpha gamma", "alpha", f"beta word{n}")
        chat.updated_at = datetime(2025, 1, 1 + n % 3, tzinfo=UTC)  # ties on updated_at
        store.write_chat(chat, expected_revision=0)
        memory.write_chat(chat, expected_revision=0)
    store.write_chat(record("other", "alpha beta", scope={"userId": "bob"}), expected_revision=0)
    scanned: list[int] = []
    original = scope_scan.scanned_candidates

    def spy(cursor, chats, terms, depth):
        histogram, found = original(cursor, chats, terms, depth)
        scanned.append(sum(histogram.values()))
        return histogram, found

    monkeypatch.setattr("deuz_transcripts.backends.sqlite.fts5.scanned_candidates", spy)
    query = "alpha beta gamma " + " ".join(f"absent{k}" for k in range(8))
    for offset in range(24):  # each page cut falls inside ties and between them
        for limit in (1, 3):
            got = store.transcript.search(ADA, query, limit=limit, offset=offset)
            want = memory.transcript.search(ADA, query, limit=limit, offset=offset)
            assert [(h.chat_id, h.message_id, h.score) for h in got] == [
                (h.chat_id, h.message_id, h.score) for h in want
            ]
    assert scanned == [24] * 48  # every scoped message holds a query term


def test_one_term_over_every_chat_does_not_count_n():
    """Every hit of a one-term query scores 1.0 whatever N (raw score / best), so a search
    of every chat for a word in fewer rows than a walk needs never reads N, which is a pass
    over every chat; same page as the memory index."""
    if not DjangoTranscriptIndex().backend.source.walks_newest_first:
        pytest.skip("the LIKE fallback ranks every match in one statement")
    store = DjangoConditionalChatStore()
    memory = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
    for n in range(6):
        chat = record(f"c{n}", "rare word" if n % 2 else "other words", "more words")
        chat.scope = {"userId": "ada" if n < 3 else "bob"}
        chat.updated_at = datetime(2025, 1, 1 + n, tzinfo=UTC)
        store.write_chat(chat, expected_revision=0)
        memory.write_chat(chat, expected_revision=0)
    for offset in range(4):
        with CaptureQueriesContext(connection) as queries:
            got = store.transcript.search({}, "rare", limit=2, offset=offset)
        want = memory.transcript.search({}, "rare", limit=2, offset=offset)
        assert [(h.chat_id, h.message_id, h.score) for h in got] == [
            (h.chat_id, h.message_id, h.score) for h in want
        ]
        assert all(h.score == 1.0 for h in got)
        assert not any("indexed_count" in q["sql"] for q in queries.captured_queries)
    assert len(store.transcript.search({}, "rare words", limit=5)) == 5  # two terms read N


def test_postgresql_looks_up_the_chats_of_a_known_few_rows_by_key():
    """A statement joining few rows, known in advance, to their chats looks each chat up
    (a LIMITed LATERAL subquery is never made a hash of the whole chat table); unknown or
    many rows keep the planner's join. A read of one mask selects it as a constant, so no
    vector is tested (nor detoasted) to compute it."""
    from deuz_transcripts.backends.chat_filter import ChatFilter
    from deuz_transcripts.backends.postgresql.counts.statistics import PostgresStoredCounts
    from deuz_transcripts.backends.postgresql.engine import PostgresRowSource
    from deuz_transcripts.backends.postgresql.policy import PostgresPolicy

    policy = forced_policies(chat_lookup_max_rows=100)[PostgresPolicy]
    source = PostgresRowSource("default", policy, PostgresStoredCounts("default"))
    assert "LATERAL" in source.chat_join("h.chat_pk", 100)
    assert "LATERAL" not in source.chat_join("h.chat_pk", 101)
    assert "LATERAL" not in source.chat_join("h.chat_pk")
    chats = ChatFilter({}, role_tokens=True)
    one, _ = source.mask_matches_sql(chats, ["alpha", "beta"], {3})
    both, _ = source.mask_matches_sql(chats, ["alpha", "beta"], {1, 3})
    assert "SELECT m.id, 3 AS mask" in one and "CASE" not in one
    assert "CASE" in both
