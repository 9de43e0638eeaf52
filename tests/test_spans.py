"""Why a message matched: ``match_spans`` (the one highlight rule, on the indexed prefix
only, at the cost of that prefix) and ``snippet``."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_transcripts import snippet
from deuz_transcripts.highlight import printable
from deuz_transcripts.spans import highlight_spans, indexed_prefix, match_spans, snippet_with_spans
from deuz_transcripts.text import (
    MAX_INDEXED_BYTES,
    fold,
    fold_capped,
    message_terms,
    query_terms,
)
from tests.span_work import count_span_work
from tests.strategies import tricky_words, unicode_text

EXAMPLES = int(os.environ.get("DEUZ_FUZZ_EXAMPLES", "40"))
TEXT_FUZZ = settings(max_examples=EXAMPLES * 5, deadline=None)
# Every whitespace character Python splits on, so tokens are cut at each of them.
SPACES = st.sampled_from(list(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u3000"))
spaced_text = st.lists(
    st.one_of(tricky_words, unicode_text, SPACES, st.sampled_from(["deploy", "DÉPLOY", "x_y"])),
    max_size=12,
).map("".join)


@settings(TEXT_FUZZ, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spaced_text, st.lists(st.one_of(tricky_words, unicode_text), max_size=4), st.booleans())
def test_match_spans_equal_the_highlight_rule_on_any_text(span_match_path, text, words, substring):
    terms = query_terms(" ".join([*words, "deploy"]))
    expected = tuple(highlight_spans(text, terms, substring=substring))
    assert match_spans(text, terms, substring=substring) == expected
    assert match_spans(text, terms, substring=substring, enough=1) == expected[:1]


@TEXT_FUZZ
@given(st.lists(st.one_of(tricky_words, unicode_text, SPACES), max_size=12).map("".join))
def test_indexed_prefix_folds_to_the_indexed_text(text):
    limit = 24  # bytes: small enough to cut the drawn text
    prefix = indexed_prefix(text, limit)
    assert text.startswith(prefix)
    folded = fold(prefix).encode("utf-8")
    assert len(folded) <= limit
    assert fold_capped(text, limit).encode("utf-8").startswith(folded)
    if prefix != text:  # one more character would not fit
        assert len(fold(text[: len(prefix) + 1]).encode("utf-8")) > limit


def test_spans_stop_at_the_indexed_prefix():
    head = "a " * (MAX_INDEXED_BYTES // 2 - 2)  # 262,140 bytes: "depl" fits, "oy" does not
    text = head + "deploy deploy"
    assert match_spans(text, ["deploy"]) == ()  # the index holds "depl", as message_terms
    assert match_spans(text, ["depl"]) == ((len(head), len(head) + 4),)
    assert "depl" in message_terms({"role": "user", "content": text})
    cyrillic = "ж " * (MAX_INDEXED_BYTES // 3) + "deploy"  # 3 bytes each, folded too
    assert match_spans(cyrillic, ["deploy"]) == ()
    assert match_spans("é deploy", ["deploy"]) == ((2, 8),)


@pytest.mark.parametrize("unit", ["deploy failed at step error\n", "déploy échoué: ÉRROR error\n"])
def test_a_10_mb_message_costs_what_its_indexed_part_costs(unit):
    text = unit * (10_000_000 // len(unit))
    with pytest.MonkeyPatch.context() as patch:
        work = count_span_work(patch)
        spans = match_spans(text, ["error", "deploy"])
    prefix = len(indexed_prefix(text))
    assert spans and spans[-1][1] <= prefix
    assert work.characters == prefix  # the indexed part once, not the 10 MB


def test_snippet_centres_on_the_best_spans_in_plain_text():
    text = "intro " * 50 + "the deploy of <b>izmir</b> failed\n\tagain " + "outro " * 50
    spans = match_spans(text, ["deploy", "izmir"])
    shown = snippet(text, spans, width=60)
    assert shown.startswith("…") and shown.endswith("…")
    assert "deploy of <b>izmir</b> failed again" in shown  # whitespace runs are one space
    assert len(shown) <= 62


def test_snippet_picks_the_window_holding_most_spans():
    text = "deploy " + "x " * 200 + "deploy izmir deploy " + "y " * 200
    spans = match_spans(text, ["deploy", "izmir"])
    assert "deploy izmir deploy" in snippet(text, spans, width=40)


def test_snippet_without_spans_is_the_start_and_never_unencodable():
    assert snippet("short \ud800 text", []) == "short \ufffd text"
    assert snippet("word " * 100, [], width=20).endswith("…")
    assert not snippet("word " * 100, [], width=20).startswith("…")
    assert snippet("", [(0, 3)]) == ""
    snippet("a\ud800b " * 100, [(0, 3)], width=10).encode("utf-8")  # no UnicodeEncodeError
    with pytest.raises(ValueError):
        snippet("text", [], width=0)


def test_snippet_ignores_spans_outside_the_text():
    assert snippet("deploy now", [(5, 99), (-1, 2)], width=50) == "deploy now"


@TEXT_FUZZ
@given(spaced_text, st.integers(min_value=1, max_value=40))
def test_snippet_spans_mark_the_matched_words_inside_the_snippet(text, width):
    spans = match_spans(text, query_terms("deploy x_y"))
    shown, inside = snippet_with_spans(text, spans, width=width)
    assert shown == snippet(text, spans, width=width)
    assert len(inside) <= len(spans)
    for a, b in inside:  # each marked piece is part of a matched word, never a space
        assert 0 <= a < b <= len(shown)
        piece = shown[a:b]
        assert piece.strip() == piece
        assert any(piece in printable(text[low:high]) for low, high in spans)


def test_snippet_spans_follow_collapsed_whitespace_and_the_ellipsis():
    text = "intro " * 50 + "the  deploy\n\tof izmir " + "outro " * 50
    spans = match_spans(text, ["deploy", "izmir"])
    shown, inside = snippet_with_spans(text, spans, width=40)
    assert [shown[a:b] for a, b in inside] == ["deploy", "izmir"]
    assert shown.startswith("…")
    assert snippet_with_spans("", [(0, 1)]) == ("", ())
