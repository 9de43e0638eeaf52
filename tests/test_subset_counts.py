"""Exact totals and mask histograms from counts of term subsets (PostgreSQL,
``postgresql.counts.subsets``): ``search_page`` of common words counts the rows holding
every term of each subset instead of every match, where that visits fewer rows, and
reads a stored term's own count instead of counting it; totals, pages and cursors stay
the memory index's."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given
from hypothesis import strategies as st

from deuz_transcripts import InMemoryTranscriptIndex
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.backends.postgresql.counts import statistics as postgresql_counts
from deuz_transcripts.backends.postgresql.counts.subsets import (
    subsets_beat_reading,
    subsets_visit_fewer,
    union_size,
)
from deuz_transcripts.backends.postgresql.engine import PostgresRowSource
from deuz_transcripts.models import Message
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.sent_statements import statements_sent
from tests.sql_support import spy_search_parts
from tests.test_term_counts import chat, count_terms, tenant_key

#: The row source's reads of matching rows (a count reads none).
ROW_READS = ("rows_with_terms", "rows_with_any_terms", "mask_candidates", "candidates")

#: Every term of these queries is too common for the essential-terms plan to read, and GIN
#: filters even a small tenant.
FORCED = forced_policies(
    single_statement_max=0,
    small_read_rows=6,
    essential_max_rows=6,
    essential_rare_rows=0,  # term by term, rarest first: these tests count per term
    lexeme_scope_min=0,
)


@given(st.lists(st.sets(st.integers(0, 40)), min_size=1, max_size=5))
def test_the_union_is_inclusion_exclusion_over_every_subset(rows_of_terms):
    together = {}
    for subset in range(1, 1 << len(rows_of_terms)):
        held = [rows for bit, rows in enumerate(rows_of_terms) if subset >> bit & 1]
        together[subset] = len(set.intersection(*held))
    assert union_size(together, len(rows_of_terms)) == len(set().union(*rows_of_terms))


def test_subsets_are_counted_where_they_visit_fewer_rows_than_the_union():
    assert subsets_visit_fewer(1_000_000, [400_000, 120_000])  # 48,000 rows against 472,000
    # three or more: each subset at most its rarest word's rows (words may go together)
    assert subsets_visit_fewer(1_000_000, [400_000, 30_000, 20_000])
    assert not subsets_visit_fewer(1_000_000, [50_000, 40_000, 30_000])
    assert not subsets_visit_fewer(1_000_000, [20_000] * 4)  # 11 counts of up to 20,000
    # nearly every row holds every term: 11 counts of ~all rows against one
    assert not subsets_visit_fewer(1_000, [990, 980, 995, 999])
    assert not subsets_visit_fewer(1_000, [500])  # one term: its count is the total
    assert not subsets_visit_fewer(0, [0, 0])


def test_subsets_give_the_histogram_where_they_visit_fewer_rows_than_reading():
    # two common words of a 50,000-message tenant: ~1,000 visits against 7,000 rows read
    assert subsets_beat_reading(50_000, [7_000, 7_000])
    assert not subsets_beat_reading(40, [40, 8])  # every row holds one: 8 visits, 8 reads
    assert not subsets_beat_reading(0, [0, 0])


def pages(index, scope, query):
    """Every page of ``search_page``: (total, [(message id, score)])."""
    got, cursor = [], None
    while True:
        page = index.search_page(scope, query, limit=4, cursor=cursor)
        got.append((page.total, [(hit.message_id, hit.score) for hit in page.hits]))
        if (cursor := page.next_cursor) is None:
            return got


def count_statements(statements):
    """The GIN counts among ``statements``: (of the union, of the term subsets)."""
    counts = [sql for sql in statements if "count(*)" in sql and "@@" in sql]
    union = [sql for sql in counts if sql.startswith("SELECT count(*)")]
    return union, [sql for sql in counts if " END, (SELECT count(*)" in sql]


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's GIN counts")
@pytest.mark.parametrize("scope", [{}, {"userId": "ada"}])
def test_common_words_total_and_next_pages_come_from_subset_counts(scope):
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        memory = InMemoryTranscriptIndex()
        for n in range(40):
            words = [*(["alpha"] * (n % 2 == 0)), *(["beta"] * (n % 3 != 1)), "filler"]
            record = chat(f"c{n:02}", "ada" if n % 5 else "bob", " ".join(words), minutes=n)
            store.write_chat(record, expected_revision=0)
            memory.index(record)
        assert count_terms(8, tenant_min_rows=20) == 3  # alpha, beta, filler
        with (
            mock.patch.object(policy, "FORCED", FORCED),
            CaptureQueriesContext(connection) as queries,
        ):
            got = pages(store.transcript, scope, "alpha beta")
        assert got == pages(memory, scope, "alpha beta")
        assert len(got) > 2
        statements = statements_sent(queries)
        union, subsets = count_statements(statements)
        assert union == []  # no count of every match
        # one statement per page: the terms' own stored counts (GIN only where a term is
        # not counted) and the count of the one subset of both, in one snapshot
        assert len(subsets) == len(got)
        assert all(sql.count("CASE WHEN EXISTS") == 2 for sql in subsets)


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's GIN counts")
def test_words_in_nearly_every_row_count_the_union_once():
    """Four words in every row: eleven subset counts would each visit every row."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        memory = InMemoryTranscriptIndex()
        for n in range(40):
            words = "alpha beta gamma delta" + " omega" * (n == 7)
            record = chat(f"c{n:02}", "ada", words, minutes=n)
            store.write_chat(record, expected_revision=0)
            memory.index(record)
        assert count_terms(8) == 4
        with (
            mock.patch.object(policy, "FORCED", FORCED),
            CaptureQueriesContext(connection) as queries,
        ):
            page = store.transcript.search_page({}, "alpha beta gamma delta", limit=4)
        want = memory.search_page({}, "alpha beta gamma delta", limit=4)
        assert (page.total, page.hits) == (want.total, want.hits) == (40, want.hits)
        union, subsets = count_statements(statements_sent(queries))
        assert len(union) == 1
        assert subsets == []


