"""A page from the masks of the terms too common to read, best raw score first.

The essential-terms plan reads the rarer terms' rows; when two or more terms are left,
each holding more rows than it may read, the page comes from their masks (all of them
first, then each smaller combination), each mask's first rows walked or read, instead of
ranking every match. Every backend that counts terms in its index runs it, and every
page is the memory index's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.backends.sqlite import fts5 as sqlite_fts5
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.mask_words import TEXTS, WHEN
from tests.sql_support import spy_search_parts, spy_tiers

pytestmark = pytest.mark.django_db

#: The rarer terms' rows fit the budget (4); the common ones do not, two or more left.
UNREAD = forced_policies(
    single_statement_max=0,
    lexeme_scope_min=0,
    small_read_rows=10**9,
    essential_min_terms=1,
    essential_max_rows=4,
    essential_rare_rows=0,  # term by term, rarest first
)
QUERIES = [
    "alpha beta gamma",
    "rare alpha beta",
    "rare seldom alpha beta gamma",
    "seldom beta gamma",
    "alpha beta missing",
]
#: Reads of every match: what the plan avoids.
FULL_READS = ("mask_histogram", "candidates")


@pytest.fixture
def indexes(settings: Any) -> tuple[DjangoConditionalChatStore, InMemoryTranscriptIndex]:
    # SQLite FTS5: no scope scanned row by row (its own plan for small scopes)
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "SQLITE_SCAN_SCOPE_MAX": 0}
    store = DjangoConditionalChatStore()
    memory = InMemoryTranscriptIndex()
    for n in range(24):
        texts = [TEXTS[(n + k) % len(TEXTS)] for k in range(3)]
        if n in (3, 17):
            texts.append("rare alpha")
        if n == 9:
            texts.append("seldom gamma")
        record = ChatRecord(
            f"c{n:02}",
            {"userId": "ada" if n % 3 else "bob"},
            [
                {"role": "user" if k % 2 else "assistant", "content": text}
                for k, text in enumerate(texts)
            ],
            updated_at=WHEN + timedelta(minutes=n % 7),  # ties: chat id order
        )
        store.write_chat(record, expected_revision=0)
        memory.index(record)
    if store.transcript.backend.substring_matching:
        pytest.skip("the LIKE fallback counts no term in an index")
    return store, memory


def same_pages(store: Any, memory: InMemoryTranscriptIndex, **options: Any) -> None:
    for query in QUERIES:
        for scope in ({}, {"userId": "ada"}):
            for offset, limit in ((0, 3), (2, 4), (0, 40)):
                search = {"limit": limit, "offset": offset, **options}
                hits = store.transcript.search(scope, query, **search)
                want = memory.search(scope, query, **search)
                assert [(h.chat_id, h.message_id, h.score) for h in hits] == [
                    (h.chat_id, h.message_id, h.score) for h in want
                ], (query, scope, offset, limit, options)


@pytest.mark.parametrize("rare_rows", [0, 3], ids=["term-by-term", "rare-at-once"])
@pytest.mark.parametrize("walk", [True, False], ids=["walked", "read"])
def test_terms_too_common_to_read_fill_the_page_from_their_masks(
    monkeypatch, indexes, walk, rare_rows
):
    """Walked within the newest chats the counts predict hold a mask's rows, or read and
    sorted; the rare terms read one by one or at once: the memory index's pages, with
    roles too, and no read of every match."""
    store, memory = indexes
    calls = spy_search_parts(monkeypatch, store.transcript.backend, FULL_READS)
    guess = forced_policies(UNREAD, essential_rare_rows=rare_rows)
    if not walk:
        guess = forced_policies(guess, big_read_rows=0)
    monkeypatch.setattr(policy, "FORCED", guess)
    same_pages(store, memory)
    same_pages(store, memory, roles=["user"])
    assert calls == []


@pytest.mark.parametrize("rare_rows", [0, 3], ids=["term-by-term", "rare-at-once"])
def test_more_unread_terms_than_one_by_one_fill_the_page_in_tiers(monkeypatch, indexes, rare_rows):
    """``unread_terms_max`` below the terms left: their masks are read in tiers of equal
    or better raw score, one statement each, with roles too, and no read of every match."""
    store, memory = indexes
    calls = spy_search_parts(monkeypatch, store.transcript.backend, FULL_READS)
    tiers = spy_tiers(monkeypatch, store.transcript.backend)
    forced = forced_policies(UNREAD, unread_terms_max=1, essential_rare_rows=rare_rows)
    monkeypatch.setattr(policy, "FORCED", forced)
    same_pages(store, memory)
    same_pages(store, memory, roles=["user"])
    assert calls == []
    assert tiers


def test_more_unread_terms_than_allowed_rank_every_match(monkeypatch, indexes):
    """``tiered_terms_max`` below the terms left: every match is ranked, as before."""
    store, memory = indexes
    calls = spy_search_parts(monkeypatch, store.transcript.backend, FULL_READS)
    monkeypatch.setattr(
        policy, "FORCED", forced_policies(UNREAD, unread_terms_max=1, tiered_terms_max=1)
    )
    same_pages(store, memory)
    assert calls


#: Every page from masks: no walk, and room to read the rarer terms' rows.
MASKS = forced_policies(single_statement_max=0, lexeme_scope_min=0, small_read_rows=10**9)


def test_a_cursor_page_of_five_words_reads_only_its_masks_in_fts5(monkeypatch, indexes):
    """FTS5 counts each word in its index: a cursor's next page of five words takes the
    mask histogram from those counts and the rarer words' rows, not from every match's
    mask, and reads its few masks by one exact query each (at 1M, 508 -> 22 ms)."""
    store, memory = indexes
    backend = store.transcript.backend
    if backend.name != "sqlite-fts5":
        pytest.skip("PostgreSQL without stored counts reads every match of five words")
    monkeypatch.setattr(policy, "FORCED", MASKS)
    query = "rare seldom alpha beta gamma"
    for scope in ({}, {"userId": "ada"}):
        want = memory.search_page(scope, query, limit=1_000).hits
        page = store.transcript.search_page(scope, query, limit=3)
        got = list(page.hits)
        calls = spy_search_parts(monkeypatch, backend, ("mask_histogram",))
        monkeypatch.setattr(sqlite_fts5, "fts_masks", _recorded(calls, sqlite_fts5.fts_masks))
        while page.next_cursor is not None:
            page = store.transcript.search_page(scope, query, limit=3, cursor=page.next_cursor)
            got.extend(page.hits)
        assert calls == []
        monkeypatch.undo()
        monkeypatch.setattr(policy, "FORCED", MASKS)
        assert [(h.message_id, h.score) for h in got] == [(h.message_id, h.score) for h in want]


def _recorded(calls: list[str], fts_masks: Any) -> Any:
    """``fts_masks``, each call recorded in ``calls``."""

    def spy(*args: Any) -> Any:
        calls.append("fts_masks")
        return fts_masks(*args)

    return spy
