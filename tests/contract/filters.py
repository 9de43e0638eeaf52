"""Search filters of SPEC section 8: ``roles`` and the ``updated_at`` window.

``roles`` narrows the messages a search may return, and N and every n_t with them, as
``chat_ids`` does. A window filters hits only: N and every n_t are those of the same
search without it, so a hit scores the same with or without a window. The scores below
are written out from the IDF formula.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from deuz_transcripts import InvalidRecord
from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, BOB, T0, assistant, chat, idf, keys, system, user

T1 = T0 + timedelta(minutes=1)
T2 = T0 + timedelta(minutes=2)


def window_admits(window: dict[str, datetime]) -> Callable[[datetime], bool]:
    """Whether a chat updated at a time is strictly inside ``window``."""
    after, before = window.get("updated_after"), window.get("updated_before")
    return lambda moment: (after is None or moment > after) and (before is None or moment < before)


def _tool(text: str) -> dict:
    return {"role": "tool", "content": text}


class FilterContract(ContractBase):
    """``roles=`` keeps messages of those roles; ``updated_after=``/``updated_before=``
    keep chats updated strictly inside the window; N and n_t follow the roles, never
    the window."""

    # ------------------------------------------------------------------ roles

    def test_roles_keep_only_those_messages_and_count_n_over_them(self, store, index):
        store.write_chat(
            chat(
                "c1",
                user("alpha beta"),
                assistant("alpha"),
                user("alpha"),
                _tool("alpha"),
                user("gamma"),
                system("alpha"),
            ),
            expected_revision=0,
        )
        hits = index.search(ADA, "alpha beta", roles=["user"])
        assert keys(hits) == [("c1", 0), ("c1", 2)]
        total, n_alpha, n_beta = 3, 2, 1  # the user messages only
        best = idf(total, n_alpha) + idf(total, n_beta)
        assert [h.score for h in hits] == pytest.approx([1.0, idf(total, n_alpha) / best])
        both = index.search(ADA, "alpha", roles=("assistant", "tool"))
        assert keys(both) == [("c1", 1), ("c1", 3)]
        assert index.search(ADA, "alpha", roles=["user", "assistant", "tool"]) == index.search(
            ADA, "alpha"
        )

    def test_roles_change_the_ranking_through_n_and_n_t(self, store, index):
        # Among every message alpha (2 of 4) is commoner than zeta (1 of 4); among the
        # user messages both are in 1 of 2, so both hits score 1.0.
        store.write_chat(
            chat("c1", user("alpha beta"), user("zeta"), assistant("alpha"), assistant("beta")),
            expected_revision=0,
        )
        unfiltered = index.search(ADA, "alpha zeta")
        assert keys(unfiltered) == [("c1", 1), ("c1", 0), ("c1", 2)]
        assert unfiltered[1].score == pytest.approx(idf(4, 2) / idf(4, 1))
        hits = index.search(ADA, "alpha zeta", roles=["user"])
        assert keys(hits) == [("c1", 0), ("c1", 1)]
        assert [h.score for h in hits] == [1.0, 1.0]

    def test_around_shows_neighbours_of_every_role(self, store, index):
        store.write_chat(
            chat("c1", user("question"), assistant("alpha"), _tool("output"), user("thanks")),
            expected_revision=0,
        )
        [hit] = index.search(ADA, "alpha question", roles=["assistant"], around=1)
        assert (hit.index, [m.index for m in hit.around]) == (1, [0, 2])

    def test_empty_roles_and_unknown_roles_find_nothing(self, store, index):
        store.write_chat(chat("c1", "alpha", system("alpha")), expected_revision=0)
        assert index.search(ADA, "alpha", roles=[]) == []
        assert index.search(ADA, "alpha", roles=["nobody"]) == []
        assert index.search(ADA, "alpha", roles=["system"]) == []  # never indexed
        assert len(index.search(ADA, "alpha", roles=None)) == 1

    @pytest.mark.parametrize(
        "roles", ["user", b"user", ["user", 3], [None], 5, ["\x00"], ["\ud800"]]
    )
    def test_bad_roles_are_invalid_record(self, index, roles):
        with pytest.raises(InvalidRecord) as caught:
            index.search(ADA, "alpha", roles=roles)
        assert caught.value.field == "roles"

    def test_roles_combine_with_scope_and_chat_ids(self, store, index):
        store.write_chat(chat("c1", "alpha", "alpha"), expected_revision=0)
        store.write_chat(chat("c2", "alpha", "alpha"), expected_revision=0)
        store.write_chat(chat("b1", "alpha", "alpha", scope=BOB), expected_revision=0)
        hits = index.search(ADA, "alpha", roles=["assistant"], chat_ids=["c2", "b1"])
        assert keys(hits) == [("c2", 1)]

    # ------------------------------------------------------------------ updated_at window

    def _three_chats(self, store):
        store.write_chat(chat("old", "alpha", "beta", updated_at=T0), expected_revision=0)
        store.write_chat(chat("mid", "alpha", "gamma", updated_at=T1), expected_revision=0)
        store.write_chat(chat("new", "alpha beta", updated_at=T2), expected_revision=0)

    def test_window_bounds_are_strict(self, store, index):
        self._three_chats(store)

        def chats(**window):
            return [h.chat_id for h in index.search(ADA, "alpha", **window)]

        assert chats(updated_after=T0) == ["new", "mid"]
        assert chats(updated_before=T2) == ["mid", "old"]
        assert chats(updated_after=T0, updated_before=T2) == ["mid"]
        assert chats(updated_after=T1, updated_before=T1) == []
        assert chats(updated_after=T2) == []
        # the same instant in another zone is the same bound
        plus_two = T1.astimezone(timezone(timedelta(hours=2)))
        assert chats(updated_after=plus_two) == ["new"]

    def test_a_window_leaves_n_and_n_t_as_without_it(self, store, index):
        self._three_chats(store)
        hits = index.search(ADA, "alpha beta", updated_before=T2)
        # every chat: alpha, beta, alpha, gamma, alpha beta
        total, n_alpha, n_beta = 5, 3, 2
        best = idf(total, n_alpha) + idf(total, n_beta)  # "new", outside the window
        assert keys(hits) == [("old", 1), ("mid", 0), ("old", 0)]
        assert [h.score for h in hits] == pytest.approx(
            [idf(total, n_beta) / best, idf(total, n_alpha) / best, idf(total, n_alpha) / best]
        )
        assert hits[0].score < 1.0  # the best hit of every chat is outside the window

    def test_a_window_keeps_the_order_of_the_search_without_it(self, store, index):
        # Among every message xray (2 of 7) is rarer than yoke (5 of 7); inside the
        # window yoke (1 of 3) is rarer than xray (2 of 3). The window's hits keep the
        # order and scores of the search without it.
        store.write_chat(
            chat("old", "yoke", "yoke", "yoke", "yoke", updated_at=T0), expected_revision=0
        )
        store.write_chat(chat("new", "xray", "xray", "yoke", updated_at=T1), expected_revision=0)
        hits = index.search(ADA, "xray yoke", updated_after=T0)
        assert keys(hits) == [("new", 0), ("new", 1), ("new", 2)]
        assert [h.score for h in hits] == pytest.approx([1.0, 1.0, idf(7, 5) / idf(7, 2)])

    @pytest.mark.parametrize(
        "window",
        [
            {"updated_after": T0},
            {"updated_before": T2},
            {"updated_after": T0, "updated_before": T2},
            {"updated_before": T1},
            {"updated_after": T2},
        ],
    )
    @pytest.mark.parametrize("query", ["alpha", "alpha beta", "beta gamma", "gamma alpha beta"])
    def test_a_window_filters_the_hits_of_the_search_without_it(self, store, index, window, query):
        self._three_chats(store)
        store.write_chat(
            chat("more", "beta gamma", "alpha", "gamma", updated_at=T1 + timedelta(seconds=30)),
            expected_revision=0,
        )
        inside = window_admits(window)
        for options in ({}, {"roles": ["user"]}, {"chat_ids": ["old", "new", "more"]}):
            every = index.search(ADA, query, limit=100, **options)
            kept = [
                (h.chat_id, h.index, h.score)
                for h in every
                if inside(store.load_chat(h.chat_id)[0].updated_at)
            ]
            hits = index.search(ADA, query, limit=100, **window, **options)
            assert [(h.chat_id, h.index, h.score) for h in hits] == kept
            page = index.search_page(ADA, query, limit=2, **window, **options)
            assert page.total == len(kept)
            assert [(h.chat_id, h.index, h.score) for h in page.hits] == kept[:2]

    def test_window_follows_rewrites(self, store, index):
        self._three_chats(store)
        store.write_chat(chat("old", "alpha", "beta", updated_at=T2), expected_revision=1)
        assert [h.chat_id for h in index.search(ADA, "beta", updated_after=T1)] == ["new", "old"]

    def test_window_bounds_at_the_ends_of_time(self, store, index):
        self._three_chats(store)
        earliest = datetime.min.replace(tzinfo=UTC)
        latest = datetime.max.replace(tzinfo=UTC)
        assert len(index.search(ADA, "alpha", updated_after=earliest, updated_before=latest)) == 3
        for name, value in [
            ("updated_after", datetime.min.replace(tzinfo=timezone(timedelta(hours=1)))),
            ("updated_before", datetime.max.replace(tzinfo=timezone(timedelta(hours=-1)))),
        ]:
            with pytest.raises(InvalidRecord) as caught:
                index.search(ADA, "alpha", **{name: value})
            assert caught.value.field == name

    @pytest.mark.parametrize("name", ["updated_after", "updated_before"])
    @pytest.mark.parametrize(
        "value", [datetime(2024, 5, 1), "2024-05-01T00:00:00Z", 1714550400000, T0.date()]
    )
    def test_bad_window_bounds_are_invalid_record(self, index, name, value):
        with pytest.raises(InvalidRecord) as caught:
            index.search(ADA, "alpha", **{name: value})
        assert caught.value.field == name

    def test_every_filter_together(self, store, index):
        self._three_chats(store)
        hits = index.search(
            ADA, "alpha gamma", roles=["assistant"], updated_after=T0, chat_ids=["mid", "new"]
        )
        assert keys(hits) == [("mid", 1)]

    def test_async_search_takes_the_filters(self, store, index):
        self._three_chats(store)
        hits = asyncio.run(index.asearch(ADA, "alpha", roles=["user"], updated_after=T1))
        assert keys(hits) == [("new", 0)]
