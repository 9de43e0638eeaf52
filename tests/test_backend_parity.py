"""Differential tests: the database's backend and the in-memory index against the oracle.

Run on SQLite this checks FTS5 (and the LIKE fallback against substring matching);
run on PostgreSQL it checks the tsvector backend. Together with the memory index
checked on both runs, every backend finds the same hits in the same order.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.conf import settings as django_settings
from django.db import connection, transaction
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.stores import DjangoTranscriptIndex
from tests import oracle

pytestmark = pytest.mark.django_db

# Words that fold, split and collide in interesting ways, plus random letters.
TRICKY = [
    "izmir",
    "İzmir",
    "IZMIR",
    "Izmír",
    "ılık",
    "straße",
    "STRASSE",
    "ﬁle",
    "file",
    "σοφός",
    "ΣΟΦΟΣ",
    "東京",
    "東京都",
    "09:40",
    "0940",
    "a\u200bb",
    "ab",
    "Việt",
    "naïve",
    "NAIVE",
    "co-op",
    "e\u0301",
    "Ǆemal",
    "dzemal",
    "x" * 300,
    "x" * 301,
    "deploy",
    "deploys",
    "ＦＵＬＬ",
    "full",
    "🙂ok",
    "ok",
    "NEAR",
    "AND",
    "OR",
    "*",
    '"',
]
WORDS = st.one_of(
    st.sampled_from(TRICKY),
    st.text(alphabet=string.ascii_lowercase[:6] + "éİıß", min_size=1, max_size=4),
)
TEXT = st.lists(WORDS, min_size=0, max_size=6).map(" ".join)
ROLES = st.sampled_from(["user", "assistant", "assistant", "tool", "system"])


@st.composite
def messages(draw: st.DrawFn) -> dict:
    role = draw(ROLES)
    shape = draw(st.sampled_from(["string", "parts", "tool", "odd"]))
    if shape == "string":
        return {"role": role, "content": draw(TEXT)}
    if shape == "parts":
        parts = draw(
            st.lists(
                st.one_of(
                    TEXT.map(lambda t: {"type": "text", "text": t}),
                    TEXT.map(lambda t: {"type": "reasoning", "text": t}),
                    TEXT.map(lambda t: {"type": "image", "image": t}),
                ),
                max_size=3,
            )
        )
        return {"role": role, "content": parts}
    if shape == "tool":
        output = draw(st.one_of(TEXT, TEXT.map(lambda t: {"type": "json", "value": {"text": t}})))
        return {
            "role": "tool",
            "content": [
                {"type": "tool-result", "toolCallId": "c", "toolName": "t", "output": output}
            ],
        }
    return {"role": role, "content": draw(st.one_of(st.none(), st.integers()))}


BASE = datetime(2025, 1, 1, tzinfo=UTC)


@st.composite
def corpora(draw: st.DrawFn) -> list[ChatRecord]:
    count = draw(st.integers(min_value=1, max_value=5))
    records = []
    for number in range(count):
        records.append(
            ChatRecord(
                chat_id=draw(st.sampled_from(["a", "B", "c", "é", "chat-10", "chat-9"]))
                + f"-{number}",
                scope={
                    "userId": draw(st.sampled_from(["ada", "bob", "Ada", "ada "])),
                    **draw(st.sampled_from([{}, {"agentId": "x"}, {"agentId": "y"}])),
                },
                messages=draw(st.lists(messages(), min_size=0, max_size=6)),
                updated_at=BASE + timedelta(minutes=draw(st.integers(0, 2))),
            )
        )
    return records


# SPEC section 8's filters: often absent, sometimes leaving nothing.
FILTERS = {
    "roles": st.sampled_from([None, None, ["user"], ["assistant", "tool"], [], ["system"]]),
    "updated_after": st.sampled_from([None, None, BASE, BASE + timedelta(seconds=30)]),
    "updated_before": st.sampled_from([None, None, BASE + timedelta(minutes=1)]),
}

SEARCHES = st.fixed_dictionaries(
    {
        "scope": st.sampled_from([{}, {"userId": "ada"}, {"userId": "ada", "agentId": "x"}]),
        "query": st.one_of(TEXT, st.lists(WORDS, min_size=1, max_size=40).map(" ".join)),
        "around": st.sampled_from([None, 0, 1, 2]),
        "limit": st.sampled_from([1, 3, 20]),
        "offset": st.sampled_from([0, 0, 1, 4]),
        **FILTERS,
    }
)


def summary(hits: list) -> list[tuple]:
    return [
        (
            h.chat_id,
            h.message_id,
            h.index,
            None if h.around is None else tuple(m.message_id for m in h.around),
        )
        for h in hits
    ]


def assert_same(got: list, expected: list[oracle.OracleHit]) -> None:
    assert summary(got) == [(h.chat_id, h.message_id, h.index, h.around) for h in expected]
    for hit, want in zip(got, expected, strict=True):
        assert hit.score == pytest.approx(want.score, abs=1e-9)


class Rollback(Exception):
    """Raised to undo one hypothesis example's writes."""


