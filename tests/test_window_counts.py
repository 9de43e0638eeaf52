"""PostgreSQL: a date window's statistics are the stored counts of the search without it.

A window filters hits only (SPEC §8): N and every n_t are those of the same search
without the window, so where that search's counts are stored (every chat, a counted
tenant, of any roles) a windowed search reads them too, and no term is counted over
the window's chats or over the chats outside it. Its hits are the memory index's: those
of the search without the window that the window holds, scored as there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.backends.postgresql.counts import stored as term_counts
from deuz_transcripts.backends.postgresql.counts.refresh import refresh_term_counts
from deuz_transcripts.models import CountedTenant, CountedTerm
from deuz_transcripts.stores import DjangoConditionalChatStore

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's stored counts"),
]

ADA = {"userId": "ada"}
WHEN = datetime(2025, 3, 1, tzinfo=UTC)
LATER = WHEN + timedelta(days=20)
#: a count of rows outside a window (the window complement this rule removed)
OUTSIDE = "NOT (c.updated_at"
#: the stored counts' table, read for N and n_t
STORED = CountedTerm._meta.db_table
#: more hits than rows hold every word of a query: a page ranked by n_t
LIMIT = 20


def records() -> Iterator[ChatRecord]:
    """Ada's 10 chats and bob's 10, one a day: "common word" in every message, a rare
    word in a few, "other" in ada's assistant messages."""
    for owner in ("ada", "bob"):
        for n in range(10):
            yield ChatRecord(
                f"{owner}{n}",
                {"userId": owner},
                [
                    {"role": "user", "content": f"common word rare{n % 4}"},
                    {"role": "assistant", "content": f"common other rare{n % 3}"},
                ],
                updated_at=WHEN + timedelta(days=n),
            )


#: every scope filtered in GIN, masks counted first, no walk: a window's masks come
#: from its term-subset counts
COUNTED_SUBSETS = forced_policies(
    lexeme_scope_min=1,
    rare_lexeme_scope_min=0,
    single_statement_max=0,
    small_read_rows=10**9,
    big_read_rows=0,
)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Any:
    """With ``TENANT_KEY = "userId"``: "common", "word" and "other" are counted, for
    every chat and for ada and bob."""
    monkeypatch.setattr(policy, "FORCED", COUNTED_SUBSETS)
    monkeypatch.setattr(term_counts, "COUNTED_MIN_ROWS", 15)
    tenants = {**settings.DEUZ_TRANSCRIPTS, "TENANT_KEY": "userId"}
    with override_settings(DEUZ_TRANSCRIPTS=tenants):
        store = DjangoConditionalChatStore()
        for record in records():
            store.write_chat(record, expected_revision=0)
        with connection.cursor() as cursor:
            refresh_term_counts(cursor, 15, tenant_min_rows=10, rebuild=True)
        counted = set(CountedTerm.objects.values_list("lexeme", flat=True))
        assert counted == {"common", "word", "other"}
        assert set(CountedTenant.objects.values_list("tenant", flat=True)) == {"ada", "bob"}
        yield store


def expected(query: str, scope: dict[str, str], **options: Any) -> list[tuple[str, str, float]]:
    memory = InMemoryTranscriptIndex()
    for record in records():
        memory.index(record)
    hits = memory.search(scope, query, limit=LIMIT, **options)
    return [(h.chat_id, h.message_id, h.score) for h in hits]


def searched(
    store: Any, query: str, scope: dict[str, str], limit: int = LIMIT, **options: Any
) -> tuple[list, list]:
    """The hits and the statements sent."""
    with CaptureQueriesContext(connection) as queries:
        hits = store.transcript.search(scope, query, limit=limit, **options)
    statements = [q["sql"] for q in queries.captured_queries]
    assert not any(OUTSIDE in sql for sql in statements)
    return [(h.chat_id, h.message_id, h.score) for h in hits], statements


#: windows keeping 8 of the 10 days (or 2 of them)
MOST = [
    {"updated_after": WHEN + timedelta(days=1, hours=12)},
    {"updated_before": WHEN + timedelta(days=7, hours=12)},
    {
        "updated_after": WHEN - timedelta(days=1),
        "updated_before": WHEN + timedelta(days=7, hours=12),
    },
]
FEW = [
    {"updated_after": WHEN + timedelta(days=7, hours=12)},
    {"updated_before": WHEN + timedelta(days=1, hours=12)},
]


