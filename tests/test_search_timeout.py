"""``SEARCH_TIMEOUT_MS``: the database stops a search that runs too long, with the
app's own ``SearchTimeout``, and leaves the connection and the caller's transaction as
they were."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.test import override_settings

from deuz_transcripts import SearchTimeout, TranscriptError, search_budget
from deuz_transcripts.sql import hits
from deuz_transcripts.sql.search.collector import Collector
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.factories import ChatRecordFactory, MessageFactory

pytestmark = pytest.mark.django_db

ADA = {"userId": "ada"}


def slow_sql() -> str:
    """A statement that runs for seconds unless the database stops it."""
    if connection.vendor == "postgresql":
        return "SELECT pg_sleep(3)"
    return (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) "
        "SELECT count(*) FROM n"
    )


@pytest.fixture
def store() -> DjangoConditionalChatStore:
    store = DjangoConditionalChatStore()
    record = ChatRecordFactory(chat_id="c1", scope=ADA, messages=[MessageFactory(text="quokka")])
    store.write_chat(record, expected_revision=0)
    return store


@pytest.fixture
def slow_planner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every search (``search`` and ``search_page``) first runs ``slow_sql()`` on the
    search's own cursor."""
    original = Collector.collect

    def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.cursor.execute(slow_sql())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Collector, "collect", slow)


def session_timeout() -> str | None:
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        return str(cursor.fetchone()[0])


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 100})
def test_a_slow_search_is_stopped_with_search_timeout(store, slow_planner):
    before = session_timeout()
    with pytest.raises(SearchTimeout) as caught:
        store.transcript.search(ADA, "quokka")
    # the database cancelled the statement (run whole, it would have answered)
    assert isinstance(caught.value.__cause__, DatabaseError)
    assert isinstance(caught.value, TranscriptError) and caught.value.timeout_ms == 100
    assert "100 ms" in str(caught.value)
    assert session_timeout() == before  # nothing left set on the connection


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 100})
def test_a_slow_counted_page_is_stopped_with_search_timeout(store, slow_planner):
    before = session_timeout()
    with pytest.raises(SearchTimeout):
        store.transcript.search_page(ADA, "quokka")
    assert session_timeout() == before


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 100})
def test_the_callers_transaction_stays_usable(store, slow_planner):
    before = session_timeout()
    with transaction.atomic():
        with pytest.raises(SearchTimeout):
            store.transcript.search(ADA, "quokka")
        assert session_timeout() == before
        record = ChatRecordFactory(chat_id="c2", scope=ADA, messages=[MessageFactory(text="x")])
        assert store.write_chat(record, expected_revision=0) == 1
    assert store.load_chat("c2") is not None


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 400})
def test_the_budget_bounds_the_whole_search_not_each_statement(store, monkeypatch):
    """Four statements of 250 ms each, every one under the 400 ms budget: the search is
    stopped in the second, not after a second in all (SQLite's progress handler has
    always timed the whole search against one deadline)."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite times a search by one deadline in its progress handler")
    original = Collector.collect
    started: list[int] = []

    def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
        for number in range(4):
            started.append(number)
            self.cursor.execute("SELECT pg_sleep(0.25)")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Collector, "collect", slow)
    before = session_timeout()
    with pytest.raises(SearchTimeout):
        store.transcript.search(ADA, "quokka")
    assert started == [0, 1]  # the second statement was stopped, the last two never ran
    assert session_timeout() == before


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 2_000})
def test_searches_within_the_budget_answer_and_restore_the_setting(store):
    before = session_timeout()
    with transaction.atomic():
        assert [hit.chat_id for hit in store.transcript.search(ADA, "quokka")] == ["c1"]
        assert session_timeout() == before
    assert [hit.chat_id for hit in store.transcript.search(ADA, "quokka")] == ["c1"]


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 0})
def test_zero_sets_no_limit(store, monkeypatch):
    if connection.vendor == "postgresql":
        monkeypatch.setattr(Collector, "collect", _sleeping_page(0.3))
    else:
        monkeypatch.setattr(Collector, "collect", _counting_page(3_000_000))
    assert store.transcript.search(ADA, "quokka") == []


@pytest.mark.parametrize("budget_ms", [0, 5_000], ids=["no-budget", "budget"])
def test_a_postgresql_search_runs_without_jit_and_puts_the_settings_back(store, budget_ms):
    """JIT compiling a search's statement cost more than running it (151 of 157 ms for a
    rare word at 10M messages): searches run with ``jit`` off, with or without a budget,
    and leave the session's ``jit`` and ``statement_timeout`` as they were."""
    if connection.vendor != "postgresql":
        pytest.skip("JIT is PostgreSQL's")
    seen: list[tuple[str, str]] = []
    original = Collector.collect

    def looking(self: Any, request: Any) -> Any:
        self.cursor.execute("SELECT current_setting('jit'), current_setting('statement_timeout')")
        seen.append(self.cursor.fetchone())
        return original(self, request)

    with connection.cursor() as cursor:
        cursor.execute("SET jit = on")
    with (
        override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": budget_ms}),
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setattr(Collector, "collect", looking)
        before = session_timeout()
        with transaction.atomic():  # nested: the savepoint's settings are put back
            assert [hit.chat_id for hit in store.transcript.search(ADA, "quokka")] == ["c1"]
            assert session_timeout() == before
        assert [hit.chat_id for hit in store.transcript.search(ADA, "quokka")] == ["c1"]
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone() == ("on",)
    timeout = f"{budget_ms // 1000}s" if budget_ms else before
    assert seen == [("off", timeout)] * 2


def _sleeping_page(seconds: float) -> Any:
    def page(self: Any, request: Any) -> None:
        self.cursor.execute("SELECT pg_sleep(%s)", [seconds])

    return page


def _counting_page(rows: int) -> Any:
    def page(self: Any, request: Any) -> None:
        self.cursor.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
            "SELECT count(*) FROM n",
            [rows],
        )

    return page


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 100})
def test_the_command_prints_the_timeout_as_one_error(store, slow_planner):
    with pytest.raises(CommandError, match="took longer than 100 ms"):
        call_command("search_transcripts", "quokka", scope="userId=ada")


