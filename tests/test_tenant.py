"""The tenant column (``TENANT_KEY``): what writes put in it, how a stale one is found
and fixed, that PostgreSQL statements test it, and the hash-partitioned message table.

The whole contract suite also runs on a partitioned schema: ``.ci/run``'s partitioned
leg (``DEUZ_TEST_PARTITIONS=8 DEUZ_TENANT_KEY=userId``, see ``tests/conftest.py``).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from deuz_transcripts.backends.postgresql.partitions import partition_info, partition_messages
from deuz_transcripts.checks import check_tenant_columns
from deuz_transcripts.errors import InvalidRecord
from deuz_transcripts.models import Chat, Message
from deuz_transcripts.records import MemorySourceRef
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.verify import Verifier
from tests.factories import ChatRecordFactory
from tests.sent_statements import statements_sent

pytestmark = pytest.mark.django_db

MESSAGES = Message._meta.db_table


def _reads_messages(sql: str) -> bool:
    """Whether a statement reads message rows (the walk's guess names the table only to
    read its row estimate from ``pg_class``)."""
    return MESSAGES in sql and "pg_class" not in sql


on_postgres = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's")


@contextmanager
def tenant_key(key: str | None) -> Iterator[None]:
    with override_settings(DEUZ_TRANSCRIPTS={**settings.DEUZ_TRANSCRIPTS, "TENANT_KEY": key}):
        yield


def tenants(chat_id: str) -> tuple[str, set[str]]:
    """The chat row's tenant and its message rows' tenants."""
    chat = Chat.objects.get(chat_id=chat_id)
    return chat.tenant, set(Message.objects.filter(chat=chat).values_list("tenant", flat=True))


def write(store, chat_id: str, scope: dict[str, str], text: str = "alpha beta") -> None:
    record = ChatRecordFactory(chat_id=chat_id, scope=scope, texts=[text, "gamma"])
    loaded = store.load_chat(chat_id)
    store.write_chat(record, expected_revision=0 if loaded is None else loaded[1])


@pytest.fixture
def store() -> DjangoConditionalChatStore:
    return DjangoConditionalChatStore()


def test_rows_carry_their_scope_value_of_the_tenant_key(store):
    with tenant_key("userId"):
        write(store, "c1", {"userId": "ada", "agentId": "x"})
        write(store, "c2", {"agentId": "x"})  # no tenant field: the "" tenant
        assert tenants("c1") == ("ada", {"ada"})
        assert tenants("c2") == ("", {""})
        write(store, "c1", {"userId": "bob"})  # the chat moves: every row follows
        assert tenants("c1") == ("bob", {"bob"})
        assert [h.chat_id for h in store.transcript.search({"userId": "bob"}, "alpha")] == ["c1"]
        assert store.transcript.search({"userId": "ada"}, "alpha") == []
        assert [r.chat_id for r in store.list_chats({"userId": "bob"})] == ["c1"]
        store.transcript.index(ChatRecordFactory(chat_id="c3", scope={"userId": "cy"}))
        assert tenants("c3")[0] == "cy"


def test_without_a_tenant_key_every_tenant_is_empty(store):
    with tenant_key(None):
        write(store, "c1", {"userId": "ada"})
    assert tenants("c1") == ("", {""})


def test_a_changed_tenant_key_is_reported_and_fixed_by_the_backfill(store):
    with tenant_key(None):
        write(store, "c1", {"userId": "ada"})
    with tenant_key("userId"):
        (warning,) = check_tenant_columns(databases=["default"])
        assert warning.id == "deuz_transcripts.W005"
        assert "1 of its 1 newest chats" in warning.msg
        assert any("tenant differs" in str(problem) for problem in Verifier().problems())
        call_command("backfill_transcripts", stdout=io.StringIO(), stderr=io.StringIO())
        assert tenants("c1") == ("ada", {"ada"})
        assert check_tenant_columns(databases=["default"]) == []
        assert list(Verifier().problems()) == []
        assert len(store.transcript.search({"userId": "ada"}, "alpha")) == 1


def test_a_message_row_of_another_tenant_is_found_and_replaced_by_the_fix(store):
    with tenant_key("userId"):
        write(store, "c1", {"userId": "ada"})
        Message.objects.filter(chat__chat_id="c1", position=0).update(tenant="zz")
        assert any("tenant differs" in str(problem) for problem in Verifier().problems())
        call_command("backfill_transcripts", "--fix", stdout=io.StringIO(), stderr=io.StringIO())
        assert tenants("c1") == ("ada", {"ada"})
        assert Message.objects.filter(chat__chat_id="c1").count() == 2
        assert list(Verifier().problems()) == []


def test_an_invalid_tenant_key_is_a_settings_error():
    for bad in ("", " userId", 7, "a\nb"):
        with tenant_key(bad):  # type: ignore[arg-type]
            out = io.StringIO()
            with pytest.raises(Exception, match="TENANT_KEY"):
                call_command("check", stdout=out, stderr=out)


def _searches(store, user: str = "ada") -> None:
    """Every path of the planner: one and several terms, roles, a window, counts and a
    cursor, neighbours, and the essential-terms plan of a long query."""
    search = store.transcript
    scope = {"userId": user}
    search.search(scope, "alpha")
    search.search(scope, "alpha beta gamma", around=1)
    search.search(scope, "alpha", roles=["user"])
    search.search(scope, "alpha", updated_after=ChatRecordFactory().updated_at)
    page = search.search_page(scope, "alpha gamma", limit=1)
    search.search_page(scope, "alpha gamma", limit=1, cursor=page.next_cursor)
    search.search(scope, " ".join(f"w{i}" for i in range(12)) + " alpha")


@on_postgres
@pytest.mark.parametrize("big_scope", [False, True], ids=["small-scope", "big-scope"])
def test_every_message_statement_of_a_tenant_scoped_search_tests_the_tenant(store, big_scope):
    from unittest import mock

    from deuz_transcripts.backends import forced_policies, policy

    big = forced_policies(small_read_rows=1, single_statement_max=0, lexeme_scope_min=0)
    with (
        tenant_key("userId"),
        mock.patch.object(policy, "FORCED", big if big_scope else {}),
    ):
        for n in range(6):
            write(store, f"c{n}", {"userId": "ada" if n % 2 else "bob"}, f"alpha beta w{n}")
        with CaptureQueriesContext(connection) as queries:
            _searches(store)
            message_id = store.load_chat("c1")[0].message_ids[0]
            ref = MemorySourceRef("transcript", "c1", message_id)
            assert store.transcript.resolve_source({"userId": "ada"}, ref) is not None
    statements = [q["sql"] for q in queries.captured_queries if _reads_messages(q["sql"])]
    assert statements
    for sql in statements:
        assert re.search(r"\btenant\" = 'ada'|\.tenant = 'ada'", sql), sql


@on_postgres
def test_the_newest_first_walk_of_a_tenant_scope_tests_each_chat_s_tenant(store):
    """A scope that is exactly the tenant walks chats newest first testing ``c.tenant``
    (as a list of the tenant's chats from the scope rows, PostgreSQL hashed them all
    first: 704 ms at 1M); a wider scope still takes its chats from the scope rows. Same
    hits as the memory index either way."""
    from unittest import mock

    from deuz_transcripts import InMemoryTranscriptIndex
    from deuz_transcripts.backends import forced_policies, policy

    memory = InMemoryTranscriptIndex()
    walk = forced_policies(small_read_rows=1)
    with tenant_key("userId"), mock.patch.object(policy, "FORCED", walk):
        scopes = [
            {"userId": "ada" if n % 2 else "bob", **({"team": "x"} if n % 4 else {})}
            for n in range(8)
        ]
        scopes += [{"team": "x"}, {"userId": ""}] * 3  # tenant "" both: one is {"userId": ""}
        for n, scope in enumerate(scopes):
            record = ChatRecordFactory(chat_id=f"c{n}", scope=scope, texts=["alpha", "beta"])
            store.write_chat(record, expected_revision=0)
            memory.index(record)
        for scope, via_scope_rows in (
            ({"userId": "ada"}, False),
            ({"userId": "ada", "team": "x"}, True),
            ({"userId": ""}, True),
        ):
            with CaptureQueriesContext(connection) as queries:
                hits = store.transcript.search(scope, "alpha", limit=3)
            assert [(h.chat_id, h.score) for h in hits] == [
                (h.chat_id, h.score) for h in memory.search(scope, "alpha", limit=3)
            ]
            walks = [  # not N's statement, which holds a small scope's ranked candidates
                q["sql"]
                for q in queries.captured_queries
                if "ORDER BY c.updated_at" in q["sql"] and "row_number()" not in q["sql"]
            ]
            assert walks, "the walk ran"
            assert all(("chatscope" in sql) == via_scope_rows for sql in walks), walks


@on_postgres
def test_an_unscoped_search_tests_no_tenant(store):
    with tenant_key("userId"):
        write(store, "c1", {"userId": "ada"})
        with CaptureQueriesContext(connection) as queries:
            assert len(store.transcript.search({}, "alpha")) == 1
    assert not any("tenant" in q["sql"] for q in queries.captured_queries)


def _partitions_read(sql: str) -> set[str]:
    """The message partitions the plan of ``sql`` reads (``EXPLAIN``, not run)."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
    text = plan if isinstance(plan, str) else json.dumps(plan)
    return set(re.findall(rf'"Relation Name": "({MESSAGES}_p\d+)"', text))


