"""``resolve_source``, and the index used on its own (``index``, ``remove``, ``index_chat``)."""

from __future__ import annotations

from deuz_transcripts import TranscriptMessage, index_chat
from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, BOB, chat, ids, image_only, ref, system, user


class SourceContract(ContractBase):
    """Resolving a source reference under a scope filter; indexing and removing chats directly."""

    # ------------------------------------------------------------------ resolve_source

    def test_resolve_source_returns_the_message(self, store, index):
        store.write_chat(
            chat("c1", system("sys"), "first", "second", message_ids=["s", "m-1", "m-2"]),
            expected_revision=0,
        )
        found = index.resolve_source(ADA, ref("c1", "m-2"))
        assert found == TranscriptMessage(
            chat_id="c1", message_id="m-2", index=2, message=user("second")
        )

    def test_resolve_source_under_a_wider_scope_filter(self, store, index):
        store.write_chat(
            chat("c1", "first", scope={"userId": "ada", "agentId": "x"}, message_ids=["m-1"]),
            expected_revision=0,
        )
        assert index.resolve_source({"userId": "ada"}, ref("c1", "m-1")).index == 0
        assert index.resolve_source({}, ref("c1", "m-1")).index == 0
        assert index.resolve_source({"userId": "ada", "agentId": "y"}, ref("c1", "m-1")) is None

    def test_resolve_source_other_scope_is_none(self, store, index):
        store.write_chat(chat("c1", "first", message_ids=["m-1"]), expected_revision=0)
        assert index.resolve_source(BOB, ref("c1", "m-1")) is None
        assert index.resolve_source({"userId": "Ada"}, ref("c1", "m-1")) is None

    def test_resolve_source_of_ids_no_message_can_have_is_none(self, store, index):
        """The same answer on every backend (memory used to raise ``TypeError``)."""
        store.write_chat(chat("c1", "first", message_ids=["m-1"]), expected_revision=0)
        for chat_id, message_id in [
            (["c1"], "m-1"),
            ("c1", {"id": "m-1"}),
            ({"c1": 1}, ["m-1"]),
            (None, "m-1"),
            ("c1", 7),
            ("c\x00", "m-1"),
            ("c1", "\ud800"),
            ("c" * 400, "m-1"),
        ]:
            found = index.resolve_source(
                ADA, {"kind": "transcript", "chatId": chat_id, "messageId": message_id}
            )
            assert found is None, (chat_id, message_id)
        assert index.resolve_source(ADA, ref("c1", "m-1")).message_id == "m-1"

    def test_resolve_source_unknown_chat_or_message_is_none(self, store, index):
        store.write_chat(chat("c1", "first", message_ids=["m-1"]), expected_revision=0)
        assert index.resolve_source(ADA, ref("nope", "m-1")) is None
        assert index.resolve_source(ADA, ref("c1", "m-9")) is None
        assert index.resolve_source(ADA, ref("c1", "c1:0")) is None

    def test_resolve_source_of_a_system_message_is_none(self, store, index):
        store.write_chat(
            chat("c1", system("sys"), "hi", message_ids=["s", "m"]), expected_revision=0
        )
        assert index.resolve_source(ADA, ref("c1", "s")) is None

    def test_resolve_source_does_not_check_the_digest(self, store, index):
        store.write_chat(chat("c1", "first", message_ids=["m-1"]), expected_revision=0)
        for digest in ("", "sha256:" + "f" * 64, "not a digest"):
            assert index.resolve_source(ADA, ref("c1", "m-1", digest)).message_id == "m-1"

    def test_resolve_source_of_a_message_without_indexed_text(self, store, index):
        store.write_chat(chat("c1", image_only(), message_ids=["img"]), expected_revision=0)
        assert index.resolve_source(ADA, ref("c1", "img")).message == image_only()

    # ------------------------------------------------------------------ the index on its own

    def test_index_remove_takes_a_chat_out_of_search(self, index):
        index.index(chat("c1", "removeword", message_ids=["m-1"]))
        index.index(chat("c2", "removeword"))
        index.remove("c1")
        assert [h.chat_id for h in index.search(ADA, "removeword")] == ["c2"]
        assert index.resolve_source(ADA, ref("c1", "m-1")) is None

    def test_index_remove_of_an_unknown_chat_is_a_no_op(self, index):
        index.remove("never-indexed")
        assert index.search(ADA, "anything") == []

    def test_indexing_twice_replaces_the_chat(self, index):
        index.index(chat("c1", "first version"))
        index.index(chat("c1", "second version"))
        assert index.search(ADA, "first") == []
        assert ids(index.search(ADA, "version")) == ["c1:0"]

    def test_index_fills_ids_like_index_chat(self, index):
        index.index(chat("c1", "a", "fillword", message_ids=["x", "x"]))
        assert ids(index.search(ADA, "fillword")) == ["c1:1"]

    def test_index_chat_returns_the_record_it_indexed(self, index):
        indexed = index_chat(index, chat("c1", "a", "b", message_ids=[None, "m"]))
        assert indexed.message_ids == ["c1:0", "m"]
        assert ids(index.search(ADA, "a")) == ["c1:0"]
