"""Wide scopes: at most ``MAX_SCOPE_FIELDS`` fields, and a filter plan whose shape does not
grow with the field count (the contract's scope section checks what wide scopes match).

One join per scope field made SQLite fail past 63 fields (its join limit) and PostgreSQL
plan for seconds to minutes; a search-only staff member could do that from the admin's
scope box. Now a filter joins at most ``JOINED_SCOPE_FIELDS`` scope rows and checks the
rest per chat, and a scope past ``MAX_SCOPE_FIELDS`` is ``InvalidRecord``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.db import connection

from deuz_transcripts import ChatRecord, InvalidRecord
from deuz_transcripts.backends.chat_filter import JOINED_SCOPE_FIELDS, ChatFilter, table
from deuz_transcripts.models import Chat, ChatScope
from deuz_transcripts.prepared import PreparedChat
from deuz_transcripts.records import MAX_SCOPE_FIELDS, validate_scope
from deuz_transcripts.stores import DjangoConditionalChatStore

pytestmark = pytest.mark.django_db


def wide(fields: int, last: str = "v") -> dict[str, str]:
    scope = {f"k{number:03d}": "v" for number in range(fields - 1)}
    scope[f"k{fields - 1:03d}"] = last
    return scope


def test_the_bound_is_checked_for_every_scope_given_and_every_write() -> None:
    assert len(validate_scope(wide(MAX_SCOPE_FIELDS))) == MAX_SCOPE_FIELDS
    with pytest.raises(InvalidRecord, match=f"more than {MAX_SCOPE_FIELDS} fields"):
        validate_scope(wide(MAX_SCOPE_FIELDS + 1))
    # a record as the stores build it from stored rows is not bounded; writing it is
    record = ChatRecord("c1", wide(MAX_SCOPE_FIELDS + 1), [])
    with pytest.raises(InvalidRecord) as raised:
        PreparedChat.of(record)
    assert raised.value.field == "scope"


def test_a_chat_stored_before_the_bound_still_loads_lists_and_searches(monkeypatch) -> None:
    """A chat given 40 scope fields by an older version (here: written with the bound
    switched off) is read as stored; only writing it again asks for a narrower scope."""
    store = DjangoConditionalChatStore()
    record = ChatRecord("old", wide(40), [{"role": "user", "content": "oldword"}])
    with monkeypatch.context() as unbounded:
        unbounded.setattr(
            "deuz_transcripts.prepared.validate_scope",
            lambda scope: validate_scope(scope, max_fields=None),
        )
        store.write_chat(record, expected_revision=0)
    loaded, revision = store.load_chat("old")
    assert loaded.scope == wide(40)
    assert [r.chat_id for r in store.list_chats({"k039": "v"})] == ["old"]
    assert [h.chat_id for h in store.transcript.search({"k000": "v"}, "oldword")] == ["old"]
    with pytest.raises(InvalidRecord) as raised:
        store.write_chat(loaded, expected_revision=revision)
    assert raised.value.field == "scope"
    store.delete_chat("old")
    assert store.load_chat("old") is None


def plan_nodes(sql: str, params: list[Any], *, analyze: bool = False) -> list[dict[str, Any]]:
    """PostgreSQL's plan of ``sql``, every node flattened (``EXPLAIN (FORMAT JSON)``)."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE {analyze}, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    pending = [(json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]]
    nodes = []
    while pending:
        node = pending.pop()
        nodes.append(node)
        pending.extend(node.get("Plans", []))
    return nodes


def joined_scope_scans(sql: str, params: list[Any]) -> int:
    """How many scans of the scope table the database plans for the filter's joins and
    per-chat check (aliases ``s<n>`` and ``r``; a wide scope's capped count of each
    field, alias ``x``, reads at most ``RARITY_CAP`` index entries and joins nothing)."""
    alias = re.compile(r"(s\d+|r)")
    if connection.vendor == "postgresql":
        return sum(
            1
            for node in plan_nodes(sql, params)
            if node.get("Relation Name") == table(ChatScope) and alias.fullmatch(node["Alias"])
        )
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        details = [row[-1].split(" ") for row in cursor.fetchall()]
    return sum(
        1 for words in details if words[0] in ("SEARCH", "SCAN") and alias.fullmatch(words[1])
    )


@pytest.mark.parametrize("fields", [1, JOINED_SCOPE_FIELDS, JOINED_SCOPE_FIELDS + 1, 32, 100])
def test_a_filter_plans_a_bounded_number_of_joins(fields: int) -> None:
    """Even past the bound (ChatFilter itself is not bounded), so the plan never grows."""
    for chats in (ChatFilter(wide(fields)), ChatFilter(wide(fields), searchable_only=False)):
        for sql, params in (chats.chat_pks_sql(), chats.total_sql()):
            assert 1 <= joined_scope_scans(sql, params) <= JOINED_SCOPE_FIELDS


@pytest.mark.django_db(transaction=True)
def test_a_wide_scope_starts_from_its_rarest_field_whatever_its_key() -> None:
    """60 chats share 31 fields; the rare field (4 chats) sorts last. The filter reads the
    rare field's rows and checks 4 chats, not 60 (PostgreSQL's actual row counts)."""
    if connection.vendor != "postgresql":
        pytest.skip("actual row counts are read from PostgreSQL's EXPLAIN ANALYZE")
    store = DjangoConditionalChatStore()
    common = wide(MAX_SCOPE_FIELDS - 1)
    for number in range(60):
        scope = {**common, "zz_user": f"u{number % 15}"}
        record = ChatRecord(f"c{number}", scope, [{"role": "user", "content": "w"}])
        store.write_chat(record, expected_revision=0)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {table(ChatScope)}")
    nodes = plan_nodes(*ChatFilter({**common, "zz_user": "u3"}).chat_pks_sql(), analyze=True)
    first = [node for node in nodes if node.get("Alias") == "s0"]
    assert [node["Actual Rows"] * node["Actual Loops"] for node in first] == [4]
    assert sorted(admitted({**common, "zz_user": "u3"})) == ["c18", "c3", "c33", "c48"]


def admitted(scope: dict[str, str]) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(*ChatFilter(scope).chat_pks_sql())
        pks = [row[0] for row in cursor.fetchall()]
    return set(Chat.objects.filter(pk__in=pks).values_list("chat_id", flat=True))


@pytest.mark.parametrize("fields", [2, JOINED_SCOPE_FIELDS + 1, MAX_SCOPE_FIELDS])
def test_a_filter_checks_every_field_joined_or_not(fields: int) -> None:
    store = DjangoConditionalChatStore()
    chats = {
        "in": wide(fields),
        "last-differs": wide(fields, "x"),
        "first-differs": {**wide(fields), "k000": "x"},
        "last-missing": wide(fields - 1),
    }
    for chat_id, scope in chats.items():
        record = ChatRecord(chat_id, scope, [{"role": "user", "content": "w"}])
        store.write_chat(record, expected_revision=0)
    assert admitted(wide(fields)) == {"in"}
    assert admitted(wide(fields, "x")) == {"last-differs"}


def test_a_filter_of_100_fields_runs_and_admits_no_chat_of_fewer() -> None:
    """Past the bound only through ``ChatFilter`` itself: past SQLite's 64-table join
    limit, which one join per field hit."""
    record = ChatRecord("c1", wide(MAX_SCOPE_FIELDS), [{"role": "user", "content": "w"}])
    DjangoConditionalChatStore().write_chat(record, expected_revision=0)
    assert admitted(wide(MAX_SCOPE_FIELDS)) == {"c1"}
    assert admitted(wide(100)) == set()
