"""PostgreSQL: how a mid-size scope's matches are found.

A scope of at most ``lexeme_scope_min`` indexed messages reads its own rows through the
chat btree (GIN would merge a common word's whole posting list); above
``rare_lexeme_scope_min``, a query whose words' posting lists hold at most
``gin_rows_per_scope_row`` rows per message of the scope (stored counts, or the counted
terms' threshold for a word not counted) is filtered in GIN like a big scope, so its cost
follows the words' rows, not the scope's. A tenant too small for counts of its own is
guessed as dense as the whole index, so its common words walk its newest chats before
any probe. Hits, order and scores are the in-memory index's on every route.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.backends.postgresql.counts import statistics as postgresql_counts
from deuz_transcripts.backends.postgresql.counts import stored as term_counts
from deuz_transcripts.backends.postgresql.counts.refresh import refresh_term_counts
from deuz_transcripts.models import CountedTenant, CountedTerm, Message
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.sent_statements import reads_matches

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's GIN routes"),
]

ADA = {"userId": "ada"}
WHEN = datetime(2025, 3, 1, tzinfo=UTC)
#: the matching statement of a scope read through its own rows (``PostgresRowSource._matches``)
OWN_ROWS = "m.chat_id IN ("


def own_rows(sql: str) -> bool:
    """Whether ``sql`` reads ada's 24 messages' matches through the scope's own rows."""
    return OWN_ROWS in sql and "@@" in sql and reads_matches(sql, 24)


def records() -> Iterator[ChatRecord]:
    """Ada's 12 chats of 2 messages (24 in all), "common word" and "other text" in each
    chat and a rare word (in at most 5 messages) in each message; bob's 2 chats of 10
    messages of the common words, so they are common in the whole index."""
    for n in range(12):
        yield ChatRecord(
            f"a{n:02}",
            ADA,
            [
                {"role": "user", "content": f"common word rare{n}"},
                {"role": "assistant", "content": f"other text rare{n % 3}"},
            ],
            updated_at=WHEN + timedelta(minutes=n),
        )
    for n in range(2):
        yield ChatRecord(
            f"b{n}",
            {"userId": "bob"},
            [{"role": "user", "content": "common word other text"}] * 10,
            updated_at=WHEN + timedelta(minutes=n),
        )


#: a mid-size scope (ada's 24 messages: over 10, at most 100) is filtered in GIN when its
#: words' posting lists hold at most 24 rows (1 per message of the scope)
MID_SIZE = forced_policies(
    lexeme_scope_min=100, rare_lexeme_scope_min=10, gin_rows_per_scope_row=1, small_read_rows=10**9
)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Any:
    """ "common", "word", "other", "text" are counted terms (each in 32 messages), the rare
    words are not (in fewer than 10, the threshold the terms were chosen with)."""
    monkeypatch.setattr(policy, "FORCED", MID_SIZE)
    monkeypatch.setattr(term_counts, "COUNTED_MIN_ROWS", 10)
    store = DjangoConditionalChatStore()
    for record in records():
        store.write_chat(record, expected_revision=0)
    with connection.cursor() as cursor:
        refresh_term_counts(cursor, 10)
    assert set(CountedTerm.objects.values_list("lexeme", flat=True)) == {
        "common",
        "word",
        "other",
        "text",
    }
    return store


def expected(query: str, scope: dict[str, str]) -> list[tuple[str, str, float]]:
    memory = InMemoryTranscriptIndex()
    for record in records():
        memory.index(record)
    return [(h.chat_id, h.message_id, h.score) for h in memory.search(scope, query, limit=5)]


def searched(store: Any, query: str, scope: dict[str, str] = ADA) -> tuple[list[Any], bool]:
    """The hits, and whether a statement read the scope's own rows."""
    with CaptureQueriesContext(connection) as queries:
        hits = store.transcript.search(scope, query, limit=5)
    own = any(own_rows(q["sql"]) for q in queries.captured_queries)
    return [(h.chat_id, h.message_id, h.score) for h in hits], own


@pytest.mark.parametrize("query", ["rare1", "rare1 rare5", "rare3 nothing"])
def test_rare_words_of_a_mid_size_scope_are_found_in_gin(store, query):
    hits, own = searched(store, query)
    assert not own
    assert hits == expected(query, ADA)


@pytest.mark.parametrize(
    "query", ["common", "rare1 word", "other rare2 rare5", "rare0 rare4 rare7"]
)
def test_words_of_more_rows_than_the_scope_keep_its_own_rows(store, query):
    """A common word's posting list, or rare words' bounds summed past the scope's size."""
    hits, own = searched(store, query)
    assert own
    assert hits == expected(query, ADA)


def test_with_no_counted_term_nothing_is_known_rare(store):
    CountedTerm.objects.all().delete()
    hits, own = searched(store, "rare1")
    assert own
    assert hits == expected("rare1", ADA)


