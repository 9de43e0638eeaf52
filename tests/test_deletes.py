"""Deletes are real: after ``delete_chat`` the text is in no table of the app, nor in the file.

Before SQLite 3.42 FTS5 deletes by writing a delete marker into a new segment; the deleted
tokens stay in older segments (``deuz_transcripts_fts_data`` blobs) until merged, so
``delete_chat`` merges the index (``optimize``); from 3.42 FTS5's ``secure-delete`` option
removes them in place. SQLite keeps freed bytes in the file unless ``secure_delete`` is on,
so with ``SQLITE_SECURE_DELETE`` (default on) it is on for every statement of the app's
SQLite connections. Run these under a newer SQLite with ``DEUZ_SQLITE_MODULE=pysqlite3``.
On PostgreSQL deleted tuples stay on disk until VACUUM: only what SQL can see is checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection, connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from deuz_transcripts import ChatRecord
from deuz_transcripts.backends.sqlite.common import FTS_TABLE, fts5_secure_delete_supported
from deuz_transcripts.stores import DjangoChatStore, DjangoConditionalChatStore
from tests.factories import ChatRecordFactory
from tests.sql_support import assert_consistent, rows_holding, sqlite_file_database

pytestmark = pytest.mark.django_db
ADA = {"userId": "ada"}
# No other word of these tests starts with "zq", so FTS5's prefix compression of terms
# in a leaf page cannot hide the secret's bytes from the blob scan.
SECRET = "zqsecretword"
MESSAGE_ID = "zqmsgid-1"


def secret_chat(chat_id: str = "doomed") -> ChatRecord:
    """The secret in every indexed shape: string content, text part, tool result."""
    return ChatRecord(
        chat_id,
        ADA,
        [
            {"role": "user", "content": f"please remember {SECRET} for me"},
            {"role": "assistant", "content": [{"type": "text", "text": f"noted {SECRET}"}]},
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "c1",
                        "toolName": "lookup",
                        "output": f"record {SECRET}",
                    }
                ],
            },
            {"role": "system", "content": f"system prompt {SECRET}"},
        ],
        message_ids=[MESSAGE_ID, None, None, None],
    )


def bystanders(store: DjangoConditionalChatStore, count: int = 30) -> None:
    """Other chats, so the FTS5 index has segments the delete must merge through."""
    for number in range(count):
        store.write_chat(
            ChatRecordFactory(chat_id=f"other-{number}", texts=[f"alpha beta word{number} gamma"]),
            expected_revision=0,
        )


BACKENDS = ["database", "like"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    """The test database's own backend; on SQLite also the LIKE fallback."""
    if request.param == "like":
        if connection.vendor != "sqlite":
            pytest.skip("the LIKE fallback is SQLite's")
        with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "like"}):
            yield request.param
    else:
        yield request.param


def test_deleted_text_is_in_no_table_of_the_app(backend):
    store = DjangoConditionalChatStore()
    bystanders(store, 10)
    store.write_chat(secret_chat(), expected_revision=0)
    bystanders_after = [f"late-{n}" for n in range(5)]
    for chat_id in bystanders_after:  # segments written after the secret's
        store.write_chat(
            ChatRecordFactory(chat_id=chat_id, texts=["alpha delta"]), expected_revision=0
        )
    DjangoChatStore().save_chat(secret_chat())  # a legacy copy written by the app
    before = rows_holding(SECRET)
    assert {"deuz_chats", "deuz_transcripts_message"} <= set(before)
    if store.transcript.backend_name == "sqlite-fts5":
        assert "deuz_transcripts_fts_data" in before  # the scan does see FTS5 blobs
    assert rows_holding(MESSAGE_ID)

    store.delete_chat("doomed")

    assert rows_holding(SECRET) == {}
    assert rows_holding(MESSAGE_ID) == {}
    assert store.transcript.search(ADA, SECRET) == []
    assert len(store.transcript.search(ADA, "alpha")) == 15  # the others are intact
    assert_consistent()


def test_only_the_chat_id_stays_in_the_tombstone():
    """Documented: a tombstone keeps the chat id (never content), so ids must not be secret."""
    store = DjangoConditionalChatStore()
    store.write_chat(secret_chat("zqchatid"), expected_revision=0)
    store.delete_chat("zqchatid")
    assert rows_holding("zqchatid") == {"deuz_transcripts_tombstone": 1}


