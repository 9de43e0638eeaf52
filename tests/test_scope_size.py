"""A scope's N is read only as far as a plan needs it.

N (the scope's indexed messages) picks how a small scope's rows are found; past every
size that picks a route, the newest-first walk needs no N at all. SQLite sums the
scope's per-chat counts as it steps through them and stops there; N is read in full
only when the walk cannot fill the page and the ranking needs it. Hits, order and
scores are those of a search that read N in full.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from deuz_transcripts import ChatRecord
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.backends.chat_filter import ChatFilter
from deuz_transcripts.backends.sqlite import fts5 as sqlite_fts5
from deuz_transcripts.stores import DjangoConditionalChatStore

pytestmark = pytest.mark.django_db

ADA = {"userId": "ada"}
#: the full sum of the per-chat counts (``ChatFilter.total_sql``)
FULL_N = "COALESCE(SUM(n), 0)"


@pytest.fixture(params=["database", "like"])
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """40 chats of ADA, an hour apart: "common word" and "other text" in each, and
    "rare common" in every tenth; the walk starts at 4 rows (the page's depth), and no
    other size picks a route above that (no scope is scanned, none is small for GIN)."""
    if request.param == "like" and connection.vendor != "sqlite":
        pytest.skip("the LIKE fallback is SQLite's")
    backend = {"SQLITE_BACKEND": "like"} if request.param == "like" else {}
    every = {**settings.DEUZ_TRANSCRIPTS, **backend, "SQLITE_SCAN_SCOPE_MAX": 0}
    with override_settings(DEUZ_TRANSCRIPTS=every):
        sizes = forced_policies(small_read_rows=4, lexeme_scope_min=0)
        monkeypatch.setattr(policy, "FORCED", sizes)
        store = DjangoConditionalChatStore()
        for n in range(40):
            texts = ["common word", "other text", *(["rare common"] if n % 10 == 0 else [])]
            store.write_chat(
                ChatRecord(
                    chat_id=f"c{n:02}",
                    scope=ADA,
                    messages=[{"role": "user", "content": text} for text in texts],
                    updated_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=n),
                ),
                expected_revision=0,
            )
        yield store


def search(store: Any, query: str, step: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The hits of a search summing ``step`` chats' counts at a time, whether the count
    stopped early, and whether N was then read in full."""
    monkeypatch.setattr(sqlite_fts5, "_COUNTS_STEP", step)
    counts_class = type(store.transcript.backend.counts)
    counted: list[tuple[int, bool]] = []
    total_past = getattr(counts_class, "total_past", None)  # FTS5's alone: others count at once

    def spy(self: Any, *args: Any) -> tuple[int, bool] | None:
        assert total_past is not None
        found = total_past(self, *args)
        if found is not None:  # None: N read whole
            counted.append(found)
        return found

    if total_past is not None:
        monkeypatch.setattr(counts_class, "total_past", spy)
    with CaptureQueriesContext(connection) as queries:
        hits = store.transcript.search(ADA, query, limit=3, offset=1)
    if total_past is not None:
        monkeypatch.setattr(counts_class, "total_past", total_past)
    found = [(hit.chat_id, hit.message_id, hit.score) for hit in hits]
    full = any(FULL_N in sql["sql"] for sql in queries.captured_queries)
    return found, [exact for _, exact in counted] == [False], full


@pytest.mark.parametrize(
    ("query", "walks"),
    [
        ("common", True),  # one term: the walk fills any page
        ("rare common", True),  # 4 rows hold both: a page's depth, walked
        ("word text", False),  # no row holds both: every match ranked, with N
        ("rare other", False),
    ],
)
def test_hits_and_scores_equal_a_search_reading_n_in_full(store, monkeypatch, query, walks):
    stepped, stopped, full = search(store, query, 2, monkeypatch)
    whole, _, _ = search(store, query, 10**6, monkeypatch)  # every chat in one step
    assert stepped == whole and len(stepped) == 3
    stops = store.transcript.backend_name == "sqlite-fts5"  # the others count at once
    assert stopped == stops
    if stops:  # the walk needs no more; ranking every match reads N in full
        assert full == (not walks)


def test_the_count_stops_once_it_passes_the_size_asked(store, monkeypatch):
    """84 messages in 40 chats (c00 first, 3 of them); summed 2 chats at a time."""
    if store.transcript.backend_name != "sqlite-fts5":
        pytest.skip("the other backends count N in one statement")
    monkeypatch.setattr(sqlite_fts5, "_COUNTS_STEP", 2)
    counts = store.transcript.backend.counts
    chats = ChatFilter(ADA, None)
    with connection.cursor() as cursor:
        assert counts.total_past(cursor, chats, 200) == (84, True)  # every chat: N
        assert counts.total_past(cursor, chats, 5) == (9, False)  # c00-c03: 3 + 2 + 2 + 2
        assert counts.total_past(cursor, chats, 84) == (84, True)
        assert counts.total_past(cursor, ChatFilter({"userId": "nobody"}, None), 5) == (0, True)
