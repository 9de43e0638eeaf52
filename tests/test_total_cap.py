"""``search_page(total_cap=...)`` on the SQL backends (``Collector`` with ``count="capped"``): past the cap
the page is planned as ``search()`` plans it, a walk for common words, and no statement
counts every match; pages, scores and cursors stay the memory index's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from deuz_transcripts import InMemoryTranscriptIndex
from deuz_transcripts.backends import forced_policies, get_backend, policy
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.sent_statements import reads_with_params
from tests.sql_support import spy_search_parts
from tests.test_term_counts import chat, count_terms


@contextmanager
def tenant_key_counted(key: str) -> Iterator[None]:
    """``TENANT_KEY``, and SQLite counting terms in FTS5 even in a small scope (it would
    read a scope of up to ``SQLITE_SCAN_SCOPE_MAX`` rows, every match included)."""
    options = {**settings.DEUZ_TRANSCRIPTS, "TENANT_KEY": key, "SQLITE_SCAN_SCOPE_MAX": 0}
    with override_settings(DEUZ_TRANSCRIPTS=options):
        yield


pytestmark = pytest.mark.django_db

#: Walks pay off from six rows holding every term (the default is 2,048).
WALKS = forced_policies(single_statement_max=0, small_read_rows=6, lexeme_scope_min=0)
#: One FTS5 expression or tsquery of both words (``"alpha" OR "beta"``, ``'alpha' & 'beta'``).
BOTH_WORDS = re.compile(r"alpha[\"')\s]*(?:\||&|\bOR\b|\bAND\b)[\"'(\s!]*beta")
#: What reads or counts every match (or every mask) of the scope.
EVERY_MATCH = ("mask_histogram", "count_matches", "subset_histogram", "candidates")


def fill(store, memory, chats: int = 48) -> None:
    """Most messages hold alpha and beta (newest chats too), a few only one of them."""
    for n in range(chats):
        texts = ["alpha beta one", "alpha two" if n % 4 == 3 else "beta alpha three"]
        if n % 7 == 0:
            texts.append("beta four")
        record = chat(f"c{n:02}", "ada" if n % 5 else "bob", *texts, minutes=n)
        store.write_chat(record, expected_revision=0)
        memory.index(record)


def pages(index, scope, query, **options):
    """Every page: (total, total_exact, [(message id, score)], whether a cursor follows)."""
    got, cursor = [], None
    for _ in range(100):  # a wrong cursor may never end
        page = index.search_page(scope, query, limit=4, cursor=cursor, **options)
        hits = [(hit.message_id, hit.score) for hit in page.hits]
        got.append((page.total, page.total_exact, hits))
        if (cursor := page.next_cursor) is None:
            return got
    raise AssertionError("the cursors never ended")


@pytest.mark.parametrize("scope", [{}, {"userId": "ada"}])
def test_capped_pages_of_common_words_count_no_match_past_the_cap(scope, monkeypatch):
    with tenant_key_counted("userId"):
        store, memory = DjangoConditionalChatStore(), InMemoryTranscriptIndex()
        fill(store, memory)
        backend = get_backend(connection.alias)
        with mock.patch.object(policy, "FORCED", WALKS):
            exact = pages(store.transcript, scope, "alpha beta")
            calls = spy_search_parts(monkeypatch, backend, EVERY_MATCH)
            with CaptureQueriesContext(connection) as queries:
                first = store.transcript.search_page(scope, "alpha beta", limit=4, total_cap=10)
                second = store.transcript.search_page(
                    scope, "alpha beta", limit=4, total_cap=10, cursor=first.next_cursor
                )
            assert calls == []  # nothing read or counted every match
            capped = pages(store.transcript, scope, "alpha beta", total_cap=10)
    assert exact == pages(memory, scope, "alpha beta")
    assert (first.total, first.total_exact, second.total, second.total_exact) == (
        10,
        False,
        10,
        False,
    )
    # the same hits and scores on every page; only the totals are capped
    assert [hits for _total, _exact, hits in capped] == [hits for _t, _e, hits in exact]
    assert {(total, exact) for total, exact, _hits in capped} == {(10, False)}
    # a count of the rows holding either word (the union) or both (a subset) stops early;
    # each word's own n_t is counted as search() counts it
    counts = [q["sql"] for q in queries.captured_queries if "count(" in q["sql"].lower()]
    together = [sql for sql in counts if BOTH_WORDS.search(sql)]
    assert together and [sql for sql in together if "LIMIT" not in sql] == []


def test_a_cap_above_the_matches_counts_them_exactly(monkeypatch):
    """At most the cap match: the exact route, whose count is bounded by the cap."""
    store, memory = DjangoConditionalChatStore(), InMemoryTranscriptIndex()
    fill(store, memory, chats=6)
    with mock.patch.object(policy, "FORCED", WALKS):
        page = store.transcript.search_page({}, "alpha beta", total_cap=1_000)
    expected = memory.search_page({}, "alpha beta")
    assert (page.total, page.total_exact, page.hits) == (expected.total, True, expected.hits)
    assert page.total == 13


def test_the_next_page_after_the_rows_with_every_term_is_read_exactly(monkeypatch):
    """The cursor's hit lacks a term: rows holding both words but older in tie order were
    served before it (they outrank it), so walking them would repeat hits; the lower
    masks that follow take the exact route (still capped in what it reports)."""
    store, memory = DjangoConditionalChatStore(), InMemoryTranscriptIndex()
    fill(store, memory)  # 84 rows hold both words
    with mock.patch.object(policy, "FORCED", WALKS):
        first = store.transcript.search_page({}, "alpha beta", limit=85, total_cap=5)
        assert [h.score < 1.0 for h in first.hits[-2:]] == [False, True]
        backend = get_backend(connection.alias)
        calls = spy_search_parts(monkeypatch, backend, EVERY_MATCH)
        second = store.transcript.search_page(
            {}, "alpha beta", limit=4, total_cap=5, cursor=first.next_cursor
        )
        assert calls  # the exact route: every mask counted
        rest = pages(store.transcript, {}, "alpha beta", total_cap=5)
    expected = memory.search_page({}, "alpha beta", limit=200).hits
    assert [h.message_id for h in first.hits + second.hits] == [h.message_id for h in expected[:89]]
    assert (second.total, second.total_exact) == (5, False)
    assert [m for _t, _e, hits in rest for m, _s in hits] == [h.message_id for h in expected]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's stored counts")
@pytest.mark.parametrize("scope", [{}, {"userId": "ada"}])
def test_a_stored_count_past_the_cap_decides_without_counting(scope):
    """One word's stored count already passes the cap: the union holds more."""
    with tenant_key_counted("userId"):
        store, memory = DjangoConditionalChatStore(), InMemoryTranscriptIndex()
        fill(store, memory)
        assert count_terms(8, tenant_min_rows=20) >= 2  # alpha and beta counted
        with mock.patch.object(policy, "FORCED", WALKS), executed_plans() as plans:
            page = store.transcript.search_page(scope, "alpha beta", limit=4, total_cap=30)
        with mock.patch.object(policy, "FORCED", WALKS):
            capped = pages(store.transcript, scope, "alpha beta", total_cap=30)
    expected = memory.search_page(scope, "alpha beta", limit=4)
    assert (page.hits, page.total, page.total_exact) == (expected.hits, 30, False)
    assert page.next_cursor == expected.next_cursor  # N and n_t pinned from the counts
    exact_pages = pages(memory, scope, "alpha beta")
    assert [hits for _t, _e, hits in capped] == [hits for _t, _e, hits in exact_pages]
    statements = [sql for sql, _plan in plans]
    counts = [plan for sql, plan in plans if "count(" in sql.lower()]
    assert [plan for plan in counts if executed_word_pairs(plan)] == []  # none of both words
    # N read once: the walk's guess and the pinned ranking share it
    assert sum("t.lexeme = ''" in sql for sql in statements) == 1


