"""PostgreSQL's backfill of new legacy chats: message rows by ``COPY``, each legacy row
read and prepared once, under its chat's lock; the rows, vectors and counts are the
ones the ``INSERT`` of a write stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from deuz_transcripts import ChatRecord, prepared
from deuz_transcripts.backends.postgresql.partitions import partition_info, partition_messages
from deuz_transcripts.backends.postgresql.rows import PostgresRows, tsvector_text
from deuz_transcripts.backends.postgresql.storage import role_lexeme, scope_lexemes
from deuz_transcripts.backends.search_rows import SearchRows
from deuz_transcripts.backfill import Backfill
from deuz_transcripts.models import Chat, ChatScope, LegacyChat, Message
from deuz_transcripts.stores import DjangoChatStore, DjangoConditionalChatStore
from deuz_transcripts.verify import Verifier
from tests.test_term_counts import count_terms, drift, stored, tenant_key

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's COPY"),
]

WHEN = datetime(2025, 4, 1, tzinfo=UTC)


def awkward(n: int, user: str) -> ChatRecord:
    """A chat whose every column has what COPY's text format and tsvector's input escape:
    tabs, newlines, backslashes, quotes, a system message (no vector), an empty one
    (no terms), a NUL-free but non-ASCII text, ids and roles with odd characters."""
    return ChatRecord(
        f"chat\t{n}\\'q",
        {"userId": user, "team": "o'brien\\\tx"},
        [
            {"role": "system", "content": "be brief\nalways"},
            {"role": "user", "content": f"alpha 'quoted' back\\slash\ttab\nline w{n}"},
            {"role": "assistant", "content": [{"type": "text", "text": "alpha Größe 日本語 x:1"}]},
            {"role": "tool\tuser", "content": ""},
            {"role": "user", "content": "\r\n\\N \\. alpha"},
        ],
        message_ids=[None, f"id\\{n}\t'", None, None, "\\N"],
        updated_at=WHEN + timedelta(minutes=n),
    )


def legacy_chats(count: int) -> None:
    for n in range(count):
        DjangoChatStore().save_chat(awkward(n, "ada" if n % 2 else "bob"))


def rows() -> tuple[list[Any], list[Any], list[Any]]:
    """Every stored value but keys (a second load makes new ones), by chat id."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.chat_id, m.tenant, m.position, m.message_id, m.role, m.payload, m.digest, "
            "m.visible_position, m.has_terms, m.search_text, m.search_vector::text "
            f"FROM {Message._meta.db_table} m JOIN {Chat._meta.db_table} c ON c.id = m.chat_id "
            "ORDER BY c.chat_id, m.position"
        )
        messages = cursor.fetchall()
    chats = list(
        Chat.objects.order_by("chat_id").values_list(
            "chat_id",
            "scope",
            "updated_at",
            "is_indexed",
            "indexed_count",
            "message_count",
            "tenant",
            "revision",
        )
    )
    scopes = list(
        ChatScope.objects.order_by("chat__chat_id", "key").values_list(
            "chat__chat_id", "key", "value"
        )
    )
    return messages, chats, scopes


def counts() -> list[int]:
    return [stored(lexeme, tenant) for lexeme in ("", "alpha") for tenant in (None, "ada", "bob")]


def backfill_both_ways(monkeypatch: Any) -> tuple[Any, Any]:
    """The legacy chats backfilled by COPY, then again (all chats deleted) by the INSERT a
    write sends; the stored rows and counts of each, checked exact each time."""
    found = []
    legacy_ids = list(LegacyChat.objects.values_list("chat_id", flat=True))
    for insert_new_chats in (PostgresRows.insert_new_chats, SearchRows.insert_new_chats):
        Chat.objects.filter(chat_id__in=legacy_ids).delete()
        monkeypatch.setattr(PostgresRows, "insert_new_chats", insert_new_chats)
        stats = Backfill(chats_per_transaction=4).run("legacy")
        assert (stats.indexed, stats.failed) == (6, 0)
        assert drift() == [] and list(Verifier().problems()) == []
        found.append((rows(), counts()))
    return found[0], found[1]


def test_a_backfill_by_copy_stores_what_the_insert_of_a_write_stores(monkeypatch: Any) -> None:
    with tenant_key("userId"):
        store = DjangoConditionalChatStore()
        for n in range(3):  # "alpha" counted, and tenant "ada" counting its own
            store.write_chat(awkward(100 + n, "ada"), expected_revision=0)
        count_terms(1, tenant_min_rows=1)
        legacy_chats(6)
        by_copy, by_insert = backfill_both_ways(monkeypatch)
    assert by_copy == by_insert
    messages = by_copy[0][0]
    assert len(messages) == 9 * 5 and sum(row[-1] is None for row in messages) == 9 * 2
    assert by_copy[1][4] == 3 * 3 + 3 * 3  # alpha: 3 messages of ada's stored and legacy chats


def test_a_backfill_by_copy_into_partitions_keeps_rows_and_counts(monkeypatch: Any) -> None:
    with tenant_key("userId"):
        if partition_info("default") is None:
            partition_messages("default", 3)
        legacy_chats(6)
        by_copy, by_insert = backfill_both_ways(monkeypatch)
    assert by_copy == by_insert


@pytest.mark.parametrize(
    "lexemes",
    [
        "alpha beta alpha 42",
        "größe 日本語 x:1 a*",
        "it's back\\slash '' \\\\",
        " ".join([*scope_lexemes({"userId": "o'b\\"}, "c'\\"), role_lexeme("user")]),
    ],
)
def test_a_vector_in_text_form_is_the_vector_array_to_tsvector_builds(lexemes: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT array_to_tsvector(string_to_array(%s, ' '))::text, %s::tsvector::text",
            [lexemes, tsvector_text(lexemes)],
        )
        built, parsed = cursor.fetchone()
    assert parsed == built


@pytest.mark.django_db(transaction=True)
def test_new_legacy_chats_are_read_and_folded_once_under_their_locks(monkeypatch: Any) -> None:
    """Locks are per chat: nothing is gained by preparing before the group's transaction,
    and reading each legacy row before it and again under the locks cost a read."""
    legacy_chats(4)
    folded: list[bool] = []
    fold = prepared.message_terms

    def recording(message: Any) -> Any:
        folded.append(connection.in_atomic_block)
        return fold(message)

    reads: list[int] = []
    read = Backfill._legacy_rows

    def counting(self: Backfill, chat_ids: list[str]) -> Any:
        reads.append(len(chat_ids))
        return read(self, chat_ids)

    monkeypatch.setattr(prepared, "message_terms", recording)
    monkeypatch.setattr(Backfill, "_legacy_rows", counting)
    stats = Backfill(chats_per_transaction=50).run("legacy")
    assert (stats.indexed, stats.failed) == (4, 0)
    assert reads == [4]
    assert len(folded) == 4 * 5 and all(folded)  # each message of 4 chats, once
