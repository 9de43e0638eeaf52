"""What is indexed (SPEC section 3), how text and queries become terms, and the 256 KiB cut."""

from __future__ import annotations

import pytest

from tests.contract.base import ContractBase
from tests.contract.helpers import (
    ADA,
    HOSTILE,
    INDEXED_SHAPES,
    LIMIT,
    UNKNOWN_SHAPES,
    chat,
    filler,
    ids,
    ref,
    system,
    user,
)


class IndexingContract(ContractBase):
    """Indexed message shapes, terms and queries (folding, hostile input), the per-message cut."""

    # ------------------------------------------------------------------ what is indexed

    @pytest.mark.parametrize(("message", "word", "indexed"), INDEXED_SHAPES)
    def test_what_is_indexed(self, store, index, message, word, indexed):
        store.write_chat(chat("c1", message), expected_revision=0)
        assert ids(index.search(ADA, word)) == (["c1:0"] if indexed else [])

    def test_system_message_is_never_a_hit(self, store, index):
        store.write_chat(
            chat("c1", system("shared"), user("shared"), {"role": "system", "content": "shared"}),
            expected_revision=0,
        )
        assert [h.index for h in index.search(ADA, "shared")] == [1]

    @pytest.mark.parametrize("message", UNKNOWN_SHAPES)
    def test_unknown_content_shape_is_stored_and_returned_as_is(self, store, index, message):
        store.write_chat(chat("c1", "before", message, "after"), expected_revision=0)
        assert store.load_chat("c1")[0].messages[1] == message
        assert index.search(ADA, "shapeword") == []
        [hit] = index.search(ADA, "before", around=1)
        assert hit.around[0].message == message
        assert index.resolve_source(ADA, ref("c1", "c1:1")).message == message

    # ------------------------------------------------------------------ terms and queries

    @pytest.mark.parametrize("query", ["", "   ", "!!!", "— …", "😀🎉", "\x00", "_", "%%"])
    def test_query_without_terms_returns_nothing(self, store, index, query):
        store.write_chat(chat("c1", "anything at all", "_ %% !!!"), expected_revision=0)
        assert index.search(ADA, query) == []

    def test_only_the_first_32_distinct_terms_count(self, store, index):
        store.write_chat(chat("c1", "needle", "other"), expected_revision=0)
        fillers = [f"qx{i}z" for i in range(32)]
        assert index.search(ADA, " ".join([*fillers, "needle"])) == []
        assert ids(index.search(ADA, " ".join([*fillers[:31], "needle"]))) == ["c1:0"]

    def test_repeated_terms_do_not_use_up_the_32(self, store, index):
        store.write_chat(chat("c1", "needle", "other"), expected_revision=0)
        fillers = [f"qx{i}z" for i in range(31)]
        query = " ".join([*fillers, *fillers, "QX0Z", "needle", "tail"])
        assert ids(index.search(ADA, query)) == ["c1:0"]

    @pytest.mark.parametrize("hostile", HOSTILE, ids=repr)
    def test_hostile_query_is_plain_text(self, store, index, hostile):
        store.write_chat(
            chat(
                "c1",
                "Book the flight to İzmir.",
                "Booked: Friday, 09:40.",
                message_ids=["m-1", "m-2"],
            ),
            expected_revision=0,
        )
        assert index.search(ADA, hostile) == []
        assert ids(index.search(ADA, f"{hostile} flight {hostile}")) == ["m-1"]
        assert ids(index.search(ADA, f"{hostile} flight {hostile} izmir")) == ["m-1"]

    def test_fts_operators_in_a_query_are_words(self, store, index):
        store.write_chat(
            chat("c1", "Book the flight to İzmir.", "near or not"), expected_revision=0
        )
        assert ids(index.search(ADA, "NEAR(flight izmir, 2)")) == ["c1:0", "c1:1"]
        assert ids(index.search(ADA, "flight NOT izmir")) == ["c1:0", "c1:1"]
        assert ids(index.search(ADA, '"flight to"')) == ["c1:0"]
        assert ids(index.search(ADA, "flig*")) == (["c1:0"] if self.substring_matching else [])

    @pytest.mark.parametrize("hostile", ["*", ":*", "%", "_", '"', "'", "\\", "\x00"], ids=repr)
    def test_hostile_characters_glued_to_a_word_are_separators(self, store, index, hostile):
        store.write_chat(chat("c1", "Book the flight to İzmir."), expected_revision=0)
        assert ids(index.search(ADA, f"{hostile}flight{hostile}")) == ["c1:0"]
        expected = ["c1:0"] if self.substring_matching else []
        assert ids(index.search(ADA, f"fli{hostile}")) == expected

    def test_hostile_text_in_messages_is_plain_text(self, store, index):
        store.write_chat(
            chat("c1", 'He typed "NEAR(x)" * OR 100% of _under_ -- /* c */ don\'t \\ ok'),
            expected_revision=0,
        )
        for query in ("near", "under", "100", "don", "NEAR(", '"near"'):
            assert ids(index.search(ADA, query)) == ["c1:0"], query

    def test_case_and_diacritics_are_folded(self, store, index):
        store.write_chat(
            chat("c1", "Book the flight to İzmir.", "Die Straße ist lang.", "Tiếng Việt"),
            expected_revision=0,
        )
        for query in ("izmir", "IZMIR", "Izmír", "İZMİR", "izmİr"):
            assert ids(index.search(ADA, query)) == ["c1:0"], query
        for query in ("strasse", "STRASSE", "straße", "STRAẞE"):
            assert ids(index.search(ADA, query)) == ["c1:1"], query
        assert ids(index.search(ADA, "viet")) == ["c1:2"]
        assert ids(index.search(ADA, "VIỆT")) == ["c1:2"]

    def test_digits_are_terms(self, store, index):
        store.write_chat(chat("c1", "Booked: Friday, 09:40."), expected_revision=0)
        assert ids(index.search(ADA, "09")) == ["c1:0"]
        assert ids(index.search(ADA, "40")) == ["c1:0"]
        assert ids(index.search(ADA, "0940")) == []

    def test_cjk_run_is_one_term(self, store, index):
        store.write_chat(chat("c1", "東京タワーに行く", "東京"), expected_revision=0)
        assert ids(index.search(ADA, "東京タワーに行く")) == ["c1:0"]
        expected = ["c1:1", "c1:0"] if self.substring_matching else ["c1:1"]
        assert sorted(ids(index.search(ADA, "東京"))) == sorted(expected)

    def test_no_stemming(self, store, index):
        store.write_chat(chat("c1", "we deploys daily"), expected_revision=0)
        expected = ["c1:0"] if self.substring_matching else []
        assert ids(index.search(ADA, "deploy")) == expected
        assert ids(index.search(ADA, "deployed")) == []

    def test_whole_words_match(self, store, index):
        store.write_chat(chat("c1", "the catalogue"), expected_revision=0)
        expected = ["c1:0"] if self.substring_matching else []
        assert ids(index.search(ADA, "cat")) == expected
        assert ids(index.search(ADA, "catalogue")) == ["c1:0"]

    def test_very_long_terms_match_only_themselves(self, store, index):
        word = "q" * 2999 + "b"
        other = "q" * 2999 + "c"
        store.write_chat(chat("c1", f"start {word} end", other), expected_revision=0)
        assert ids(index.search(ADA, word)) == ["c1:0"]
        assert ids(index.search(ADA, word.upper())) == ["c1:0"]
        assert ids(index.search(ADA, other)) == ["c1:1"]

    # ------------------------------------------------------------------ the 256 KiB cut

    def test_term_wholly_past_256_kib_is_not_found(self, store, index):
        store.write_chat(chat("c1", filler(LIMIT) + "pastword"), expected_revision=0)
        assert ids(index.search(ADA, "pad")) == ["c1:0"]
        assert index.search(ADA, "pastword") == []

    def test_term_ending_at_the_boundary_is_found(self, store, index):
        store.write_chat(chat("c1", filler(LIMIT - 8) + "edgeword after"), expected_revision=0)
        assert ids(index.search(ADA, "edgeword")) == ["c1:0"]
        assert index.search(ADA, "after") == []

    def test_term_straddling_the_boundary_is_found_by_its_cut_prefix_only(self, store, index):
        store.write_chat(chat("c1", filler(LIMIT - 6) + "straddleword"), expected_revision=0)
        assert ids(index.search(ADA, "stradd")) == ["c1:0"]
        assert index.search(ADA, "straddleword") == []
        assert index.search(ADA, "straddl") == []

    def test_character_cut_by_the_boundary_is_dropped(self, store, index):
        # "ж" is two bytes: its first byte is the last one indexed.
        store.write_chat(chat("c1", filler(LIMIT - 4) + "abcж"), expected_revision=0)
        assert ids(index.search(ADA, "abc")) == ["c1:0"]
        assert index.search(ADA, "abcж") == []

    def test_cut_counts_folded_bytes_not_original_bytes(self, store, index):
        # Fullwidth "Ｘ" is 3 bytes and folds to 1: the needle sits at original byte
        # ~400,000 but folded byte ~200,000.
        store.write_chat(chat("c1", "Ｘ " * 100_000 + "needleword"), expected_revision=0)
        assert ids(index.search(ADA, "needleword")) == ["c1:0"]
        # "ŉ" is 2 bytes and folds to "ʼn", 3 bytes: original ~240,000, folded ~320,000.
        store.write_chat(chat("c2", "ŉ " * 80_000 + "lostword"), expected_revision=0)
        assert index.search(ADA, "lostword") == []

    def test_long_message_is_stored_whole(self, store, index):
        text = filler(LIMIT) + "pastword"
        store.write_chat(chat("c1", text), expected_revision=0)
        assert store.load_chat("c1")[0].messages[0]["content"] == text
        assert index.search(ADA, "pad")[0].message["content"] == text

    def test_cut_applies_per_message(self, store, index):
        store.write_chat(
            chat("c1", filler(LIMIT) + "pastword", "pastword again"), expected_revision=0
        )
        assert ids(index.search(ADA, "pastword")) == ["c1:1"]
