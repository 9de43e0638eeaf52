"""``text_terms`` (the fast path of every write) gives exactly the terms of the folding rule.

The rule is ``dict.fromkeys(findall(fold_capped(text)))``. The fast path maps each
character through a codec table (``fold_codes``), which is right only because folding
works on each character alone (proven below on every code point); text with a character
the table has no room for is mapped by ``str.translate`` through a table of every character
seen. These tests hold both paths to the rule on every code point, at the 256 KiB cut, and
on random text.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deuz_transcripts import fold_codes, text
from deuz_transcripts.fold_codes import FoldCodes
from deuz_transcripts.text import (
    MAX_INDEXED_BYTES,
    cut_utf8,
    fold,
    fold_capped,
    text_terms,
    use_cjk_bigrams,
)
from tests.test_cjk_bigrams import bigram_rule

TERM = re.compile(r"[^\W_]+")
CODE_POINTS = [chr(c) for c in range(sys.maxunicode + 1)]


DROPPED = frozenset({"Mn", "Mc", "Me", "Cf", "Cs"})


def rule(value: str) -> list[str]:
    return list(dict.fromkeys(TERM.findall(fold_capped(value))))


def spaced(value: str) -> str:
    """``fold(value)`` with each non-term character a space: what ``plain`` must give,
    character for character (``span_match`` maps offsets through it)."""
    return "".join(char if TERM.fullmatch(char) else " " for char in fold(value))


def reference_fold(value: str) -> str:
    """The folding rule, restated: NFKD, case folding, NFKD, marks/format/surrogates dropped."""
    nfkd = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", value).casefold())
    return "".join(c for c in nfkd if unicodedata.category(c) not in DROPPED)


@contextmanager
def fresh_codes() -> Iterator[FoldCodes]:
    """A codec table that knows only ASCII, in place of the process's."""
    kept = text._FOLD_CODES
    text._FOLD_CODES = FoldCodes(text._fold_pieces, text._codable)
    try:
        yield text._FOLD_CODES
    finally:
        text._FOLD_CODES = kept


@pytest.fixture
def codes_only(monkeypatch):
    """Fails a test whose text leaves the codec table for ``str.translate``."""

    def no_translation(self: FoldCodes, value: str, *, sized: bool) -> str:
        raise AssertionError(f"took str.translate: {value[:40]!r}")

    monkeypatch.setattr(FoldCodes, "translated", no_translation)


@contextmanager
def translation_only() -> Iterator[FoldCodes]:
    """A table that never gives a code: every non-ASCII text takes ``str.translate``."""
    with fresh_codes() as codes:
        codes._separate = lambda value, sized: (codes.translated(value, sized=sized), False)  # type: ignore[method-assign]
        yield codes


def translated_terms(value: str) -> list[str]:
    with translation_only():
        return text_terms(value)


def codable_chunks() -> Iterator[list[str]]:
    """Every code point that can get a code (the BMP but U+FFFE and the large scripts), in
    chunks that fit one fresh table: at most 100 characters, at most 31 whose fold is not
    one character."""
    chunk: list[str] = []
    expanding = 0
    for code in range(0x10000):
        char = chr(code)
        if char == "\ufffe" or code < 128 or not text._codable(char):
            continue
        grows = len(fold(char)) != 1
        if len(chunk) == 100 or expanding + grows > 31:
            yield chunk
            chunk, expanding = [], 0
        chunk.append(char)
        expanding += grows
    yield chunk


# ---------------------------------------------------------------- folding, per character


def test_fold_is_the_reference_rule_on_every_code_point():
    for start in range(0, len(CODE_POINTS), 512):
        chunk = CODE_POINTS[start : start + 512]
        assert [fold(c) for c in chunk] == [reference_fold(c) for c in chunk]
        assert fold("".join(chunk)) == reference_fold("".join(chunk)), f"U+{start:04X}"


