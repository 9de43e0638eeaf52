"""Signals: ``chat_indexed``, ``chat_removed`` and ``chat_deleted``, once per change, after commit.

The SQL subclasses run each test in a rolled-back transaction: their ``committed``
fixture runs the callbacks ``transaction.on_commit`` collected as the block ends, as a
commit would. Memory sends at once. What happens on a real commit and a rollback is
proven in ``tests/test_signals.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import pytest

from deuz_transcripts import ChatDeleted, InvalidRecord, RevisionConflict, index_chat
from deuz_transcripts.signals import chat_deleted, chat_indexed, chat_removed
from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, BOB, IndexFailure, chat

SIGNALS = {"indexed": chat_indexed, "removed": chat_removed, "deleted": chat_deleted}


class Received:
    """Every signal of the module received while connected, as ``(name, chat_id, scope)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, str] | None]] = []
        self.senders: list[type] = []
        self.aliases: list[str | None] = []

    def receiver(self, name: str) -> Callable[..., None]:
        def receive(sender: type, *, chat_id: str, scope: Any, using: Any, **_: Any) -> None:
            self.events.append((name, chat_id, scope))
            self.senders.append(sender)
            self.aliases.append(using)

        return receive


class SignalContract(ContractBase):
    """Which writes send which signal, with what, and which send nothing."""

    @pytest.fixture
    def received(self) -> Iterator[Received]:
        received = Received()
        receivers = {name: received.receiver(name) for name in SIGNALS}
        for name, signal in SIGNALS.items():
            signal.connect(receivers[name], weak=False)
        yield received
        for name, signal in SIGNALS.items():
            signal.disconnect(receivers[name])

    @pytest.fixture
    def committed(self) -> Callable[[], AbstractContextManager[Any]]:
        """A block whose writes count as committed when it ends (memory: nothing to do)."""
        return nullcontext

    def test_write_chat_sends_chat_indexed(self, store, received, committed):
        with committed():
            store.write_chat(chat("c1", "hello", scope=BOB), expected_revision=0)
            store.write_chat(chat("c1", "hello again", scope=BOB), expected_revision=1)
        assert received.events == [("indexed", "c1", BOB), ("indexed", "c1", BOB)]
        assert received.senders == [type(store.transcript)] * 2
        assert received.aliases == [getattr(store, "using", None)] * 2

    def test_append_messages_sends_chat_indexed(self, store, received, committed):
        with committed():
            store.write_chat(chat("c1", "hello", scope=BOB), expected_revision=0)
            store.append_messages("c1", [{"role": "user", "content": "more"}], expected_revision=1)
            with pytest.raises(RevisionConflict):  # refused: nothing to tell
                store.append_messages("c1", [], expected_revision=1)
        assert received.events == [("indexed", "c1", BOB), ("indexed", "c1", BOB)]
        assert received.senders == [type(store.transcript)] * 2
        assert received.aliases == [getattr(store, "using", None)] * 2

    def test_index_chat_on_the_index_alone_sends_chat_indexed(self, index, received, committed):
        with committed():
            index_chat(index, chat("c1", "hello"))
        assert received.events == [("indexed", "c1", ADA)]

    def test_remove_sends_chat_removed_once_for_a_searchable_chat(
        self, store, index, received, committed
    ):
        with committed():
            store.write_chat(chat("c1", "hello"), expected_revision=0)
            index.remove("c1")
            index.remove("c1")  # out of search already: nothing to tell
            index.remove("never-written")
        assert received.events == [("indexed", "c1", ADA), ("removed", "c1", ADA)]
        assert received.senders[-1] is type(index)

    def test_delete_sends_chat_removed_then_chat_deleted(self, store, received, committed):
        with committed():
            store.write_chat(chat("c1", "hello", scope=BOB), expected_revision=0)
            store.delete_chat("c1")
            store.delete_chat("c1")  # tombstoned already: nothing new
        assert received.events == [
            ("indexed", "c1", BOB),
            ("removed", "c1", BOB),
            ("deleted", "c1", BOB),
        ]
        assert received.senders[-1] is type(store)

    def test_delete_of_a_removed_chat_sends_only_chat_deleted(
        self, store, index, received, committed
    ):
        with committed():
            store.write_chat(chat("c1", "hello"), expected_revision=0)
            index.remove("c1")
            store.delete_chat("c1")
        assert [name for name, _, _ in received.events] == ["indexed", "removed", "deleted"]
        assert received.events[-1] == ("deleted", "c1", ADA)

    def test_delete_of_an_unknown_chat_sends_chat_deleted_without_scope(
        self, store, received, committed
    ):
        with committed():
            store.delete_chat("never-written")
        assert received.events == [("deleted", "never-written", None)]

    def test_failed_writes_send_nothing(self, store, received, committed, monkeypatch):
        with committed():
            store.write_chat(chat("c1", "hello"), expected_revision=0)
        received.events.clear()
        with committed():
            with pytest.raises(RevisionConflict):
                store.write_chat(chat("c1", "stale"), expected_revision=0)
            with pytest.raises(InvalidRecord):
                store.write_chat(chat("", "no id"), expected_revision=0)
            store.delete_chat("c1")
        received.events.clear()
        with committed(), pytest.raises(ChatDeleted):
            store.write_chat(chat("c1", "again"), expected_revision=1)

        def failing_index(record: Any) -> None:
            raise IndexFailure(record.chat_id)

        monkeypatch.setattr(store.transcript, "index", failing_index)
        with committed(), pytest.raises(IndexFailure):
            store.write_chat(chat("c2", "broken"), expected_revision=0)
        assert received.events == []

    def test_a_receiver_sees_the_write_complete(self, store, committed):
        """Sent after the store's whole write: its revision, its tombstone, its index."""
        seen: list[tuple[str, Any, bool, int]] = []

        def look(signal_name: str) -> Callable[..., None]:
            def receive(*, chat_id: str, **_: Any) -> None:
                loaded = store.load_chat(chat_id)
                found = len(store.transcript.search(ADA, "hello"))
                seen.append((signal_name, loaded and loaded[1], store.is_deleted(chat_id), found))

            return receive

        receivers = {name: look(name) for name in SIGNALS}
        for name, signal in SIGNALS.items():
            signal.connect(receivers[name], weak=False)
        try:
            with committed():
                store.write_chat(chat("c1", "hello"), expected_revision=0)
            with committed():
                store.delete_chat("c1")
        finally:
            for name, signal in SIGNALS.items():
                signal.disconnect(receivers[name])
        assert seen == [
            ("indexed", 1, False, 1),
            ("removed", None, True, 0),
            ("deleted", None, True, 0),
        ]

    def test_a_failing_receiver_is_logged_and_fails_nothing(
        self, store, received, committed, caplog
    ):
        def broken(**kwargs: Any) -> None:
            raise RuntimeError("receiver bug")

        chat_indexed.connect(broken, weak=False)
        try:
            with caplog.at_level(logging.ERROR, "deuz_transcripts.signals"), committed():
                assert store.write_chat(chat("c1", "hello"), expected_revision=0) == 1
        finally:
            chat_indexed.disconnect(broken)
        assert received.events == [("indexed", "c1", ADA)]  # the other receiver still ran
        assert store.load_chat("c1")[1] == 1
        assert "receiver bug" in caplog.text
