"""SPEC §8's opt-in CJK and Thai bigrams: the rule, the setting, and a database left behind.

The rule is written out here independently of ``deuz_transcripts.text``: script classes come
from Unicode character names, not from the module's code point ranges.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Iterator

import pytest
from django.core import checks
from django.core.management import call_command
from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from deuz_transcripts.checks import check_text_rules
from deuz_transcripts.conf import conf
from deuz_transcripts.kana_voicing import VOICED, VOICING_BASES
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.text import (
    MAX_QUERY_TERMS,
    cjk_bigrams_enabled,
    cut_utf8,
    fold,
    query_terms,
    text_terms,
    voiced_text,
)
from tests.contract.helpers import ADA, chat, ids

WORD = re.compile(r"[^\W_]+")
HAN_KANA_NAMES = (
    "CJK UNIFIED IDEOGRAPH",
    "CJK COMPATIBILITY IDEOGRAPH",
    "HIRAGANA",
    "KATAKANA",
    "HALFWIDTH KATAKANA",
    "HENTAIGANA",
    "KANA ",
    "IDEOGRAPHIC",
    "HANGZHOU NUMERAL",
    "VERTICAL KANA REPEAT",
    "VERTICAL IDEOGRAPHIC ITERATION",
    "MASU MARK",
)


def script_class(char: str) -> str:
    name = unicodedata.name(char, "")
    if name.startswith("THAI "):
        return "thai"
    return "han-kana" if name.startswith(HAN_KANA_NAMES) else "other"


#: The voicing marks written as characters of their own, and the combining mark of each.
VOICING_MARKS = {"\u3099": "\u3099", "\u309a": "\u309a", "\u309b": "\u3099",
                 "\u309c": "\u309a", "\uff9e": "\u3099", "\uff9f": "\u309a"}  # fmt: skip
DROPPED = frozenset({"Mn", "Mc", "Me", "Cf", "Cs"})


def _is_kana(char: str) -> bool:
    return unicodedata.name(char).startswith(("HIRAGANA", "KATAKANA"))


def voiced_fold(value: str) -> str:
    """SPEC §8's folding under bigrams, restated with NFC itself: a kana (after NFKD) and
    the voicing mark right after it become the kana NFC composes; each character then
    folds as §2 says, but the combining voicing marks it holds are kept and composed."""
    chars: list[str] = []
    for char in value:
        if chars and char in VOICING_MARKS:
            base = unicodedata.normalize("NFKD", chars[-1])
            composed = unicodedata.normalize("NFC", base + VOICING_MARKS[char])
            if len(base) == 1 and len(composed) == 1 and _is_kana(composed):
                chars[-1] = composed
                continue
        chars.append(char)
    return "".join(map(_voiced_char_fold, chars))


@functools.cache
def _voiced_char_fold(char: str) -> str:
    nfkd = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", char).casefold())
    kept = "".join(c for c in nfkd if c in "\u3099\u309a" or unicodedata.category(c) not in DROPPED)
    return re.sub(".?[\u3099\u309a]", _composed_or_dropped, kept)


def _composed_or_dropped(found: re.Match[str]) -> str:
    composed = unicodedata.normalize("NFC", found.group())
    return composed if len(found.group()) == 2 and len(composed) == 1 else found.group()[:-1]


def bigram_rule(value: str) -> list[str]:
    """SPEC §8: split runs at class changes, bigrams of Han/Kana/Thai (over the first
    256 KiB of ``voiced_fold``)."""
    found: list[str] = []
    for run in WORD.findall(cut_utf8(voiced_fold(value))):
        pieces: list[str] = []
        for char in run:
            if pieces and script_class(pieces[-1][-1]) == script_class(char):
                pieces[-1] += char
            else:
                pieces.append(char)
        for piece in pieces:
            if script_class(piece[0]) == "other" or len(piece) == 1:
                found.append(piece)
            else:
                found.extend(piece[i : i + 2] for i in range(len(piece) - 1))
    return list(dict.fromkeys(found))


@pytest.fixture
def bigrams() -> Iterator[None]:
    with override_settings(DEUZ_TRANSCRIPTS={"CJK_BIGRAMS": True}):
        yield


def test_off_by_default():
    assert conf.CJK_BIGRAMS is False
    assert not cjk_bigrams_enabled()
    # folding drops the voicing marks first: デ is テ + U+3099
    assert text_terms("web-3.internalへのデプロイ") == ["web", "3", "internalへのテフロイ"]


@pytest.mark.usefixtures("bigrams")
def test_the_issues_examples():
    assert text_terms("web-3.internalへのデプロイ") == [
        "web", "3", "internal", "への", "のデ", "デプ", "プロ", "ロイ",
    ]  # fmt: skip
    assert query_terms("東京") == ["東京"]
    assert "東京" in text_terms("東京都")
    assert "注文" in text_terms("ご注文の確認")
    assert text_terms("ภาษาไทย") == ["ภา", "าษ", "ษา", "าไ", "ไท", "ทย"]


@pytest.mark.usefixtures("bigrams")
def test_every_folded_letter_is_classed_as_its_unicode_name_says():
    """The module's code point ranges against character names, over every code point."""
    for start in range(0, sys.maxunicode + 1, 4096):
        chunk = "".join(chr(c) for c in range(start, start + 4096) if not 0xD800 <= c <= 0xDFFF)
        for value in (chunk, " ".join(chunk), "a".join(chunk), "".join(f"{c}x" for c in chunk)):
            assert text_terms(value) == bigram_rule(value), f"code points from U+{start:04X}"