def check_corpus(
    records: list[ChatRecord],
    searches: list[dict],
    *,
    substring: bool,
    written: Callable[[], object] | None = None,
) -> None:
    """Every search gives the oracle's hits on both indexes (``written`` runs between the
    writes and the searches)."""
    memory = InMemoryTranscriptIndex()
    sql = DjangoTranscriptIndex()
    try:
        with transaction.atomic():
            unique = {r.chat_id: r for r in records}.values()
            for record in unique:
                memory.index(record)
                sql.index(record)
            if written is not None:
                written()
            for search in searches:
                expected = oracle.search(unique, **search, substring=substring)
                everything = oracle.search(
                    unique, **{**search, "offset": 0, "limit": 10**6}, substring=substring
                )
                for index in (sql,) if substring else (sql, memory):
                    assert_same(index.search(**search), expected)
                    check_pages(index, search, expected, everything)
                    check_window_filters_hits(index, search, unique)
            raise Rollback
    except Rollback:
        pass


def check_window_filters_hits(index, search: dict, records: Iterable[ChatRecord]) -> None:
    """SPEC §8: a windowed search's hits are the search without the window, filtered by
    it: the same order and the same scores (N and n_t are not the window's)."""
    after, before = search["updated_after"], search["updated_before"]
    if after is None and before is None:
        return
    updated = {record.chat_id: record.updated_at for record in records}
    every = index.search(
        **{**search, "updated_after": None, "updated_before": None, "offset": 0, "limit": 10**6}
    )
    kept = [
        (hit.chat_id, hit.index, hit.score)
        for hit in every
        if (after is None or updated[hit.chat_id] > after)
        and (before is None or updated[hit.chat_id] < before)
    ]
    end = search["offset"] + search["limit"]
    windowed = index.search(**search)
    assert [(hit.chat_id, hit.index, hit.score) for hit in windowed] == kept[search["offset"] : end]
    page = index.search_page(**search)
    assert page.total == len(kept)
    assert [(hit.chat_id, hit.index, hit.score) for hit in page.hits] == kept[
        search["offset"] : end
    ]


def check_pages(index, search: dict, expected: list, everything: list) -> None:
    """``search_page``: the first page is ``search()``'s with the oracle's exact count,
    and its cursors walk every hit once, in order (``offset`` applied once, first)."""
    page = index.search_page(**search)
    assert_same(page.hits, expected)
    assert page.total == len(everything)
    first_cursor = page.next_cursor
    walked, cursor = list(page.hits), page.next_cursor
    while cursor is not None and len(walked) <= len(everything):  # a wrong cursor may loop
        page = index.search_page(**{**search, "offset": 0}, cursor=cursor)
        walked.extend(page.hits)
        cursor = page.next_cursor
    assert_same(walked, everything[search["offset"] :])
    # a total capped below the count: the same hits and cursors, each page "more than"
    cap = len(everything) // 2
    if not cap:
        return
    page = index.search_page(**search, total_cap=cap)
    assert_same(page.hits, expected)
    assert (page.total, page.total_exact, page.next_cursor) == (cap, False, first_cursor)
    walked, cursor = list(page.hits), page.next_cursor
    while cursor is not None and len(walked) <= len(everything):
        page = index.search_page(**{**search, "offset": 0}, cursor=cursor, total_cap=cap)
        assert (page.total, page.total_exact) == (cap, False)
        walked.extend(page.hits)
        cursor = page.next_cursor
    assert_same(walked, everything[search["offset"] :])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=corpora(), searches=st.lists(SEARCHES, min_size=1, max_size=4))