def inside(window: dict[str, datetime], chat_id: str) -> bool:
    updated = next(r.updated_at for r in records() if r.chat_id == chat_id)
    after, before = window.get("updated_after"), window.get("updated_before")
    return (after is None or updated > after) and (before is None or updated < before)


@pytest.mark.parametrize("window", [*MOST, *FEW])
@pytest.mark.parametrize("scope", [{}, ADA])
@pytest.mark.parametrize("query", ["common rare1", "rare2 other", "word rare0 rare3"])
def test_a_window_reads_the_stored_counts_of_the_search_without_it(store, query, scope, window):
    hits, statements = searched(store, query, scope, **window)
    assert any(STORED in sql for sql in statements)
    assert hits == expected(query, scope, **window)
    # the hits of the search without the window that the window holds, scored as there
    every, _ = searched(store, query, scope, limit=1000)
    assert hits == [hit for hit in every if inside(window, hit[0])][:LIMIT]


@pytest.mark.parametrize("window", [*MOST, *FEW])
def test_roles_in_a_window_read_the_counts_of_those_roles(store, window):
    hits, statements = searched(store, "common rare2", {}, roles=["assistant"], **window)
    assert any(STORED in sql for sql in statements)
    assert hits == expected("common rare2", {}, roles=["assistant"], **window)


def test_a_scope_without_stored_counts_counts_the_search_without_the_window(store):
    scope = {"userId": "ada", "other": "field"}
    hits, _ = searched(store, "common rare1", scope, **MOST[0])
    assert hits == expected("common rare1", scope, **MOST[0]) == []
    ada = {"userId": "ada"}
    record = replace(next(r for r in records() if r.chat_id == "ada9"), scope={**ada, "x": "y"})
    store.write_chat(record, expected_revision=1)
    memory = InMemoryTranscriptIndex()
    for each in records():
        memory.index(record if each.chat_id == record.chat_id else each)
    for window in (*MOST, *FEW):
        hits, _ = searched(store, "common rare1", {**ada, "x": "y"}, **window)
        assert hits == [
            (h.chat_id, h.message_id, h.score)
            for h in memory.search({**ada, "x": "y"}, "common rare1", limit=LIMIT, **window)
        ]


def test_a_chat_written_since_moves_into_the_window(store):
    """A chat written after an earlier search moves into the window: it joins the hits,
    and the scores of the others stay (N and n_t do not follow the window)."""
    window = MOST[0]
    before, _ = searched(store, "common rare0", {}, **window)
    moved = replace(next(r for r in records() if r.chat_id == "ada0"), updated_at=LATER)
    store.write_chat(moved, expected_revision=1)
    memory = InMemoryTranscriptIndex()
    for record in records():
        memory.index(moved if record.chat_id == moved.chat_id else record)
    hits, _ = searched(store, "common rare0", {}, **window)
    assert {hit[0] for hit in hits} - {hit[0] for hit in before} == {"ada0"}
    scores = {hit[:2]: hit[2] for hit in hits}
    assert all(scores[hit[:2]] == hit[2] for hit in before if hit[:2] in scores)
    assert hits == [
        (h.chat_id, h.message_id, h.score)
        for h in memory.search({}, "common rare0", limit=LIMIT, **window)
    ]


@pytest.mark.parametrize("window", [*MOST, *FEW])
@pytest.mark.parametrize("scope", [{}, ADA])
def test_a_long_query_in_a_window_takes_its_n_t_from_the_stored_counts(store, scope, window):
    """Five words or more: the search without the window ranks by the essential-terms
    plan on the stored counts; the window's own page counts its rows, never a word's
    n_t over the chats outside it."""
    query = "common word other rare1 rare2"
    hits, statements = searched(store, query, scope, **window)
    assert hits == expected(query, scope, **window)
    assert any(STORED in sql for sql in statements)
    every, _ = searched(store, query, scope, limit=1000)
    assert hits == [hit for hit in every if inside(window, hit[0])][:LIMIT][: len(hits)]
