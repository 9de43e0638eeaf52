"""The text rules every backend shares: folding, terms, indexed text, the cut, highlights."""

from __future__ import annotations

import sys

import pytest

from deuz_transcripts import text as text_module
from deuz_transcripts.spans import highlight_spans
from deuz_transcripts.text import (
    MAX_INDEXED_BYTES,
    MAX_QUERY_TERMS,
    MAX_STORED_TERM_BYTES,
    cut_utf8,
    fold,
    fold_capped,
    indexed_text,
    is_system,
    message_terms,
    query_terms,
    stored_term,
    stored_terms_text,
    terms,
)
from tests.factories import (
    MessageFactory,
    file_part,
    image_part,
    reasoning_part,
    text_part,
    tool_call_part,
    tool_result_part,
)


def highlighted(text: str, query, **kwargs) -> list[str]:
    return [text[start:end] for start, end in highlight_spans(text, query, **kwargs)]


# ---------------------------------------------------------------------- folding


@pytest.mark.parametrize("word", ["İzmir", "izmir", "IZMIR", "Izmír", "İZMİR", "Izmi\u0301r"])
def test_izmir_spellings_are_one_term(word):
    assert terms(word) == ["izmir"]


def test_dotted_capital_i_folds_to_plain_i():
    assert fold("İ") == "i"
    assert fold("i̇") == "i"  # i + combining dot above


def test_dotless_i_stays_dotless():
    # Documented consequence: Unicode case folding keeps "ı" (U+0131) a letter of its
    # own, so "ıstanbul" and "istanbul" are different terms; "I" folds to "i", not "ı".
    assert fold("ı") == "ı"
    assert terms("ıstanbul") == ["ıstanbul"]
    assert terms("ISTANBUL") == ["istanbul"]
    assert terms("ıstanbul") != terms("istanbul")


def test_greek_final_sigma_equals_sigma():
    assert fold("ς") == fold("σ") == fold("Σ") == "σ"
    assert terms("λόγος") == terms("ΛΟΓΟΣ") == terms("λογοσ") == ["λογοσ"]


def test_greek_accents_and_iota_subscript():
    assert terms("Ἀθῆναι") == ["αθηναι"]
    assert fold("ᾳ") == "αι"  # the iota subscript case-folds to a full iota


def test_vietnamese_stacked_marks_are_dropped():
    assert terms("Tiếng Việt") == ["tieng", "viet"]
    assert terms("PHỞ") == terms("phở") == ["pho"]
    assert fold("ệ") == fold("e\u0323\u0302") == fold("e\u0302\u0323") == "e"


def test_sharp_s_folds_to_ss():
    assert terms("Straße") == terms("STRASSE") == terms("strasse") == ["strasse"]
    assert fold("ẞ") == "ss"


@pytest.mark.parametrize(
    ("text", "folded"),
    [("ﬁle", "file"), ("ﬂow", "flow"), ("ﬀ", "ff"), ("ﬃ", "ffi"), ("ﬆ", "st"), ("Ǆ", "dz")],
)
def test_ligatures_decompose(text, folded):
    assert fold(text) == folded


def test_fullwidth_letters_and_digits():
    assert fold("ＡＢＣ１２３") == "abc123"
    assert terms("ＩＺＭＩＲ") == ["izmir"]


def test_other_compatibility_forms():
    assert fold("①") == "1"
    assert fold("²") == "2"
    assert fold("Ⅻ") == "xii"
    assert fold("㎏") == "kg"
    assert fold("K") == "k"  # Kelvin sign
    assert fold("Å") == "a"  # Angstrom sign


@pytest.mark.parametrize(
    "joiner",
    ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e", "\u200f"],
    ids=["zwsp", "zwnj", "zwj", "word-joiner", "bom", "soft-hyphen", "lrm", "rlm"],
)
def test_invisible_characters_inside_a_word_do_not_split_it(joiner):
    assert terms(f"deu{joiner}zword") == ["deuzword"]


def test_digits_and_times():
    assert terms("Booked: Friday, 09:40.") == ["booked", "friday", "09", "40"]
    assert terms("v2 3.14 1,000") == ["v2", "3", "14", "1", "000"]


def test_cjk_runs_are_one_term():
    assert terms("東京タワーに行きます") == ["東京タワーに行きます"]
    assert terms("你好，世界") == ["你好", "世界"]
    # Hangul syllables decompose to conjoining jamo (NFKD): still one term per run.
    assert terms("한국어 텍스트") == [fold("한국어"), fold("텍스트")]
    assert len(fold("한국어")) == 8


def test_fullwidth_cjk_punctuation_separates():
    assert terms("東京。大阪、京都") == ["東京", "大阪", "京都"]


