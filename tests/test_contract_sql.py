"""The one contract suite, run against every SQL backend of this run's database.

Run on SQLite it covers FTS5 and the LIKE fallback; on PostgreSQL the tsvector
backend. The async twins run the sync method in another thread, on another
connection, which must see the test's writes: those tests alone are transactional.
"""

from __future__ import annotations

import asyncio
import sys
from unittest import mock

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, connections
from django.test import override_settings

if "tests.contract" not in sys.modules:
    pytest.register_assert_rewrite("tests.contract")

from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.prepared import PreparedChat
from deuz_transcripts.stores import DjangoConditionalChatStore, DjangoTranscriptIndex
from tests.contract import TranscriptContract


class SqlContract(TranscriptContract):
    """``tests/conftest.py`` marks these tests ``django_db``, the async ones transactional."""

    database_contract = True

    @pytest.fixture(autouse=True)
    def _close_worker_connections(self):
        """The async twins' worker thread keeps its own connection: close it after each test."""
        yield
        asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())

    @pytest.fixture
    def committed(self, django_capture_on_commit_callbacks):
        """The test's transaction never commits: run what ``on_commit`` collected instead."""
        return lambda: django_capture_on_commit_callbacks(execute=True)


class TestDatabaseContract(SqlContract):
    """FTS5 on SQLite, tsvector on PostgreSQL: whichever this run's database has."""

    backend_name = "postgresql" if connection.vendor == "postgresql" else "sqlite-fts5"
    substring_matching = False

    def make_store(self) -> DjangoConditionalChatStore:
        return DjangoConditionalChatStore()


class TestPrunedPlanContract(SqlContract):
    """The database's backend planning every search as a big scope: the full-mask walk
    whenever it is exact, else masks counted first, few-row masks read through the
    index and any mask with a page of rows walked newest first (PostgreSQL: the scope
    filtered inside GIN by its lexemes)."""

    backend_name = "postgresql" if connection.vendor == "postgresql" else "sqlite-fts5"
    substring_matching = False

    @pytest.fixture(autouse=True)
    def _plan_as_big_scope(self):
        with (
            mock.patch.object(
                policy,
                "FORCED",
                forced_policies(small_read_rows=1, single_statement_max=0, lexeme_scope_min=0),
            ),
            override_settings(
                DEUZ_TRANSCRIPTS={**settings.DEUZ_TRANSCRIPTS, "SQLITE_SCAN_SCOPE_MAX": 0}
            ),
        ):
            yield

    def make_store(self) -> DjangoConditionalChatStore:
        return DjangoConditionalChatStore()


class WholeChatIndex(DjangoTranscriptIndex):
    """An ``index`` of the caller's own that reads every write as a whole chat (an
    append's stored messages are loaded then), before the stock write."""

    def index(self, record):
        chat = PreparedChat.of(record)
        assert len(chat.messages) == len(chat.message_ids) == len(set(chat.message_ids))
        super().index(chat)


class TestOverriddenIndexContract(SqlContract):
    """The contract through an overridden ``index``: the store's one write path, with an
    append's whole chat read from the database."""

    backend_name = "postgresql" if connection.vendor == "postgresql" else "sqlite-fts5"
    substring_matching = False

    def make_store(self) -> DjangoConditionalChatStore:
        store = DjangoConditionalChatStore()
        store.transcript = WholeChatIndex()
        return store


if connection.vendor == "sqlite":

    class TestSqliteLikeContract(SqlContract):
        """The LIKE fallback: the same contract, with substring matching."""

        backend_name = "sqlite-like"
        substring_matching = True

        @pytest.fixture(autouse=True)
        def _like_backend(self):
            with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "like"}):
                yield

        def make_store(self) -> DjangoConditionalChatStore:
            return DjangoConditionalChatStore()

    class TestSqliteFts5IndexContract(SqlContract):
        """FTS5 for every search: small scopes otherwise scan their own rows."""

        backend_name = "sqlite-fts5"
        substring_matching = False

        @pytest.fixture(autouse=True)
        def _fts5_for_every_scope(self):
            with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SCAN_SCOPE_MAX": 0}):
                yield

        def make_store(self) -> DjangoConditionalChatStore:
            return DjangoConditionalChatStore()