def test_fold_works_on_each_character_alone():
    """Why the codec table is the rule: NFKD decomposes each character alone and then only
    reorders non-starters (combining class > 0); case folding works per character. Every
    non-starter any step produces is dropped in the end, but U+0345, whose case fold is
    the starter "ι" (and another U+0345 folds the same): so reordering never changes what
    is kept, and ``fold(text)`` is the concatenation of each character's fold."""
    kept_non_starters = set()
    for char in CODE_POINTS:
        first = unicodedata.normalize("NFKD", char)
        folded = first.casefold()
        for step in (first, folded, unicodedata.normalize("NFKD", folded)):
            for piece in step:
                if unicodedata.combining(piece) and fold(piece):
                    kept_non_starters.add(piece)
    assert kept_non_starters == {"\u0345"}
    assert fold("\u0345") == "ι" and unicodedata.combining("ι") == 0
    for start in range(0, len(CODE_POINTS), 512):
        chunk = CODE_POINTS[start : start + 512]
        for value in ("".join(chunk), "\u0345".join(chunk), "a\u0301".join(chunk)):
            assert fold(value) == "".join(map(fold, value)), f"U+{start:04X}"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(st.text(), st.sampled_from(["\u0345", "\u0301", "\u0323", "ᾳ", "e"])), max_size=40
    )
)
def test_fold_of_random_text_is_each_characters_fold(pieces):
    value = "".join(pieces)
    assert fold(value) == "".join(map(fold, value)) == reference_fold(value)


# ---------------------------------------------------------------- the codec table


@pytest.mark.usefixtures("codes_only")
def test_every_code_point_through_the_codec_table():
    for chunk in codable_chunks():
        with fresh_codes():
            for value in (
                "".join(chunk),
                " ".join(chunk),
                " ".join(f"a{c}b" for c in chunk),
                " ".join(f"{c}x {c}" for c in chunk),
                "ä".join(chunk),
            ):
                assert text_terms(value) == rule(value), f"code points from U+{ord(chunk[0]):04X}"


def test_every_code_point_without_a_code(monkeypatch):
    """Outside the BMP (and U+FFFE) no character gets a code: one that folds to no term
    becomes spaces of its folded size through the codec's error handler; a text with one
    that folds to a term takes ``str.translate``."""
    codeless = [chr(c) for c in range(0x10000, sys.maxunicode + 1)] + ["\ufffe"]
    termless = [c for c in codeless if not TERM.search(fold(c))]
    with_terms = [c for c in codeless if TERM.search(fold(c))]
    assert len(termless) > 800_000 and len(with_terms) > 80_000
    with fresh_codes() as codes:
        for start in range(0, len(termless), 4096):
            chunk = termless[start : start + 4096]
            for value in ("".join(chunk), "x".join(chunk), " ".join(f"é{c}y" for c in chunk)):
                sized = codes.sized(value)
                assert len(sized.encode()) == len(fold(value).encode())
                assert codes.plain(value) == spaced(value)  # one space per folded character
                assert sized.split() == TERM.findall(fold(value))
                assert text_terms(value) == rule(value)
        assert len(codes) == 128 + 1  # é
        for char in with_terms[::97]:
            assert codes.plain(f"a{char}") == spaced(f"a{char}")
            assert text_terms(f"é {char}b") == rule(f"é {char}b")
        assert len(codes) <= 128 + 1  # nothing learnt (they miss: it may have started again)


@pytest.mark.usefixtures("codes_only")
def test_plain_is_aligned_exactly_where_every_character_folds_to_one():
    """``plain_aligned`` says the offsets need no map back only when none is needed: on
    every code point that can get a code, alone and in a whole chunk."""
    for chunk in codable_chunks():
        with fresh_codes() as codes:
            whole = "x".join(chunk)
            assert codes.plain_aligned(whole) == (
                spaced(whole),
                all(len(fold(char)) == 1 for char in chunk),
            )
            for char in chunk:
                separated, aligned = codes.plain_aligned(f"a{char}b")
                assert separated == spaced(f"a{char}b")
                assert aligned == (len(fold(char)) == 1), f"U+{ord(char):04X}"


def test_plain_is_not_aligned_once_a_codeless_character_folds_to_other_than_one():
    """Characters without a code are not in the codes: once one folding to nothing or to
    more than one character was seen, no text with such a character claims alignment,
    and text through ``str.translate`` never does."""
    with fresh_codes() as codes:
        assert codes.plain_aligned("x\U0001f600y é") == ("x y e", True)  # a symbol: a space
        assert codes.plain_aligned("x\U0001d167y") == ("xy", False)  # a mark: dropped
        assert codes.plain_aligned("x\U0001f600y") == ("x y", False)
        assert codes.plain_aligned("ab") == ("ab", False)
    with fresh_codes() as codes:
        assert codes.plain_aligned("\U00020000 x") == ("\U00020000 x", False)  # translated
        assert codes.plain_aligned("é x") == ("e x", True)


