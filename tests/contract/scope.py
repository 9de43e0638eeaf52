"""Scope filters and ``chat_ids``: exact matching, every field set, never widened."""

from __future__ import annotations

import pytest

from deuz_transcripts import InvalidRecord, TranscriptContextSource
from deuz_transcripts.records import MAX_SCOPE_FIELDS
from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, BOB, chat, ids, ref


def wide_scope(fields: int = MAX_SCOPE_FIELDS, **changes: str) -> dict[str, str]:
    """``fields`` fields ``k00=v00`` ..., then ``changes`` (a field whose value is "" is dropped)."""
    scope = {f"k{number:02d}": f"v{number:02d}" for number in range(fields)}
    scope.update(changes)
    return {key: value for key, value in scope.items() if value != ""}


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

    def test_scope_of_the_most_fields_matches_every_one_of_them(self, store, index):
        """``MAX_SCOPE_FIELDS`` fields: a chat differing in any one field (the first, a
        middle one, the last, one missing) is out; the same fields in another order are in."""
        last = f"k{MAX_SCOPE_FIELDS - 1:02d}"
        chats = {
            "same": wide_scope(),
            "first-differs": wide_scope(k00="other"),
            "middle-differs": wide_scope(k10="other"),
            "last-differs": wide_scope(**{last: "other"}),
            "last-missing": wide_scope(**{last: ""}),
            "reordered": dict(reversed(wide_scope().items())),
        }
        for chat_id, scope in chats.items():
            store.write_chat(chat(chat_id, "wideword", scope=scope), expected_revision=0)
        store.write_chat(
            chat("extra", "wideword", scope={**wide_scope(MAX_SCOPE_FIELDS - 1), "a": "x"}),
            expected_revision=0,
        )
        assert {h.chat_id for h in index.search(wide_scope(), "wideword")} == {"same", "reordered"}
        assert {r.chat_id for r in store.list_chats(wide_scope())} == {"same", "reordered"}
        narrower = wide_scope(MAX_SCOPE_FIELDS - 1)
        assert {h.chat_id for h in index.search(narrower, "wideword")} == {
            "same",
            "last-differs",
            "last-missing",
            "reordered",
            "extra",
        }
        assert index.resolve_source(wide_scope(), ref("same", "same:0")).chat_id == "same"
        assert index.resolve_source(wide_scope(), ref("last-differs", "last-differs:0")) is None

    def test_scope_past_the_most_fields_is_invalid_record(self, store, index):
        """One field past ``MAX_SCOPE_FIELDS`` is refused by every method, before any SQL
        (one join per field used to fail SQLite past 63 fields and stall PostgreSQL)."""
        store.write_chat(chat("c1", "wideword", scope=wide_scope()), expected_revision=0)
        too_wide = wide_scope(MAX_SCOPE_FIELDS + 1)
        calls = {
            "search": lambda: index.search(too_wide, "wideword"),
            "list_chats": lambda: store.list_chats(too_wide),
            "write_chat": lambda: store.write_chat(
                chat("c2", "wideword", scope=too_wide), expected_revision=0
            ),
            "resolve_source": lambda: index.resolve_source(too_wide, ref("c1", "c1:0")),
            "context source": lambda: TranscriptContextSource(index, too_wide),
        }
        for name, call in calls.items():
            with pytest.raises(InvalidRecord) as raised:
                call()
            assert raised.value.field == "scope", name
        assert store.load_chat("c2") is None
        assert [h.chat_id for h in index.search(wide_scope(), "wideword")] == ["c1"]

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
