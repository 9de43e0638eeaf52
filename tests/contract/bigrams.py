"""CJK and Thai bigrams (SPEC §8): opt-in by ``CJK_BIGRAMS``, the same on every backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import override_settings

from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, chat, idf, ids

DEPLOY = "web-3.internalへのデプロイが失敗しました"
ORDER = "ご注文の確認をお願いします"


class BigramContract(ContractBase):
    """Off: a run of letters is one term (the seed's rule). On: scripts split runs, and
    Han/Kana and Thai runs are searched by their overlapping bigrams."""

    @pytest.fixture
    def cjk_bigrams(self) -> Iterator[None]:
        """``CJK_BIGRAMS`` on, over whatever the backend's own settings are."""
        given = getattr(settings, "DEUZ_TRANSCRIPTS", {})
        with override_settings(DEUZ_TRANSCRIPTS={**given, "CJK_BIGRAMS": True}):
            yield

    def test_off_by_default_a_run_of_letters_is_one_term(self, store, index):
        store.write_chat(chat("c1", DEPLOY, ORDER, "東京都に住んでいます"), expected_revision=0)
        assert ids(index.search(ADA, "注文")) == (["c1:1"] if self.substring_matching else [])
        assert ids(index.search(ADA, "東京")) == (["c1:2"] if self.substring_matching else [])
        assert ids(index.search(ADA, "internal")) == (["c1:0"] if self.substring_matching else [])

    @pytest.mark.usefixtures("cjk_bigrams")
    def test_han_and_kana_are_found_by_their_bigrams(self, store, index):
        store.write_chat(
            chat("c1", DEPLOY, ORDER, "東京都に住んでいます", "京都"), expected_revision=0
        )
        assert ids(index.search(ADA, "注文")) == ["c1:1"]
        assert ids(index.search(ADA, "internal")) == ["c1:0"]
        assert ids(index.search(ADA, "デプロイ")) == ["c1:0"]
        assert set(ids(index.search(ADA, "東京"))) == {"c1:2"}
        # 京都 is a bigram of 東京都 and the whole of the last message
        assert set(ids(index.search(ADA, "京都"))) == {"c1:2", "c1:3"}

    @pytest.mark.usefixtures("cjk_bigrams")
    def test_thai_is_found_by_its_bigrams_and_scripts_split_runs(self, store, index):
        store.write_chat(chat("c1", "ภาษาไทยง่ายมาก", "abcภาษา", "漢字カナ"), expected_revision=0)
        assert set(ids(index.search(ADA, "ภาษา"))) == {"c1:0", "c1:1"}
        assert ids(index.search(ADA, "abc")) == ["c1:1"]
        assert ids(index.search(ADA, "字カ")) == ["c1:2"]  # Han and Kana are one class

    @pytest.mark.usefixtures("cjk_bigrams")
    def test_one_character_runs_are_terms(self, store, index):
        store.write_chat(chat("c1", "猫 と dog", "猫猫"), expected_revision=0)
        assert ids(index.search(ADA, "と")) == ["c1:0"]
        # 猫猫 holds only the bigram (the LIKE fallback matches the substring)
        assert ids(index.search(ADA, "猫")) == (
            ["c1:0", "c1:1"] if self.substring_matching else ["c1:0"]
        )

    @pytest.mark.usefixtures("cjk_bigrams")
    def test_bigrams_are_ranked_by_the_same_formula(self, store, index):
        store.write_chat(
            chat("c1", "東京都の天気", "東京の天気", "京都の天気", "大阪の天気"),
            expected_revision=0,
        )
        hits = index.search(ADA, "東京都")  # terms 東京 (2 of 4) and 京都 (2 of 4)
        assert [h.index for h in hits] == [0, 1, 2]
        both = 2 * idf(4, 2)
        assert [h.score for h in hits] == pytest.approx(
            [1.0, idf(4, 2) / both, idf(4, 2) / both], abs=1e-9
        )

    @pytest.mark.usefixtures("cjk_bigrams")
    def test_the_32_term_limit_counts_bigrams(self, store, index):
        # 34 distinct characters give 33 bigrams: the last one is ignored
        query = "".join(chr(0x4E00 + n) for n in range(34))
        store.write_chat(chat("c1", query[-2:], query[:2]), expected_revision=0)
        assert ids(index.search(ADA, query)) == ["c1:1"]

    @pytest.mark.usefixtures("cjk_bigrams")
    def test_a_hit_spans_its_matching_bigrams(self, store, index):
        store.write_chat(chat("c1", "東京都の天気 and internalへの"), expected_revision=0)
        [hit] = index.search(ADA, "東京都 internal")
        # 東京 and 京都 overlap: one span over 東京都; internal is split from への
        assert [hit.message["content"][a:b] for a, b in hit.spans] == ["東京都", "internal"]

    @pytest.mark.usefixtures("cjk_bigrams")
    def test_kana_voicing_marks_stay_on_their_kana(self, store, index):
        store.write_chat(
            chat("c1", "デフォルトの設定", "デプロイが失敗", "バス停", "パスワード", "ハス池"),
            expected_revision=0,
        )
        # デプロイ and デフォルト share no bigram (folded to テフ, they did)
        assert ids(index.search(ADA, "デプロイ")) == ["c1:1"]
        assert ids(index.search(ADA, "デフォルト")) == ["c1:0"]
        assert [ids(index.search(ADA, word)) for word in ("バス", "パス", "ハス")] == [
            ["c1:2"],
            ["c1:3"],
            ["c1:4"],
        ]

    @pytest.mark.usefixtures("cjk_bigrams")
    def test_a_mark_of_its_own_is_its_kana_voiced_and_spans_cover_both(self, store, index):
        # half-width kana with half-width marks, a spacing mark, a combining mark
        store.write_chat(chat("c1", "ﾊﾟｽﾜｰﾄﾞ", "ハ゛ス停", "ハ\u3099ス"), expected_revision=0)
        [hit] = index.search(ADA, "パス")
        assert hit.message_id == "c1:0"
        assert [hit.message["content"][a:b] for a, b in hit.spans] == ["ﾊﾟｽ"]
        hits = index.search(ADA, "バス")
        assert sorted(h.message_id for h in hits) == ["c1:1", "c1:2"]
        assert sorted(h.message["content"][a:b] for h in hits for a, b in h.spans) == [
            "ハ\u3099ス",
            "ハ゛ス",
        ]
        assert ids(index.search(ADA, "ハス")) == []