def test_characters_without_a_code_take_str_translate():
    with fresh_codes() as codes:
        assert len(codes) == 128
        for value in ("\U00020000 x ä", "".join(map(chr, range(0x4E00, 0x4E81)))):
            assert codes.plain(value).split() == TERM.findall(fold(value))
            assert text_terms(value) == rule(value)
        assert len(codes) == 128  # nothing learnt: ä came with a codeless term character
        for value in ("emoji \U0001f600 ä", "\ufffe x", "tag\U000e0041s"):
            assert codes.plain(value).split() == TERM.findall(fold(value))
            assert text_terms(value) == rule(value)
        assert codes.plain("Ünï\ud800code") == "unicode"  # surrogates get a code: they drop
        assert len(codes) == 128 + 3 + 1  # Ü, ï, the surrogate, and ä


def spy_translations(codes: FoldCodes) -> list[str]:
    """The texts ``codes`` hands to ``str.translate`` from now on."""
    calls: list[str] = []
    translated = codes.translated

    def spy(value: str, *, sized: bool) -> str:
        calls.append(value)
        return translated(value, sized=sized)

    codes.translated = spy  # type: ignore[method-assign]
    return calls


def test_a_table_that_keeps_missing_starts_again(monkeypatch):
    monkeypatch.setattr(fold_codes, "RESET_AFTER_MISSES", 3)
    with fresh_codes() as codes:
        translated = spy_translations(codes)
        syllabics = "".join(map(chr, range(0x1401, 0x1471)))
        assert codes.plain(syllabics) == syllabics and len(codes) == 128 + 112
        cyrillic = "".join(map(chr, range(0x430, 0x450)))  # 32 more do not fit
        assert codes.plain(cyrillic) == fold(cyrillic)
        assert codes.plain(cyrillic) == fold(cyrillic)
        assert translated == [cyrillic, cyrillic] and len(codes) == 128 + 112
        assert codes.plain(cyrillic) == fold(cyrillic)  # the third miss: ASCII and these 32
        assert len(codes) == 128 + 32 and len(translated) == 2
        assert text_terms("一 " + cyrillic) == rule("一 " + cyrillic)


def test_a_full_table_keeps_its_codes_and_the_rule():
    with fresh_codes() as codes:
        greek = "".join(map(chr, range(0x3B1, 0x3CA)))  # 25 letters
        latin = "".join(map(chr, range(0xC0, 0x100)))  # 64, ß and others expand
        cyrillic = "".join(map(chr, range(0x430, 0x450)))  # 32
        for value in (greek, latin, cyrillic):
            assert codes.plain(value).split() == TERM.findall(fold(value))
        assert len(codes) == 128 + 25 + 64 + 32
        translated = spy_translations(codes)
        armenian = "".join(map(chr, range(0x561, 0x587)))  # 38 more do not fit
        assert codes.plain(armenian) == fold(armenian)
        assert translated == [armenian]
        assert len(codes) == 128 + 25 + 64 + 32
        for value in (greek + armenian, latin + " " + cyrillic, armenian):
            assert text_terms(value) == rule(value)


def test_threads_learning_at_once_keep_the_rule():
    """Learners take a lock and swap the whole table; readers use one snapshot of it."""
    values = [" ".join(f"{chr(c)}x" for c in range(b, b + 30)) for b in range(0xC0, 0x6C0, 30)]
    with fresh_codes() as codes, ThreadPoolExecutor(8) as pool:
        found = list(pool.map(text_terms, values * 4))
        assert len(codes) == len(set(codes._chars)) <= 256
    assert found == [rule(value) for value in values * 4]


def test_a_character_that_found_no_room_is_not_learnt_again(monkeypatch):
    """Until the table starts again, a text whose first character without a code found
    no room before goes straight to ``str.translate`` (no set of its characters built)."""
    with fresh_codes() as codes:
        codes.plain("".join(map(chr, range(0x1401, 0x1471))))  # 112 codes
        learnt: list[str] = []
        learn_all = codes._learn_all
        monkeypatch.setattr(
            codes, "_learn_all", lambda value: learnt.append(value) or learn_all(value)
        )
        cyrillic = "".join(map(chr, range(0x430, 0x450)))  # 32 more do not fit
        for value in (cyrillic, cyrillic[:5], cyrillic[:1] + " é"):
            assert codes.plain(value) == fold(value)
        assert learnt == [cyrillic]  # "а" found no room: the next two texts do not try
        assert codes.plain("é ü") == "e u" and learnt[-1] == "é ü"  # others still learn
        assert len(codes) == 128 + 112 + 2


