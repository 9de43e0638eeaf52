"""``text_terms`` (the fast path of every write) gives exactly the terms of the folding rule.

The rule is ``dict.fromkeys(findall(fold_capped(text)))``; the fast path lowers ASCII text
and folds other short text word by word through a cache. These tests hold it to the rule
on every code point, at the 256 KiB cut, and on random text.
"""

from __future__ import annotations

import re
import sys
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from deuz_transcripts import text
from deuz_transcripts.text import MAX_INDEXED_BYTES, fold, fold_capped, text_terms

TERM = re.compile(r"[^\W_]+")
CODE_POINTS = [chr(c) for c in range(sys.maxunicode + 1)]


def rule(value: str) -> list[str]:
    return list(dict.fromkeys(TERM.findall(fold_capped(value))))


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


def test_whitespace_folds_to_separators_that_start_a_sequence():
    """What lets a text be folded word by word: no whitespace vanishes, joins words,
    carries a letter or digit, or moves marks across it."""
    for char in CODE_POINTS:
        if char.isspace():
            folded = fold(char)
            assert folded and not TERM.search(folded), f"U+{ord(char):04X}"
            assert len(folded.encode("utf-8")) <= text._MAX_FOLDED_SPACE_BYTES
            assert unicodedata.combining(char) == 0


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
    """Long text is cut only when its folded size passes 256 KiB, counted word by word."""
    for separator in (" ", "\u2028", "\u3000\n", "\x85\t"):
        for words in (20_000, 21_844, 21_846, 26_000, 60_000):
            value = separator.join(f"ä{n % 97}ö" for n in range(words))
            assert text_terms(value) == rule(value), (repr(separator), words)


def test_the_word_cache_stays_bounded_and_correct(monkeypatch):
    monkeypatch.setattr(text, "_WORD_CACHE_SIZE", 8)
    value = " ".join(f"wörd{n} don't x{n}" for n in range(100))
    assert text_terms(value) == rule(value)
    # emptied before a text once full, never while a text is read
    assert len(text._WORD_TERMS) <= 8 + len(set(value.split()))
    assert text_terms("ünïcode") == ["unicode"]
    assert len(text._WORD_TERMS) == 1
    assert len(text._WORD_BYTES) == 1
    assert text_terms(value) == rule(value)


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
