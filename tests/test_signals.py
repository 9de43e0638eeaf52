"""The signals wait for a real commit: nothing before it, nothing after a rollback.

The contract (``tests/contract/signals.py``) says which write sends what on every
backend; here, on this run's database, transactions really commit and roll back, on
``default`` and on ``other``, and a backfill announces the chats it indexes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from deuz_transcripts import ChatRecord, InMemoryConditionalChatStore, InMemoryTranscriptIndex
from deuz_transcripts.backfill import Backfill
from deuz_transcripts.signals import chat_deleted, chat_indexed, chat_removed
from deuz_transcripts.stores import DjangoChatStore, DjangoConditionalChatStore

ADA = {"userId": "ada"}


class Rollback(Exception):
    """Raised to roll a block back."""


def record(chat_id: str, text: str = "hello") -> ChatRecord:
    return ChatRecord(chat_id, dict(ADA), [{"role": "user", "content": text}])


@pytest.fixture
def received() -> Iterator[list[tuple[str, str, str | None]]]:
    """``(signal, chat_id, using)`` of every signal sent while the test runs."""
    events: list[tuple[str, str, str | None]] = []
    receivers = {}
    for name, signal in (
        ("indexed", chat_indexed),
        ("removed", chat_removed),
        ("deleted", chat_deleted),
    ):

        def receive(*, chat_id: str, using: str | None, name: str = name, **_: Any) -> None:
            events.append((name, chat_id, using))

        receivers[signal] = receive
        signal.connect(receive, weak=False)
    yield events
    for signal, receive in receivers.items():
        signal.disconnect(receive)


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
@pytest.mark.parametrize("using", ["default", "other"])
def test_sent_only_when_the_outermost_transaction_commits(received, using):
    store = DjangoConditionalChatStore(using)
    with transaction.atomic(using=using):
        store.write_chat(record("c1"), expected_revision=0)
        with transaction.atomic(using=using):
            store.transcript.remove("c1")
        store.delete_chat("c1")
        assert received == []  # written, not yet committed
    assert received == [
        ("indexed", "c1", using),
        ("removed", "c1", using),
        ("deleted", "c1", using),
    ]


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
def test_a_commit_of_another_database_sends_nothing(received):
    with transaction.atomic(using="other"):
        with transaction.atomic(using="default"):
            DjangoConditionalChatStore("other").write_chat(record("c1"), expected_revision=0)
        assert received == []  # "default" committed; the write is in "other"
    assert received == [("indexed", "c1", "other")]


@pytest.mark.django_db(transaction=True)
def test_a_rollback_sends_nothing(received):
    store = DjangoConditionalChatStore()
    with pytest.raises(Rollback), transaction.atomic():
        store.write_chat(record("c1"), expected_revision=0)
        raise Rollback
    assert received == []
    assert store.load_chat("c1") is None


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_savepoint_takes_its_signals_with_it(received):
    store = DjangoConditionalChatStore()
    with transaction.atomic():
        store.write_chat(record("kept"), expected_revision=0)
        with pytest.raises(Rollback), transaction.atomic():
            store.write_chat(record("dropped"), expected_revision=0)
            store.delete_chat("kept")
            raise Rollback
    assert received == [("indexed", "kept", "default")]
    assert store.load_chat("kept") is not None


@pytest.mark.django_db(transaction=True)
def test_autocommit_writes_send_at_once(received):
    store = DjangoConditionalChatStore()
    store.write_chat(record("c1"), expected_revision=0)
    assert received == [("indexed", "c1", "default")]


@pytest.mark.django_db
def test_backfill_announces_each_chat_it_indexes(received, django_capture_on_commit_callbacks):
    DjangoChatStore().save_chat(record("legacy-1"))
    DjangoChatStore().save_chat(record("legacy-2"))
    with django_capture_on_commit_callbacks(execute=True):
        assert Backfill().run().indexed == 2
    with django_capture_on_commit_callbacks(execute=True):
        assert Backfill().run().unchanged == 2  # nothing changed: nothing to announce
    assert received == [("indexed", "legacy-1", "default"), ("indexed", "legacy-2", "default")]


def test_memory_sends_at_once_with_no_alias(received):
    store = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
    store.write_chat(record("c1"), expected_revision=0)
    assert received == [("indexed", "c1", None)]
    store.delete_chat("c1")
    assert received[1:] == [("removed", "c1", None), ("deleted", "c1", None)]
