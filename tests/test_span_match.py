"""``match_spans`` (span_match) against the straightforward rule: ``highlight_spans`` on the
indexed prefix, character by character, and a prefix cut by folding the text itself."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_transcripts import span_match
from deuz_transcripts.span_match import indexed_prefix, match_spans
from deuz_transcripts.span_rule import highlight_spans
from deuz_transcripts.text import MAX_INDEXED_BYTES, fold, query_terms, use_cjk_bigrams

EXAMPLES = int(os.environ.get("DEUZ_FUZZ_EXAMPLES", "40"))
# the fixtures set process state (the term rule, a chunk size) that every example shares
FUZZ = settings(
    max_examples=EXAMPLES * 5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def reference_prefix(text: str, limit: int = MAX_INDEXED_BYTES) -> str:
    """The longest prefix whose fold fits ``limit`` UTF-8 bytes, by folding prefixes."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if len(fold(text[:middle]).encode("utf-8")) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def reference_spans(text: str, terms: list[str], substring: bool) -> tuple[tuple[int, int], ...]:
    return tuple(highlight_spans(reference_prefix(text), terms, substring=substring))


@pytest.fixture(params=[False, True], ids=["words", "cjk-bigrams"])
def bigrams(request: pytest.FixtureRequest) -> Iterator[bool]:
    use_cjk_bigrams(request.param)
    try:
        yield request.param
    finally:
        use_cjk_bigrams(False)


# Characters whose fold changes length or vanishes, case pairs, look-alikes of ASCII
# letters, fullwidth forms, surrogates, CJK and Thai, separators and marks, kana and the
# voicing marks that (under bigrams) make one character with them.
TRICKY = list(
    "aeiorstnkKEROéèÉöÖüßẞﬁﬃİıΣσςΐ½²℡㎒ＥＲｒｏ東京日本語デプロイไทย한\u0301\u0308\u3099"
    "\u309a\u309b\u309c\uff9e\uff9fかｶハﾊ"
    "\u200b\u200d\u00ad\ufeff\ud800\udfff😀\u212a\u017f-_.:/=?'\u00a0\u3000\t"
)
PIECES = ["error", "ERROR", "e\u0301rror", "érror", "hören", "horen", "ho\u0308ren", "ﬁle", "file"]
word = st.text(st.sampled_from(TRICKY), min_size=1, max_size=8) | st.sampled_from(PIECES)
long_word = st.builds(lambda piece, n: piece * n, word, st.integers(50, 400))
any_word = st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=6)
texts = st.lists(
    st.one_of(word, word, any_word, long_word, st.sampled_from([" ", "\n", "  ", "-", "\u3000"])),
    max_size=30,
).map("".join)
queries = st.lists(st.one_of(word, any_word), min_size=1, max_size=4).map(" ".join)
# raw terms too: match_spans takes any strings (those holding no letter or digit match nothing)
raw_terms = st.lists(st.one_of(word, st.sampled_from(["", "a b", "x_y", "TEL", "tel"])), max_size=2)


@FUZZ
@given(texts, queries, raw_terms, st.booleans(), st.integers(0, 3))
def test_match_spans_equal_the_rule_on_mixed_text(
    bigrams, span_match_path, text, query, raw, substring, enough
):
    terms = [*query_terms(query), *raw]
    expected = reference_spans(text, terms, substring)
    assert match_spans(text, terms, substring=substring) == expected
    if enough:
        assert match_spans(text, terms, substring=substring, enough=enough) == expected[:enough]


@FUZZ
@given(texts, texts, st.booleans())
def test_terms_drawn_from_the_text_itself(bigrams, span_match_path, text, other, substring):
    terms = query_terms(text + " " + other)[:6]
    assert match_spans(text, terms, substring=substring) == reference_spans(text, terms, substring)


@FUZZ
@given(
    st.lists(st.one_of(word, any_word, st.sampled_from([" ", "\n"])), max_size=20).map("".join),
    st.integers(0, 80),
    st.sampled_from([64, 16, 1]),
)
def test_indexed_prefix_equals_folding_its_prefixes(monkeypatch_chunk, text, limit, chunk):
    monkeypatch_chunk(chunk)  # small chunks: the cut crosses every level of the search
    assert indexed_prefix(text, limit) == reference_prefix(text, limit)