@contextmanager
def partitioned(partitions: int = 4) -> Iterator[None]:
    """The message table hash-partitioned for this test (rolled back with its
    transaction), unless the run's database is partitioned already."""
    if partition_info("default") is None:
        partition_messages("default", partitions)
    yield


@on_postgres
def test_a_tenant_scoped_search_reads_one_partition_and_finds_what_it_found_before(store):
    with tenant_key("userId"):
        for n in range(12):
            write(store, f"c{n}", {"userId": f"u{n % 4}"}, f"alpha beta w{n}")
        before = {
            user: [
                (h.chat_id, h.index, h.score)
                for h in store.transcript.search({"userId": user}, "alpha beta w3")
            ]
            for user in ("u0", "u1", "u2", "u3", "nobody")
        }
        unscoped = [(h.chat_id, h.score) for h in store.transcript.search({}, "alpha w5")]
        with partitioned():
            info = partition_info("default")
            assert info is not None and info.key == "HASH (tenant)"
            for user, hits in before.items():
                found = store.transcript.search({"userId": user}, "alpha beta w3")
                assert [(h.chat_id, h.index, h.score) for h in found] == hits
            assert [(h.chat_id, h.score) for h in store.transcript.search({}, "alpha w5")] == (
                unscoped
            )
            with CaptureQueriesContext(connection) as queries:
                _searches(store, "u1")
            selects = [
                sql
                for sql in statements_sent(queries)
                if _reads_messages(sql) and sql.startswith(("SELECT", "WITH"))
            ]
            read = [_partitions_read(sql) for sql in selects]
            assert read and all(len(found) == 1 for found in read), read
            with CaptureQueriesContext(connection) as queries:
                store.transcript.search({}, "alpha")
            everywhere = set().union(
                *(
                    _partitions_read(sql)
                    for sql in statements_sent(queries)
                    if _reads_messages(sql) and sql.startswith(("SELECT", "WITH"))
                )
            )
            assert len(everywhere) == info.partitions
            # writes, moves and deletes keep working with the partition key in every key
            write(store, "c0", {"userId": "u9"}, "moved here")
            assert tenants("c0") == ("u9", {"u9"})
            store.delete_chat("c1")
            assert store.transcript.search({"userId": "u1"}, "w1") == []
            assert list(Verifier().problems()) == []


@on_postgres
def test_the_partition_command_reports_converts_and_refuses_twice(store):
    out = io.StringIO()
    already = partition_info("default")
    call_command("partition_transcripts", "--status", stdout=out)
    assert ("not partitioned" in out.getvalue()) == (already is None)
    if already is None:
        write(store, "c1", {"userId": "ada"})
        out = io.StringIO()
        call_command("partition_transcripts", "--partitions", "3", stdout=out, stderr=io.StringIO())
        assert (
            out.getvalue() == "The message table is now split by HASH (tenant) into 3 partitions.\n"
        )
        assert len(store.transcript.search({"userId": "ada"}, "alpha")) == 1
    with pytest.raises(CommandError, match="partitioned already"):
        call_command("partition_transcripts", stdout=io.StringIO(), stderr=io.StringIO())


def test_partition_arguments_are_checked():
    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="only PostgreSQL"):
            call_command("partition_transcripts", stdout=io.StringIO(), stderr=io.StringIO())
        return
    if partition_info("default") is not None:
        pytest.skip("this run's message table is partitioned already")
    for bad in (1, 0, 257):
        with pytest.raises(InvalidRecord, match="partitions: must be from 2 to 256"):
            partition_messages("default", bad)
