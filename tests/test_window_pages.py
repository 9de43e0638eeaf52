"""A date window's page read mask by mask, best first, without counting the window.

A window filters hits only (SPEC §8): every mask's score is the search's without the
window, so the window's page is the first rows of its best masks: the rarest terms'
rows within the window, then the common terms' masks, each walked newest first from the
window's upper bound or read, only up to what the page still needs. No statement counts
a term, a mask or N within the window (that histogram cost 10-95x the search without
the window at 1M: bench/RESULTS.md). Every page is the memory index's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.factories import conversation
from tests.mask_words import TEXTS, WHEN
from tests.sql_support import spy_tiers

pytestmark = pytest.mark.django_db

QUERIES = [
    "alpha",
    "alpha beta",
    "rare alpha beta",
    "rare seldom alpha beta gamma",
    "seldom beta gamma",
    "alpha beta missing",
]
#: Windows over the 30 chats' days: the newest few, the middle, an old closed one, one
#: holding nothing, and one that only bounds from above.
WINDOWS = [
    (WHEN + timedelta(days=26), None),
    (WHEN + timedelta(days=9), WHEN + timedelta(days=20)),
    (WHEN - timedelta(days=1), WHEN + timedelta(days=4)),
    (WHEN + timedelta(days=40), None),
    (None, WHEN + timedelta(days=12)),
]
#: Past the one-statement size and no full-mask walk: pages are planned by masks.
MASKS = forced_policies(single_statement_max=0, lexeme_scope_min=0, small_read_rows=10**9)
#: Reads that count within a filter (a term, a mask, N) or rank every match of it.
COUNTING = {
    "source": ("candidates",),
    "counts": ("total", "mask_histogram", "subset_histogram", "term_counts"),
}


@pytest.fixture
def indexes(settings: Any) -> tuple[DjangoConditionalChatStore, InMemoryTranscriptIndex]:
    # SQLite FTS5: no scope scanned row by row (its own plan for small scopes)
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "SQLITE_SCAN_SCOPE_MAX": 0}
    store = DjangoConditionalChatStore()
    memory = InMemoryTranscriptIndex()
    for n in range(30):
        texts = [TEXTS[(n + k) % len(TEXTS)] for k in range(3)]
        if n in (3, 17, 28):
            texts.append("rare alpha")
        if n == 9:
            texts.append("seldom gamma")
        record = ChatRecord(
            f"c{n:02}",
            {"userId": "ada" if n % 3 else "bob"},
            conversation(texts),
            updated_at=WHEN + timedelta(days=n // 2),  # two chats a day: ties by chat id
        )
        store.write_chat(record, expected_revision=0)
        memory.index(record)
    if not store.transcript.backend.source.walks_newest_first:
        pytest.skip("the LIKE fallback counts the window's masks (it ranks in one statement)")
    return store, memory


def spy_windowed_counts(
    monkeypatch: pytest.MonkeyPatch, backend: Any, reads: dict[str, tuple[str, ...]] = COUNTING
) -> list[str]:
    """The names of ``reads`` (by backend part) the search makes over a windowed filter."""
    calls: list[str] = []
    for part, names in reads.items():
        part_class = type(getattr(backend, part))
        for name in names:
            if not hasattr(part_class, name):  # another engine's part: never called here
                continue
            original = getattr(part_class, name)

            def spy(
                self: Any,
                cursor: Any,
                chats: Any,
                *args: Any,
                _name: str = name,
                _original: Any = original,
            ) -> Any:
                if chats.windowed:
                    calls.append(_name)
                return _original(self, cursor, chats, *args)

            monkeypatch.setattr(part_class, name, spy)
    return calls


def same_pages(store: Any, memory: InMemoryTranscriptIndex, **options: Any) -> None:
    for query in QUERIES:
        for scope in ({}, {"userId": "ada"}):
            for after, before in WINDOWS:
                for offset, limit in ((0, 3), (2, 4), (0, 40)):
                    search = {
                        "limit": limit,
                        "offset": offset,
                        "updated_after": after,
                        "updated_before": before,
                        **options,
                    }
                    hits = store.transcript.search(scope, query, **search)
                    want = memory.search(scope, query, **search)
                    assert [(h.chat_id, h.message_id, h.score) for h in hits] == [
                        (h.chat_id, h.message_id, h.score) for h in want
                    ], (query, scope, after, before, offset, limit, options)


@pytest.mark.parametrize("rare_rows", [0, 3, 2_000], ids=["all-common", "one-rare", "rare"])
@pytest.mark.parametrize("walk", [True, False], ids=["walked", "read"])
def test_a_window_page_reads_its_best_masks_and_counts_nothing_in_the_window(
    monkeypatch, indexes, walk, rare_rows
):
    """The rarest terms' rows within the window and the common terms' masks, best
    first, each walked from the window's upper bound (or read): the memory index's
    pages, with roles too, and no count of anything within the window."""
    store, memory = indexes
    calls = spy_windowed_counts(monkeypatch, store.transcript.backend)
    masks = forced_policies(MASKS, essential_rare_rows=rare_rows)
    if not walk:
        masks = forced_policies(masks, big_read_rows=0)
    monkeypatch.setattr(policy, "FORCED", masks)
    same_pages(store, memory)
    same_pages(store, memory, roles=["user"])
    assert calls == []


def test_a_capped_window_page_past_its_cap_counts_nothing_in_the_window(monkeypatch, indexes):
    """``search_page`` with a cap the window's matches pass: the same page as
    ``search()``, the total "more than the cap", and nothing counted in the window."""
    store, memory = indexes
    calls = spy_windowed_counts(monkeypatch, store.transcript.backend)
    monkeypatch.setattr(policy, "FORCED", MASKS)
    after = WHEN + timedelta(days=5)
    for query in ("alpha beta", "rare alpha beta"):
        page = store.transcript.search_page({}, query, limit=3, total_cap=2, updated_after=after)
        want = memory.search({}, query, limit=3, updated_after=after)
        assert [(h.message_id, h.score) for h in page.hits] == [
            (h.message_id, h.score) for h in want
        ]
        assert (page.total, page.total_exact) == (2, False)  # more than the cap
    assert calls == []


def test_more_common_terms_than_unread_max_terms_read_the_window_in_tiers(monkeypatch, indexes):
    """Too many common terms to try their masks one by one: the window's masks are read
    in tiers of equal or better raw score, nothing counted within the window, and the
    pages are still the memory index's."""
    store, memory = indexes
    calls = spy_windowed_counts(monkeypatch, store.transcript.backend)
    tiers = spy_tiers(monkeypatch, store.transcript.backend)
    monkeypatch.setattr(
        policy, "FORCED", forced_policies(MASKS, essential_rare_rows=0, unread_terms_max=1)
    )
    same_pages(store, memory)
    assert calls == []
    assert tiers


