"""Hypothesis properties of folding, matching, scoping and highlighting.

The text rules are also fuzzed with all of Unicode and any message shape (see
``tests/strategies.py``): they never fail, and what they return is well formed.
``DEUZ_FUZZ_EXAMPLES`` raises the example count of those for a long local run.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex
from deuz_transcripts.spans import highlight_spans
from deuz_transcripts.text import (
    MAX_QUERY_TERMS,
    fold,
    indexed_text,
    message_terms,
    query_terms,
    terms,
)
from tests.strategies import messages, tricky_words, unicode_text

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
PROPERTY = settings(max_examples=150, deadline=None)
SLOW_PROPERTY = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
EXAMPLES = int(os.environ.get("DEUZ_FUZZ_EXAMPLES", "40"))
TEXT_FUZZ = settings(max_examples=EXAMPLES * 5, deadline=None)

# Text rich in the characters folding cares about, plus anything Unicode has.
_interesting = st.sampled_from(
    list("aZ09 _-.:İıIiςσΣßẞﬁＡ東京한😀\u0301\u0323\u200b\u200d\u00ad½℅ŉǅ①\u0345ᾳ\t\n")
)
texts = st.text(st.one_of(_interesting, st.characters()), max_size=60)
words = st.text(st.sampled_from(list("abcdeİıßéüж東")), min_size=1, max_size=6)
scopes = st.sampled_from([{"userId": "ada"}, {"userId": "bob"}, {"userId": "ada", "agentId": "x"}])


@PROPERTY
@given(texts)
def test_fold_is_idempotent(text):
    assert fold(fold(text)) == fold(text)


@PROPERTY
@given(texts, texts)
def test_fold_distributes_over_concatenation(left, right):
    assert fold(left + right) == fold(left) + fold(right)


@PROPERTY
@given(texts)
def test_terms_are_folded_and_fold_stable(text):
    for term in terms(text):
        assert fold(term) == term
        assert terms(term) == [term]


@PROPERTY
@given(texts)
def test_query_terms_are_the_first_distinct_terms(text):
    assert query_terms(text) == terms(text)[:32]


@SLOW_PROPERTY
@given(texts, st.data())
def test_a_message_matches_a_query_made_of_its_own_words(text, data):
    index = InMemoryTranscriptIndex()
    index.index(
        ChatRecord(
            chat_id="c1",
            scope={"userId": "ada"},
            messages=[{"role": "user", "content": "unrelated"}, {"role": "user", "content": text}],
            updated_at=T0,
        )
    )
    own = message_terms({"role": "user", "content": text})
    if not own:
        return
    picked = data.draw(st.lists(st.sampled_from(own), min_size=1, max_size=5))
    query = " ".join(word.upper() if i % 2 else word for i, word in enumerate(picked))
    hits = index.search({"userId": "ada"}, query)
    assert (hits[0].chat_id, hits[0].index) in {("c1", 1), ("c1", 0)}
    assert ("c1", 1) in {(hit.chat_id, hit.index) for hit in hits}


@SLOW_PROPERTY
@given(
    st.lists(st.tuples(scopes, st.lists(words, min_size=1, max_size=4)), min_size=1, max_size=8),
    scopes,
    st.lists(words, min_size=1, max_size=4),
)
def test_search_never_returns_another_scopes_message(chats, scope, query_words):
    index = InMemoryTranscriptIndex()
    chat_scopes = {}
    for number, (chat_scope, chat_words) in enumerate(chats):
        chat_id = f"c{number}"
        chat_scopes[chat_id] = chat_scope
        index.index(
            ChatRecord(
                chat_id=chat_id,
                scope=chat_scope,
                messages=[{"role": "user", "content": word} for word in chat_words],
                updated_at=T0 + timedelta(seconds=number),
            )
        )
    hits = index.search(scope, " ".join(query_words), limit=100, around=1)
    for hit in hits:
        assert all(chat_scopes[hit.chat_id].get(k) == v for k, v in scope.items())
        assert all(m.chat_id == hit.chat_id for m in hit.around)
        assert 0 < hit.score <= 1
    if hits:
        assert hits[0].score == 1.0
    # Every matching message of the scope is found (limit is large enough).
    wanted = set(query_terms(" ".join(query_words)))
    expected = {
        (chat_id, i)
        for chat_id, (chat_scope, chat_words) in zip(chat_scopes, chats, strict=True)
        if all(chat_scope.get(k) == v for k, v in scope.items())
        for i, word in enumerate(chat_words)
        if wanted & set(terms(word))
    }
    assert {(hit.chat_id, hit.index) for hit in hits} == expected


@PROPERTY
@given(texts)
def test_highlight_spans_of_own_words_are_non_empty(text):
    for term in terms(text):
        spans = highlight_spans(text, [term])
        assert spans, term
        for start, end in spans:
            assert 0 <= start < end <= len(text)
            assert term in terms(text[start:end])


@PROPERTY
@given(texts)
def test_highlight_spans_are_ordered_and_inside_the_text(text):
    spans = highlight_spans(text, text)
    assert spans == sorted(spans)
    assert all(0 <= start < end <= len(text) for start, end in spans)


# ---------------------------------------------------------------- fuzzed text rules


@TEXT_FUZZ
@given(messages())
def test_text_rules_never_fail_on_any_message_shape(message):
    text = indexed_text(message)
    found = message_terms(message)
    if message.get("role") in ("system", "developer"):
        assert text is None and found is None
        return
    assert isinstance(text, str)
    assert found == list(dict.fromkeys(found))  # distinct, in order
    for term in found:
        assert term and all(c.isalnum() for c in term) and fold(term) == term


@TEXT_FUZZ
@given(unicode_text, st.lists(st.one_of(tricky_words, unicode_text), max_size=40).map(" ".join))
def test_query_terms_and_highlights_on_any_unicode(text, query):
    terms = query_terms(query)
    assert len(terms) <= MAX_QUERY_TERMS and len(set(terms)) == len(terms)
    assert all(term.isalnum() and fold(term) == term for term in terms)
    spans = highlight_spans(text, query)
    previous = (0, 0)
    for start, stop in spans:  # ordered, inside the text, each holding a matching word
        # Not always disjoint: "¼" folds to "1⁄4", two words in one character.
        assert previous <= (start, stop) and 0 <= start < stop <= len(text)
        previous = (start, stop)
        assert set(query_terms(text[start:stop])) & set(terms)