def test_database_backend_matches_the_oracle(records, searches):
    check_corpus(records, searches, substring=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=corpora(), searches=st.lists(SEARCHES, min_size=1, max_size=4))
def test_like_fallback_matches_substrings(records, searches):
    if connection.vendor != "sqlite":
        pytest.skip("the LIKE fallback is SQLite's")
    with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "like"}):
        assert DjangoTranscriptIndex().backend_name == "sqlite-like"
        check_corpus(records, searches, substring=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=corpora(), searches=st.lists(SEARCHES, min_size=1, max_size=4))
def test_fts5_index_route_matches_the_oracle(records, searches):
    """Small scopes scan their rows; with the scan off every scoped search goes to FTS5."""
    if connection.vendor != "sqlite":
        pytest.skip("the scan route is SQLite FTS5's")
    with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SCAN_SCOPE_MAX": 0}):
        assert DjangoTranscriptIndex().backend_name == "sqlite-fts5"
        check_corpus(records, searches, substring=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=corpora(), searches=st.lists(SEARCHES, min_size=1, max_size=4))
def test_fts5_scan_with_masks_in_python_matches_the_oracle(records, searches):
    """Small scopes scan their rows; every query, however short, finds each row's mask
    in Python (by default only queries of ``scan_python_min_terms`` terms do)."""
    if connection.vendor != "sqlite":
        pytest.skip("the scan route is SQLite FTS5's")
    with mock.patch.object(policy, "FORCED", forced_policies(scan_python_min_terms=1)):
        assert DjangoTranscriptIndex().backend_name == "sqlite-fts5"
        check_corpus(records, searches, substring=False)


# Few words, many shared: most queries have enough rows holding all their terms to walk.
DENSE_WORDS = st.sampled_from(["alpha", "beta", "gamma", "Alpha", "delta"])


@st.composite
def dense_corpora(draw: st.DrawFn) -> list[ChatRecord]:
    records = []
    for number in range(draw(st.integers(min_value=1, max_value=6))):
        texts = draw(st.lists(st.lists(DENSE_WORDS, max_size=4).map(" ".join), max_size=6))
        records.append(
            ChatRecord(
                chat_id=draw(st.sampled_from(["a", "B", "é", "chat-10", "chat-9"])) + f"-{number}",
                scope={"userId": draw(st.sampled_from(["ada", "bob"]))},
                messages=[
                    {"role": draw(st.sampled_from(["user", "assistant", "system"])), "content": t}
                    for t in texts
                ],
                updated_at=BASE + timedelta(minutes=draw(st.integers(0, 2))),
            )
        )
    return records


DENSE_SEARCHES = st.fixed_dictionaries(
    {
        "scope": st.sampled_from([{}, {"userId": "ada"}]),
        "query": st.lists(DENSE_WORDS, min_size=1, max_size=5).map(" ".join),
        "around": st.sampled_from([None, 1]),
        "limit": st.integers(1, 5),
        "offset": st.integers(0, 3),
        **FILTERS,
    }
)