@pytest.mark.parametrize("emoji", ["😀", "🎉", "👍🏽", "👨‍👩‍👧", "🇹🇷", "❤️"])
def test_emoji_are_separators(emoji):
    assert terms(f"flight{emoji}izmir") == ["flight", "izmir"]
    assert terms(emoji) == []


def test_arabic_letters_are_terms_and_harakat_drop():
    assert terms("مَرْحَبًا بالعالم") == ["مرحبا", "بالعالم"]
    assert terms("مرحبا") == ["مرحبا"]


def test_hebrew_points_drop():
    assert terms("שָׁלוֹם עולם") == ["שלום", "עולם"]


def test_underscore_and_punctuation_separate():
    assert terms("snake_case kebab-case dot.case a/b") == [
        "snake",
        "case",
        "kebab",
        "dot",
        "a",
        "b",
    ]


def test_ascii_fast_path_matches_the_general_rule():
    text = "Hello WORLD 123 _x_ \x00 ~"
    assert fold(text) == fold(text + "é")[:-1]
    assert fold(text) == text.lower()


def test_fold_is_idempotent_for_every_code_point():
    failures = []
    for code_point in range(sys.maxunicode + 1):
        once = fold(chr(code_point))
        if fold(once) != once:
            failures.append(hex(code_point))
    assert failures == []


def test_fold_drops_lone_surrogates():
    assert fold("a\ud800b") == "ab"


# ---------------------------------------------------------------------- terms and queries


def test_terms_are_distinct_in_first_appearance_order():
    assert terms("b a B c A") == ["b", "a", "c"]


def test_no_terms():
    assert terms("") == []
    assert terms("  !?… — 😀") == []
    assert query_terms("") == []
    assert query_terms("%_*\"'\\") == []


def test_query_terms_caps_at_32_distinct():
    words = [f"w{i}" for i in range(40)]
    assert MAX_QUERY_TERMS == 32
    assert query_terms(" ".join(words)) == words[:32]


def test_query_terms_duplicates_count_once():
    words = [f"w{i}" for i in range(32)]
    query = " ".join(["W0", "w0", "w0", *words, "extra"])
    assert query_terms(query) == words


def test_query_terms_fold():
    assert query_terms("İzmir FLIGHT flight") == ["izmir", "flight"]


def test_query_terms_of_a_non_string_is_empty():
    assert query_terms(None) == []
    assert query_terms(42) == []


# ---------------------------------------------------------------------- indexed text

TOOL_RESULT_TEXT = {"type": "text", "value": "valueword"}
TOOL_RESULT_JSON = {"type": "json", "value": {"k": "jsonword"}}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "user", "content": "plain"}, "plain"),
        ({"role": "user", "content": ""}, ""),
        ({"role": "assistant", "content": [text_part("a"), text_part("b")]}, "a\nb"),
        ({"role": "assistant", "content": [reasoning_part("hidden"), text_part("shown")]}, "shown"),
        ({"role": "assistant", "content": [tool_call_part({"q": "input"})]}, ""),
        ({"role": "tool", "content": [tool_result_part("result")]}, "result"),
        ({"role": "tool", "content": [tool_result_part(TOOL_RESULT_TEXT)]}, "valueword"),
        (
            {"role": "tool", "content": [tool_result_part({"type": "error-text", "value": "e"})]},
            "e",
        ),
        ({"role": "tool", "content": [tool_result_part(TOOL_RESULT_JSON)]}, ""),
        ({"role": "tool", "content": [tool_result_part({"type": "json", "value": "s"})]}, ""),
        ({"role": "tool", "content": [tool_result_part({"type": "text", "value": 3})]}, ""),
        ({"role": "user", "content": [image_part(), file_part("data")]}, ""),
        ({"role": "system", "content": "rules"}, None),
        ({"role": "developer", "content": "rules"}, None),
        ({"role": "system", "content": [text_part("rules")]}, None),
        # OpenAI
        ({"role": "tool", "tool_call_id": "c", "content": "openai"}, "openai"),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}],
            },
            "",
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
                ],
            },
            "look",
        ),
        # Anthropic
        (
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "redacted_thinking", "data": "xx"},
                    {"type": "text", "text": "answer"},
                    {"type": "tool_use", "id": "t", "name": "n", "input": {"q": "in"}},
                ],
            },
            "answer",
        ),
        (
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}],
            },
            "r",
        ),
        (
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [text_part("r1"), image_part(), text_part("r2")],
                    }
                ],
            },
            "r1\nr2",
        ),
        # Unknown shapes
        ({"role": "user", "content": {"text": "odd"}}, ""),
        ({"role": "user", "content": 42}, ""),
        ({"role": "user"}, ""),
        ({"role": "user", "content": ["bare string", None, 1]}, ""),
        ({"role": "user", "content": [{"type": "text", "text": 5}]}, ""),
        ("not a mapping", ""),
        (None, ""),
    ],
)
def test_indexed_text(message, expected):
    assert indexed_text(message) == expected