def test_large_scripts_never_get_a_code_nor_count_as_misses():
    """Han, Kana and Hangul texts take ``str.translate`` at once: a few of them would fill
    the table and send every other text there too."""
    japanese, korean = "東京都の天気は晴れ、カタカナ", "한국어 텍스트"
    with fresh_codes() as codes:
        translated = spy_translations(codes)
        for value in (japanese, korean, "café " + japanese, "tschüß " + korean):
            assert text_terms(value) == rule(value)
        assert translated == [japanese, korean, "café " + japanese, "tschüß " + korean]
        assert sorted(codes._chars[128:]) == ["ß", "é", "ü", "、"] and codes._misses == 0
        assert not any(map(text._codable, "東カ한\u3131\ua000"))
        assert all(map(text._codable, "éşαжกא"))


def test_too_many_expanding_characters_take_str_translate():
    """31 placeholders: a fold of several characters, not all ASCII, takes one each;
    ASCII folds (``ß``, marks that drop) are expanded in the codes and need none."""
    with fresh_codes() as codes:
        marks = "".join(map(chr, range(0x300, 0x330)))  # 48 marks, each folds to nothing
        value = "".join(f"e{m}" for m in marks) + " ß ﬁ"
        assert codes.plain(value) == "e" * 48 + " ss fi"
        grown = [c for c in map(chr, range(0x370, 0x2000)) if len(fold(c)) > 1][:60]
        grown = [c for c in grown if not fold(c).isascii()][:40]
        assert len(grown) == 40
        value = " ".join(grown)
        translated = spy_translations(codes)
        assert codes.plain(value).split() == TERM.findall(fold(value))
        assert text_terms(value) == rule(value)
        assert translated == [value, value]
    with fresh_codes() as codes:
        translated = spy_translations(codes)
        assert codes.plain(value[:61]).split() == TERM.findall(fold(value[:61]))
        assert not translated  # 31 of them fit


def test_sized_separators_keep_the_folded_size():
    with fresh_codes() as codes:
        value = "a—b\u00a0c\u3000½ ﷺ e\u0301 ß\x00\u2028"
        for sized in (codes.sized(value), codes.translated(value, sized=True)):
            assert len(sized.encode()) == len(fold(value).encode())
            assert sized.split() == TERM.findall(fold(value))
        assert len(sized.encode()) == len(fold(value).encode())
        assert sized.split() == TERM.findall(fold(value))


CUT_CHARS = ["é", "€", "ﷺ", "\u0301", "\u3000", "—", "½", "ß", "\U0001f600", "한", "ä\u0308"]