@pytest.fixture
def monkeypatch_chunk(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def set_chunk(size: int) -> None:
        monkeypatch.setattr(span_match, "_PREFIX_CHUNK", size)

    return set_chunk


@pytest.mark.parametrize("cut", ["é", "ß", "東", "😀", "\u0301", "½", "\ufdfa", "İ"])
@pytest.mark.parametrize("shift", [0, 1, 2])
def test_texts_crossing_the_256_kib_cap_with_a_multibyte_character_at_the_cut(cut, shift):
    unit = "error hören kubelet " + cut + " "
    filler = unit * (MAX_INDEXED_BYTES // len(fold(unit).encode("utf-8")))
    text = "x" * shift + filler + (cut + "error ") * 40
    terms = query_terms("error hören " + cut)
    for substring in (False, True):
        expected = reference_spans(text, terms, substring)
        assert match_spans(text, terms, substring=substring) == expected
    assert indexed_prefix(text) == reference_prefix(text)


# Where bigrams change the rule: Thai, CJK symbols and Kana, Han, compatibility forms,
# half-width Kana, an astral Han block (elsewhere the bigram rule is the word rule).
BIGRAM_BLOCKS = [0x0E00, 0x3000, 0x4E00, 0x9800, 0xF800, 0xFF00, 0x1B000, 0x20000]


@pytest.mark.parametrize("span_match_path", ["where-a-term-may-be"], indirect=True)
def test_every_code_point_inside_words(bigrams, span_match_path):
    """Each code point glued inside ``error``, ``hören`` and ``xy``, and alone. One folding
    to a single character that is none of the terms' cannot make or break a match there,
    so only the others need the (slow) rule: the rest must add no span."""
    terms = ["error", "horen", "xy"]
    term_chars = set("".join(terms))
    step = 2048  # a batch's fold stays under the 256 KiB cap (asserted)
    for first in BIGRAM_BLOCKS if bigrams else range(0, 0x110000, step):
        pieces: list[str] = []
        expected: dict[bool, list[tuple[int, int]]] = {False: [], True: []}
        offset = 0
        for code in range(first, min(first + step, 0x110000)):
            char = chr(code)
            piece = f"err{char}or hö{char}ren x{char}y {char} "
            folded = fold(char)
            if len(folded) != 1 or folded in term_chars:
                for substring, found in expected.items():
                    spans = highlight_spans(piece, terms, substring=substring)
                    found.extend((offset + low, offset + high) for low, high in spans)
            pieces.append(piece)
            offset += len(piece)
        text = "".join(pieces)
        assert indexed_prefix(text) == text
        for substring, found in expected.items():
            assert match_spans(text, terms, substring=substring) == tuple(found), hex(first)


def test_a_mark_glues_a_word_and_a_ligature_splits_across_runs(span_match_path):
    assert match_spans("e\u0301rror", ["error"]) == ((0, 6),)
    assert match_spans("ﬁle ﬁ le", ["file"]) == ((0, 3),)
    assert match_spans("x-ERROR-é", ["error"]) == ((2, 7),)
    assert match_spans("hörenß", ["horenss"]) == ((0, 6),)
    assert match_spans("℡ tel", ["tel"]) == ((0, 1), (2, 5))  # one character, a whole word
    # "½" folds to "1⁄2": a word ending inside a fold leaves the mark after it to the next
    assert match_spans("3½\u0301", ["31", "2"]) == ((0, 2), (1, 3))
    assert match_spans("x3½\u0301 ß\u0301", ["x31", "2", "ss"]) == ((0, 3), (2, 4), (5, 7))
    assert match_spans("error", ["", "x"], substring=True) == ((0, 5),)  # "" is in every word
    assert match_spans("error", ["", "x"]) == ()


@FUZZ
@given(texts, queries, st.booleans(), st.integers(1, 5), st.sampled_from([1, 2, 7, 64]))
def test_the_first_spans_read_piece_by_piece_are_the_rules_first(
    bigrams, span_match_path, monkeypatch, text, query, substring, enough, piece
):
    """``enough`` reads the text in pieces cut at ASCII whitespace (tiny pieces here: every
    cut is crossed) and gives exactly the rule's first spans."""
    monkeypatch.setattr(span_match, "_FIRST_PIECE", piece)
    terms = query_terms(query)
    expected = reference_spans(text, terms, substring)[:enough]
    assert match_spans(text, terms, substring=substring, enough=enough) == expected


@pytest.mark.parametrize("substring", [False, True])
def test_the_first_spans_stop_at_the_indexed_prefix(substring):
    """Past 256 KiB of folded text nothing is a span, however many are asked for; a word
    cut by the limit is dropped as the index drops it."""
    text = "ß" * 131_060 + " izmir " + "izmir " * 10  # 4 of them in the indexed 256 KiB
    everything = match_spans(text, ["izmir"], substring=substring)
    assert everything == reference_spans(text, ["izmir"], substring)
    assert len(everything) == 4
    assert match_spans(text, ["izmir"], substring=substring, enough=50) == everything
    dense = "izmir " * 50_000
    assert match_spans(dense, ["izmir"], substring=substring, enough=10**6) == match_spans(
        dense, ["izmir"], substring=substring
    )
