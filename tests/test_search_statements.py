"""What a search sends: one transaction (a savepoint in the caller's) whose control and
settings travel with its reads on PostgreSQL, no round trip that reads nothing, and the
caller's settings as they were afterwards; on SQLite, reads only, in one read transaction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from bench.statements import scaled_policies
from deuz_transcripts import SearchTimeout, TranscriptError
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.backends.chat_filter import ChatFilter
from deuz_transcripts.backends.postgresql.session import (
    BEGIN,
    BITMAP_WORK_MEM,
    bitmap_scans,
    keep_bitmap_scans,
    search_session,
)
from deuz_transcripts.backends.sqlite.fts5_policy import Fts5Policy
from deuz_transcripts.sql.search.collector import Collector
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.factories import ChatRecordFactory, MessageFactory
from tests.sent_statements import CONTROL, reads, round_trips

ADA = {"userId": "ada"}
BOB = {"userId": "bob"}

WORDS = "alpha beta gamma delta epsilon"


def postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL session's transaction and settings")


@pytest.fixture
def store() -> DjangoConditionalChatStore:
    return users_store()


def users_store() -> DjangoConditionalChatStore:
    """A small user (``ada``, three chats) and a bigger one (``bob``), the five words in
    rows of both."""
    store = DjangoConditionalChatStore()
    texts = ["alpha beta", "gamma alpha", "delta epsilon alpha", "beta gamma", "epsilon"]
    for number in range(3):
        messages = [MessageFactory(text=text) for text in texts]
        record = ChatRecordFactory(chat_id=f"a{number}", scope=ADA, messages=messages)
        store.write_chat(record, expected_revision=0)
    for number in range(12):
        messages = [MessageFactory(text=f"{text} filler{number}") for text in texts * 3]
        record = ChatRecordFactory(chat_id=f"b{number}", scope=BOB, messages=messages)
        store.write_chat(record, expected_revision=0)
    return store


@contextmanager
def sent() -> Iterator[list[list[str]]]:
    trips: list[list[str]] = []
    with CaptureQueriesContext(connection) as captured:
        yield trips
    trips.extend(round_trips(captured))


def settings_now() -> tuple[str, ...]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('statement_timeout'), current_setting('jit'), "
            "current_setting('enable_seqscan'), current_setting('work_mem')"
        )
        return tuple(cursor.fetchone())


def transaction_status() -> Any:
    from psycopg.pq import TransactionStatus

    return TransactionStatus(connection.connection.info.transaction_status)


@pytest.fixture
def big_plans() -> Iterator[None]:
    """Every scope planned as a big one: on PostgreSQL found in GIN, its terms counted
    there (``bitmap_scans``) and their masks read one by one."""
    big = forced_policies(single_statement_max=0, lexeme_scope_min=0, small_read_rows=1_000)
    with mock.patch.object(policy, "FORCED", big):
        yield


def searches(store: DjangoConditionalChatStore, scope: dict[str, str], query: str) -> Any:
    """The hits of ``search`` and ``search_page``, each with the round trips it sent."""
    with sent() as searched:
        hits = store.transcript.search(scope, query)
    with sent() as paged:
        page = store.transcript.search_page(scope, query)
    found = [(hit.chat_id, hit.message_id, hit.score) for hit in hits]
    assert found and found == [(hit.chat_id, hit.message_id, hit.score) for hit in page.hits]
    return found, (searched, paged)


def statements_of(trips: list[list[str]]) -> list[str]:
    return [statement for trip in trips for statement in trip]


def assert_in_one_transaction(trips: list[list[str]]) -> None:
    """The search's own transaction, begun and ended with its first and last reads: no
    round trip without a read, one settings statement before the first read, no
    savepoint."""
    assert trips[0][:2] == [BEGIN, trips[0][1]] and CONTROL.match(trips[0][1])
    assert "set_config('jit', 'off', true)" in trips[0][1]
    assert trips[-1][-1] == "COMMIT"
    assert all(len(reads(trip)) == 1 for trip in trips)
    statements = [statement for trip in trips for statement in trip]
    assert sum(statement == BEGIN for statement in statements) == 1
    assert not any("SAVEPOINT" in statement for statement in statements)


@pytest.mark.django_db(transaction=True)
def test_a_small_users_search_is_two_round_trips_on_postgresql(store):
    """N with the ranked candidates (the scope is under the one-statement size, so its
    ranking needs N only to know it), then the hits: two round trips, the transaction
    and the settings sent with them (they were six: BEGIN, the settings, N, the
    candidates, the hits, COMMIT)."""
    postgresql_only()
    assert connection.get_autocommit() and not connection.in_atomic_block
    _, both = searches(store, ADA, "alpha beta")
    for trips in both:
        assert len(trips) <= 2
        assert_in_one_transaction(trips)
        assert "count(*) OVER (PARTITION BY h.mask)" in reads(trips[0])[0]
    assert transaction_status().name == "IDLE"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scope", [ADA, BOB, {}], ids=["small", "big", "unscoped"])
def test_every_round_trip_of_a_search_holds_one_read(store, big_plans, scope):
    """On PostgreSQL the control and settings travel with the reads (GIN counts in a
    row share one ``set_config``); SQLite sends its reads alone, between the ``BEGIN``
    and ``COMMIT`` of its read transaction (in process: no network between them)."""
    _, both = searches(store, scope, WORDS)
    for trips in both:
        if connection.vendor == "postgresql":
            assert_in_one_transaction(trips)
            settings = [trip for trip in trips if any("enable_seqscan" in s for s in trip)]
            assert settings and len(settings) < len(trips) - 1  # not one per count
        else:
            assert trips[0] == ["BEGIN DEFERRED"] and trips[-1] == ["COMMIT"]
            inner = trips[1:-1]
            assert inner and all(len(trip) == 1 and not CONTROL.match(trip[0]) for trip in inner)


@pytest.mark.django_db(transaction=True)
def test_bitmap_scans_in_a_search_cost_a_setting_only_where_the_mode_changes():
    """GIN counts run without a sequential scan and with ``BITMAP_WORK_MEM``, every
    other read with the caller's settings; a ``set_config`` goes with the first read
    of each mode, none in between, and no savepoint."""
    postgresql_only()
    probe = (
        "SELECT s.* FROM (SELECT current_setting('enable_seqscan'), current_setting('work_mem')) s"
    )
    with connection.cursor() as cursor:
        cursor.execute("SET work_mem = '2MB'")
    try:
        with sent() as trips, search_session("default", 5_000) as cursor:
            cursor.execute(probe)
            first = cursor.fetchone()
            with bitmap_scans("default", cursor):
                cursor.execute(probe)
                counting = cursor.fetchone()
                cursor.execute(probe)
                still = cursor.fetchone()
            cursor.execute(probe)
            after = cursor.fetchone()
        assert first == after == ("on", "2MB")
        assert counting == still == ("off", BITMAP_WORK_MEM)
        assert [len(trip) for trip in trips] == [3, 2, 1, 2, 1]  # COMMIT: no last read
        assert [reads(trip) for trip in trips] == [[probe]] * 4 + [[]]
        assert trips[-1] == ["COMMIT"]
        assert settings_now()[3] == "2MB" and transaction_status().name == "IDLE"
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET work_mem")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["last read", "kept"])
def test_a_read_after_bitmap_scans_keeps_their_mode_where_told(how):
    """The search's last read (the hits, by key), and every read after
    ``keep_bitmap_scans``, runs in the bitmap mode in force: no ``set_config`` back."""
    postgresql_only()
    probe = "SELECT current_setting('enable_seqscan'), current_setting('work_mem')"
    with sent() as trips, search_session("default", 5_000) as cursor:
        with bitmap_scans("default", cursor):
            cursor.execute(probe)
        if how == "kept":
            keep_bitmap_scans(cursor)
            cursor.execute(probe)
            assert cursor.fetchone() == ("off", BITMAP_WORK_MEM)
        cursor.last_read_next()
        cursor.execute(probe)
        assert cursor.fetchone() == ("off", BITMAP_WORK_MEM)
    assert trips[-1][-1] == "COMMIT"
    settings = [s for trip in trips for s in trip if "set_config" in s]
    assert len(settings) == 1 and "set_config('enable_seqscan', 'off', true)" in settings[0]
    assert settings_now()[2] == "on" and transaction_status().name == "IDLE"


@pytest.mark.django_db
def test_a_search_in_the_callers_transaction_takes_one_savepoint_and_puts_settings_back(
    store, big_plans
):
    """One savepoint for the whole search, rolled back and released with its last read
    (a search writes nothing): the caller's ``SET LOCAL`` values are back, all four."""
    postgresql_only()
    with connection.cursor() as cursor:
        cursor.execute(
            "SET LOCAL statement_timeout = '12345ms'; SET LOCAL jit = on; "
            "SET LOCAL enable_seqscan = off; SET LOCAL work_mem = '3MB'"
        )
    callers = settings_now()
    assert callers == ("12345ms", "on", "off", "3MB")
    _, both = searches(store, BOB, WORDS)
    for trips in both:
        statements = [statement for trip in trips for statement in trip]
        assert trips[0][0] == "SAVEPOINT deuz_search"
        assert trips[-1][-2:] == [
            "ROLLBACK TO SAVEPOINT deuz_search",
            "RELEASE SAVEPOINT deuz_search",
        ]
        assert sum("SAVEPOINT" in statement for statement in statements) == 3
        assert all(len(reads(trip)) == 1 for trip in trips)
        assert not any(statement in (BEGIN, "COMMIT") for statement in statements)
    assert settings_now() == callers


