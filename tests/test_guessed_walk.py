"""The newest-first walk guessed from stored counts, and the bounded walk it runs.

Where PostgreSQL's stored counts give N and every n_t, and they predict (as if the words
were independent) that the newest chats of a few messages hold a page of rows with every
query word, those chats are walked at once: no probe, whose GIN AND merges whole posting
lists. The walk is bounded to those chats, so words that rarely meet cost that walk and
then the probe, never the whole scope. Every search here gives the memory index's hits.
"""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_transcripts import InMemoryTranscriptIndex
from deuz_transcripts.backends import backend_name_for, forced_policies, get_backend, policy
from deuz_transcripts.backends.chat_filter import request_filter
from deuz_transcripts.backends.policy import Forced
from deuz_transcripts.backends.postgresql.policy import PostgresPolicy
from deuz_transcripts.backends.sqlite.fts5_policy import Fts5Policy
from deuz_transcripts.search_request import SearchRequest
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.test_backend_parity import DENSE_SEARCHES, check_corpus, dense_corpora
from tests.test_term_counts import WHEN, chat, count_terms, tenant_key

pytestmark = pytest.mark.django_db

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's stored counts"
)

#: A page of 3 is guessed near when 2 pages of rows are expected within 64 messages.
GUESS = forced_policies(small_read_rows=4, big_read_rows=64, walk_guess_margin=2)
BOUNDED = "AS before"  # the bounded walk's statement
PROBE = "AS probe"  # the probe's
WINDOW_N = "COALESCE(SUM("  # N of a window: its chats' indexed messages summed
#: A window sized for its walks once one ended short: at most ``big_read_rows`` + 1 chat
#: rows read, never its N.
SIZED = "SELECT count(*), COALESCE(SUM(w.indexed_count), 0)"


def counts_window_n(sql: str) -> bool:
    """Whether a statement sums a window's N (not the walks' capped sizing of it)."""
    return WINDOW_N in sql and SIZED not in sql


class Corpus:
    """The same chats in the database (scope ``userId``, stored counts) and in memory."""

    def __init__(self) -> None:
        self.store = DjangoConditionalChatStore()
        self.memory = InMemoryTranscriptIndex()

    def add(self, chat_id: str, user: str, *texts: str, minutes: int) -> None:
        record = chat(chat_id, user, *texts, minutes=minutes)
        self.store.write_chat(record, expected_revision=0)
        self.memory.index(record)

    def statements(
        self, scope: dict[str, str], query: str, guess: Forced = GUESS, **options: object
    ) -> list[str]:
        """The statements of one search, whose hits must be the memory index's."""
        with (
            mock.patch.object(policy, "FORCED", guess),
            CaptureQueriesContext(connection) as queries,
        ):
            hits = self.store.transcript.search(scope, query, limit=3, **options)
        want = self.memory.search(scope, query, limit=3, **options)
        assert [(h.chat_id, h.message_id, h.score) for h in hits] == [
            (h.chat_id, h.message_id, h.score) for h in want
        ], (scope, query)
        assert hits, (scope, query)
        return [query["sql"] for query in queries.captured_queries]


@postgresql_only
def test_dense_words_are_walked_at_once_without_the_probe():
    """Every message holds both words: the newest chats of a few messages hold the page,
    for the whole index and for a counted tenant, with one word or two."""
    with tenant_key("userId"):
        corpus = Corpus()
        for n in range(30):
            user = "ada" if n % 3 else "bob"
            corpus.add(f"c{n:02}", user, f"alpha beta w{n}", "alpha beta filler", minutes=n)
        assert count_terms(10) == 3  # alpha, beta, filler
        for scope in ({}, {"userId": "ada"}):
            for query in ("alpha beta", "beta", "alpha filler beta"):
                statements = corpus.statements(scope, query)
                assert any(BOUNDED in sql for sql in statements), (scope, query)
                assert not any(PROBE in sql for sql in statements), (scope, query)


@postgresql_only
def test_words_that_rarely_meet_end_the_bounded_walk_and_the_probe_plans():
    """The counts say each word is in half the messages, so a quarter should hold both;
    they meet once, in the oldest chat: the bounded walk of the newest chats finds
    nothing, and the probe and the ranking find it, as the memory index does."""
    with tenant_key("userId"):
        corpus = Corpus()
        corpus.add("old", "ada", "gamma delta together", minutes=0)
        for n in range(1, 41):
            word = "gamma" if n <= 20 else "delta"
            corpus.add(f"c{n:02}", "ada", f"{word} one", f"{word} two", minutes=n)
        assert count_terms(10) == 4  # gamma, delta, one, two
        for scope in ({}, {"userId": "ada"}):
            statements = corpus.statements(scope, "gamma delta")
            bounded = [sql for sql in statements if BOUNDED in sql]
            assert len(bounded) == 1 and any(PROBE in sql for sql in statements), scope


