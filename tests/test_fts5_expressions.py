"""What an FTS5 row holds, tested without a database: the mask the essential-terms plan
reads from a row's ``search_text`` is the SQL word test's, term for term."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from deuz_transcripts.backends.sqlite.fts5_expressions import HeldTerms
from deuz_transcripts.text import text_terms

WORDS = st.sampled_from(
    ["a", "ab", "b", "ba", "abc", "é", "ée", "東京", "1", "12", "ａ", "a.b", "a+", "(", "|", "\\"]
)


def sql_word_test(search_text: str | None, terms: list[str]) -> int:
    """``word_condition``: ``instr(' ' || search_text || ' ', ' term ') > 0`` per term."""
    padded = f" {search_text or ''} "
    return sum(1 << bit for bit, term in enumerate(terms) if f" {term} " in padded)


@given(
    row=st.lists(WORDS, unique=True).map(" ".join) | st.none(),
    terms=st.lists(WORDS, min_size=1, max_size=8),
)
def test_held_terms_are_the_sql_word_test(row, terms):
    """Whole words only (``a`` is not in ``ab``), a repeated query term gets each of its
    bits, a term is never read as a pattern (``a.b``, ``(``) and a row without search
    text holds nothing."""
    assert HeldTerms(terms).mask(row) == sql_word_test(row, terms)


def test_held_terms_on_the_stored_text_of_a_message():
    text = " ".join(text_terms("Deploy to web-3.internal failed: tokyo and Tokyo again"))
    terms = ["tokyo", "web", "internal", "tok", "deploy", "tokyo"]
    assert HeldTerms(terms).mask(text) == 0b110111