def written_tenant(store, memory, alpha_rows, beta_rows):
    """40 chats of one tenant: ``alpha`` in the first ``alpha_rows``, ``beta`` in every
    ``40 // beta_rows``-th; every term counted."""
    for n in range(40):
        words = [
            "filler",
            *(["alpha"] * (n < alpha_rows)),
            *(["beta"] * (n % (40 // beta_rows) == 0)),
        ]
        record = chat(f"c{n:02}", "ada", " ".join(words), minutes=n)
        store.write_chat(record, expected_revision=0)
        memory.index(record)
    assert count_terms(8, tenant_min_rows=20) == 3


#: No walk: the page's masks are read, so the counts are the histogram's only source.
EVERY_SUBSET = forced_policies(single_statement_max=0, small_read_rows=10**9, lexeme_scope_min=0)

#: The default reading budget: the essential-terms plan could read either word's rows.
READABLE = forced_policies(
    single_statement_max=0, small_read_rows=6, lexeme_scope_min=0, essential_rare_rows=0
)


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's GIN counts")
@pytest.mark.parametrize("scope", [{}, {"userId": "ada"}])
def test_a_counted_page_ranks_by_subset_counts_where_they_beat_reading_rows(scope, monkeypatch):
    """Two words of 24 and 20 rows among 40: one count of both (~12 rows visited) against
    reading the 20 rows of the rarer: the histogram comes from the counts, no term's rows
    are read, and every page is the memory index's."""
    with tenant_key("userId"):
        store, memory = DjangoConditionalChatStore(), InMemoryTranscriptIndex()
        written_tenant(store, memory, alpha_rows=24, beta_rows=20)
        calls = spy_search_parts(monkeypatch, store.transcript.backend, ROW_READS)
        with mock.patch.object(policy, "FORCED", READABLE):
            got = pages(store.transcript, scope, "alpha beta")
        assert got == pages(memory, scope, "alpha beta")
        assert len(got) > 2
        assert [call for call in calls if call != "mask_candidates"] == []


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's GIN counts")
def test_a_rarer_word_is_read_where_its_rows_cost_less_than_the_counts(monkeypatch):
    """``beta`` in 8 rows of 40, ``alpha`` in all: reading beta's 8 rows beats counting
    both (40 x 0.2 = 8 rows visited, and two posting lists)."""
    with tenant_key("userId"):
        store, memory = DjangoConditionalChatStore(), InMemoryTranscriptIndex()
        written_tenant(store, memory, alpha_rows=40, beta_rows=8)
        calls = spy_search_parts(monkeypatch, store.transcript.backend, ROW_READS)
        with mock.patch.object(policy, "FORCED", READABLE):
            got = pages(store.transcript, {}, "alpha beta")
        assert got == pages(memory, {}, "alpha beta")
        assert "rows_with_terms" in calls


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's GIN counts")
def test_a_total_left_to_count_is_counted_by_subsets_where_they_visit_fewer_rows():
    """``alpha`` in 36 rows of 40, ``beta`` in 8: reading beta's 8 rows costs less than
    counting both (so the histogram is not taken from the counts), but both are over the
    reading budget, so the page comes from the words' masks and the total is left to
    count: ``n_a + n_b - |a and b|``, never every match."""
    with tenant_key("userId"):
        store, memory = DjangoConditionalChatStore(), InMemoryTranscriptIndex()
        written_tenant(store, memory, alpha_rows=36, beta_rows=8)
        with (
            mock.patch.object(policy, "FORCED", FORCED),
            CaptureQueriesContext(connection) as queries,
        ):
            page = store.transcript.search_page({}, "alpha beta", limit=4)
        want = memory.search_page({}, "alpha beta", limit=4)
        assert (page.total, page.hits) == (want.total, want.hits)
        union, subsets = count_statements(statements_sent(queries))
        assert (len(union), len(subsets)) == (0, 1)


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's GIN counts")
def test_a_write_between_the_statements_gives_a_total_of_before_or_after_it():
    """Under READ COMMITTED each statement has its own snapshot: a delete committed
    right after the stored counts are read (for the choice: alone, or with N) must not
    mix into the total. The counts are read again with the subset counts, in one
    statement."""
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        store.write_chat(chat("both", "ada", "alpha beta", minutes=0), expected_revision=0)
        for n in range(10):
            store.write_chat(chat(f"a{n}", "ada", "alpha", minutes=n + 1), expected_revision=0)
        for n in range(5):
            store.write_chat(chat(f"b{n}", "ada", "beta", minutes=n + 20), expected_revision=0)
        count_terms(1)
        scope = {"userId": "ada"}
        assert store.transcript.search_page(scope, "alpha beta", limit=3).total == 16
        doomed = Message.objects.get(chat__chat_id="both").pk
        read_counts = postgresql_counts.stored_term_counts
        read_sized = PostgresRowSource.sized_candidates

        def then_a_delete_commits(cursor, *args, **kwargs):
            counts = read_counts(cursor, *args, **kwargs)
            cursor.execute(f"DELETE FROM {Message._meta.db_table} WHERE id = %s", [doomed])
            return counts

        def sized_then_a_delete_commits(self, cursor, *args, **kwargs):
            sized = read_sized(self, cursor, *args, **kwargs)
            cursor.execute(f"DELETE FROM {Message._meta.db_table} WHERE id = %s", [doomed])
            return sized

        with (
            mock.patch.object(policy, "FORCED", EVERY_SUBSET),
            mock.patch.object(postgresql_counts, "subsets_beat_reading", lambda *_: True),
            mock.patch.object(postgresql_counts, "stored_term_counts", then_a_delete_commits),
            mock.patch.object(PostgresRowSource, "sized_candidates", sized_then_a_delete_commits),
        ):
            page = store.transcript.search_page(scope, "alpha beta", limit=3)
        assert page.total == 15