#: The planner's masks read by ranking their rows (``mask_candidates``).
RANKED_READ = "WITH h AS MATERIALIZED"
#: Masks of fewer than 1,000 rows are read, unless a guessed walk fills their page.
UNDER_THE_WALK = forced_policies(
    single_statement_max=0,
    lexeme_scope_min=0,
    small_read_rows=1_000,
    big_read_rows=64,
    walk_guess_margin=2,
    essential_rare_rows=0,  # term by term: a batch would read these few rows whole
)


def alpha_beside_zeta(alpha_chats: int) -> Corpus:
    """``alpha zeta`` in the oldest chat, then 29 chats of two messages each holding
    ``alpha`` (the ``alpha_chats - 1`` oldest of them) or ``other``; terms counted."""
    corpus = Corpus()
    corpus.add("c00", "ada", "alpha zeta", "filler", minutes=0)
    for n in range(1, 30):
        word = "alpha" if n < alpha_chats else "other"
        corpus.add(f"c{n:02}", "ada", f"{word} one", f"{word} two", minutes=n)
    assert count_terms(5) >= 1
    return corpus


@postgresql_only
@pytest.mark.parametrize(("alpha_chats", "walks", "reads"), [(30, 1, 0), (20, 1, 1), (5, 0, 1)])
def test_a_page_mask_under_walk_min_rows_is_walked_where_dense_and_read_where_not(
    alpha_chats, walks, reads
):
    """``alpha`` everywhere but the rare ``zeta``'s row: the rows holding alpha alone are
    one mask of 59 rows of 60, under ``small_read_rows``, of which the newest chats of 7
    messages should hold two pages: walked there, not read and ranked whole. In the 20
    oldest chats only, the bounded walk of the newest chats finds none and the mask is
    read. In 5 chats (8 rows), a walk would visit more messages (3 x 60 / 8) than the
    mask holds rows: read at once."""
    with tenant_key("userId"):
        corpus = alpha_beside_zeta(alpha_chats)
        statements = corpus.statements({}, "alpha zeta", guess=UNDER_THE_WALK)
        walked = [sql for sql in statements if BOUNDED in sql]
        ranked = [sql for sql in statements if RANKED_READ in sql]
        assert (len(walked), len(ranked)) == (walks, reads)


#: Masks of 4 rows or more are walked newest chat first.
OVER_THE_WALK = forced_policies(UNDER_THE_WALK, small_read_rows=4)
#: The unbounded walk: the planner's own join of chats and rows, in tie order.
UNBOUNDED = " m ON m.chat_id = c.id WHERE"


@postgresql_only
@pytest.mark.parametrize(("alpha_chats", "unbounded"), [(30, 0), (20, 1), (5, 1)])
def test_a_page_mask_over_walk_min_rows_is_walked_bounded_first(alpha_chats, unbounded):
    """The rows holding alpha alone are one mask of at least ``small_read_rows``: walked
    newest chat first. The bounded walk comes first, so the cost follows the page even
    where PostgreSQL would sort every row of the mask; where the newest chats hold
    none, the unbounded walk finds them."""
    with tenant_key("userId"):
        corpus = alpha_beside_zeta(alpha_chats)
        statements = corpus.statements({}, "alpha zeta", guess=OVER_THE_WALK)
        walks = [sql for sql in statements if BOUNDED in sql or UNBOUNDED in sql]
        assert any(BOUNDED in sql for sql in walks)
        assert [UNBOUNDED in sql and BOUNDED not in sql for sql in walks].count(True) == unbounded