def test_a_small_scope_reads_its_own_rows_without_asking(store, monkeypatch):
    monkeypatch.setattr(policy, "FORCED", forced_policies(MID_SIZE, rare_lexeme_scope_min=24))
    asked = f"EXISTS (SELECT 1 FROM {CountedTerm._meta.db_table})"
    with CaptureQueriesContext(connection) as queries:
        hits, own = searched(store, "rare1")
    assert own
    assert not any(asked in q["sql"] for q in queries.captured_queries)
    assert hits == expected("rare1", ADA)
    monkeypatch.setattr(policy, "FORCED", forced_policies(MID_SIZE, rare_lexeme_scope_min=23))
    with CaptureQueriesContext(connection) as queries:
        hits, own = searched(store, "rare1")
    assert not own
    assert any(asked in q["sql"] for q in queries.captured_queries)


def test_filters_and_pages_of_a_routed_scope_rank_as_the_memory_index(store, monkeypatch):
    """Ada's 12 user messages: "rare1 rare2" (20 rows at most) is routed at 2 rows each."""
    monkeypatch.setattr(policy, "FORCED", forced_policies(MID_SIZE, gin_rows_per_scope_row=2))
    memory = InMemoryTranscriptIndex()
    for record in records():
        memory.index(record)
    with CaptureQueriesContext(connection) as queries:
        page = store.transcript.search_page(ADA, "rare1 rare2", limit=2, roles=["user"])
    assert not any(own_rows(q["sql"]) for q in queries.captured_queries)
    want = memory.search_page(ADA, "rare1 rare2", limit=2, roles=["user"])
    assert [(h.chat_id, h.message_id, h.score) for h in page.hits] == [
        (h.chat_id, h.message_id, h.score) for h in want.hits
    ]
    assert page.total == want.total
    after = store.transcript.search_page(ADA, "rare1 rare2", limit=2, cursor=page.next_cursor)
    want_after = memory.search_page(ADA, "rare1 rare2", limit=2, cursor=want.next_cursor)
    assert [(h.chat_id, h.message_id) for h in after.hits] == [
        (h.chat_id, h.message_id) for h in want_after.hits
    ]
    when = WHEN + timedelta(minutes=4)
    windowed = store.transcript.search(ADA, "rare1 rare2", updated_after=when)
    assert [(h.chat_id, h.score) for h in windowed] == [
        (h.chat_id, h.score) for h in memory.search(ADA, "rare1 rare2", updated_after=when)
    ]


@pytest.fixture
def tenant_store(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The same chats with ``TENANT_KEY = "userId"``: ada's scope is a tenant without counts
    of its own (under ``COUNTED_TENANT_MIN_ROWS``), searched by newest-first walks from 4
    rows on, never routed to GIN by size."""
    every = {**settings.DEUZ_TRANSCRIPTS, "TENANT_KEY": "userId"}
    walks = forced_policies(small_read_rows=4, lexeme_scope_min=100, rare_lexeme_scope_min=10**6)
    monkeypatch.setattr(policy, "FORCED", walks)
    with override_settings(DEUZ_TRANSCRIPTS=every):
        store = DjangoConditionalChatStore()
        for record in records():
            store.write_chat(record, expected_revision=0)
        with connection.cursor() as cursor:
            refresh_term_counts(cursor, 10)
            cursor.execute(f"ANALYZE {Message._meta.db_table}")  # the table's estimated rows
        assert not CountedTenant.objects.exists()
        yield store


def walked(store: Any, query: str) -> tuple[list[Any], bool, bool]:
    """The hits, whether the whole index's density was read, and whether the probe ran."""
    with CaptureQueriesContext(connection) as queries:
        hits = store.transcript.search(ADA, query, limit=5)
    sqls = [q["sql"] for q in queries.captured_queries]
    density = any("pg_class" in sql for sql in sqls)
    probe = any("AS probe" in sql for sql in sqls)
    return [(h.chat_id, h.message_id, h.score) for h in hits], density, probe


@pytest.mark.parametrize("query", ["common", "common word", "other text"])
def test_a_tenant_without_its_own_counts_is_walked_as_dense_as_the_index(tenant_store, query):
    """Its common words are as dense as in the whole index (32 of 44 rows each): the walk
    of the newest chats fills the page, with no probe."""
    hits, density, probe = walked(tenant_store, query)
    assert density
    assert not probe
    assert hits == expected(query, ADA)


@pytest.mark.parametrize("query", ["common rare1", "other text word"])
def test_a_guess_not_made_or_proved_wrong_leaves_the_probe_to_decide(tenant_store, query):
    """``rare1`` is not counted: no guess. No message of ada holds "other", "text" and
    "word" together (bob's do): the bounded walk finds none, and the probe follows."""
    hits, density, probe = walked(tenant_store, query)
    assert density
    assert probe
    assert hits == expected(query, ADA)


def test_a_tenant_big_enough_for_counts_of_its_own_is_not_guessed_from_the_index(
    tenant_store, monkeypatch
):
    """Its own counts (``SearchStatistics.stored``) are its guess; without them (not counted yet),
    the probe decides, as before."""
    monkeypatch.setattr(postgresql_counts, "COUNTED_TENANT_MIN_ROWS", 24)
    hits, density, probe = walked(tenant_store, "common word")
    assert not density
    assert probe
    assert hits == expected("common word", ADA)
