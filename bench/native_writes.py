"""The write baseline issue #11 names: the same rows by plain SQL ``INSERT`` into tables whose
search data the engine fills itself.

PostgreSQL: message rows with a ``tsvector`` computed by ``to_tsvector('simple', text)`` in
the ``INSERT`` and a GIN index on it. SQLite: message rows and an external-content FTS5
table (tokenizer ``unicode61``) filled by an ``AFTER INSERT`` trigger. Both hold a chat
table with a unique chat id, as the app's do. The tables start empty in the write phase
(the app's tables hold the loaded corpus), which favours this baseline.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

from deuz_transcripts.text import MAX_INDEXED_BYTES, cut_utf8

from .corpus import CorpusChat

__all__ = ["create_tables", "drop_tables", "native_write"]

_POSTGRES = [
    "CREATE TABLE bench_native_chat (id bigserial PRIMARY KEY, chat_id text NOT NULL UNIQUE, "
    "user_id text NOT NULL, updated_at timestamptz NOT NULL)",
    "CREATE TABLE bench_native_message (id bigserial PRIMARY KEY, "
    "chat_id bigint NOT NULL REFERENCES bench_native_chat (id), position integer NOT NULL, "
    "role text NOT NULL, payload text NOT NULL, search_vector tsvector NOT NULL, "
    "UNIQUE (chat_id, position))",
    "CREATE INDEX bench_native_vector ON bench_native_message USING gin (search_vector)",
]
_SQLITE = [
    "CREATE TABLE bench_native_chat (id integer PRIMARY KEY, chat_id text NOT NULL UNIQUE, "
    "user_id text NOT NULL, updated_at text NOT NULL)",
    "CREATE TABLE bench_native_message (id integer PRIMARY KEY, "
    "chat_id integer NOT NULL REFERENCES bench_native_chat (id), position integer NOT NULL, "
    "role text NOT NULL, payload text NOT NULL, body text NOT NULL, "
    "UNIQUE (chat_id, position))",
    "CREATE VIRTUAL TABLE bench_native_fts USING fts5(body, content='bench_native_message', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER bench_native_fill AFTER INSERT ON bench_native_message BEGIN "
    "INSERT INTO bench_native_fts (rowid, body) VALUES (new.id, new.body); END",
]


def create_tables() -> None:
    """The baseline's tables, made afresh."""
    drop_tables()
    with connection.cursor() as cursor:
        for statement in _POSTGRES if connection.vendor == "postgresql" else _SQLITE:
            cursor.execute(statement)


def drop_tables() -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("DROP TABLE IF EXISTS bench_native_fts")
        cursor.execute("DROP TABLE IF EXISTS bench_native_message")
        cursor.execute("DROP TABLE IF EXISTS bench_native_chat")


def native_write(chat: CorpusChat, chat_id: str, user: str) -> None:
    """One chat and its messages in one transaction: one ``INSERT`` of the chat, one
    multi-row ``INSERT`` per 1,000 messages."""
    moment = datetime.fromtimestamp(chat.updated_at_ms / 1000, UTC)
    postgres = connection.vendor == "postgresql"
    row = "(%s, %s, %s, %s, to_tsvector('simple', %s))" if postgres else "(%s, %s, %s, %s, %s)"
    column = "search_vector" if postgres else "body"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO bench_native_chat (chat_id, user_id, updated_at) VALUES (%s, %s, %s) "
            "RETURNING id",
            [chat_id, user, connection.ops.adapt_datetimefield_value(moment)],
        )
        (chat_pk,) = cursor.fetchone()
        rows = list(enumerate(zip(chat.messages, chat.indexed, strict=True)))
        for start in range(0, len(rows), 1_000):
            chunk = rows[start : start + 1_000]
            params: list[Any] = []
            for position, (message, text) in chunk:
                payload = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
                body = cut_utf8(text, MAX_INDEXED_BYTES) if text else ""
                params.extend([chat_pk, position, message["role"], payload, body])
            cursor.execute(
                f"INSERT INTO bench_native_message (chat_id, position, role, payload, {column}) "
                f"VALUES {', '.join([row] * len(chunk))}",
                params,
            )