@postgresql_only
@pytest.mark.parametrize(
    ("alpha_chats", "big_read_rows", "read", "sized"),
    [(30, 64, False, False), (20, 64, False, True), (20, 40, True, True), (5, 64, False, True)],
)
def test_a_window_mask_is_walked_bounded_first_then_read_within_the_window(
    alpha_chats, big_read_rows, read, sized
):
    """In a date window no mask is counted (a window filters hits only): the rows
    holding alpha alone are walked from the window's upper bound within the newest
    chats the counts without the window predict hold a page of them. Where those hold
    too few, the window is sized once: one of at most ``big_read_rows`` messages (60
    here) is walked whole; a bigger one has the mask's rows within it read. The
    window's N is never read."""
    with tenant_key("userId"):
        corpus = alpha_beside_zeta(alpha_chats)
        window = {"updated_after": WHEN - timedelta(minutes=1)}
        guess = forced_policies(OVER_THE_WALK, big_read_rows=big_read_rows)
        statements = corpus.statements({}, "alpha zeta", guess=guess, **window)
        assert any(BOUNDED in sql for sql in statements)
        alpha_alone = [sql for sql in statements if RANKED_READ in sql and " 1 AS mask" in sql]
        assert bool(alpha_alone) == read
        assert [SIZED in sql for sql in statements].count(True) == sized
        assert not any(counts_window_n(sql) for sql in statements)


@postgresql_only
def test_a_date_window_is_walked_and_its_n_never_counted():
    """A window filters hits only: it is ranked by the search without it, and its rows
    are guessed as dense as that search's. A walk of the window that fills the page
    needs no N of the window (a pass over its chats); one that ends short (the window's
    rows hold the words apart) falls back to the probe of the search without the
    window, and where the probe's walk cannot fill the page either, the window's masks
    are read best first: never the window's N. Hits as the memory index gives them."""
    with tenant_key("userId"):
        corpus = Corpus()
        for n in range(30):  # the 10 newest chats hold the words apart
            texts = ("alpha beta", "alpha beta") if n < 20 else ("alpha one", "beta two")
            corpus.add(f"c{n:02}", "ada", *texts, minutes=n)
        assert count_terms(11) == 2  # alpha, beta
        for window in (
            {"updated_before": WHEN + timedelta(minutes=19, seconds=30)},
            {"updated_after": WHEN, "updated_before": WHEN + timedelta(minutes=15)},
            {"updated_after": WHEN + timedelta(minutes=4)},  # the probe walks
            {"updated_after": WHEN + timedelta(minutes=19, seconds=30)},  # masks best first
        ):
            for scope in ({}, {"userId": "ada"}):
                statements = corpus.statements(scope, "alpha beta", **window)
                assert any(BOUNDED in sql for sql in statements), (scope, window)
                assert not any(counts_window_n(sql) for sql in statements), (scope, window)
                assert [SIZED in sql for sql in statements].count(True) <= 1, (scope, window)


@postgresql_only
def test_no_guess_without_stored_counts_or_where_the_words_are_sparse():
    """A word not counted (rare, or new since the refresh), a scope narrower than a
    tenant, or counts that predict too few rows in the bound: the probe, as before the
    guess, and no bounded walk before it."""
    with tenant_key("userId"):
        corpus = Corpus()
        for n in range(30):
            rare = " zeta" if n == 7 else ""
            corpus.add(f"c{n:02}", "ada", f"alpha beta{rare}", "alpha", minutes=n)
        assert count_terms(10) == 2  # alpha, beta
        for scope, query, options in (
            ({}, "alpha zeta", {}),
            ({"userId": "ada"}, "beta zeta", {}),
            ({}, "alpha beta", {"chat_ids": [f"c{n:02}" for n in range(20)]}),
        ):
            statements = corpus.statements(scope, query, **options)
            assert not any(BOUNDED in sql for sql in statements), (scope, query, options)
        sparse = forced_policies(small_read_rows=4, big_read_rows=5, walk_guess_margin=2)
        statements = corpus.statements({}, "alpha beta", sparse)
        probe = next(n for n, sql in enumerate(statements) if PROBE in sql)
        assert not any(BOUNDED in sql for sql in statements[:probe])  # no guessed walk