def test_more_common_terms_than_any_mask_route_count_the_window(monkeypatch, indexes):
    """Too many common terms to enumerate their masks: the window's masks are counted
    (the histogram route), and the pages are still the memory index's."""
    store, memory = indexes
    calls = spy_windowed_counts(monkeypatch, store.transcript.backend)
    monkeypatch.setattr(
        policy,
        "FORCED",
        forced_policies(MASKS, essential_rare_rows=0, unread_terms_max=1, tiered_terms_max=1),
    )
    same_pages(store, memory)
    assert calls


@pytest.fixture
def sparse_window(settings: Any) -> tuple[DjangoConditionalChatStore, InMemoryTranscriptIndex]:
    """40 chats full of the words, then the 3 newest, which (nearly) lack them."""
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "SQLITE_SCAN_SCOPE_MAX": 0}
    store = DjangoConditionalChatStore()
    memory = InMemoryTranscriptIndex()
    newest = [["plain words", "alpha beta"], ["plain words", "alpha"], ["gamma filler"]]
    for n in range(43):
        texts = newest[n - 40] if n >= 40 else ["alpha beta gamma", "alpha beta", "alpha"]
        record = ChatRecord(
            f"s{n:02}", {"userId": "ada"}, conversation(texts), updated_at=WHEN + timedelta(days=n)
        )
        store.write_chat(record, expected_revision=0)
        memory.index(record)
    if not store.transcript.backend.source.walks_newest_first:
        pytest.skip("the LIKE fallback ranks in one statement")
    return store, memory


def test_a_window_where_the_words_are_nearly_absent_is_walked_whole(monkeypatch, sparse_window):
    """A window holding fewer rows of the words than a page: the walk from its upper
    bound ends short, which sizes the window once; within the walks' bound, every
    further mask is walked through the window, never read through the words' rows in
    the whole scope (that read cost 165x the search without the window at 1M)."""
    store, memory = sparse_window
    reads = spy_windowed_counts(
        monkeypatch,
        store.transcript.backend,
        {"source": ("mask_candidates",), "counts": ("walk_size",)},
    )
    # past the one-statement size, a probe that finds a page of rows with every word
    # and walks bounded by 40 messages: the scope holds 125 messages, the window 5
    monkeypatch.setattr(
        policy,
        "FORCED",
        forced_policies(MASKS, small_read_rows=4, big_read_rows=40, essential_rare_rows=0),
    )
    after = WHEN + timedelta(days=39, hours=12)
    for query in ("alpha", "alpha beta", "alpha beta gamma", "gamma"):
        for scope in ({}, {"userId": "ada"}):
            reads.clear()
            hits = store.transcript.search(scope, query, limit=5, updated_after=after)
            want = memory.search(scope, query, limit=5, updated_after=after)
            assert [(h.message_id, h.score) for h in hits] == [
                (h.message_id, h.score) for h in want
            ], (query, scope)
            assert hits, query
            assert "mask_candidates" not in reads, (query, scope, reads)
            assert reads.count("walk_size") <= 1, (query, scope, reads)