KANA_AND_MARKS = st.text(
    st.sampled_from("かカｶハﾊうゝヽア㋕🈂ガ" + "".join(VOICING_MARKS) + "\u0301\u0334\u200b a"),
    max_size=8,
)


@pytest.mark.usefixtures("bigrams")
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(),
            st.sampled_from(
                ["東京都", "ご注文", "ｶﾀｶﾅ", "ーゝ々", "ภาษา", "a1", " ", "ß", "\u3000"]
            ),
            KANA_AND_MARKS,
        ),
        max_size=40,
    )
)
def test_random_text_follows_the_rule(pieces):
    value = "".join(pieces)
    assert text_terms(value) == bigram_rule(value)
    assert query_terms(value) == bigram_rule(value)[:MAX_QUERY_TERMS]


@pytest.mark.usefixtures("bigrams")
def test_voicing_marks_stay_on_their_kana():
    """デプロイ and デフォルト share no bigram; バス, パス and ハス are three words."""
    assert set(text_terms("デプロイ")).isdisjoint(text_terms("デフォルト"))
    assert [text_terms(word) for word in ("バス", "パス", "ハス")] == [["バス"], ["パス"], ["ハス"]]
    # a mark of its own after its kana is the precomposed kana (as NFC/NFKC compose it):
    # combining, spacing and half-width, after full- and half-width kana
    for written in ("ハ\u3099ス", "ハ゛ス", "ﾊﾞｽ", "ﾊ\u3099ｽ", "ハﾞス"):
        assert fold(written) == "バス", written
    for written in ("ハ\u309aス", "ハ゜ス", "ﾊﾟｽ"):
        assert fold(written) == "パス", written
    assert fold("㌀") == "アパート"  # a compatibility square's marks too
    # a mark after what it cannot voice is a diacritic (or, spacing, a separator) as before
    assert fold("ア\u3099イ") == "アイ"
    assert fold("ガ\u3099") == "ガ"
    assert text_terms("a゛b") == ["a", "b"]


def test_off_voicing_marks_are_diacritics_as_before():
    assert fold("デプロイ") == fold("テ\u3099フ\u309aロイ") == "テフロイ"
    assert text_terms("バス パス ハス ﾊﾞｽ") == ["ハス"]


@pytest.mark.usefixtures("bigrams")
def test_voiced_folding_is_the_restated_rule_on_every_code_point():
    """Each code point alone, after a kana and before a voicing mark."""
    for start in range(0, sys.maxunicode + 1, 4096):
        chunk = [chr(c) for c in range(start, start + 4096) if not 0xD800 <= c <= 0xDFFF]
        assert [fold(c) for c in chunk] == [voiced_fold(c) for c in chunk]
        for value in ("カ".join(chunk), "\u309b".join(chunk), "\uff9e".join(chunk)):
            assert fold(value) == voiced_fold(value), f"code points from U+{start:04X}"