@pytest.mark.django_db(transaction=True)
def test_a_search_outside_a_transaction_leaves_the_sessions_settings(store, big_plans):
    postgresql_only()
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = '12345ms'; SET jit = on; SET work_mem = '3MB'")
    try:
        searches(store, BOB, WORDS)
        assert settings_now() == ("12345ms", "on", "on", "3MB")
        assert transaction_status().name == "IDLE"
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET statement_timeout; RESET jit; RESET work_mem")


@pytest.fixture
def sleeping_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``search`` first sleeps for seconds in its own transaction."""
    original = Collector.collect

    def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.cursor.execute("SELECT pg_sleep(3)")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Collector, "collect", slow)


@pytest.mark.django_db(transaction=True)
@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 100})
def test_a_cancelled_search_rolls_its_transaction_back(store, sleeping_first, monkeypatch):
    """The timeout set in the first read's query string stops that read; the search's
    transaction is rolled back and the connection serves the next search."""
    postgresql_only()
    before = settings_now()
    with sent() as trips, pytest.raises(SearchTimeout):
        store.transcript.search(ADA, "alpha")
    assert trips[0][:1] == [BEGIN] and reads(trips[0]) == ["SELECT pg_sleep(3)"]
    assert trips[-1] == ["ROLLBACK"]
    assert transaction_status().name == "IDLE"
    assert settings_now() == before
    monkeypatch.undo()
    assert store.transcript.search(ADA, "alpha")


@pytest.mark.django_db
@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 100})
def test_a_cancelled_search_leaves_the_callers_transaction_and_settings(store, sleeping_first):
    postgresql_only()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL work_mem = '3MB'; SET LOCAL statement_timeout = '12345ms'")
    callers = settings_now()
    with sent() as trips, pytest.raises(SearchTimeout):
        store.transcript.search(ADA, "alpha")
    assert trips[-1] == ["ROLLBACK TO SAVEPOINT deuz_search", "RELEASE SAVEPOINT deuz_search"]
    assert settings_now() == callers
    record = ChatRecordFactory(chat_id="c9", scope=ADA, messages=[MessageFactory(text="x")])
    assert store.write_chat(record, expected_revision=0) == 1


@pytest.mark.django_db(transaction=True)
def test_a_failed_read_rolls_the_searchs_transaction_back(store, monkeypatch):
    postgresql_only()
    original = Collector.collect

    def failing(self: Any, *args: Any, **kwargs: Any) -> Any:
        original(self, *args, **kwargs)
        self.cursor.execute("SELECT 1 / 0")

    monkeypatch.setattr(Collector, "collect", failing)
    with sent() as trips, pytest.raises(TranscriptError):
        store.transcript.search(ADA, "alpha")
    assert trips[-1] == ["ROLLBACK"]
    monkeypatch.undo()
    assert store.transcript.search(ADA, "alpha")


@pytest.mark.django_db(transaction=True)
def test_a_search_whose_connection_dies_raises_the_searchs_error(store, monkeypatch):
    """The rollback after the failure cannot reach the server either: the caller gets
    the search's own error (not the rollback's), and the next search reconnects."""
    postgresql_only()
    original = Collector.collect

    def killed(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Collector, "collect", killed)
    with pytest.raises(TranscriptError) as caught:
        store.transcript.search(ADA, "alpha")
    assert "terminat" in str(caught.value.__cause__).lower()
    monkeypatch.undo()
    assert store.transcript.search(ADA, "alpha")


@pytest.mark.django_db(transaction=True)
def test_a_search_with_server_side_binding_sends_each_statement_alone(store, big_plans):
    """``server_side_binding`` sends one statement per query string: the same
    transaction, settings and hits, each statement a round trip."""
    postgresql_only()
    expected, _ = searches(store, BOB, WORDS)
    before = settings_now()
    options = connection.settings_dict["OPTIONS"]
    connection.close()
    options["server_side_binding"] = True
    try:
        found, both = searches(store, BOB, WORDS)
        assert found == expected
        for trips in both:
            assert all(len(trip) == 1 for trip in trips)
            assert trips[0] == [BEGIN] and trips[-1] == ["COMMIT"]
            assert not any("SAVEPOINT" in trip[0] for trip in trips)
        assert settings_now() == before and transaction_status().name == "IDLE"
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL work_mem = '3MB'")
            callers = settings_now()
            found, both = searches(store, BOB, WORDS)
            assert found == expected and settings_now() == callers
        for trips in both:
            assert trips[0] == ["SAVEPOINT deuz_search"]
            assert trips[-2:] == [
                ["ROLLBACK TO SAVEPOINT deuz_search"],
                ["RELEASE SAVEPOINT deuz_search"],
            ]
    finally:
        connection.close()
        del options["server_side_binding"]


@pytest.fixture
def scaled_plans() -> Iterator[None]:
    """The default thresholds scaled down as ``bench.statements`` scales them, so that
    ``bob``'s 180 messages take the routes of a 50,000-message tenant at 1M (past the
    one-statement size; on PostgreSQL found in GIN). FTS5's one-statement size is the
    setting that bounds its scanned scopes, scaled there."""
    scaled = scaled_policies(0.01)
    scan = {"SQLITE_SCAN_SCOPE_MAX": scaled[Fts5Policy].scan_scope_max}
    with mock.patch.object(policy, "FORCED", scaled), mock.patch.dict(TENANTS, scan):
        yield


def counted_users_store() -> DjangoConditionalChatStore:
    """``users_store`` with ``bob`` a tenant whose counts are stored (and its words'), as
    ``bench.statements`` refreshes them."""
    store = users_store()
    assert store.transcript.backend.source.policy.single_statement_max < 12 * 15
    if connection.vendor == "postgresql":
        from deuz_transcripts.backends.postgresql.counts.refresh import refresh_term_counts

        with connection.cursor() as cursor:
            refresh_term_counts(cursor, 10, tenant_min_rows=100)
    return store


TENANTS = {**settings.DEUZ_TRANSCRIPTS, "TENANT_KEY": "userId"}


@pytest.mark.django_db(transaction=True)
@override_settings(DEUZ_TRANSCRIPTS=TENANTS)
def test_a_five_word_search_of_a_big_tenant_sends_at_most_eight_statements(scaled_plans):
    """On PostgreSQL at most eight statements in all, ``BEGIN``, the settings and
    ``COMMIT`` included (N and every n_t in one statement, the settings once, the hits
    read in the mode in force), each round trip holding one read; at most eight reads
    for an exact total too, and on SQLite. The process's first search of the tenant
    reads its n_t in a statement of their own (it learns there that the tenant is big):
    one more."""
    store = counted_users_store()
    _, (first, _) = searches(store, BOB, WORDS)
    assert len(reads(statements_of(first))) <= 9
    _, (searched, paged) = searches(store, BOB, WORDS)
    for trips in (searched, paged):
        assert len(reads(statements_of(trips))) <= 8
        # SQLite's BEGIN and COMMIT are round trips of their own (in process, no network)
        reading = trips if connection.vendor == "postgresql" else trips[1:-1]
        assert len(reading) == len(reads(statements_of(trips)))
    if connection.vendor == "postgresql":
        assert_in_one_transaction(searched)
        assert len(statements_of(searched)) <= 8


@pytest.mark.django_db
@override_settings(DEUZ_TRANSCRIPTS=TENANTS)
def test_n_and_every_n_t_of_a_big_tenant_come_in_one_statement(scaled_plans):
    """Past the one-statement size, N's statement also reads every n_t of a tenant whose
    counts are stored, the terms not stored counted in GIN (five terms: more than a walk
    takes): the counts the plan reads next, the same as read alone, and no statement."""
    postgresql_only()
    store = counted_users_store()
    backend = store.transcript.backend
    source, counts = backend.search_parts()
    _, alone = backend.search_parts()
    rare = [MessageFactory(text="zeta alpha") for _ in range(3)]  # a word written since
    store.write_chat(
        ChatRecordFactory(chat_id="b99", scope=BOB, messages=rare), expected_revision=0
    )
    terms = [*WORDS.split()[:4], "zeta"]
    bob = ChatFilter(BOB, tenant=source.tested_tenant(BOB))
    sized = replace(bob, size=183)
    with connection.cursor() as cursor:
        assert alone.stored.term_counts(cursor, bob, terms)[-1] is None  # not counted
        expected = alone.term_counts(cursor, sized, terms)
        assert expected[0] == 12 * 9 + 3 and expected[-1] == 3
    with search_session("default", 5_000) as cursor:  # a first search finds bob big
        assert source.sized_candidates(cursor, bob, terms, 4, 15) == (183, None)
    with sent() as trips, search_session("default", 5_000) as cursor:
        assert source.sized_candidates(cursor, bob, terms, 4, 15) == (183, None)
        assert counts.stored.term_counts(cursor, sized, terms)[:4] == expected[:4]
        assert counts.term_counts(cursor, sized, terms[4:]) == expected[4:]
    assert [len(reads(trip)) for trip in trips] == [1, 0]  # then COMMIT alone
    assert "set_config('enable_seqscan', 'off', true)" in trips[0][1]


@pytest.mark.django_db
def test_n_and_a_small_scopes_candidates_come_in_one_statement(store):
    """The candidates read with N are those ``candidates`` reads once N is known; past
    ``most`` N comes alone, and the matches are not read."""
    postgresql_only()
    source = store.transcript.backend.source
    terms = WORDS.split()

    def chats_of(scope: dict[str, str]) -> ChatFilter:
        return ChatFilter(scope, tenant=source.tested_tenant(scope))

    ada = chats_of(ADA)
    with CaptureQueriesContext(connection) as captured, connection.cursor() as cursor:
        size, read = source.sized_candidates(cursor, ada, terms, 4, 15)
        assert len(captured.captured_queries) == 1 and size == 15
        known = replace(ada, size=size)
        assert read == source.candidates(cursor, known, terms, 4, size)
        assert read is not None and sum(read[0].values()) == 15  # each message holds a word
        assert source.sized_candidates(cursor, ada, terms, 4, 14) == (15, None)
        assert source.sized_candidates(cursor, chats_of(BOB), terms, 4, 15) == (180, None)


@pytest.mark.django_db
@override_settings(DEUZ_TRANSCRIPTS=TENANTS)
def test_ns_statement_plans_the_same_subqueries_for_any_number_of_terms(scaled_plans):
    """Every n_t N's statement carries comes from one array subquery per kind (stored,
    counted in GIN), not one per term: PostgreSQL plans a statement's subqueries whether
    their branch runs or not, and 32 of them each cost a small scope's search three times
    its own time (bench/RESULTS.md)."""
    postgresql_only()
    store = counted_users_store()
    source = store.transcript.backend.source
    bob = ChatFilter(BOB, tenant=source.tested_tenant(BOB))
    many = [*WORDS.split(), *(f"word{number}" for number in range(27))]
    with search_session("default", 5_000) as cursor:  # a first search finds bob big
        source.sized_candidates(cursor, bob, many, 4, 15)
    subqueries = []
    for terms in (WORDS.split(), many):
        with sent() as trips, search_session("default", 5_000) as cursor:
            source.sized_candidates(cursor, bob, terms, 4, 15)
        subqueries.append(trips[0][-1].count("(SELECT"))
    assert subqueries[0] == subqueries[1]


@pytest.mark.django_db
@override_settings(DEUZ_TRANSCRIPTS=TENANTS)
def test_a_tenant_not_found_big_reads_n_alone_with_its_candidates(scaled_plans):
    """N's statement carries the n_t only for a tenant this process found past the
    one-statement size: a small tenant's search plans no subquery for them, and a big
    tenant's first search learns its size (its n_t then read as without them)."""
    postgresql_only()
    store = counted_users_store()
    source = store.transcript.backend.source
    ada = ChatFilter(ADA, tenant=source.tested_tenant(ADA))
    bob = ChatFilter(BOB, tenant=source.tested_tenant(BOB))
    sizes = []
    for chats in (ada, bob, bob):
        with sent() as trips, search_session("default", 5_000) as cursor:
            size, _ = source.sized_candidates(cursor, chats, WORDS.split(), 4, 15)
        sizes.append((size, "unnest" in trips[0][-1]))
    assert sizes == [(15, False), (180, False), (180, True)]
