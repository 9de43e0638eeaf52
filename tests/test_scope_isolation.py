"""Scope isolation, as a hypothesis property over random multi-user corpora, on every backend.

Scope values and keys are drawn from near-collisions: case, NFC against NFD, trailing and
leading spaces, zero-width characters, fullwidth forms, ``İ``/``i``, ``ß``/``ss``. Text is
folded for search, scopes never are: no search hit, ``around`` neighbour, resolved source or
context candidate may come from a chat whose scope does not match the filter exactly.
Results are also compared with the brute-force oracle, so isolation is not bought by
returning nothing. ``DEUZ_FUZZ_EXAMPLES`` raises the example count for a long local run.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_transcripts import (
    ChatRecord,
    InMemoryConditionalChatStore,
    InMemoryTranscriptIndex,
    MemorySourceRef,
    TranscriptContextSource,
)
from deuz_transcripts.records import fill_message_ids, scope_matches
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.text import message_terms
from tests import oracle

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("DEUZ_FUZZ_EXAMPLES", "40"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Families of values a careless implementation would fold, trim or normalise into one.
FAMILIES = [
    ["ada", "Ada", "ADA", "ada ", " ada", "ada\t", "ada\u200b", "ａｄａ"],
    ["\u00e1da", "a\u0301da", "ada", "\u00c1DA"],  # NFC, NFD, unaccented, upper
    ["İda", "ida", "IDA", "i\u0307da"],
    ["straße", "strasse", "STRASSE", "straẞe"],
    ["", " ", "\u200b"],
]
VALUES = sorted({value for family in FAMILIES for value in family})
KEYS = ["userId", "UserId", "userid", "user Id", "agentId"]
WORDS = ["alpha", "beta", "gamma", "ada", "ida", "strasse", "straße", "ALPHA"]
BASE = datetime(2025, 1, 1, tzinfo=UTC)

texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=4).map(" ".join)
message = st.one_of(
    texts.map(lambda t: {"role": "user", "content": f"alpha {t}"}),
    texts.map(lambda t: {"role": "assistant", "content": [{"type": "text", "text": t}]}),
    texts.map(lambda t: {"role": "system", "content": f"alpha {t}"}),
)


def scopes_from(family: list[str]) -> st.SearchStrategy[dict[str, str]]:
    """Mostly one of two near-identical keys, values from one family: collisions are the rule."""
    keys = st.sampled_from(["userId", "userId", "UserId", *KEYS])
    return st.dictionaries(keys, st.sampled_from(family), max_size=2)


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[ChatRecord], list[tuple[dict, str]]]:
    """Chats and searches whose scopes are drawn from one family of near-collisions."""
    family = draw(st.sampled_from(FAMILIES))
    records = [
        ChatRecord(
            f"chat{number}",
            draw(scopes_from(family)),
            draw(st.lists(message, min_size=1, max_size=4)),
            updated_at=BASE + timedelta(minutes=draw(st.integers(0, 3))),
        )
        for number in range(draw(st.integers(2, 6)))
    ]
    searches = draw(
        st.lists(
            st.tuples(scopes_from(family), texts.map(lambda t: f"alpha {t}")),
            min_size=1,
            max_size=4,
        )
    )
    return records, searches


class Rollback(Exception):
    """Undoes one example's writes on the test database."""


def check_isolation(
    index: Any, records: list[ChatRecord], scope: dict, query: str, substring: bool
) -> None:
    by_id = {record.chat_id: record for record in records}

    def matches(chat_id: str) -> bool:
        return scope_matches(by_id[chat_id].scope, scope)

    hits = index.search(scope, query, around=2, limit=50)
    for hit in hits:
        assert matches(hit.chat_id), (hit.chat_id, by_id[hit.chat_id].scope, scope)
        assert all(m.chat_id == hit.chat_id for m in hit.around)
    expected = oracle.search(records, scope, query, around=2, limit=50, substring=substring)
    assert [(h.chat_id, h.index) for h in hits] == [(h.chat_id, h.index) for h in expected]

    for record in records:  # every message, resolved under the filter
        for position, message_id in enumerate(fill_message_ids(record)):
            ref = MemorySourceRef("m", record.chat_id, message_id, "sha256:x")
            found = index.resolve_source(scope, ref)
            visible = message_terms(record.messages[position]) is not None
            if found is not None:
                assert (found.chat_id, found.index) == (record.chat_id, position)
            assert (found is not None) == (matches(record.chat_id) and visible)

    refs = [MemorySourceRef("m", r.chat_id, i, "") for r in records for i in fill_message_ids(r)]
    candidates = TranscriptContextSource(index, scope, around=1, refs=refs).candidates(query, 100)
    assert all(matches(c.chat_id) for c in candidates)


@pytest.mark.parametrize("backend", ["memory", "database", "like"])
@PROPERTY
@given(world=worlds())
def test_no_result_ever_crosses_a_scope(backend, world):
    records, searches = world
    if backend == "like" and connection.vendor != "sqlite":
        pytest.skip("the LIKE fallback is SQLite's")
    like = override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "like"})
    with like if backend == "like" else nullcontext():
        if backend == "memory":
            store: Any = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
        else:
            store = DjangoConditionalChatStore()
        try:
            with transaction.atomic():
                for record in records:
                    store.write_chat(record, expected_revision=0)
                for scope, query in searches:
                    check_isolation(
                        store.transcript, records, scope, query, substring=backend == "like"
                    )
                raise Rollback
        except Rollback:
            pass


def test_near_collisions_stay_apart_on_every_backend():
    """The same sweep without hypothesis: one chat per value, each found only by itself."""
    for backend in ("memory", "database", "like"):
        if backend == "like" and connection.vendor != "sqlite":
            continue
        like = override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "like"})
        with like if backend == "like" else nullcontext():
            store: Any = (
                InMemoryConditionalChatStore(InMemoryTranscriptIndex())
                if backend == "memory"
                else DjangoConditionalChatStore(using="default")
            )
            try:
                with transaction.atomic():
                    for n, value in enumerate(VALUES):
                        store.write_chat(
                            ChatRecord(
                                f"v{n}", {"userId": value}, [{"role": "user", "content": "alpha"}]
                            ),
                            expected_revision=0,
                        )
                    for n, value in enumerate(VALUES):
                        hits = store.transcript.search({"userId": value}, "alpha")
                        assert [h.chat_id for h in hits] == [f"v{n}"], (backend, value)
                        assert [r.chat_id for r in store.list_chats({"userId": value})] == [f"v{n}"]
                    raise Rollback
            except Rollback:
                pass
