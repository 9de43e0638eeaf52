"""Invalid records, arguments and queries: ``InvalidRecord`` naming the field, nothing changed."""

from __future__ import annotations

from datetime import datetime

import pytest

from deuz_transcripts import InvalidRecord
from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, chat, ids, user


class InvalidRecordContract(ContractBase):
    """Every invalid input raises ``InvalidRecord`` naming its field and leaves the store as it was."""

    # ------------------------------------------------------------------ invalid records

    @pytest.mark.parametrize(
        ("field", "change"),
        [
            pytest.param("chat_id", {"chat_id": ""}, id="empty-chat-id"),
            pytest.param("chat_id", {"chat_id": 42}, id="int-chat-id"),
            pytest.param("chat_id", {"chat_id": None}, id="none-chat-id"),
            pytest.param("scope", {"scope": ["userId", "ada"]}, id="scope-not-mapping"),
            pytest.param("scope", {"scope": {"userId": 7}}, id="scope-int-value"),
            pytest.param("scope", {"scope": {"userId": None}}, id="scope-none-value"),
            pytest.param("scope", {"scope": {7: "ada"}}, id="scope-int-key"),
            pytest.param("messages", {"messages": "hello"}, id="messages-string"),
            pytest.param(
                "messages[1]", {"messages": [user("validword"), "hello"]}, id="message-not-mapping"
            ),
            pytest.param(
                "messages[1].role",
                {"messages": [user("validword"), {"content": "no role"}]},
                id="message-without-role",
            ),
            pytest.param(
                "messages[0].role",
                {"messages": [{"role": 3, "content": "validword"}]},
                id="message-int-role",
            ),
            pytest.param("message_ids", {"message_ids": ["a", "b"]}, id="too-many-ids"),
            pytest.param("message_ids", {"message_ids": []}, id="too-few-ids"),
            pytest.param("message_ids[0]", {"message_ids": [7]}, id="int-message-id"),
            pytest.param(
                "messages[0]",
                {"messages": [{"role": "user", "content": "validword", "x": {1, 2}}]},
                id="set-content",
            ),
            pytest.param(
                "messages[0]",
                {"messages": [{"role": "user", "content": "validword", "x": object()}]},
                id="object-content",
            ),
            pytest.param(
                "messages[0]",
                {"messages": [{"role": "user", "content": "validword", "x": float("nan")}]},
                id="nan-content",
            ),
            pytest.param("updated_at", {"updated_at": datetime(2024, 1, 1)}, id="naive-updated-at"),
            pytest.param("updated_at", {"updated_at": "yesterday"}, id="str-updated-at"),
            pytest.param("updated_at", {"updated_at": 1_714_554_000}, id="seconds-updated-at"),
        ],
    )
    def test_invalid_record_names_the_field_and_changes_nothing(self, store, index, field, change):
        record = chat("bad", "validword")
        for name, value in change.items():
            setattr(record, name, value)
        with pytest.raises(InvalidRecord) as excinfo:
            store.write_chat(record, expected_revision=0)
        assert field in str(excinfo.value)
        assert excinfo.value.field.startswith(field.split("[")[0])
        assert store.load_chat("bad") is None
        assert store.list_chats({}) == []
        assert index.search({}, "validword") == []

    def test_invalid_update_keeps_the_previous_revision(self, store, index):
        store.write_chat(chat("c1", "oldword"), expected_revision=0)
        record = chat("c1", "newword")
        record.messages = [{"content": "no role"}]
        with pytest.raises(InvalidRecord):
            store.write_chat(record, expected_revision=1)
        loaded, revision = store.load_chat("c1")
        assert (loaded.messages, revision) == ([user("oldword")], 1)
        assert ids(index.search(ADA, "oldword")) == ["c1:0"]

    def test_invalid_chat_id_to_load_or_delete(self, store):
        for bad in ("", 42, None):
            with pytest.raises(InvalidRecord):
                store.load_chat(bad)
            with pytest.raises(InvalidRecord):
                store.delete_chat(bad)

    def test_non_string_query_is_invalid(self, store, index):
        store.write_chat(chat("c1", "x"), expected_revision=0)
        with pytest.raises(InvalidRecord):
            index.search(ADA, 42)

    @pytest.mark.parametrize("field", ["limit", "offset", "around"])
    @pytest.mark.parametrize("value", [2**31, 2**63, 2**64])
    def test_paging_arguments_past_32_bits_are_invalid_on_every_backend(
        self, store, index, field, value
    ):
        store.write_chat(chat("c1", "hugeword", "other"), expected_revision=0)
        with pytest.raises(InvalidRecord) as excinfo:
            index.search(ADA, "hugeword", **{field: value})
        assert excinfo.value.field == field

    def test_the_largest_paging_arguments_answer_normally(self, store, index):
        store.write_chat(chat("c1", "hugeword", "other"), expected_revision=0)
        largest = 2**31 - 1
        hits = index.search(ADA, "hugeword", limit=largest, around=largest)
        assert ids(hits) == ["c1:0"] and [m.message_id for m in hits[0].around] == ["c1:1"]
        assert index.search(ADA, "hugeword", offset=largest) == []
        assert index.search(ADA, "hugeword", offset=largest, limit=largest) == []