def test_message_terms_of_system_message_is_none():
    assert message_terms(MessageFactory(system=True)) is None
    assert message_terms({"role": "developer", "content": "x"}) is None


def test_message_terms_of_factory_shapes():
    assert message_terms(MessageFactory(text="Hello World", parts=True)) == ["hello", "world"]
    assert message_terms(MessageFactory(text="Hello", tool_result=True)) == ["hello"]
    assert message_terms(MessageFactory(text="Hello", tool_result_text=True)) == ["hello"]
    assert message_terms(MessageFactory(text="Hello", tool_result_json=True)) == []
    assert message_terms(MessageFactory(text="Hello", reasoning=True)) == []
    assert message_terms(MessageFactory(text="Hello", tool_call=True)) == []


def test_is_system():
    assert is_system({"role": "system"})
    assert is_system({"role": "developer"})
    assert not is_system({"role": "user"})
    assert not is_system({"role": "System"})
    assert not is_system("system")


# ---------------------------------------------------------------------- the 256 KiB cut


def test_max_indexed_bytes():
    assert MAX_INDEXED_BYTES == 262_144


def test_cut_utf8_keeps_short_text():
    assert cut_utf8("short") == "short"
    assert cut_utf8("é" * 10, 20) == "é" * 10


def test_cut_utf8_cuts_at_the_byte_limit():
    assert cut_utf8("abcdef", 4) == "abcd"
    assert cut_utf8("a" * 300_000) == "a" * MAX_INDEXED_BYTES


@pytest.mark.parametrize(
    ("char", "size"), [("é", 2), ("€", 3), ("😀", 4)], ids=["2-bytes", "3-bytes", "4-bytes"]
)
def test_cut_utf8_drops_a_character_cut_by_the_boundary(char, size):
    text = "ab" + char + "cd"
    for limit in range(2, 2 + size):
        assert cut_utf8(text, limit) == "ab"
    assert cut_utf8(text, 2 + size) == "ab" + char


def test_cut_utf8_at_the_real_boundary():
    text = "a" * (MAX_INDEXED_BYTES - 1) + "ж" + "tail"
    assert cut_utf8(text) == "a" * (MAX_INDEXED_BYTES - 1)
    text = "a" * (MAX_INDEXED_BYTES - 2) + "ж" + "tail"
    assert cut_utf8(text) == "a" * (MAX_INDEXED_BYTES - 2) + "ж"


def test_fold_capped_counts_folded_bytes():
    # "Ｘ" (3 bytes) folds to "x" (1 byte): all 150,000 survive the cut.
    assert fold_capped("Ｘ" * 150_000) == "x" * 150_000
    # "ŉ" (2 bytes) folds to "ʼn" (3 bytes).
    capped = fold_capped("ŉ" * 100_000)
    assert len(capped.encode("utf-8")) <= MAX_INDEXED_BYTES
    assert capped == ("ʼn" * 100_000)[: len(capped)]
    assert len(capped.encode("utf-8")) > MAX_INDEXED_BYTES - 3


def test_fold_capped_equals_cut_of_fold():
    chunk = "Ab É ß ﬁ 東京 ŉ ẞ Ｘ 😀 "
    for size in (1, 1_000, 20_000, 40_000):
        text = chunk * size
        assert fold_capped(text) == cut_utf8(fold(text)), size


def test_fold_capped_chunk_boundaries_do_not_split_marks():
    # A combining mark right after a chunk boundary still folds away.
    text = "e" * 65_535 + "e\u0301" + "x" * 10
    assert fold_capped(text) == "e" * 65_536 + "x" * 10


@pytest.mark.parametrize(
    "text",
    ["x" * 10_000_000, "é" * 10_000_000, "東" * 10_000_000, "Straße " * 1_500_000],
    ids=["ascii", "latin", "cjk", "mixed"],
)
def test_fold_capped_of_10_megabytes_folds_only_what_it_keeps(text, monkeypatch):
    folded: list[int] = []

    def counted(piece: str) -> str:
        folded.append(len(piece))
        return fold(piece)

    monkeypatch.setattr(text_module, "fold", counted)
    capped = fold_capped(text)
    assert len(capped.encode("utf-8")) <= MAX_INDEXED_BYTES
    # whole chunks until the cut: every character folds to at least one byte here
    assert sum(folded) <= MAX_INDEXED_BYTES + text_module._FOLD_CHUNK_CHARS, sum(folded)


