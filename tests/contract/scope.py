"""Scope filters and ``chat_ids``: exact matching, every field set, never widened."""

from __future__ import annotations

import pytest

from deuz_transcripts import InvalidRecord
from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, BOB, chat, ids


class ScopeContract(ContractBase):
    """A search sees only chats whose scope holds every field of the filter, exactly."""

    # ------------------------------------------------------------------ scope

    def test_other_scope_sees_nothing(self, store, index):
        store.write_chat(chat("c1", "secretword"), expected_revision=0)
        assert index.search(BOB, "secretword") == []
        assert index.search({"userId": "ada", "agentId": "x"}, "secretword") == []

    def test_multi_field_scope_matches_every_field_set(self, store, index):
        scope = {"userId": "ada", "agentId": "travel", "tenant": "t1"}
        store.write_chat(chat("c1", "scopedword", scope=scope), expected_revision=0)
        store.write_chat(
            chat("c2", "scopedword", scope={"userId": "ada", "agentId": "billing", "tenant": "t1"}),
            expected_revision=0,
        )

        def found(scope_filter: dict[str, str]) -> set[str]:
            return {h.chat_id for h in index.search(scope_filter, "scopedword")}

        assert found(scope) == {"c1"}
        assert found({"userId": "ada"}) == {"c1", "c2"}
        assert found({"agentId": "travel"}) == {"c1"}
        assert found({"userId": "ada", "tenant": "t1"}) == {"c1", "c2"}
        assert found({"userId": "ada", "agentId": "support"}) == set()
        assert found({"userId": "ada", "missing": "x"}) == set()

    def test_empty_scope_matches_every_chat(self, store, index):
        store.write_chat(chat("c1", "everyword", scope=ADA), expected_revision=0)
        store.write_chat(chat("c2", "everyword", scope=BOB), expected_revision=0)
        store.write_chat(chat("c3", "everyword", scope={}), expected_revision=0)
        assert {h.chat_id for h in index.search({}, "everyword")} == {"c1", "c2", "c3"}

    def test_chat_with_empty_scope_is_only_found_by_empty_scope(self, store, index):
        store.write_chat(chat("c1", "everyword", scope={}), expected_revision=0)
        assert index.search(ADA, "everyword") == []
        assert ids(index.search({}, "everyword")) == ["c1:0"]

    @pytest.mark.parametrize("value", ["Ada", "ADA", "ada ", " ada", "adá", "ada\t"], ids=repr)
    def test_scope_values_match_exactly(self, store, index, value):
        store.write_chat(chat("c1", "exactword"), expected_revision=0)
        assert index.search({"userId": value}, "exactword") == []

    def test_scope_keys_match_exactly(self, store, index):
        store.write_chat(chat("c1", "exactword"), expected_revision=0)
        assert index.search({"userid": "ada"}, "exactword") == []
        assert index.search({"userId ": "ada"}, "exactword") == []

    def test_scope_field_set_to_empty_string_needs_that_field(self, store, index):
        store.write_chat(chat("c1", "emptyword", scope={"userId": "ada"}), expected_revision=0)
        store.write_chat(
            chat("c2", "emptyword", scope={"userId": "ada", "agentId": ""}), expected_revision=0
        )
        assert [h.chat_id for h in index.search({"agentId": ""}, "emptyword")] == ["c2"]

    def test_invalid_scope_filter_is_invalid_record(self, index):
        with pytest.raises(InvalidRecord):
            index.search({"userId": 7}, "anything")
        with pytest.raises(InvalidRecord):
            index.search(["userId"], "anything")

    def test_chat_ids_filter_restricts_chats(self, store, index):
        for chat_id in ("c1", "c2", "c3"):
            store.write_chat(chat(chat_id, "filterword"), expected_revision=0)
        assert {h.chat_id for h in index.search(ADA, "filterword", chat_ids=["c1", "c3"])} == {
            "c1",
            "c3",
        }
        assert {h.chat_id for h in index.search(ADA, "filterword", chat_ids=("c2",))} == {"c2"}

    def test_chat_ids_filter_never_widens_the_scope(self, store, index):
        store.write_chat(chat("mine", "filterword", scope=ADA), expected_revision=0)
        store.write_chat(chat("theirs", "filterword", scope=BOB), expected_revision=0)
        hits = index.search(ADA, "filterword", chat_ids=["mine", "theirs"])
        assert [h.chat_id for h in hits] == ["mine"]

    def test_empty_or_unknown_chat_ids_find_nothing(self, store, index):
        store.write_chat(chat("c1", "filterword"), expected_revision=0)
        assert index.search(ADA, "filterword", chat_ids=[]) == []
        assert index.search(ADA, "filterword", chat_ids=["nope"]) == []

    def test_chat_ids_as_a_plain_string_is_invalid(self, store, index):
        store.write_chat(chat("c1", "filterword"), expected_revision=0)
        with pytest.raises(InvalidRecord):
            index.search(ADA, "filterword", chat_ids="c1")