def test_without_secure_delete_fts5_segments_keep_deleted_terms():
    """The trade-off of ``SQLITE_SECURE_DELETE: False``: not searchable, but still stored."""
    if DjangoConditionalChatStore().transcript.backend_name != "sqlite-fts5":
        pytest.skip("FTS5 segments are SQLite's")
    with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SECURE_DELETE": False}):
        store = DjangoConditionalChatStore()
        if fts5_secure_delete_supported():  # a table whose option the setting never set
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rank) VALUES ('secure-delete', 0)"
                )
        bystanders(store, 5)
        store.write_chat(secret_chat(), expected_revision=0)
        store.delete_chat("doomed")
        assert store.transcript.search(ADA, SECRET) == []
        assert "deuz_transcripts_fts_data" in rows_holding(SECRET)
        assert_consistent()


def test_fts5_deletes_in_place_from_sqlite_3_42_and_merges_before():
    """3.42+: FTS5's ``secure-delete`` option is switched on and nothing is merged (the
    delete's cost follows the chat); older libraries merge the whole index (``optimize``)."""
    store = DjangoConditionalChatStore()
    if store.transcript.backend_name != "sqlite-fts5":
        pytest.skip("FTS5 is SQLite's")
    bystanders(store, 5)
    store.write_chat(secret_chat(), expected_revision=0)
    with CaptureQueriesContext(connection) as queries:
        store.delete_chat("doomed")
    merged = any("'optimize'" in query["sql"] for query in queries.captured_queries)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT v FROM {FTS_TABLE}_config WHERE k = 'secure-delete'")
        option = cursor.fetchone()
    if fts5_secure_delete_supported():
        assert option == (1,)
        assert not merged
    else:
        assert option is None
        assert merged
    assert rows_holding(SECRET) == {}
    assert store.transcript.search(ADA, "alpha") != []
    assert_consistent()


def test_text_a_rewrite_replaced_before_any_delete_leaves_with_the_chat():
    """A message rewritten before the first delete ever switched FTS5's ``secure-delete``
    on: its old text must not stay in old segments once the chat is deleted."""
    store = DjangoConditionalChatStore()
    if store.transcript.backend_name != "sqlite-fts5":
        pytest.skip("FTS5 segments are SQLite's")
    bystanders(store, 5)
    first = ChatRecord("doomed", ADA, [{"role": "user", "content": f"first {SECRET}"}])
    store.write_chat(first, expected_revision=0)
    second = ChatRecord("doomed", ADA, [{"role": "user", "content": "second version"}])
    store.write_chat(second, expected_revision=1)  # the secret's row is rewritten
    store.delete_chat("doomed")
    assert rows_holding(SECRET) == {}
    assert_consistent()


@pytest.fixture
def sqlite_only():
    if connection.vendor != "sqlite":
        pytest.skip("the database file is SQLite's")


def file_bytes(alias: str) -> bytes:
    path = Path(connections[alias].settings_dict["NAME"])
    connections[alias].close()
    return path.read_bytes()


def secure_delete_pragma(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("PRAGMA secure_delete")
        return int(cursor.fetchone()[0])


@pytest.mark.parametrize("secure", [True, False])
def test_deleted_text_is_not_in_the_database_file(tmp_path, sqlite_only, secure):
    """Byte scan of the SQLite file, on a build whose ``secure_delete`` default is off.

    Chats written after the secret make FTS5 merge segments holding it (copies the
    delete cannot reach later), and a rewrite of the chat frees its first rows: with
    the setting, no byte of any of them is left once the chat is deleted, whichever
    path the library takes (``secure-delete`` on 3.42+, ``optimize`` before).
    """
    with (
        override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SECURE_DELETE": secure}),
        sqlite_file_database(tmp_path, init_command="PRAGMA secure_delete = OFF") as database,
    ):
        alias = database.alias
        # With the setting every connection zeroes what it frees; without, the operator's
        # own value (here off) is left alone.
        assert secure_delete_pragma(alias) == int(secure)
        store = DjangoConditionalChatStore(using=alias)
        bystanders(store, 20)
        store.write_chat(secret_chat(), expected_revision=0)
        edited = secret_chat()
        edited.messages[0]["content"] = f"please forget {SECRET} now"
        store.write_chat(edited, expected_revision=1)  # the first row rewritten
        for number in range(20):
            store.write_chat(
                ChatRecordFactory(chat_id=f"late-{number}", texts=[f"delta late{number}"]),
                expected_revision=0,
            )
        DjangoChatStore(using=alias).save_chat(secret_chat())
        assert SECRET.encode() in file_bytes(alias)

        store.delete_chat("doomed")
        assert secure_delete_pragma(alias) == int(secure)  # a delete restores what it found
        assert_consistent(alias)
        leftover = file_bytes(alias).count(SECRET.encode())
        assert not Path(connections[alias].settings_dict["NAME"] + "-journal").exists()
    if secure:
        assert leftover == 0
    else:
        assert leftover > 0  # why the setting exists: freed pages keep deleted bytes
