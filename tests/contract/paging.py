"""``search_page``: the exact match count and cursors that survive writes meanwhile."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from deuz_transcripts import InvalidRecord, SearchPage
from deuz_transcripts.cursors import decode_cursor
from deuz_transcripts.search_request import SearchRequest
from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, BOB, T0, assistant, chat, keys, user
from tests.cursor_forgery import HUGE, forged_cursors, resigned


def _walk(index, scope, query, *, limit, **options) -> tuple[list, list[int]]:
    """Every page through the cursors: the hits in order and each page's total."""
    hits, totals, cursor = [], [], None
    for _ in range(100):
        page = index.search_page(scope, query, limit=limit, cursor=cursor, **options)
        hits.extend(page.hits)
        totals.append(page.total)
        cursor = page.next_cursor
        if cursor is None:
            return hits, totals
    raise AssertionError("the cursors never ended")


def _corpus(store) -> None:
    """Twelve chats, two per minute, whose messages hold alpha, beta or both."""
    for number in range(12):
        store.write_chat(
            chat(
                f"c{number:02d}",
                "alpha beta" if number % 3 == 0 else "alpha",
                "beta",
                "gamma",
                "alpha" if number % 2 else "delta",
                updated_at=T0 + timedelta(minutes=number // 2),
            ),
            expected_revision=0,
        )


def _summary(hits: list) -> list[tuple]:
    return [(h.chat_id, h.message_id, h.index, h.score) for h in hits]


class PagingContract(ContractBase):
    """Pages in ``search()``'s order, an exact ``total``, opaque cursors bound to their
    search, and no untouched hit repeated or skipped while chats are written."""

    # ------------------------------------------------------------------ pages and totals

    def test_first_page_is_search_with_the_exact_total(self, store, index):
        _corpus(store)
        page = index.search_page(ADA, "alpha beta", limit=5, around=1)
        assert isinstance(page, SearchPage)
        assert page.hits == index.search(ADA, "alpha beta", limit=5, around=1)
        assert all(hit.spans for hit in page.hits)  # why each hit matched, as search() says
        assert page.total == len(index.search(ADA, "alpha beta", limit=1000)) == 30
        assert page.has_next

    @pytest.mark.parametrize("limit", [1, 3, 7, 30, 50])
    def test_cursors_walk_every_hit_once_in_order(self, store, index, limit):
        _corpus(store)
        hits, totals = _walk(index, ADA, "alpha beta", limit=limit)
        assert _summary(hits) == _summary(index.search(ADA, "alpha beta", limit=1000))
        assert set(totals) == {30}

    def test_last_page_has_no_cursor(self, store, index):
        _corpus(store)
        assert index.search_page(ADA, "alpha beta", limit=30).next_cursor is None
        assert index.search_page(ADA, "alpha beta", limit=29).next_cursor is not None
        assert index.search_page(ADA, "nothinghere").next_cursor is None

    def test_cursors_with_filters_and_offset(self, store, index):
        _corpus(store)
        options = {"roles": ["assistant"], "updated_after": T0, "chat_ids": None}
        expected = index.search(ADA, "alpha beta", limit=1000, **options)
        hits, totals = _walk(index, ADA, "alpha beta", limit=2, **options)
        assert _summary(hits) == _summary(expected)
        assert set(totals) == {len(expected)}
        first = index.search_page(ADA, "alpha beta", limit=2, **options)
        skipped = index.search_page(
            ADA, "alpha beta", limit=2, offset=3, cursor=first.next_cursor, **options
        )
        assert _summary(skipped.hits) == _summary(expected[5:7])

    @pytest.mark.parametrize(
        "window",
        [
            {"updated_after": T0 + timedelta(minutes=3)},
            {"updated_before": T0 + timedelta(minutes=2)},
            {"updated_after": T0, "updated_before": T0 + timedelta(minutes=5)},
        ],
    )
    @pytest.mark.parametrize("query", ["alpha beta", "beta delta", "gamma"])
    def test_a_window_s_pages_keep_the_scores_of_the_search_without_it(
        self, store, index, window, query
    ):
        """A window filters hits only: its pages, cursors and capped totals serve the
        hits of the search without it that the window holds, scored as there."""
        _corpus(store)
        after, before = window.get("updated_after"), window.get("updated_before")
        kept = [
            hit
            for hit in index.search(ADA, query, limit=1000)
            if (after is None or store.load_chat(hit.chat_id)[0].updated_at > after)
            and (before is None or store.load_chat(hit.chat_id)[0].updated_at < before)
        ]
        assert 0 < len(kept) < 30
        for limit in (1, 4):
            hits, totals = _walk(index, ADA, query, limit=limit, **window)
            assert _summary(hits) == _summary(kept)
            assert set(totals) == {len(kept)}
            hits, totals = _walk(index, ADA, query, limit=limit, total_cap=2, **window)
            assert _summary(hits) == _summary(kept)
            assert set(totals) == {min(2, len(kept))}

    def test_a_window_s_cursor_pins_the_ranking_of_the_search_without_it(self, store, index):
        """N, every n_t and the best mask a windowed page's cursor carries are those of the
        search without the window, whatever the window keeps."""
        _corpus(store)

        def pinned(**window):
            page = index.search_page(ADA, "alpha beta delta", limit=1, **window)
            request = SearchRequest.build(ADA, "alpha beta delta", limit=1, **window)
            return decode_cursor(page.next_cursor, request).pinned

        every = pinned()
        for window in (
            {"updated_after": T0 + timedelta(minutes=3)},
            {"updated_before": T0 + timedelta(minutes=1)},
            {"updated_after": T0, "updated_before": T0 + timedelta(minutes=4)},
        ):
            assert pinned(**window) == every

    def test_limit_zero_counts_only(self, store, index):
        _corpus(store)
        page = index.search_page(ADA, "gamma", limit=0)
        assert (page.hits, page.total, page.next_cursor) == ([], 12, None)

    def test_nothing_to_find_is_an_empty_page(self, store, index):
        _corpus(store)
        for options in ({"roles": []}, {"chat_ids": []}, {}):
            page = index.search_page(ADA, "alpha" if options else "...", **options)
            assert (page.hits, page.total, page.next_cursor) == ([], 0, None)
        assert index.search_page(BOB, "alpha").total == 0

    def test_chats_a_microsecond_apart_and_before_1970_keep_their_order(self, store, index):
        """Tie order and cursors hold each chat's time to the microsecond, before the
        epoch too (PostgreSQL hands the plan integer microseconds, SQLite text)."""
        times = [
            datetime(1901, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
            datetime(1969, 12, 31, 23, 59, 59, 999_998, tzinfo=UTC),
            datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
            datetime(1970, 1, 1, tzinfo=UTC),
            datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
            T0 + timedelta(microseconds=1),
            T0,
        ]
        for number, updated_at in enumerate(times):
            store.write_chat(
                chat(f"t{number}", "alpha", "alpha beta", updated_at=updated_at),
                expected_revision=0,
            )
        newest_first = [f"t{number}" for number in (5, 6, 4, 3, 2, 1, 0)]
        hits = index.search(ADA, "alpha", limit=100)
        assert [h.chat_id for h in hits[::2]] == newest_first
        for limit in (1, 2, 3):
            walked, totals = _walk(index, ADA, "alpha", limit=limit)
            assert _summary(walked) == _summary(hits)
            assert set(totals) == {14}
        walked, _ = _walk(index, ADA, "alpha beta", limit=1, total_cap=3)
        assert _summary(walked) == _summary(index.search(ADA, "alpha beta", limit=100))

    # ------------------------------------------------------------------ a capped total

    @pytest.mark.parametrize("cap", [1, 7, 29, 30, 31, 10_000])
    def test_a_capped_total_says_more_than_the_cap(self, store, index, cap):
        _corpus(store)
        page = index.search_page(ADA, "alpha beta", limit=5, around=1, total_cap=cap)
        exact = index.search_page(ADA, "alpha beta", limit=5, around=1)
        assert (page.total, page.total_exact) == ((30, True) if cap >= 30 else (cap, False))
        # only the count is capped: the same hits, scores and cursor
        assert page.hits == exact.hits
        assert page.next_cursor == exact.next_cursor

    @pytest.mark.parametrize("limit", [1, 4, 13])
    def test_capped_cursors_walk_every_hit_once_in_order(self, store, index, limit):
        _corpus(store)
        options = {"total_cap": 5}
        hits, totals = _walk(index, ADA, "alpha beta", limit=limit, **options)
        assert _summary(hits) == _summary(index.search(ADA, "alpha beta", limit=1000))
        assert set(totals) == {5}  # every page: more than 5 of the 30 match

    def test_capped_pages_with_filters_and_offset(self, store, index):
        _corpus(store)
        options = {"roles": ["assistant"], "updated_after": T0}
        expected = index.search(ADA, "alpha beta", limit=1000, **options)
        assert len(expected) > 3
        hits, totals = _walk(index, ADA, "alpha beta", limit=2, total_cap=3, **options)
        assert _summary(hits) == _summary(expected)
        assert set(totals) == {3}
        first = index.search_page(ADA, "alpha beta", limit=2, total_cap=3, **options)
        skipped = index.search_page(
            ADA, "alpha beta", limit=2, offset=1, cursor=first.next_cursor, total_cap=2, **options
        )
        assert _summary(skipped.hits) == _summary(expected[3:5])
        assert (skipped.total, skipped.total_exact) == (2, False)
        one_term = index.search_page(ADA, "gamma", limit=0, total_cap=11)
        assert (one_term.hits, one_term.total, one_term.total_exact) == ([], 11, False)

    def test_a_cap_past_the_last_match_and_nothing_to_find(self, store, index):
        _corpus(store)
        past = index.search_page(ADA, "alpha beta", offset=40, total_cap=3)
        assert (past.hits, past.total, past.total_exact, past.next_cursor) == ([], 3, False, None)
        none = index.search_page(ADA, "nothinghere", total_cap=3)
        assert (none.hits, none.total, none.total_exact) == ([], 0, True)

    @pytest.mark.parametrize("cap", [0, -1, True, 1.5, "10", 2**31])
    def test_a_bad_total_cap_is_invalid_record(self, store, index, cap):
        _corpus(store)
        with pytest.raises(InvalidRecord) as caught:
            index.search_page(ADA, "alpha", total_cap=cap)
        assert caught.value.field == "total_cap"

    # ------------------------------------------------------------------ cursors

    def test_a_cursor_belongs_to_its_search(self, store, index):
        _corpus(store)
        cursor = index.search_page(ADA, "alpha beta", limit=2).next_cursor
        # the same search: another spelling of the same terms, another limit or around
        assert index.search_page(ADA, "ALPHA, Béta!", cursor=cursor, limit=3, around=1).hits
        for scope, query, options in [
            (BOB, "alpha beta", {}),
            (ADA, "alpha", {}),
            (ADA, "beta alpha", {}),
            (ADA, "alpha beta", {"roles": ["user"]}),
            (ADA, "alpha beta", {"updated_after": T0}),
            (ADA, "alpha beta", {"updated_before": T0 + timedelta(days=1)}),
            (ADA, "alpha beta", {"chat_ids": ["c01"]}),
        ]:
            with pytest.raises(InvalidRecord) as caught:
                index.search_page(scope, query, cursor=cursor, **options)
            assert caught.value.field == "cursor"

    def test_garbage_and_tampered_cursors_are_invalid_record(self, store, index):
        _corpus(store)
        cursor = index.search_page(ADA, "alpha beta", limit=2).next_cursor
        body, signature = cursor.split(".")
        raw = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        tampered = [body, f"{body}.", f".{signature}", f"{cursor}.{signature}"]
        for position in (0, 9, len(raw) // 2, len(raw) - 2):
            changed = bytearray(raw)
            changed[position] ^= 0x01
            changed_body = base64.urlsafe_b64encode(bytes(changed)).decode().rstrip("=")
            tampered.append(f"{changed_body}.{signature}")
        tampered.append(f"{body}.{signature[:-1]}{'A' if signature[-1] != 'A' else 'B'}")
        for bad in [
            "",
            "x",
            "not a cursor!",
            "====",
            cursor[:-3],
            cursor + "AAAA",
            "\ud800",
            "A" * 100_000,
            base64.urlsafe_b64encode(b"\x00" * 8 + b'{"v":1}').decode(),
            *tampered,
        ]:
            with pytest.raises(InvalidRecord) as caught:
                index.search_page(ADA, "alpha beta", cursor=bad)
            assert caught.value.field == "cursor"
        for not_a_string in (1, b"abc", ["x"]):
            with pytest.raises(InvalidRecord) as caught:
                index.search_page(ADA, "alpha beta", cursor=not_a_string)
            assert caught.value.field == "cursor"

    def test_forged_cursors_are_invalid_record(self, store, index):
        """A client rewrites the counts its cursor pins (every idf 0.0) and reseals it:
        ``InvalidRecord("cursor")``, never a division by zero."""
        _corpus(store)
        cursor = index.search_page(ADA, "alpha beta", limit=2).next_cursor
        forgeries = [
            *forged_cursors(cursor),
            *forged_cursors(cursor, k=[1, 0, "c00", 0]),  # another last hit
            *forged_cursors(cursor, q="0" * 16),  # another search's fingerprint
        ]
        for forged in forgeries:
            with pytest.raises(InvalidRecord) as caught:
                index.search_page(ADA, "alpha beta", cursor=forged)
            assert caught.value.field == "cursor"

    def test_a_signed_cursor_must_pin_counts_that_still_rank(self, store, index):
        """Signed with the server's key, counts whose idfs are 0.0 still do not rank:
        ``InvalidRecord("cursor")``; the same cursor with its own counts is read."""
        _corpus(store)
        cursor = index.search_page(ADA, "alpha beta", limit=2).next_cursor
        assert index.search_page(ADA, "alpha beta", cursor=resigned(cursor, v=2)).hits
        for changes in [
            {"n": HUGE, "t": [HUGE, HUGE]},
            {"n": HUGE, "t": [HUGE, 0]},
            {"n": HUGE + 1},
            {"n": 0},
            {"t": [-1, 0]},
            {"b": 0},
        ]:
            with pytest.raises(InvalidRecord) as caught:
                index.search_page(ADA, "alpha beta", cursor=resigned(cursor, **changes))
            assert caught.value.field == "cursor"

    def test_cursors_follow_secret_key_rotation(self, store, index):
        """Signed by ``SECRET_KEY``; one signed by a key of ``SECRET_KEY_FALLBACKS`` is
        still read while the key rotates, one of a key no longer listed is not."""
        _corpus(store)
        with override_settings(SECRET_KEY="old-key-" + "x" * 50):
            cursor = index.search_page(ADA, "alpha beta", limit=2).next_cursor
            expected = index.search_page(ADA, "alpha beta", cursor=cursor).hits
        assert expected
        new_key = "new-key-" + "y" * 50
        with override_settings(SECRET_KEY=new_key, SECRET_KEY_FALLBACKS=["old-key-" + "x" * 50]):
            assert index.search_page(ADA, "alpha beta", cursor=cursor).hits == expected
            assert index.search_page(ADA, "alpha beta", limit=2).next_cursor != cursor
        with override_settings(SECRET_KEY=new_key, SECRET_KEY_FALLBACKS=[]):
            with pytest.raises(InvalidRecord) as caught:
                index.search_page(ADA, "alpha beta", cursor=cursor)
            assert caught.value.field == "cursor"

    # ------------------------------------------------------------------ writes meanwhile

    def test_writes_meanwhile_neither_repeat_nor_skip_untouched_hits(self, store, index):
        """Chats written, rewritten and deleted between pages: every hit of a chat left
        alone is served exactly once, and the pages stay in the first page's order."""
        _corpus(store)
        before = index.search(ADA, "alpha beta", limit=1000)
        seen: list = []
        page = index.search_page(ADA, "alpha beta", limit=4)
        seen.extend(page.hits)
        # newer chats full of alpha: N and n_alpha grow, and they sort before the cursor
        for number in range(6):
            store.write_chat(
                chat(f"n{number}", "alpha", "alpha", updated_at=T0 + timedelta(hours=1)),
                expected_revision=0,
            )
        page = index.search_page(ADA, "alpha beta", limit=4, cursor=page.next_cursor)
        seen.extend(page.hits)
        store.delete_chat("c05")  # a chat not served yet
        store.write_chat(
            chat("old", "beta", "alpha", updated_at=T0 - timedelta(hours=1)),
            expected_revision=0,
        )
        touched = {"n0", "n1", "n2", "n3", "n4", "n5", "c05", "old"}
        cursor = page.next_cursor
        while cursor is not None:
            page = index.search_page(ADA, "alpha beta", limit=4, cursor=cursor)
            seen.extend(page.hits)
            cursor = page.next_cursor
        untouched = [(h.chat_id, h.index) for h in before if h.chat_id not in touched]
        served = [(h.chat_id, h.index) for h in seen if h.chat_id not in touched]
        assert served == untouched
        assert "c05" not in {h.chat_id for h in seen[8:]}

    def test_pinned_ranking_keeps_the_order_when_idfs_change(self, store, index):
        """alpha is rarer than beta on the first page; enough alpha written meanwhile
        would rank beta first if the next page re-ranked: it must not skip beta."""
        store.write_chat(chat("c1", "alpha", "beta", "beta", updated_at=T0), expected_revision=0)
        first = index.search_page(ADA, "alpha beta", limit=1)
        assert keys(first.hits) == [("c1", 0)]
        for number in range(5):  # newer: they sort before the cursor's hit
            store.write_chat(
                chat(f"x{number}", "alpha", "alpha", updated_at=T0 + timedelta(days=1)),
                expected_revision=0,
            )
        assert keys(index.search(ADA, "alpha beta", limit=2)) == [("c1", 1), ("c1", 2)]
        rest = index.search_page(ADA, "alpha beta", limit=50, cursor=first.next_cursor)
        assert keys(rest.hits) == [("c1", 1), ("c1", 2)]
        assert rest.total == 13
        assert all(0 < h.score < 1.0 for h in rest.hits)

    def test_a_rewritten_cursor_chat_keeps_its_place(self, store, index):
        store.write_chat(chat("a", "alpha", "alpha", "alpha", updated_at=T0), expected_revision=0)
        store.write_chat(
            chat("b", "alpha", updated_at=T0 - timedelta(minutes=1)), expected_revision=0
        )
        first = index.search_page(ADA, "alpha", limit=2)
        assert keys(first.hits) == [("a", 0), ("a", 1)]
        # the cursor's own chat written again, same time: the rest of it follows
        store.write_chat(
            chat("a", "alpha", "alpha", "alpha", "beta", updated_at=T0), expected_revision=1
        )
        rest = index.search_page(ADA, "alpha", limit=10, cursor=first.next_cursor)
        assert keys(rest.hits) == [("a", 2), ("b", 0)]

    def test_async_search_page(self, store, index):
        store.write_chat(chat("c1", user("alpha"), assistant("alpha")), expected_revision=0)

        async def scenario() -> tuple[SearchPage, SearchPage]:
            first = await index.asearch_page(ADA, "alpha", limit=1, roles=["user", "assistant"])
            return first, await index.asearch_page(
                ADA, "alpha", limit=1, cursor=first.next_cursor, roles=["assistant", "user"]
            )

        first, second = asyncio.run(scenario())
        assert keys(first.hits + second.hits) == [("c1", 0), ("c1", 1)]
        assert (first.total, second.next_cursor) == (2, None)
        capped = asyncio.run(index.asearch_page(ADA, "alpha", limit=1, total_cap=1))
        assert (capped.hits, capped.total, capped.total_exact) == (first.hits, 1, False)
