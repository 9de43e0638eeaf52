"""The ``roles`` filter is counted from role tokens in the search data (FTS5 bodies,
PostgreSQL vectors): N and the n_t counts of an unscoped or big search never read
message rows, and migration 0003 gives stored rows their tokens (and takes them back)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import fields, replace
from datetime import UTC, datetime
from unittest import mock

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from deuz_transcripts import ChatRecord
from deuz_transcripts.backends import forced_policies, get_backend, policy
from deuz_transcripts.backends.chat_filter import request_filter
from deuz_transcripts.backends.matches import Matches
from deuz_transcripts.models import Message
from deuz_transcripts.search_request import SearchRequest
from deuz_transcripts.sql.search.statistics import SearchStatistics
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.verify import Verifier
from tests.sql_support import vectors_holding_lexemes

MESSAGES = Message._meta.db_table
ROLES = ("user", "assistant", 'to\'ol \\ "x"')  # quotes and backslashes stay data


def chats() -> Iterator[ChatRecord]:
    for n in range(6):
        yield ChatRecord(
            chat_id=f"c{n}",
            scope={"userId": f"u{n % 2}"},
            messages=[
                {"role": ROLES[(n + i) % 3], "content": f"deploy plan {n} step {i}"}
                for i in range(5)
            ],
            updated_at=datetime(2025, 1, 1 + n, tzinfo=UTC),
        )


@pytest.fixture
def store() -> DjangoConditionalChatStore:
    if connection.vendor == "sqlite" and get_backend("default").name != "sqlite-fts5":
        pytest.skip("the LIKE fallback reads rows: it has no role tokens")
    written = DjangoConditionalChatStore()
    for chat in chats():
        written.write_chat(chat, expected_revision=0)
    return written


def expected_hits(roles: set[str], scope: dict[str, str]) -> set[str]:
    return {
        f"{chat.chat_id}:{i}"
        for chat in chats()
        for i, message in enumerate(chat.messages)
        if message["role"] in roles and all(chat.scope.get(k) == v for k, v in scope.items())
    }


def found(store: DjangoConditionalChatStore, scope: dict[str, str], roles: list[str]) -> set[str]:
    return {
        hit.message_id for hit in store.transcript.search(scope, "deploy", roles=roles, limit=50)
    }


@pytest.mark.django_db
@pytest.mark.parametrize("scope", [{}, {"userId": "u1"}])
def test_n_and_term_counts_with_roles_read_no_message_row(store, scope):
    """Unscoped (and, past the scan threshold, scoped) with roles: N and n_t are counted
    in FTS5 / GIN from the scope and role tokens, with no condition on message rows."""
    backend = get_backend("default")
    request = SearchRequest.build(scope, "deploy step", roles=["user", ROLES[2]], limit=5)
    chats = request_filter(request, "default", role_tokens=backend.source.role_tokens)
    with CaptureQueriesContext(connection) as queries, connection.cursor() as cursor:
        if scope:  # the token count is for scopes too big to read row by row
            own = {field.name for field in fields(backend.counts.policy)}
            sizes = {"scan_scope_max": 0, "lexeme_scope_min": 0}
            small = replace(backend.counts.policy, **{k: v for k, v in sizes.items() if k in own})
            backend.source.policy = backend.counts.policy = small
        matches = Matches(backend.source, backend.counts, cursor, chats, request.terms)
        total = SearchStatistics(backend.source.policy).of(matches).total()  # stored, else counted
        histogram = backend.counts.mask_histogram(cursor, chats, request.terms)
    assert total == len(expected_hits({"user", ROLES[2]}, scope))
    assert sum(histogram.values()) == total  # every message holds both terms
    statements = [query["sql"] for query in queries.captured_queries]
    if scope:  # first the scope's size, from its chats' counts, to pick the plan
        size = statements.pop(0)
        assert "indexed_count" in size and MESSAGES not in size
    for sql in statements:  # (PostgreSQL also sets enable_seqscan around its counts)
        if "deuz_transcripts_termcount" in sql:  # PostgreSQL's stored counts, by role
            # (t.role), alone or beside GIN counts of the term subsets (same snapshot)
            assert "m.role" not in sql and "deuz_transcripts_chat " not in sql
            continue
        assert ".role" not in sql and "deuz_transcripts_chat" not in sql
    counts = [sql for sql in statements if "count(" in sql]
    # N, then every n_t in one statement (PostgreSQL reads an unscoped N stored by role,
    # FTS5 sums it from its vocabulary's rows of each role token)
    assert len(counts) == (1 if not scope else 2)
    if connection.vendor == "sqlite" and not scope:
        assert any("fts_vocab WHERE term IN" in sql for sql in statements)
    for sql in counts:
        if connection.vendor == "sqlite":
            assert MESSAGES not in sql  # FTS5 alone
        else:
            assert f"FROM {MESSAGES} m WHERE m.search_vector @@" in sql  # GIN alone


@pytest.mark.django_db
def test_an_unscoped_search_with_roles_never_filters_rows_by_role(store):
    with CaptureQueriesContext(connection) as queries:
        assert found(store, {}, ["assistant"]) == expected_hits({"assistant"}, {})
    assert not any(".role IN" in query["sql"] for query in queries.captured_queries)


@pytest.mark.django_db(transaction=True)
def test_migration_0003_adds_role_tokens_to_stored_rows_and_takes_them_back(store):
    """Backwards: verify sees rows lacking their role tokens; forwards again: the tokens
    are back, verify is clean and searches with roles find exactly their messages."""
    assert [str(problem) for problem in Verifier().problems()] == []
    try:
        call_command("migrate", "deuz_transcripts", "0002", verbosity=0)
        # no Verifier here: the models have columns 0004 adds
        if connection.vendor == "postgresql":
            assert vectors_holding_lexemes("\ue003") == 0
        # the tokens are gone (guessing no walk: the stored counts are 0005's tables)
        with mock.patch.object(policy, "FORCED", forced_policies(big_read_rows=0)):
            assert found(store, {}, ["user"]) == set()
    finally:
        call_command("migrate", "deuz_transcripts", verbosity=0)
    assert [str(problem) for problem in Verifier().problems()] == []
    assert list(Verifier(chat_ids=["c0", "c1"]).problems()) == []  # checked chat by chat
    out = io.StringIO()
    call_command("backfill_transcripts", "--verify", stdout=out, stderr=io.StringIO())
    assert out.getvalue().endswith("no problems found.\n")
    for roles in (["user"], ["assistant", ROLES[2]], list(ROLES)):
        for scope in ({}, {"userId": "u0"}):
            assert found(store, scope, roles) == expected_hits(set(roles), scope)
