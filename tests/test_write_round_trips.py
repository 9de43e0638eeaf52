"""A store write's round trips on PostgreSQL: its lock and read in one, its rows in one."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from deuz_transcripts.backends.postgresql.rows import array_literal
from deuz_transcripts.models import Chat, ChatScope, Message
from deuz_transcripts.records import ChatRecord
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.sent_statements import CONTROL

#: Between two statements of one query string (the test's texts hold no ``; INSERT``).
_BETWEEN = re.compile(r";\s+(?=(?:INSERT|UPDATE|DELETE|SELECT)\b)")

pytestmark = pytest.mark.django_db


@pytest.fixture
def postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("round trips are PostgreSQL's (SQLite runs in the process)")


def chat(chat_id: str, *texts: str, scope: dict[str, str] | None = None) -> ChatRecord:
    return ChatRecord(
        chat_id,
        scope or {"userId": "ada"},
        [{"role": "system", "content": "be brief"}]
        + [{"role": "user", "content": text} for text in texts],
    )


def sent(write: Any) -> list[list[str]]:
    """The query strings ``write()`` sent (but transaction control), each as its statements."""
    with CaptureQueriesContext(connection) as captured:
        write()
    trips = [_BETWEEN.split(query["sql"]) for query in captured.captured_queries]
    return [trip for trip in trips if not all(CONTROL.match(statement) for statement in trip)]


def kinds(trip: list[str]) -> list[str]:
    return [" ".join(statement.split()[:3]) for statement in trip]


def test_a_new_chat_is_written_in_two_round_trips(postgres: None) -> None:
    store = DjangoConditionalChatStore()
    trips = sent(lambda: store.write_chat(chat("c1", "hello", "world"), expected_revision=0))
    assert len(trips) == 2
    lock_and_read, write = trips
    assert "pg_advisory_xact_lock" in lock_and_read[0] and len(lock_and_read) == 2
    assert "nextval" in lock_and_read[1]  # the new row's key, reserved with the read
    assert kinds(write) == [
        "INSERT INTO deuz_transcripts_chat",
        "INSERT INTO deuz_transcripts_chatscope",
        "INSERT INTO deuz_transcripts_storedform",
        "INSERT INTO deuz_transcripts_message",
    ]
    row = Chat.objects.get(chat_id="c1")
    assert row.revision == 1 and row.message_count == 3 and row.indexed_count == 2
    assert dict(ChatScope.objects.filter(chat=row).values_list("key", "value")) == row.scope
    assert Message.objects.filter(chat=row).count() == 3
    assert [hit.chat_id for hit in store.transcript.search({"userId": "ada"}, "world")] == ["c1"]


def test_a_rewrite_sends_its_chat_row_with_its_message_rows(postgres: None) -> None:
    store = DjangoConditionalChatStore()
    store.write_chat(chat("c1", "hello"), expected_revision=0)
    moved = chat("c1", "hello", "again", scope={"userId": "ada", "team": "x"})
    keys = "SELECT last_value FROM deuz_transcripts_chat_id_seq"
    with connection.cursor() as cursor:
        cursor.execute(keys)
        before = cursor.fetchone()
        trips = sent(lambda: store.write_chat(moved, expected_revision=1))
        cursor.execute(keys)
        assert cursor.fetchone() == before  # a chat with a row reserves no key
    assert kinds(trips[-1]) == [
        "UPDATE deuz_transcripts_chat SET",
        "DELETE FROM deuz_transcripts_chatscope",
        "INSERT INTO deuz_transcripts_chatscope",
        "INSERT INTO deuz_transcripts_storedform",
        "INSERT INTO deuz_transcripts_message",
    ]
    row = Chat.objects.get(chat_id="c1")
    assert row.revision == 2 and row.scope == {"userId": "ada", "team": "x"}
    assert dict(ChatScope.objects.filter(chat=row).values_list("key", "value")) == row.scope
    assert store.transcript.search({"team": "x"}, "again")[0].chat_id == "c1"


def test_an_append_is_one_round_trip_after_its_reads(postgres: None) -> None:
    store = DjangoConditionalChatStore()
    store.write_chat(chat("c1", "hello"), expected_revision=0)
    trips = sent(
        lambda: store.append_messages(
            "c1", [{"role": "user", "content": "more"}], expected_revision=1
        )
    )
    assert kinds(trips[-1]) == [
        "UPDATE deuz_transcripts_chat SET",
        "INSERT INTO deuz_transcripts_storedform",
        "INSERT INTO deuz_transcripts_message",
    ]
    assert store.load_chat("c1")[1] == 2  # type: ignore[index]


@pytest.mark.parametrize(
    "values",
    [
        ['{"a":"b"}', 'back\\slash \\" quote', "", "NULL", "{,}", "it's", "é\n\t中"],
        ["null", None, " spaced ", '"', "\\"],
    ],
)
def test_array_literals_hold_every_text_as_given(postgres: None, values: list[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::text[]", [array_literal(values)])
        assert cursor.fetchone()[0] == values


def test_array_literals_of_numbers_and_flags(postgres: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s::bigint[], %s::bool[]",
            [array_literal([1, None, -3, 2**40]), array_literal([True, False, None])],
        )
        assert cursor.fetchone() == ([1, None, -3, 2**40], [True, False, None])
