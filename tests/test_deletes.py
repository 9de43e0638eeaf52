"""Deletes are real: after ``delete_chat`` the text is in no table of the app, nor in the file.

FTS5 deletes by writing a delete marker into a new segment; the deleted tokens stay
in older segments (``deuz_transcripts_fts_data`` blobs) until merged, and SQLite keeps
deleted rows' bytes in free pages unless ``secure_delete`` is on. ``delete_chat`` therefore
merges the FTS5 index and zeroes freed pages (setting ``SQLITE_SECURE_DELETE``, default on).
On PostgreSQL deleted tuples stay on disk until VACUUM: only what SQL can see is checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection, connections
from django.test import override_settings

from deuz_transcripts import ChatRecord
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
        bystanders(store, 5)
        store.write_chat(secret_chat(), expected_revision=0)
        store.delete_chat("doomed")
        assert store.transcript.search(ADA, SECRET) == []
        assert "deuz_transcripts_fts_data" in rows_holding(SECRET)
        assert_consistent()


@pytest.fixture
def sqlite_only():
    if connection.vendor != "sqlite":
        pytest.skip("the database file is SQLite's")


def file_bytes(alias: str) -> bytes:
    path = Path(connections[alias].settings_dict["NAME"])
    connections[alias].close()
    return path.read_bytes()


@pytest.mark.parametrize("secure", [True, False])
def test_deleted_text_is_not_in_the_database_file(tmp_path, sqlite_only, secure):
    """Byte scan of the SQLite file, on a build whose ``secure_delete`` default is off."""
    with (
        override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SECURE_DELETE": secure}),
        sqlite_file_database(tmp_path, init_command="PRAGMA secure_delete = OFF") as database,
    ):
        alias = database.alias
        store = DjangoConditionalChatStore(using=alias)
        bystanders(store, 20)
        store.write_chat(secret_chat(), expected_revision=0)
        DjangoChatStore(using=alias).save_chat(secret_chat())
        assert SECRET.encode() in file_bytes(alias)

        store.delete_chat("doomed")
        with connections[alias].cursor() as cursor:  # the connection's own setting is back
            cursor.execute("PRAGMA secure_delete")
            assert cursor.fetchone()[0] == 0
        assert_consistent(alias)
        leftover = file_bytes(alias).count(SECRET.encode())
        assert not Path(connections[alias].settings_dict["NAME"] + "-journal").exists()
    if secure:
        assert leftover == 0
    else:
        assert leftover > 0  # why the setting exists: freed pages keep deleted bytes