@pytest.fixture
def slow_spans(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A clock the budget reads that only moves with span work: each hit's spans take a
    second of it. Returns the clock (one value) to move by hand."""
    now = [0.0]
    monkeypatch.setattr(search_budget, "clock", lambda: now[0])
    original = hits.hit_spans

    def one_second(*args: Any, **kwargs: Any) -> Any:
        now[0] += 1.0
        return original(*args, **kwargs)

    monkeypatch.setattr(hits, "hit_spans", one_second)
    return now


@pytest.fixture
def three_hits(store: DjangoConditionalChatStore) -> DjangoConditionalChatStore:
    record = ChatRecordFactory(
        chat_id="c2", scope=ADA, messages=[MessageFactory(text="quokka") for _ in range(3)]
    )
    store.write_chat(record, expected_revision=0)
    return store


@pytest.mark.parametrize("method", ["search", "search_page"])
@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 1_500})
def test_the_budget_covers_the_hits_spans(three_hits, slow_spans, method):
    """Spans of 4 hits take 4 s of a 1.5 s budget: the search stops with the database's
    own ``SearchTimeout`` before the third hit's spans, not after all of them."""
    with pytest.raises(SearchTimeout) as caught:
        getattr(three_hits.transcript, method)(ADA, "quokka", limit=4)
    assert caught.value.timeout_ms == 1_500
    assert slow_spans[0] == 2.0  # two hits' spans, then the check that stopped it


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 1_500})
def test_no_budget_left_after_the_statements_stops_before_any_span(three_hits, slow_spans):
    original = hits.check_budget

    def spent() -> None:  # the statements took the whole budget
        slow_spans[0] = max(slow_spans[0], 1.5)
        original()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hits, "check_budget", spent)
        with pytest.raises(SearchTimeout):
            three_hits.transcript.search(ADA, "quokka", limit=4)
    assert slow_spans[0] == 1.5  # no hit's spans were computed


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 0})
def test_zero_sets_no_budget_for_spans_either(three_hits, slow_spans):
    assert len(three_hits.transcript.search(ADA, "quokka", limit=4)) == 4
    assert slow_spans[0] == 4.0


@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TIMEOUT_MS": 5_000})
def test_spans_within_the_budget_answer(three_hits, slow_spans):
    assert len(three_hits.transcript.search_page(ADA, "quokka", limit=4).hits) == 4