def counts_decide_the_cap() -> bool:
    """PostgreSQL (stored counts) and FTS5 (doclists) decide a cap from each word's count."""
    return get_backend(connection.alias).name in ("postgresql", "sqlite-fts5")


@pytest.mark.parametrize(
    ("query", "cap", "total", "exact", "counted"),
    [
        # alpha 96 rows, beta 91, both 84, either 103
        ("alpha beta", 95, 95, False, None),  # alpha alone passes the cap
        ("alpha beta", 100, 100, False, "both"),  # fewer than 96 + 91 - 100 hold both
        ("alpha beta", 102, 102, False, "both"),  # 84 < 85: 103 rows hold one
        ("alpha beta", 103, 103, True, "both"),  # 84 hold both: exactly 103 hold one
        ("alpha beta", 187, 103, True, None),  # n_alpha + n_beta = 187: cannot pass it
        # four (7 rows) is not counted: GIN counts it, so 96 + 91 + 7 = 194 > 190
        ("alpha beta four", 190, 103, True, "either"),
        ("alpha beta four", 194, 103, True, None),
    ],
)
def test_stored_counts_decide_the_cap_where_they_can(query, cap, total, exact, counted):
    if not counts_decide_the_cap():
        pytest.skip("the LIKE fallback has no term counts: it counts the union")
    with tenant_key_counted("userId"):
        store, memory = DjangoConditionalChatStore(), InMemoryTranscriptIndex()
        fill(store, memory)
        if connection.vendor == "postgresql":
            count_terms(8, tenant_min_rows=20)
        with executed_plans() as plans:
            page = store.transcript.search_page({}, query, limit=4, total_cap=cap)
    assert (page.total, page.total_exact) == (total, exact)
    assert page.hits == memory.search_page({}, query, limit=4).hits
    # which count of several words ran: on PostgreSQL from the plans as executed (a count
    # of both words sits in the deciding statement, run only when the n_t leave it open)
    ran: list[set[str]] = []
    for sql, plan in plans:
        if connection.vendor == "postgresql":
            if sql_has(sql, "LIMIT (SELECT n.a + n.b", f"LIMIT {cap + 1}"):
                ran.append(executed_word_pairs(plan))
        elif (
            sql_has(sql, f"LIMIT {96 + 91 - cap})", f"LIMIT {cap + 1})")
            and "count(" in sql
            and (pair := BOTH_WORDS.search(sql))
        ):
            ran.append({"both" if "AND" in pair.group() else "either"})
    assert set().union(*ran) == ({counted} if counted else set())