def test_a_bounded_walk_reads_the_newest_chats_of_at_most_its_rows():
    """``newest_with_mask(within_rows=k)`` walks the chats with fewer than ``k`` indexed
    messages newer than them (ties by chat id), and its rows come in tie order: the same
    first rows as the unbounded walk wherever the bound holds enough of them."""
    backend = get_backend("default")
    if not backend.source.walks_newest_first:
        pytest.skip("the LIKE fallback does not walk")
    corpus = Corpus()
    sizes = [3, 1, 2, 4, 1, 2]  # chat n has sizes[n] messages; chat 5 is the newest
    for n, size in enumerate(sizes):
        corpus.add(f"c{n}", "ada", *[f"omega m{k}" for k in range(size)], minutes=n)
    corpus.add("tied", "ada", "omega tie", minutes=5)  # same time as c5, after it by id
    request = SearchRequest.build({}, "omega", limit=100)
    chats = request_filter(request, "default", role_tokens=backend.source.role_tokens)
    newest_first = ["c5", "tied", "c4", "c3", "c2", "c1", "c0"]
    size_of = {**{f"c{n}": size for n, size in enumerate(sizes)}, "tied": 1}
    with connection.cursor() as cursor:
        everything = backend.source.newest_with_mask(cursor, chats, ["omega"], 1, 100)
        assert [row.chat_id for row in everything] == [
            chat_id for chat_id in newest_first for _ in range(size_of[chat_id])
        ]
        for within in range(1, 16):
            before, walked = 0, set()
            for chat_id in newest_first:
                if before < within:
                    walked.add(chat_id)
                before += size_of[chat_id]
            rows = backend.source.newest_with_mask(
                cursor, chats, ["omega"], 1, 100, within_rows=within
            )
            assert rows == [row for row in everything if row.chat_id in walked], within
            page = backend.source.newest_with_mask(
                cursor, chats, ["omega"], 1, 2, within_rows=within
            )
            assert page == everything[: len(page)] and len(page) == min(2, len(rows))


#: No guess: the probe decides, and a walk it chooses is bounded to the newest 6 messages.
PROBED = forced_policies(small_read_rows=4, big_read_rows=0, probed_walk_max_rows=6)
#: Rows of a mask read and sorted (``ranked_candidates``; not N's statement, which holds
#: a small scope's candidates behind a filter on N).
READ = "WITH H AS MATERIALIZED"
COUNTED = "SELECT count(*) FROM (SELECT 1 FROM"  # the probe, on either database


@pytest.mark.parametrize(("old_pairs", "bounded", "read"), [(0, 1, 0), (1, 1, 1)])
def test_a_walk_the_probe_chose_is_bounded_and_rows_in_old_chats_are_read(old_pairs, bounded, read):
    """Rows holding both words gather in old chats: the walk stops at the newest 6
    messages and the rows holding both are read and sorted, not the whole scope walked.
    Where the newest messages hold the page, the bounded walk is all."""
    if not get_backend("default").source.walks_newest_first:
        pytest.skip("the LIKE fallback does not walk")
    corpus = Corpus()
    for n in range(6):  # 6 rows holding both words, in the oldest chats
        corpus.add(f"old{n}", "ada", "alpha beta", minutes=n)
    for n in range(8):  # 16 newer messages, one word each
        corpus.add(f"new{n}", "ada", "alpha", "beta", minutes=10 + n)
    if not old_pairs:  # the newest chats hold a page of rows with both words
        for n in range(3):
            corpus.add(f"newest{n}", "ada", "alpha beta", minutes=30 + n)
    statements = corpus.statements({"userId": "ada"}, "alpha beta", guess=PROBED)
    assert sum(COUNTED in sql for sql in statements) == 1
    assert sum(BOUNDED in sql for sql in statements) == bounded
    assert sum(READ in sql.upper() for sql in statements) == read
    unbounded = corpus.statements(
        {"userId": "ada"},
        "alpha beta",
        guess=forced_policies(PROBED, probed_walk_max_rows=0),
    )
    assert not any(BOUNDED in sql or READ in sql.upper() for sql in unbounded)


def test_only_postgresql_bounds_a_walk_the_probe_chose_by_default():
    """FTS5 keeps the unbounded walk: with no stored counts every walk of a dense word
    is the probe's, and its bound would cost a window over the newest chats first."""
    name = backend_name_for("default")
    bound = get_backend("default").source.policy.probed_walk_max_rows
    if name == "sqlite-fts5":
        assert bound == Fts5Policy().probed_walk_max_rows == 0
    else:
        assert bound == PostgresPolicy().probed_walk_max_rows > 0


@postgresql_only
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=dense_corpora(), searches=st.lists(DENSE_SEARCHES, min_size=1, max_size=4))
def test_guessed_walks_give_the_oracles_hits(records, searches):
    """Dense words with every term counted (for each tenant and the whole index), a guess
    of a page within 64 messages: walks that fill the page, walks that end short, roles and
    windows (no guess), pages and cursors, all as the oracle ranks them."""
    guess = forced_policies(
        small_read_rows=1,
        big_read_rows=64,
        walk_guess_margin=1,
        single_statement_max=0,
        lexeme_scope_min=0,
    )
    with tenant_key("userId"), mock.patch.object(policy, "FORCED", guess):
        check_corpus(records, searches, substring=False, written=lambda: count_terms(1))