ROUTES = {
    # the full-mask walk whenever one row holds every term (else one ranking statement)
    "walk": {"WALK_MIN_ROWS": 1},
    # fewer full-mask rows than a walk needs: a page of them (or one term's matches) read
    "full-mask read": {"WALK_MIN_ROWS": 8},
    # every scope counts masks first, then reads the page's masks through the index
    # (PostgreSQL: the scope filtered inside GIN by its lexemes)
    "pruned": {"WALK_MIN_ROWS": 10**9, "SINGLE_STATEMENT_MAX": 0, "LEXEME_SCOPE_MIN": 0},
    # ... and walks every page mask holding at least a page of rows
    "pruned+walk": {"WALK_MIN_ROWS": 1, "SINGLE_STATEMENT_MAX": 0, "LEXEME_SCOPE_MIN": 0},
    # one ranking statement, the scope filtered inside GIN (PostgreSQL)
    "lexemes": {"WALK_MIN_ROWS": 10**9, "LEXEME_SCOPE_MIN": 0},
    # every term counted in the index, then the rarest terms' rows until the page is exact
    "essential": {
        "WALK_MIN_ROWS": 10**9,
        "SINGLE_STATEMENT_MAX": 0,
        "LEXEME_SCOPE_MIN": 0,
        "ESSENTIAL_MIN_TERMS": 1,
    },
    # ... the terms of at most 8 rows in all read first, in one statement
    "essential+rare": {
        "WALK_MIN_ROWS": 10**9,
        "SINGLE_STATEMENT_MAX": 0,
        "LEXEME_SCOPE_MIN": 0,
        "ESSENTIAL_MIN_TERMS": 1,
        "ESSENTIAL_RARE_ROWS": 8,
    },
    # ... two or more terms left over its budget: their masks, best first, walked within
    # the newest chats the counts predict hold them
    "essential+unread": {
        "WALK_MIN_ROWS": 10**9,
        "SINGLE_STATEMENT_MAX": 0,
        "LEXEME_SCOPE_MIN": 0,
        "ESSENTIAL_MIN_TERMS": 1,
        "ESSENTIAL_MAX_ROWS": 0,
    },
    # ... each mask's rows read and sorted
    "essential+unread+read": {
        "WALK_MIN_ROWS": 10**9,
        "SINGLE_STATEMENT_MAX": 0,
        "LEXEME_SCOPE_MIN": 0,
        "ESSENTIAL_MIN_TERMS": 1,
        "ESSENTIAL_MAX_ROWS": 0,
        "WALK_GUESS_MAX_ROWS": 0,
    },
    # ... giving up for the mask plans after a few rows
    "essential+fallback": {
        "WALK_MIN_ROWS": 10**9,
        "SINGLE_STATEMENT_MAX": 0,
        "LEXEME_SCOPE_MIN": 0,
        "ESSENTIAL_MIN_TERMS": 1,
        "ESSENTIAL_MAX_ROWS": 3,
        "UNREAD_MAX_TERMS": 0,
        "TIERED_MAX_TERMS": 0,
    },
    # ... the unread terms' masks read in tiers of equal or better raw score
    "essential+tiers": {
        "WALK_MIN_ROWS": 10**9,
        "SINGLE_STATEMENT_MAX": 0,
        "LEXEME_SCOPE_MIN": 0,
        "ESSENTIAL_MIN_TERMS": 1,
        "ESSENTIAL_MAX_ROWS": 0,
        "UNREAD_MAX_TERMS": 0,
    },
}


@contextmanager
def route(name: str) -> Iterator[None]:
    values = ROUTES[name]
    with (
        mock.patch.object(
            policy,
            "FORCED",
            forced_policies(
                small_read_rows=values["WALK_MIN_ROWS"],
                single_statement_max=values.get("SINGLE_STATEMENT_MAX", 5_000),
                lexeme_scope_min=values.get("LEXEME_SCOPE_MIN", 10_000),
                essential_min_terms=values.get("ESSENTIAL_MIN_TERMS", 5),
                essential_max_rows=values.get("ESSENTIAL_MAX_ROWS", 20_000),
                essential_rare_rows=values.get("ESSENTIAL_RARE_ROWS", 0),
                big_read_rows=values.get("WALK_GUESS_MAX_ROWS", 16_384),
                unread_terms_max=values.get("UNREAD_MAX_TERMS", 5),
                tiered_terms_max=values.get("TIERED_MAX_TERMS", 8),
            ),
        ),
        override_settings(
            DEUZ_TRANSCRIPTS={**django_settings.DEUZ_TRANSCRIPTS, "SQLITE_SCAN_SCOPE_MAX": 0}
        ),
    ):
        yield


@pytest.mark.parametrize("name", sorted(ROUTES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=dense_corpora(), searches=st.lists(DENSE_SEARCHES, min_size=1, max_size=4))
def test_every_search_route_matches_the_oracle(name, records, searches):
    """Dense words, so pages fill from one mask and walks and pruned plans really run."""
    if not DjangoTranscriptIndex().backend.source.walks_newest_first:
        pytest.skip("the LIKE fallback ranks every match in one statement")
    with route(name):
        check_corpus(records, searches, substring=False)