def sql_has(sql: str, *parts: str) -> bool:
    return any(part in sql for part in parts)


@contextmanager
def executed_plans() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Each read (parameters in) with, on PostgreSQL, its ``EXPLAIN ANALYZE`` plan, run
    just after it on the same data, on a cursor of its own (the read's rows stay to be
    fetched; the settings its query string set are still in force): a plan tells which
    subqueries ran."""
    plans: list[tuple[str, dict[str, Any]]] = []

    def explain(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        result = execute(sql, params, many, context)
        for read, own in reads_with_params(sql, params):
            if connection.vendor != "postgresql":
                plans.append((read % tuple(repr(p) for p in own), {}))
            elif read.lstrip().upper().startswith(("SELECT", "WITH")):
                with context["connection"].connection.cursor() as other:
                    other.execute(
                        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, FORMAT JSON) " + read, own
                    )
                    plan = other.fetchone()[0]
                plans.append((read % tuple(own), plan[0]["Plan"]))
        return result

    with connection.execute_wrapper(explain):
        yield plans


def executed_word_pairs(node: dict[str, Any]) -> set[str]:
    """``both`` / ``either``: plan nodes that ran a GIN search of both words together."""
    found: set[str] = set()
    if node.get("Actual Loops"):
        for key in ("Index Cond", "Recheck Cond", "Filter"):
            pair = BOTH_WORDS.search(str(node.get(key, "")))
            if pair:
                found.add("both" if "&" in pair.group() else "either")
    for child in node.get("Plans", ()):
        found |= executed_word_pairs(child)
    return found
