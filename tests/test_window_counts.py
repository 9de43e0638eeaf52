"""PostgreSQL: n_t of a date window that holds most of a filter's messages.

A window's n_t are counted in GIN, and a GIN count visits every found row's heap tuple,
however few of them the window keeps. Where a window over every chat holds more than half
of the indexed messages, a counted term's n_t is its stored count less its rows outside
the window, in the same statement: only the smaller side is visited (a tenant's window
counts its own rows: there either side's count costs the tenant's rows). A query of five words or more
counts each word's n_t over the window so (the essential-terms plan, as without one)
instead of ranking every match. Hits, order and scores are the in-memory index's either
way.
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
from deuz_transcripts.backends import policy
from deuz_transcripts.backends.policy import PlanPolicy
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
#: the count of a term's rows outside the window (``ChatFilter.outside_window``)
OUTSIDE = "NOT (c.updated_at"
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
COUNTED_SUBSETS = PlanPolicy(
    lexeme_scope_min=1,
    rare_lexeme_scope_min=0,
    single_statement_max=0,
    walk_min_rows=10**9,
    walk_guess_max_rows=0,
)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Any:
    """With ``TENANT_KEY = "userId"``: "common", "word" and "other" are counted, for
    every chat and for ada and bob."""
    monkeypatch.setattr(policy, "DEFAULT_POLICY", COUNTED_SUBSETS)
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


def expected(query: str, scope: dict[str, str], **window: Any) -> list[tuple[str, str, float]]:
    memory = InMemoryTranscriptIndex()
    for record in records():
        memory.index(record)
    hits = memory.search(scope, query, limit=LIMIT, **window)
    return [(h.chat_id, h.message_id, h.score) for h in hits]


def searched(
    store: Any, query: str, scope: dict[str, str], **window: Any
) -> tuple[list[tuple[str, str, float]], bool]:
    """The hits, and whether a statement counted rows outside the window."""
    with CaptureQueriesContext(connection) as queries:
        hits = store.transcript.search(scope, query, limit=LIMIT, **window)
    outside = any(OUTSIDE in q["sql"] for q in queries.captured_queries)
    return [(h.chat_id, h.message_id, h.score) for h in hits], outside


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


@pytest.mark.parametrize("window", MOST)
@pytest.mark.parametrize("query", ["common rare1", "rare2 other", "word rare0 rare3"])
def test_a_window_of_most_messages_counts_the_rows_outside_it(store, query, window):
    hits, outside = searched(store, query, {}, **window)
    assert outside
    assert hits == expected(query, {}, **window)


@pytest.mark.parametrize("window", MOST)
def test_a_counted_tenant_s_window_counts_its_own_rows(store, window):
    hits, outside = searched(store, "common rare1", ADA, **window)
    assert not outside
    assert hits == expected("common rare1", ADA, **window)


@pytest.mark.parametrize("window", FEW)
@pytest.mark.parametrize("scope", [{}, ADA])
def test_a_window_of_few_messages_counts_its_own_rows(store, scope, window):
    hits, outside = searched(store, "common rare1", scope, **window)
    assert not outside
    assert hits == expected("common rare1", scope, **window)


@pytest.mark.parametrize("window", MOST)
def test_roles_in_a_window_subtract_the_rows_of_those_roles(store, window):
    hits, outside = searched(store, "common rare2", {}, roles=["assistant"], **window)
    assert outside
    assert hits == expected("common rare2", {}, roles=["assistant"], **window)


def test_a_scope_without_stored_counts_counts_the_window_itself(store):
    scope = {"userId": "ada", "other": "field"}
    window = MOST[0]
    hits, outside = searched(store, "common rare1", scope, **window)
    assert not outside
    assert hits == expected("common rare1", scope, **window) == []


def test_a_chat_written_since_moves_into_the_window(store):
    """A chat written after an earlier search moves from outside the window into it: its
    rows leave the subtracted count and join the window's n_t."""
    window = MOST[0]
    before = searched(store, "common rare0", {}, **window)[0]
    moved = replace(next(r for r in records() if r.chat_id == "ada0"), updated_at=LATER)
    store.write_chat(moved, expected_revision=1)
    memory = InMemoryTranscriptIndex()
    for record in records():
        memory.index(moved if record.chat_id == moved.chat_id else record)
    hits, outside = searched(store, "common rare0", {}, **window)
    assert outside
    assert hits != before
    assert hits == [
        (h.chat_id, h.message_id, h.score)
        for h in memory.search({}, "common rare0", limit=LIMIT, **window)
    ]


def counted_in_window(statements: list[str]) -> list[str]:
    """The statements that count one term's rows in the window: in GIN, or as its
    stored count less its rows outside."""
    return [
        sql
        for sql in statements
        if "@@" in sql
        and "updated_at" in sql
        and (sql.startswith("SELECT count(*) FROM") or sql.startswith("SELECT CASE WHEN EXISTS"))
    ]


@pytest.mark.parametrize("window", [*MOST, *FEW])
@pytest.mark.parametrize("scope", [{}, ADA])
def test_a_long_query_in_a_window_counts_each_word_and_reads_the_rarest(store, scope, window):
    """Five words or more: each word's n_t over the window is counted (the essential-terms
    plan, as without a window), not every match read and ranked in one statement."""
    query = "common word other rare1 rare2"
    with CaptureQueriesContext(connection) as queries:
        hits = store.transcript.search(scope, query, limit=LIMIT, **window)
    statements = [q["sql"] for q in queries.captured_queries]
    assert [(h.chat_id, h.message_id, h.score) for h in hits] == expected(query, scope, **window)
    counted = counted_in_window(statements)
    assert counted
    assert any(OUTSIDE in sql for sql in counted) == (window in MOST and not scope)