@pytest.mark.usefixtures("bigrams")
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(), KANA_AND_MARKS), max_size=20))
def test_voiced_folding_works_on_each_character_of_the_voiced_text(pieces):
    value = "".join(pieces)
    voiced = voiced_text(value)
    assert len(voiced) == len(value)
    assert voiced_text(voiced) == voiced
    assert fold(value) == "".join(map(fold, voiced)) == voiced_fold(value)


def test_a_character_folds_to_as_many_characters_under_either_rule():
    """Why the spans' cache of one-for-one characters serves both rules: the characters
    whose decomposition holds a voicing mark (the only ones the rules fold apart)."""
    voicing = [
        chr(c)
        for c in range(sys.maxunicode + 1)
        if not 0xD800 <= c <= 0xDFFF
        and not {"\u3099", "\u309a"}.isdisjoint(unicodedata.normalize("NFKD", chr(c)))
    ]
    assert len(voicing) > 100
    seed = [len(fold(char)) for char in voicing]
    with override_settings(DEUZ_TRANSCRIPTS={"CJK_BIGRAMS": True}):
        assert [len(fold(char)) for char in voicing] == seed


def test_every_character_a_mark_can_voice_is_known():
    """``kana_voicing.VOICING_BASES`` scans a few blocks: no other code point qualifies."""
    kana = {pair[0] for pair in VOICED}
    found = {
        chr(c): unicodedata.normalize("NFKD", chr(c))
        for c in range(sys.maxunicode + 1)
        if not 0xD800 <= c <= 0xDFFF and unicodedata.normalize("NFKD", chr(c)) in kana
    }
    assert found == VOICING_BASES


def test_the_word_cache_follows_the_setting():
    assert text_terms("東京都") == ["東京都"]
    with override_settings(DEUZ_TRANSCRIPTS={"CJK_BIGRAMS": True}):
        assert text_terms("東京都") == ["東京", "京都"]
    assert text_terms("東京都") == ["東京都"]


def test_an_invalid_value_is_a_check_error_and_the_seed_rule():
    with override_settings(DEUZ_TRANSCRIPTS={"CJK_BIGRAMS": "yes"}):
        assert [p.check_id for p in conf.problems()] == ["deuz_transcripts.E009"]
        assert not cjk_bigrams_enabled()


@pytest.mark.django_db(databases=["default"])
def test_switching_the_setting_is_reported_and_backfill_reindexes():
    store = DjangoConditionalChatStore()
    store.write_chat(chat("c1", "ご注文の確認", "plain words"), expected_revision=0)
    assert check_text_rules(databases=["default"]) == []
    with override_settings(DEUZ_TRANSCRIPTS={"CJK_BIGRAMS": True}):
        found = check_text_rules(databases=["default"])
        assert [m.id for m in found] == ["deuz_transcripts.W004"]
        assert "indexed under CJK_BIGRAMS=False" in found[0].msg
        assert isinstance(found[0], checks.Warning)
        assert ids(store.transcript.search(ADA, "注文")) == []
        call_command("backfill_transcripts", stdout=_Sink(), stderr=_Sink())
        assert check_text_rules(databases=["default"]) == []
        assert ids(store.transcript.search(ADA, "注文")) == ["c1:0"]
    # back to the seed's rule: the database is now the one left behind
    assert [m.id for m in check_text_rules(databases=["default"])] == ["deuz_transcripts.W004"]


def test_the_check_skips_databases_it_is_not_asked_about(settings):
    settings.DEBUG = False  # with DEBUG on (runserver) it reads every database's forms
    assert check_text_rules(databases=None) == []


def test_folding_comes_first():
    """Half-width Katakana and compatibility ideographs fold to the forms the ranges hold."""
    assert fold("ｶﾀｶﾅ") == "カタカナ"
    with override_settings(DEUZ_TRANSCRIPTS={"CJK_BIGRAMS": True}):
        assert text_terms("ｶﾀｶﾅ") == ["カタ", "タカ", "カナ"]


class _Sink:
    def write(self, value: str) -> int:
        return len(value)

    def flush(self) -> None:
        pass
