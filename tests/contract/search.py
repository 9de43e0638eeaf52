"""Search results: the SPEC's seed walk-through, what a hit carries, ``around``, paging and scores."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_transcripts import (
    ChatRecord,
    InMemoryChatStore,
    InvalidRecord,
    MemorySourceRef,
    TranscriptHit,
    TranscriptMessage,
    index_chat,
)
from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, DIGEST, T0, assistant, chat, image_only, system, user
from tests.factories import reasoning_part, text_part


class SearchContract(ContractBase):
    """Setup, the seed examples, hits with their ``around`` context, limit/offset and scores."""

    # ------------------------------------------------------------------ setup

    def test_store_carries_its_index_as_transcript(self, store, index):
        assert store.transcript is index
        assert index.backend_name == self.backend_name

    # ------------------------------------------------------------------ seed

    def test_seed_write_search_around_other_scope_delete(self, store, index):
        record = ChatRecord(
            chat_id="chat-1",
            scope={"userId": "ada"},
            messages=[
                {"role": "user", "content": "Book the flight to İzmir."},
                {"role": "assistant", "content": "Booked: Friday, 09:40."},
            ],
            message_ids=["m-1", "m-2"],
            updated_at=T0,
        )
        assert store.write_chat(record, expected_revision=0) == 1

        hits = index.search({"userId": "ada"}, "izmir flight", around=1)
        assert [(h.message_id, h.score, [m.message_id for m in h.around]) for h in hits] == [
            ("m-1", 1.0, ["m-2"])
        ]
        assert index.search({"userId": "bob"}, "izmir") == []

        store.delete_chat("chat-1")
        assert index.search({"userId": "ada"}, "izmir") == []

    def test_seed_legacy_chat_indexed_with_index_chat(self, index):
        legacy = InMemoryChatStore()
        legacy.save_chat(
            ChatRecord(
                chat_id="chat-2",
                scope={"userId": "ada"},
                messages=[{"role": "user", "content": "Cancel the hotel."}],
                updated_at=T0,
            )
        )
        index_chat(index, legacy.load_chat("chat-2"))
        assert index.search({"userId": "ada"}, "hotel")[0].message_id == "chat-2:0"

    def test_seed_resolve_source(self, index):
        index.index(
            ChatRecord(
                chat_id="chat-1",
                scope={"userId": "ada"},
                messages=[{"role": "user", "content": "Book the flight to İzmir."}],
                message_ids=["m-1"],
                updated_at=T0,
            )
        )
        source = MemorySourceRef(kind="user", chat_id="chat-1", message_id="m-1", digest=DIGEST)
        assert index.resolve_source({"userId": "ada"}, source).index == 0
        assert index.resolve_source({"userId": "bob"}, source) is None

    # ------------------------------------------------------------------ hits

    def test_hit_carries_chat_message_id_index_and_message(self, store, index):
        store.write_chat(
            chat(
                "c1", system("rules"), "hello there", "general kenobi", message_ids=["s", "a", "b"]
            ),
            expected_revision=0,
        )
        [hit] = index.search(ADA, "kenobi")
        assert isinstance(hit, TranscriptHit)
        assert (hit.chat_id, hit.message_id, hit.index) == ("c1", "b", 2)
        assert hit.message == {"role": "user", "content": "general kenobi"}
        assert hit.score == 1.0
        assert hit.around is None

    def test_hit_message_is_returned_as_written(self, store, index):
        message = {
            "role": "assistant",
            "content": [text_part("roundtrip ünïcödé 東京"), reasoning_part("secret")],
            "metadata": {"n": 1, "f": 1.5, "flag": False, "none": None, "list": [1, "two"]},
        }
        store.write_chat(chat("c1", message), expected_revision=0)
        [hit] = index.search(ADA, "roundtrip")
        assert hit.message == message

    def test_around_none_gives_none(self, store, index):
        store.write_chat(chat("c1", "one", "two target", "three"), expected_revision=0)
        assert index.search(ADA, "target")[0].around is None

    def test_around_zero_gives_empty_list(self, store, index):
        store.write_chat(chat("c1", "one", "two target", "three"), expected_revision=0)
        assert index.search(ADA, "target", around=0)[0].around == []

    def test_around_gives_k_messages_on_each_side_in_chat_order(self, store, index):
        store.write_chat(
            chat("c1", "m0", "m1", "m2", "m3 target", "m4", "m5", "m6"), expected_revision=0
        )
        [hit] = index.search(ADA, "target", around=2)
        assert [m.index for m in hit.around] == [1, 2, 4, 5]
        assert all(isinstance(m, TranscriptMessage) for m in hit.around)
        assert [m.message_id for m in hit.around] == ["c1:1", "c1:2", "c1:4", "c1:5"]
        assert hit.around[0].message == assistant("m1")
        assert {m.chat_id for m in hit.around} == {"c1"}

    def test_around_at_chat_start(self, store, index):
        store.write_chat(chat("c1", "target", "m1", "m2", "m3"), expected_revision=0)
        [hit] = index.search(ADA, "target", around=2)
        assert [m.index for m in hit.around] == [1, 2]

    def test_around_at_chat_end(self, store, index):
        store.write_chat(chat("c1", "m0", "m1", "m2", "target"), expected_revision=0)
        [hit] = index.search(ADA, "target", around=2)
        assert [m.index for m in hit.around] == [1, 2]

    def test_around_larger_than_chat(self, store, index):
        store.write_chat(chat("c1", "m0", "target", "m2"), expected_revision=0)
        [hit] = index.search(ADA, "target", around=50)
        assert [m.index for m in hit.around] == [0, 2]

    def test_around_skips_system_messages_without_counting_them(self, store, index):
        store.write_chat(
            chat(
                "c1",
                user("m0"),
                system("sys1"),
                assistant("m2"),
                system("sys3"),
                user("target"),
                system("sys5"),
                system("sys6"),
                assistant("m7"),
                user("m8"),
            ),
            expected_revision=0,
        )
        [hit] = index.search(ADA, "target", around=1)
        assert [m.index for m in hit.around] == [2, 7]
        [hit] = index.search(ADA, "target", around=2)
        assert [m.index for m in hit.around] == [0, 2, 7, 8]

    def test_around_includes_non_system_messages_without_indexed_text(self, store, index):
        store.write_chat(
            chat("c1", image_only(), user("target"), {"role": "assistant", "content": None}),
            expected_revision=0,
        )
        [hit] = index.search(ADA, "target", around=1)
        assert [m.index for m in hit.around] == [0, 2]
        assert hit.around[1].message == {"role": "assistant", "content": None}

    def test_around_of_each_hit_is_its_own(self, store, index):
        store.write_chat(chat("c1", "a0", "target", "a2"), expected_revision=0)
        store.write_chat(chat("c2", "b0", "b1", "target"), expected_revision=0)
        hits = index.search(ADA, "target", around=1)
        around = {h.chat_id: [(m.chat_id, m.index) for m in h.around] for h in hits}
        assert around == {"c1": [("c1", 0), ("c1", 2)], "c2": [("c2", 1)]}

    # ------------------------------------------------------------------ paging and scores

    def _ranked_chat(self, store: Any) -> None:
        # Distinct raw scores: message i holds the first (4 - i) query terms.
        store.write_chat(
            chat(
                "c1",
                "page one two three",
                "page one two",
                "page one",
                "page",
                "unrelated words",
            ),
            expected_revision=0,
        )

    def test_limit_caps_the_hits(self, store, index):
        self._ranked_chat(store)
        assert [h.index for h in index.search(ADA, "page one two three", limit=2)] == [0, 1]

    def test_default_limit_is_20(self, store, index):
        store.write_chat(chat("c1", *(["many"] * 25)), expected_revision=0)
        assert len(index.search(ADA, "many")) == 20

    def test_offset_pages_concatenate_to_the_full_result(self, store, index):
        self._ranked_chat(store)
        full = index.search(ADA, "page one two three")
        pages = [index.search(ADA, "page one two three", limit=3, offset=o) for o in (0, 3, 6)]
        assert [len(p) for p in pages] == [3, 1, 0]
        assert [(h.index, h.score) for p in pages for h in p] == [(h.index, h.score) for h in full]

    def test_scores_on_later_pages_are_relative_to_the_best_hit(self, store, index):
        self._ranked_chat(store)
        second = index.search(ADA, "page one two three", limit=1, offset=1)
        assert len(second) == 1
        assert 0 < second[0].score < 1

    def test_offset_past_the_end_is_empty(self, store, index):
        self._ranked_chat(store)
        assert index.search(ADA, "page", offset=4) == []
        assert index.search(ADA, "page", offset=1000) == []

    def test_limit_zero_is_empty(self, store, index):
        self._ranked_chat(store)
        assert index.search(ADA, "page", limit=0) == []

    @pytest.mark.parametrize(
        "kwargs",
        [{"limit": -1}, {"offset": -1}, {"around": -1}, {"limit": "5"}, {"limit": True}],
        ids=["negative-limit", "negative-offset", "negative-around", "str-limit", "bool-limit"],
    )
    def test_bad_paging_arguments_are_invalid(self, store, index, kwargs):
        self._ranked_chat(store)
        with pytest.raises(InvalidRecord):
            index.search(ADA, "page", **kwargs)

    def test_best_hit_scores_exactly_one_and_all_scores_in_0_1(self, store, index):
        self._ranked_chat(store)
        store.write_chat(chat("c2", "three", "page three", "two one"), expected_revision=0)
        hits = index.search(ADA, "page one two three")
        assert len(hits) == 7
        assert hits[0].score == 1.0
        assert all(0 < h.score <= 1 for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    def test_single_hit_scores_one(self, store, index):
        store.write_chat(chat("c1", "lonely", "other"), expected_revision=0)
        assert [h.score for h in index.search(ADA, "lonely")] == [1.0]
