"""The conditional store: revisions, tombstones, rollback of a failed index, message ids."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from deuz_transcripts import ChatDeleted, ChatRecord, RevisionConflict, TranscriptError
from tests.contract.base import ContractBase
from tests.contract.helpers import (
    ADA,
    BOB,
    T0,
    IndexFailure,
    assistant,
    chat,
    ids,
    ref,
    system,
    user,
)
from tests.factories import reasoning_part, text_part


class StoreContract(ContractBase):
    """Writes under ``expected_revision``, deletes as tombstones, atomic indexing, filled ids."""

    # ------------------------------------------------------------------ revisions

    def test_first_write_creates_revision_1(self, store):
        assert store.write_chat(chat("c1", "hello"), expected_revision=0) == 1
        record, revision = store.load_chat("c1")
        assert revision == 1
        assert record.chat_id == "c1"

    def test_each_write_increments_the_revision(self, store):
        assert store.write_chat(chat("c1", "v1"), expected_revision=0) == 1
        assert store.write_chat(chat("c1", "v2"), expected_revision=1) == 2
        assert store.write_chat(chat("c1", "v3"), expected_revision=2) == 3
        assert store.load_chat("c1")[1] == 3

    def test_load_chat_round_trips_the_record(self, store):
        record = chat(
            "c1",
            system("be brief"),
            "hello ünïcode",
            {"role": "assistant", "content": [text_part("x"), reasoning_part("y")]},
            scope={"userId": "ada", "agentId": "travel"},
            message_ids=["s-1", "u-1", "a-1"],
            updated_at=T0 + timedelta(microseconds=123_000),
        )
        store.write_chat(record, expected_revision=0)
        loaded, revision = store.load_chat("c1")
        assert revision == 1
        assert loaded.chat_id == "c1"
        assert loaded.scope == {"userId": "ada", "agentId": "travel"}
        assert loaded.messages == record.messages
        assert loaded.message_ids == ["s-1", "u-1", "a-1"]
        assert loaded.updated_at == T0 + timedelta(microseconds=123_000)

    def test_load_chat_of_unknown_chat_is_none(self, store):
        assert store.load_chat("nope") is None

    def test_stale_revision_raises_conflict_with_current_revision(self, store):
        store.write_chat(chat("c1", "v1"), expected_revision=0)
        store.write_chat(chat("c1", "v2"), expected_revision=1)
        for stale in (0, 1, 3, 99):
            with pytest.raises(RevisionConflict) as excinfo:
                store.write_chat(chat("c1", "v3"), expected_revision=stale)
            assert excinfo.value.current_revision == 2

    def test_new_chat_with_nonzero_revision_conflicts_at_0(self, store):
        with pytest.raises(RevisionConflict) as excinfo:
            store.write_chat(chat("c1", "v1"), expected_revision=1)
        assert excinfo.value.current_revision == 0
        assert store.load_chat("c1") is None

    def test_nothing_changes_on_conflict(self, store, index):
        store.write_chat(chat("c1", "oldword"), expected_revision=0)
        with pytest.raises(RevisionConflict):
            store.write_chat(chat("c1", "newword"), expected_revision=0)
        record, revision = store.load_chat("c1")
        assert (record.messages, revision) == ([user("oldword")], 1)
        assert ids(index.search(ADA, "oldword")) == ["c1:0"]
        assert index.search(ADA, "newword") == []

    def test_conflict_is_a_transcript_error(self, store):
        store.write_chat(chat("c1", "v1"), expected_revision=0)
        with pytest.raises(TranscriptError):
            store.write_chat(chat("c1", "v2"), expected_revision=0)

    def test_rewrite_replaces_old_messages_in_search(self, store, index):
        store.write_chat(chat("c1", "apple banana", "cherry"), expected_revision=0)
        store.write_chat(chat("c1", "apple"), expected_revision=1)
        assert index.search(ADA, "banana") == []
        assert index.search(ADA, "cherry") == []
        assert ids(index.search(ADA, "apple")) == ["c1:0"]

    def test_rewrite_drops_removed_messages_from_resolve_source(self, store, index):
        store.write_chat(chat("c1", "one", "two", message_ids=["m-1", "m-2"]), expected_revision=0)
        store.write_chat(chat("c1", "one", message_ids=["m-1"]), expected_revision=1)
        assert index.resolve_source(ADA, ref("c1", "m-2")) is None
        assert index.resolve_source(ADA, ref("c1", "m-1")).message == user("one")

    def test_rewrite_can_move_a_chat_to_another_scope(self, store, index):
        store.write_chat(chat("c1", "moveword", scope=ADA), expected_revision=0)
        store.write_chat(chat("c1", "moveword", scope=BOB), expected_revision=1)
        assert index.search(ADA, "moveword") == []
        assert ids(index.search(BOB, "moveword")) == ["c1:0"]

    def test_rewrite_updates_recency(self, store, index):
        store.write_chat(chat("a", "tieword", updated_at=T0), expected_revision=0)
        store.write_chat(
            chat("b", "tieword", updated_at=T0 + timedelta(hours=1)), expected_revision=0
        )
        store.write_chat(
            chat("a", "tieword", updated_at=T0 + timedelta(hours=2)), expected_revision=1
        )
        assert [h.chat_id for h in index.search(ADA, "tieword")] == ["a", "b"]

    def test_list_chats_filters_by_scope_newest_first(self, store):
        store.write_chat(chat("old", "x", updated_at=T0), expected_revision=0)
        store.write_chat(chat("new", "x", updated_at=T0 + timedelta(hours=1)), expected_revision=0)
        store.write_chat(chat("bobs", "x", scope=BOB), expected_revision=0)
        assert [r.chat_id for r in store.list_chats(ADA)] == ["new", "old"]
        assert [r.chat_id for r in store.list_chats(BOB)] == ["bobs"]
        assert {r.chat_id for r in store.list_chats({})} == {"old", "new", "bobs"}
        assert store.list_chats({"userId": "carol"}) == []

    # ------------------------------------------------------------------ tombstones

    def test_deleted_chat_leaves_search_at_once(self, store, index):
        store.write_chat(chat("c1", "goneword"), expected_revision=0)
        store.write_chat(chat("c2", "goneword"), expected_revision=0)
        store.delete_chat("c1")
        assert [h.chat_id for h in index.search(ADA, "goneword")] == ["c2"]

    def test_deleted_chat_loads_as_none(self, store):
        store.write_chat(chat("c1", "goneword"), expected_revision=0)
        store.delete_chat("c1")
        assert store.load_chat("c1") is None
        assert store.list_chats(ADA) == []

    @pytest.mark.parametrize("expected_revision", [0, 1, 2])
    def test_write_after_delete_raises_chat_deleted(self, store, index, expected_revision):
        store.write_chat(chat("c1", "goneword"), expected_revision=0)
        store.delete_chat("c1")
        with pytest.raises(ChatDeleted):
            store.write_chat(chat("c1", "backword"), expected_revision=expected_revision)
        assert store.load_chat("c1") is None
        assert index.search(ADA, "backword") == []

    def test_deleted_chat_does_not_resolve(self, store, index):
        store.write_chat(chat("c1", "goneword", message_ids=["m-1"]), expected_revision=0)
        store.delete_chat("c1")
        assert index.resolve_source(ADA, ref("c1", "m-1")) is None

    def test_chat_deleted_is_a_transcript_error(self, store):
        store.write_chat(chat("c1", "x"), expected_revision=0)
        store.delete_chat("c1")
        with pytest.raises(TranscriptError):
            store.write_chat(chat("c1", "x"), expected_revision=1)

    # ------------------------------------------------------------------ rollback

    def _break_index(self, monkeypatch: pytest.MonkeyPatch, store: Any) -> None:
        def failing_index(record: ChatRecord) -> None:
            raise IndexFailure(record.chat_id)

        monkeypatch.setattr(store.transcript, "index", failing_index)

    def test_failed_index_on_create_commits_nothing(self, store, index, monkeypatch):
        self._break_index(monkeypatch, store)
        with pytest.raises(IndexFailure):
            store.write_chat(chat("c1", "failword"), expected_revision=0)
        monkeypatch.undo()
        assert store.load_chat("c1") is None
        assert store.list_chats(ADA) == []
        assert index.search(ADA, "failword") == []
        assert store.write_chat(chat("c1", "failword"), expected_revision=0) == 1

    def test_failed_index_on_update_keeps_the_previous_revision(self, store, index, monkeypatch):
        store.write_chat(chat("c1", "oldword", message_ids=["m-1"]), expected_revision=0)
        self._break_index(monkeypatch, store)
        with pytest.raises(IndexFailure):
            store.write_chat(chat("c1", "newword", message_ids=["m-2"]), expected_revision=1)
        monkeypatch.undo()
        record, revision = store.load_chat("c1")
        assert (record.messages, record.message_ids, revision) == ([user("oldword")], ["m-1"], 1)
        assert ids(index.search(ADA, "oldword")) == ["m-1"]
        assert index.search(ADA, "newword") == []
        assert store.write_chat(chat("c1", "newword"), expected_revision=1) == 2

    def test_index_exception_propagates_unchanged(self, store, monkeypatch):
        error = IndexFailure("the very object")

        def failing_index(record: ChatRecord) -> None:
            raise error

        monkeypatch.setattr(store.transcript, "index", failing_index)
        with pytest.raises(IndexFailure) as excinfo:
            store.write_chat(chat("c1", "x"), expected_revision=0)
        assert excinfo.value is error

    def test_the_store_indexes_through_the_public_index_method(self, store, index, monkeypatch):
        """A subclass or wrapper overriding ``index`` sees every write (SPEC section 5)."""
        seen: list[tuple[str, list[str], list[dict[str, Any]]]] = []
        original = store.transcript.index

        def spying_index(record: ChatRecord) -> None:
            seen.append((record.chat_id, list(record.message_ids), list(record.messages)))
            original(record)

        monkeypatch.setattr(store.transcript, "index", spying_index)
        store.write_chat(chat("c1", "hello there", message_ids=["m-1"]), expected_revision=0)
        store.write_chat(chat("c1", "hello there", "again"), expected_revision=1)
        assert seen == [
            ("c1", ["m-1"], [user("hello there")]),
            ("c1", ["c1:0", "c1:1"], [user("hello there"), assistant("again")]),
        ]
        assert ids(index.search(ADA, "again")) == ["c1:1"]

    # ------------------------------------------------------------------ message ids

    def test_missing_ids_are_filled(self, store, index):
        store.write_chat(chat("c1", "idword", "idword"), expected_revision=0)
        assert store.load_chat("c1")[0].message_ids == ["c1:0", "c1:1"]
        assert ids(index.search(ADA, "idword")) == ["c1:0", "c1:1"]

    def test_empty_and_none_ids_are_filled(self, store, index):
        store.write_chat(
            chat("c1", "a", "b", "c", message_ids=["", None, "m-3"]), expected_revision=0
        )
        assert store.load_chat("c1")[0].message_ids == ["c1:0", "c1:1", "m-3"]

    def test_repeated_ids_are_filled_after_the_first(self, store, index):
        store.write_chat(
            chat("c1", "a", "b", "idword", message_ids=["dup", "x", "dup"]), expected_revision=0
        )
        assert store.load_chat("c1")[0].message_ids == ["dup", "x", "c1:2"]
        assert ids(index.search(ADA, "idword")) == ["c1:2"]

    def test_stored_ids_survive_unchanged(self, store, index):
        message_ids = ["run-7:0", "run-7:1", "ünï-çødé", "m with spaces", "M-1"]
        store.write_chat(
            chat("c1", "keep", "keep", "keep", "keep", "keep", message_ids=message_ids),
            expected_revision=0,
        )
        assert store.load_chat("c1")[0].message_ids == message_ids
        assert ids(index.search(ADA, "keep")) == message_ids
        for message_id in message_ids:
            assert index.resolve_source(ADA, ref("c1", message_id)).message_id == message_id

    def test_around_carries_filled_ids(self, store, index):
        store.write_chat(
            chat("c1", "a", "target", "c", message_ids=["m-a", None, ""]), expected_revision=0
        )
        [hit] = index.search(ADA, "target", around=1)
        assert hit.message_id == "c1:1"
        assert [m.message_id for m in hit.around] == ["m-a", "c1:2"]
