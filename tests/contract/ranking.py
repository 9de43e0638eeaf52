"""Ranking: the IDF formula of SPEC section 4, and how ties are broken."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.contract.base import ContractBase
from tests.contract.helpers import (
    ADA,
    BOB,
    T0,
    assistant,
    chat,
    idf,
    image_only,
    keys,
    system,
    user,
)


class RankingContract(ContractBase):
    """Rare terms first, scores from the IDF formula over the scope; ties by recency, id, index."""

    # ------------------------------------------------------------------ ranking

    def test_rare_term_outranks_common_term(self, store, index):
        store.write_chat(chat("c1", "apple", "apple", "apple", "kiwi"), expected_revision=0)
        hits = index.search(ADA, "apple kiwi")
        assert [h.index for h in hits] == [3, 0, 1, 2]
        expected = idf(4, 3) / idf(4, 1)
        assert [h.score for h in hits] == pytest.approx(
            [1.0, expected, expected, expected], abs=1e-9
        )

    def test_more_matched_terms_rank_higher(self, store, index):
        store.write_chat(chat("c1", "alpha", "alpha beta", "beta"), expected_revision=0)
        assert index.search(ADA, "alpha beta")[0].index == 1

    def test_scores_follow_the_idf_formula(self, store, index):
        # N counts indexed messages in scope: not the system message, not the image-only
        # message, not another scope's chat.
        store.write_chat(
            chat(
                "c1",
                system("alpha beta gamma"),
                user("alpha beta"),
                assistant("alpha"),
                user("gamma delta"),
                image_only(),
            ),
            expected_revision=0,
        )
        store.write_chat(chat("other", "alpha", "alpha", "omega", scope=BOB), expected_revision=0)
        hits = index.search(ADA, "alpha beta")
        total, n_alpha, n_beta = 3, 2, 1
        best = idf(total, n_alpha) + idf(total, n_beta)
        assert keys(hits) == [("c1", 1), ("c1", 2)]
        assert [h.score for h in hits] == pytest.approx([1.0, idf(total, n_alpha) / best], abs=1e-9)

    def test_n_counts_every_indexed_message_of_the_scope(self, store, index):
        store.write_chat(chat("c1", "alpha beta", "alpha", "gamma"), expected_revision=0)
        store.write_chat(chat("c2", "alpha", "delta", "epsilon"), expected_revision=0)
        hits = index.search(ADA, "alpha beta")
        total, n_alpha, n_beta = 6, 3, 1
        best = idf(total, n_alpha) + idf(total, n_beta)
        assert keys(hits)[0] == ("c1", 0)
        assert [h.score for h in hits] == pytest.approx(
            [1.0] + [idf(total, n_alpha) / best] * 2, abs=1e-9
        )

    def test_n_applies_the_chat_ids_filter(self, store, index):
        store.write_chat(chat("c1", "alpha beta", "alpha", "gamma"), expected_revision=0)
        store.write_chat(chat("c2", "alpha", "delta", "epsilon"), expected_revision=0)
        hits = index.search(ADA, "alpha beta", chat_ids=["c1"])
        total, n_alpha, n_beta = 3, 2, 1
        best = idf(total, n_alpha) + idf(total, n_beta)
        assert keys(hits) == [("c1", 0), ("c1", 1)]
        assert [h.score for h in hits] == pytest.approx([1.0, idf(total, n_alpha) / best], abs=1e-9)

    def test_a_term_repeated_in_a_message_counts_once(self, store, index):
        store.write_chat(chat("c1", "echo echo echo echo", "echo"), expected_revision=0)
        hits = index.search(ADA, "echo")
        assert [(h.index, h.score) for h in hits] == [(0, 1.0), (1, 1.0)]

    def test_a_term_repeated_in_the_query_counts_once(self, store, index):
        store.write_chat(chat("c1", "alpha", "beta", "alpha beta", "gamma"), expected_revision=0)
        once = index.search(ADA, "alpha beta")
        repeated = index.search(ADA, "alpha ALPHA alpha beta Alpha")
        assert [(h.index, h.score) for h in repeated] == [(h.index, h.score) for h in once]

    # ------------------------------------------------------------------ ties

    def test_tie_newer_chat_first(self, store, index):
        store.write_chat(chat("aaa-old", "tieword", updated_at=T0), expected_revision=0)
        store.write_chat(
            chat("zzz-new", "tieword", updated_at=T0 + timedelta(milliseconds=1)),
            expected_revision=0,
        )
        assert [h.chat_id for h in index.search(ADA, "tieword")] == ["zzz-new", "aaa-old"]

    def test_tie_same_updated_at_orders_by_chat_id_code_points(self, store, index):
        chat_ids = ["chat-9", "ä", "b", "chat-10", "B", "Z"]
        for chat_id in chat_ids:
            store.write_chat(chat(chat_id, "tieword"), expected_revision=0)
        hits = index.search(ADA, "tieword")
        assert [h.chat_id for h in hits] == ["B", "Z", "b", "chat-10", "chat-9", "ä"]
        assert [h.chat_id for h in hits] == sorted(chat_ids)
        assert {h.score for h in hits} == {1.0}

    def test_tie_same_chat_lower_index_first(self, store, index):
        store.write_chat(
            chat("c1", "tieword", system("tieword"), "other", "tieword", "tieword"),
            expected_revision=0,
        )
        assert [h.index for h in index.search(ADA, "tieword")] == [0, 3, 4]

    def test_ties_across_different_terms_with_equal_weight(self, store, index):
        store.write_chat(chat("old", "alpha", updated_at=T0), expected_revision=0)
        store.write_chat(
            chat("new", "beta", updated_at=T0 + timedelta(seconds=1)), expected_revision=0
        )
        hits = index.search(ADA, "alpha beta")
        assert [(h.chat_id, h.score) for h in hits] == [("new", 1.0), ("old", 1.0)]
        assert [h.chat_id for h in index.search(ADA, "alpha beta", limit=1)] == ["new"]
        assert [h.chat_id for h in index.search(ADA, "alpha beta", offset=1)] == ["old"]

    def test_score_outranks_recency(self, store, index):
        store.write_chat(chat("old", "alpha beta", updated_at=T0), expected_revision=0)
        store.write_chat(
            chat("new", "alpha", updated_at=T0 + timedelta(days=1)), expected_revision=0
        )
        assert [h.chat_id for h in index.search(ADA, "alpha beta")] == ["old", "new"]