@pytest.mark.parametrize("char", CUT_CHARS)
def test_the_cut_falls_inside_every_kind_of_character(char):
    """Folded text over 256 KiB is cut at a byte: through a term, a separator, an expansion."""
    for extra in range(0, 12):
        value = "x" * (MAX_INDEXED_BYTES - 40 + extra) + (char + "y") * 20
        assert text_terms(value) == rule(value), (char, extra)
        wide = "é" * ((MAX_INDEXED_BYTES - 60) // 2) + "z" * extra + (char + "y") * 40
        assert text_terms(wide) == rule(wide), (char, extra)


MIXED = st.lists(
    st.one_of(
        st.text(),
        st.sampled_from(
            [
                *(" ", "\u3000", "\u200b", "'", "é", "e\u0301\u0323", "\u0345", "İ", "ß"),
                *("\ufdfa", "\ud800", "\udfff", "東京都", "ｶﾀｶﾅ", "ภาษา", "한국어", "\U0001f600"),
                *("½", "ﬁ"),
            ]
        ),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(MIXED, st.booleans())
def test_random_text_follows_the_rule_with_a_fresh_or_a_used_table(pieces, fresh):
    value = "".join(pieces)
    if fresh:
        with fresh_codes():
            assert text_terms(value) == rule(value)
            assert text.separated_fold_aligned(value)[0] == spaced(value)
    else:
        assert text_terms(value) == rule(value)
        assert text.separated_fold_aligned(value)[0] == spaced(value)
    assert translated_terms(value) == rule(value)


@settings(max_examples=150, deadline=None)
@given(MIXED)
def test_random_text_follows_the_bigram_rule(pieces):
    value = "".join(pieces)
    use_cjk_bigrams(True)
    try:
        with fresh_codes():
            assert text_terms(value) == bigram_rule(value)
        assert translated_terms(value) == bigram_rule(value)
    finally:
        use_cjk_bigrams(False)


@settings(max_examples=40, deadline=None)
@given(MIXED, st.integers(min_value=0, max_value=600), st.sampled_from(["x", "é", "€", "ﷺ"]))
def test_random_text_at_the_cut_follows_the_rule(pieces, slack, filler):
    """Text over the never-cut size (sized separators), its fold ending near 256 KiB."""
    tail = "".join(pieces)
    size = len(fold(filler).encode())
    value = filler * ((MAX_INDEXED_BYTES - slack) // size) + tail
    assert text_terms(value) == rule(value)
    assert cut_utf8(fold(value)) == fold_capped(value)


def test_every_code_point_alone_in_words_and_between_words():
    for start in range(0, len(CODE_POINTS), 512):
        chunk = CODE_POINTS[start : start + 512]
        for value in (
            "".join(chunk),
            " ".join(chunk),
            " ".join(f"a{c}b" for c in chunk),
            " ".join(f"{c}x {c}" for c in chunk),
            "ä".join(chunk),  # non-ASCII, so never the lower() path
        ):
            assert text_terms(value) == rule(value), f"code points from U+{start:04X}"


def test_no_character_folds_longer_than_the_growth_bound():
    growth = max(
        len(fold(c).encode("utf-8")) / len(c.encode("utf-8"))
        for c in CODE_POINTS
        if not 0xD800 <= ord(c) <= 0xDFFF
    )
    assert growth <= text.MAX_FOLD_GROWTH


def test_the_cut_at_256_kib_is_the_rules():
    word = "ﷺé"  # grows 11x when folded
    for repeat in (2_000, 2_500, 7_000, 40_000):
        value = " ".join(f"{word}{n}" for n in range(repeat))
        assert text_terms(value) == rule(value)
    near = "ä" * (MAX_INDEXED_BYTES // 2 - 3) + " tail"
    assert text_terms(near) == rule(near)


def test_ascii_text_at_the_cut_is_the_rules():
    """ASCII text is cut by a slice (one byte per character): a word across the cut is cut."""
    for shift in range(-2, 3):
        head = "Ab9-" * ((MAX_INDEXED_BYTES + shift) // 4) + "x" * ((MAX_INDEXED_BYTES + shift) % 4)
        for value in (head + "Tail END", head + " tail", "x" * (MAX_INDEXED_BYTES + shift)):
            assert text_terms(value) == rule(value), shift


def test_text_near_the_cut_whatever_its_whitespace():
    """Long text is cut only when its folded size passes 256 KiB (the folded size, not the text's)."""
    for separator in (" ", "\u2028", "\u3000\n", "\x85\t"):
        for words in (20_000, 21_844, 21_846, 26_000, 60_000):
            value = separator.join(f"ä{n % 97}ö" for n in range(words))
            assert text_terms(value) == rule(value), (repr(separator), words)


def test_the_translation_tables_stay_bounded_and_correct(monkeypatch):
    monkeypatch.setattr(fold_codes, "TRANSLATED_CHARACTERS", 8)
    value = " ".join(f"wörd{n} ﬁ don't x{n} 東京{n}" for n in range(100))
    with translation_only() as codes:
        assert text_terms(value) == rule(value)
        plain, sized = codes._translations
        assert 0 < len(plain) <= 8 and not sized  # emptied once full, then filled again
        assert codes.translated("ünï", sized=True) == "uni"
        assert text_terms(value + "ä" * (MAX_INDEXED_BYTES // 2)) == rule(
            value + "ä" * (MAX_INDEXED_BYTES // 2)
        )
        assert 0 < len(sized) <= 8


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(), st.sampled_from([" ", "\u3000", "\u200b", "'", "é", "İ", "ß", "\ufdfa"])
        ),
        max_size=60,
    )
)
def test_random_text_follows_the_rule(pieces):
    value = "".join(pieces)
    assert text_terms(value) == rule(value)


def test_ascii_text_takes_the_ascii_class_with_the_same_terms():
    every = "".join(chr(c) for c in range(128))
    for value in (every, " ".join(every), "x".join(every), every.upper() + "Hello_World 09:40"):
        assert value.isascii()
        assert text_terms(value) == rule(value)
