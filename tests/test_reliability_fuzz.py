"""Fuzzing the text rules and search on every backend with random Unicode and message shapes.

Inputs cover all of Unicode (lone surrogates, NUL, controls, private use, astral planes),
arbitrary JSON in every position of a message (including NaN and infinities), random
roles, part types, ids and scopes. A write either succeeds or raises ``InvalidRecord``;
what succeeds loads back exactly and searches exactly as the brute-force oracle says.

CI runs a bounded number of examples. For a long local run::

    DEUZ_FUZZ_EXAMPLES=2000 .venv/bin/pytest tests/test_reliability_fuzz.py tests/test_reliability_scope.py
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from deuz_transcripts import (
    ChatRecord,
    InMemoryConditionalChatStore,
    InMemoryTranscriptIndex,
    InvalidRecord,
)
from deuz_transcripts.records import fill_message_ids
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.text import (
    MAX_QUERY_TERMS,
    fold,
    highlight_spans,
    indexed_text,
    message_terms,
    query_terms,
)
from tests import oracle

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("DEUZ_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TEXT_FUZZ = settings(max_examples=EXAMPLES * 5, deadline=None)

# Every code point, surrogates and controls included, biased towards the tricky ones.
any_char = st.characters(codec=None, exclude_categories=())
tricky_char = st.sampled_from(
    list(
        "aZ09 _-'\"%*:!\\\x00\x01\x7f\u0085\u00a0İıßẞﬁ½σςΣ東京😀\u0301\u200b\u200d\u202e\ue000\ud800\udfff"
    )
)
unicode_text = st.text(st.one_of(tricky_char, any_char), max_size=40)
words = st.text(st.sampled_from(list("abcİıßé東")), min_size=1, max_size=5)
wordy_text = st.lists(st.one_of(words, unicode_text), max_size=6).map(" ".join)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinities: not JSON, must be InvalidRecord
    unicode_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(unicode_text, inner, max_size=3)
    ),
    max_leaves=8,
)
part_types = st.sampled_from(
    [
        "text",
        "reasoning",
        "tool-call",
        "tool-result",
        "tool_result",
        "tool_use",
        "thinking",
        "image",
        "image_url",
        "file",
        "json",
        "error-text",
        "",
        "TEXT",
    ]
)


@st.composite
def parts(draw: st.DrawFn) -> dict[str, Any]:
    part: dict[str, Any] = {"type": draw(part_types)}
    for key in draw(st.sets(st.sampled_from(["text", "output", "content", "value", "input"]))):
        part[key] = draw(
            st.one_of(
                wordy_text,
                json_values,
                st.builds(
                    lambda kind, value: {"type": kind, "value": value},
                    st.sampled_from(["text", "error-text", "json"]),
                    st.one_of(wordy_text, json_values),
                ),
            )
        )
    return part


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(
        st.one_of(
            st.sampled_from(["user", "assistant", "tool", "system", "developer"]),
            st.text(any_char, min_size=1, max_size=8),
        )
    )
    content = draw(st.one_of(wordy_text, st.lists(parts(), max_size=4), json_values))
    message = {"role": role, "content": content}
    message.update(
        draw(st.dictionaries(st.sampled_from(["name", "tool_calls", "x"]), json_values, max_size=2))
    )
    return message


ids = st.one_of(
    st.none(), st.just(""), st.sampled_from(["m", "m", "dup"]), st.text(any_char, max_size=12)
)


@st.composite
def records(draw: st.DrawFn, number: int) -> ChatRecord | dict[str, Any]:
    """A ChatRecord, or the JSON a ChatRecord would refuse (an expected InvalidRecord)."""
    body = draw(st.lists(messages(), min_size=0, max_size=5))
    data = {
        "chatId": f"{draw(st.sampled_from(['a', 'B', 'é', '𝔸', 'chat']))}{number}",
        "scope": draw(
            st.dictionaries(
                st.sampled_from(["userId", "agentId"]),
                st.sampled_from(["ada", "Ada", "bob"]),
                max_size=2,
            )
        ),
        "messages": body,
        "messageIds": draw(
            st.one_of(st.none(), st.lists(ids, min_size=len(body), max_size=len(body)))
        ),
        "updatedAt": draw(st.integers(0, 3)) * 60_000 + 1_700_000_000_000,
    }
    return data


def finite_json(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(finite_json(v) for v in value)
    if isinstance(value, dict):
        return all(finite_json(v) for v in value.values())
    return True


# ---------------------------------------------------------------- text rules


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
@given(unicode_text, st.lists(st.one_of(words, unicode_text), max_size=40).map(" ".join))
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


# ---------------------------------------------------------------- search on every backend


class Rollback(Exception):
    pass


def write_all(store: Any, drafts: list[dict[str, Any]]) -> list[ChatRecord]:
    """Write each draft; it succeeds or raises InvalidRecord naming a real field."""
    written = []
    for draft in drafts:
        try:
            record = ChatRecord.from_json(draft)
            store.write_chat(record, expected_revision=0)
        except InvalidRecord as exc:
            assert exc.field.split("[")[0].split(".")[0] in (
                "chat_id",
                "scope",
                "messages",
                "message_ids",
                "updated_at",
            ), exc
            bad_json = not all(finite_json(m) for m in draft["messages"])
            assert bad_json or exc.field != "messages" or "nested" in str(exc), exc
            assert store.load_chat(draft["chatId"]) is None  # nothing half-written
            continue
        written.append(record)
    return written


def check(store: Any, written: list[ChatRecord], queries: list[str], substring: bool) -> None:
    for record in written:
        loaded, revision = store.load_chat(record.chat_id)
        assert revision == 1
        assert loaded.messages == record.messages  # exact round trip, NaN excluded
        assert loaded.message_ids == fill_message_ids(record)
    own = [
        term
        for record in written
        for message in record.messages
        for term in (message_terms(message) or [])[:2]
    ]
    for query in [*queries, *own[:6], " ".join(own)]:
        for scope in ({}, {"userId": "ada"}):
            expected = oracle.search(written, scope, query, around=1, limit=30, substring=substring)
            found = store.transcript.search(scope, query, around=1, limit=30)
            assert [(h.chat_id, h.message_id, h.index) for h in found] == [
                (h.chat_id, h.message_id, h.index) for h in expected
            ]
            for hit, want in zip(found, expected, strict=True):
                assert hit.score == pytest.approx(want.score, abs=1e-9)
                assert tuple(m.message_id for m in hit.around) == want.around


@contextmanager
def store_for(backend: str) -> Iterator[Any]:
    """A conditional store on the memory index, the database's backend or SQLite's LIKE."""
    if backend == "like" and connection.vendor != "sqlite":
        pytest.skip("the LIKE fallback is SQLite's")
    like = override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "like"})
    with like if backend == "like" else nullcontext():
        if backend == "memory":
            yield InMemoryConditionalChatStore(InMemoryTranscriptIndex())
        else:
            yield DjangoConditionalChatStore()


@pytest.mark.parametrize("backend", ["memory", "database", "like"])
@FUZZ
@given(
    drafts=st.integers(1, 4).flatmap(lambda n: st.tuples(*[records(i) for i in range(n)])),
    queries=st.lists(wordy_text, min_size=1, max_size=3),
)
def test_random_chats_store_exactly_and_search_like_the_oracle(backend, drafts, queries):
    assume(len({d["chatId"] for d in drafts}) == len(drafts))
    with store_for(backend) as store:
        try:
            with transaction.atomic():
                written = write_all(store, list(drafts))
                check(store, written, queries, substring=backend == "like")
                raise Rollback
        except Rollback:
            pass


@pytest.mark.parametrize("backend", ["memory", "database", "like"])
def test_around_is_in_chat_order_after_rewrites(backend):
    """Found by this fuzzer on PostgreSQL: rewritten rows came back in heap order."""
    with store_for(backend) as store:
        if backend == "database" and connection.vendor == "postgresql":
            with connection.cursor() as cursor:  # the plans a bigger table gets: heap order
                cursor.execute("SET LOCAL enable_indexscan = off")
                cursor.execute("SET LOCAL enable_seqscan = off")
        texts = [f"filler{n}" for n in range(7)]
        texts[3] = "needle"
        store.write_chat(
            ChatRecord("c", {"u": "a"}, [{"role": "user", "content": t} for t in texts]),
            expected_revision=0,
        )
        for revision, changed in enumerate([0, 1, 2], start=1):  # rows before the hit move
            texts[changed] += "x"
            record = ChatRecord("c", {"u": "a"}, [{"role": "user", "content": t} for t in texts])
            store.write_chat(record, expected_revision=revision)
            [hit] = store.transcript.search({"u": "a"}, "needle", around=3)
            assert [m.index for m in hit.around] == [0, 1, 2, 4, 5, 6]
