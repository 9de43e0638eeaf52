"""A ``roles`` filter reads what the same search without it reads, in the same routes.

A big scope's N is counted only as far as a route needs it, roles or not (SQLite FTS5:
the scope's chats summed until they pass the size, then the rows of the scope and role
tokens counted up to it), and the newest-first walk tests a row's role before its
terms. Every search gives the oracle's hits, scores and order.
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

from deuz_transcripts import ChatRecord
from deuz_transcripts.backends import forced_policies, get_backend, policy
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests import oracle

pytestmark = pytest.mark.django_db

ADA = {"userId": "ada"}
#: N read in full: every chat's count summed (``ChatFilter.total_sql``)
FULL_N = "COALESCE(SUM(n), 0)"
#: FTS5's rows of the scope and role tokens, counted whole
WHOLE_TOKEN_COUNT = "SELECT count(*) FROM deuz_transcripts_fts WHERE deuz_transcripts_fts MATCH"


def records() -> list[ChatRecord]:
    """40 chats of ADA, an hour apart: a user turn, an assistant answer and a tool
    result, each holding "common"; "rare" in the user turn of every tenth chat and in
    every assistant answer; BOB's chats hold the same words."""
    chats = []
    for n in range(40):
        for user in ("ada", "bob"):
            turn = "common question" + (" rare" if n % 10 == 0 else "")
            chats.append(
                ChatRecord(
                    chat_id=f"{user}{n:02}",
                    scope={"userId": user},
                    messages=[
                        {"role": "user", "content": turn},
                        {"role": "assistant", "content": "common rare answer"},
                        {"role": "tool", "content": "common output"},
                    ],
                    updated_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=n),
                )
            )
    return chats


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[DjangoConditionalChatStore]:
    """The walk starts at 4 rows (the page's depth); no scope is scanned."""
    every = {**settings.DEUZ_TRANSCRIPTS, "SQLITE_SCAN_SCOPE_MAX": 0}
    with override_settings(DEUZ_TRANSCRIPTS=every):
        monkeypatch.setattr(policy, "FORCED", forced_policies(small_read_rows=4))
        written = DjangoConditionalChatStore()
        for record in records():
            written.write_chat(record, expected_revision=0)
        yield written


def search(store: DjangoConditionalChatStore, query: str, **options: Any) -> list[str]:
    """The statements of a search, whose hits must be the oracle's."""
    with CaptureQueriesContext(connection) as queries:
        hits = store.transcript.search(ADA, query, limit=3, offset=1, **options)
    want = oracle.search(records(), ADA, query, limit=3, offset=1, **options)
    assert [(h.chat_id, h.message_id) for h in hits] == [(h.chat_id, h.message_id) for h in want]
    assert [h.score for h in hits] == pytest.approx([h.score for h in want], abs=1e-9)
    assert hits
    return [query["sql"] for query in queries.captured_queries]


def fts5_only() -> None:
    if connection.vendor != "sqlite" or get_backend("default").name != "sqlite-fts5":
        pytest.skip("FTS5's N of a scope, counted as far as a route needs it")


@pytest.mark.parametrize("query", ["common", "common question", "rare question"])
def test_a_big_scope_with_roles_counts_n_only_as_far_as_without_them(store, query):
    """Past the walk's size, neither the scope's N nor its rows of the role are counted
    in full: the walk needs neither (before, both were, for every such search)."""
    fts5_only()
    plain = search(store, query)
    roles = search(store, query, roles=["user"])
    for statements in (plain, roles):
        assert not any(FULL_N in sql for sql in statements)
        assert not any(sql.startswith(WHOLE_TOKEN_COUNT) for sql in statements)
    capped = [sql for sql in roles if "MATCH" in sql and "LIMIT" in sql and "count(*)" in sql]
    assert capped  # the rows of the scope and role tokens, up to the size asked


def test_a_scope_within_the_size_counts_n_with_roles_exactly(store, monkeypatch):
    """A scope within the walk's size has its N with roles counted whole: its routes
    need N itself."""
    fts5_only()
    monkeypatch.setattr(policy, "FORCED", forced_policies(small_read_rows=1_000))
    statements = search(store, "common question", roles=["user"])
    assert any(sql.startswith(WHOLE_TOKEN_COUNT) for sql in statements)


def test_the_walk_tests_a_rows_role_before_its_terms(store):
    """SQLite tests a row's conditions in the order written: a message of another role
    then costs its ``role`` column, not its text (read past the payload)."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite tests conditions in the order written; PostgreSQL orders them")
    statements = search(store, "common", roles=["user", "tool"])
    walks = [sql for sql in statements if "ORDER BY c.updated_at DESC" in sql and "m.role" in sql]
    assert walks
    for sql in walks:
        assert sql.index("m.role IN") < sql.index("m.has_terms")


@pytest.mark.parametrize("every_role", [True, False], ids=["every-role", "roles-own"])
def test_a_roles_probe_counts_every_role_so_the_walk_replaces_a_whole_read(
    store, monkeypatch, every_role
):
    """FTS5's probe counts every role's rows holding every term, up to the walk's size:
    where the roles' own rows are fewer (4 user turns hold "common rare", 44 rows in
    all), it stops at the size instead of running to the end, and the roles' page is
    walked newest first rather than every such row of the roles read and sorted.
    PostgreSQL counts the roles' own rows (GIN intersects their role lexemes as cheaply),
    and reads them when they are fewer; both ways give the oracle's page."""
    from tests.sql_support import spy_search_parts

    backend = get_backend("default")
    if not backend.source.walks_newest_first:
        pytest.skip("the LIKE fallback ranks every match in one statement")
    if backend.source.policy.probes_every_role != every_role:
        pytest.skip("the other engine's probe")
    monkeypatch.setattr(policy, "FORCED", forced_policies(small_read_rows=8))
    calls = spy_search_parts(monkeypatch, backend, ("newest_with_mask", "mask_candidates"))
    search(store, "common rare", roles=["user"])
    assert calls == (["newest_with_mask"] if every_role else ["mask_candidates"])