def test_message_terms_apply_the_cut():
    filler = "pad " * (MAX_INDEXED_BYTES // 4)
    assert message_terms({"role": "user", "content": filler + "past"}) == ["pad"]
    assert message_terms({"role": "user", "content": filler[:-4] + " straddle"}) == ["pad", "str"]


# ---------------------------------------------------------------------- stored_term


def test_short_terms_are_stored_unchanged():
    assert stored_term("izmir") == "izmir"
    assert stored_term("a" * MAX_STORED_TERM_BYTES) == "a" * MAX_STORED_TERM_BYTES
    assert stored_term("ж" * 127) == "ж" * 127  # 254 bytes


def test_long_terms_are_stored_as_a_digest():
    long_ascii = "a" * (MAX_STORED_TERM_BYTES + 1)
    long_cyrillic = "ж" * 128  # 256 bytes, 128 characters
    for term in (long_ascii, long_cyrillic, "q" * 100_000):
        stored = stored_term(term)
        assert stored != term
        assert len(stored.encode("utf-8")) <= MAX_STORED_TERM_BYTES
        assert terms(stored) != [stored]  # can never equal a real term
        assert stored_term(term) == stored  # deterministic


def test_distinct_long_terms_have_distinct_digests():
    base = "q" * 3000
    stored = {stored_term(base + suffix) for suffix in ("a", "b", "c", "aa", "")}
    assert len(stored) == 5


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["izmir", "flight"],
        ["a" * 63, "ж" * 63, "𝔘" * 63],  # the longest terms that skip the digest check
        ["short", "a" * 64, "ok"],  # 64 ASCII characters: checked, still stored as is
        ["ж" * 127, "ж" * 128, "a" * 300, "tail"],  # 254 bytes kept, 256 and 300 digested
    ],
)
def test_stored_terms_text_is_stored_term_of_each_word(words):
    text = " ".join(words)
    assert stored_terms_text(text) == " ".join(stored_term(word) for word in words)


# ---------------------------------------------------------------------- highlight_spans


def test_highlight_spans_index_the_original_text():
    text = "Book the flight to İzmir."
    assert highlight_spans(text, "izmir flight") == [(9, 15), (19, 24)]
    assert highlighted(text, "IZMIR") == ["İzmir"]


def test_highlight_spans_cover_decomposed_accents():
    text = "Izmi\u0301r and cafe\u0301"
    assert highlighted(text, "izmir cafe") == ["Izmi\u0301r", "cafe\u0301"]


def test_highlight_spans_cover_expanding_folds():
    assert highlighted("Die Straße, die STRASSE", "strasse") == ["Straße", "STRASSE"]
    assert highlighted("ﬁle", "file") == ["ﬁle"]
    assert highlighted("ＡＢＣ", "abc") == ["ＡＢＣ"]


def test_highlight_spans_keep_invisible_characters_inside_words():
    assert highlighted("deu\u200bzword!", "deuzword") == ["deu\u200bzword"]


def test_highlight_spans_match_whole_words_only():
    assert highlight_spans("we deploys daily", "deploy") == []
    assert highlighted("deploy deploys", "deploy") == ["deploy"]


def test_highlight_spans_substring_mode():
    assert highlighted("we deploys daily", "deploy", substring=True) == ["deploys"]
    assert highlighted("the catalogue", "CAT", substring=True) == ["catalogue"]


def test_highlight_spans_with_term_list():
    assert highlighted("alpha beta gamma", ["beta", "gamma"]) == ["beta", "gamma"]


def test_highlight_spans_of_digits_and_cjk():
    assert highlighted("Booked: Friday, 09:40.", "40 09") == ["09", "40"]
    assert highlighted("東京タワー 東京", "東京") == ["東京"]
    assert highlighted("한국어 텍스트", "텍스트") == ["텍스트"]


def test_highlight_spans_of_compatibility_characters_follow_terms():
    # "3½" folds to "31⁄2": its terms are "31" and "2", both ending or starting in "½".
    assert terms("3½") == ["31", "2"]
    assert highlighted("3½", "31") == ["3½"]
    assert highlighted("3½", "2") == ["½"]


def test_highlight_spans_without_terms():
    assert highlight_spans("anything", "") == []
    assert highlight_spans("anything", "!!!") == []
    assert highlight_spans(None, "x") == []


def test_every_term_of_a_text_is_highlighted():
    text = "Ünïcode İzmir 東京 ß ﬁ 3½ x℅ ŉ ǅ ①"
    for term in terms(text):
        assert highlight_spans(text, [term]), term
