"""Rarity-weighted ranking: idf, mask sums and page planning (SPEC section 4)."""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deuz_transcripts.paging import HitKey, PageAfter, PinnedRanking
from deuz_transcripts.ranking import (
    RankPlan,
    idf,
    mask_raw,
    masks_from_subset_counts,
    plan_page,
    sort_key,
)

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


# ---------------------------------------------------------------------- idf


@pytest.mark.parametrize(
    ("total", "matching", "expected"),
    [
        (1, 1, math.log(1 + 0.5 / 1.5)),
        (3, 1, math.log(1 + 2.5 / 1.5)),
        (3, 2, math.log(1.6)),
        (10, 1, math.log(1 + 9.5 / 1.5)),
        (10, 10, math.log(1 + 0.5 / 10.5)),
        (1_000_000, 1, math.log(1 + 999_999.5 / 1.5)),
    ],
)
def test_idf_values(total, matching, expected):
    assert idf(total, matching) == pytest.approx(expected, rel=1e-15)


def test_idf_is_positive_even_when_every_message_matches():
    for total in (1, 2, 10, 10_000):
        assert idf(total, total) > 0


def test_idf_decreases_as_a_term_gets_common():
    weights = [idf(100, n) for n in range(1, 101)]
    assert weights == sorted(weights, reverse=True)
    assert len(set(weights)) == 100


# ---------------------------------------------------------------------- mask_raw


def test_mask_raw_sums_the_weights_of_the_set_bits():
    idfs = [0.5, 1.25, 2.0]
    assert mask_raw(0b000, idfs) == 0.0
    assert mask_raw(0b001, idfs) == 0.5
    assert mask_raw(0b010, idfs) == 1.25
    assert mask_raw(0b101, idfs) == 2.5
    assert mask_raw(0b111, idfs) == 3.75


def test_mask_raw_adds_in_term_order():
    # Float addition is not associative: the sum must be the left-to-right one.
    idfs = [0.1, 0.2, 0.3, 1e16, -1e16]
    assert mask_raw(0b11111, idfs) == (((0.1 + 0.2) + 0.3) + 1e16) + -1e16
    idfs = [1e16, 1.0, -1e16]
    assert mask_raw(0b111, idfs) == ((1e16 + 1.0) + -1e16)


def test_mask_raw_ignores_bits_beyond_the_terms():
    assert mask_raw(0b1000, [1.0, 2.0, 3.0]) == 0.0


# ---------------------------------------------------------------------- plan_page


def test_plan_scores_relative_to_the_best_mask():
    # Terms a (bit 0) and b (bit 1); N = 3; a in 2 messages, b in 1.
    plan = plan_page({0b11: 1, 0b01: 1}, term_count=2, total=3, offset=0, limit=10)
    assert plan is not None
    a, b = idf(3, 2), idf(3, 1)
    assert plan.raws == {0b11: a + b, 0b01: a}
    assert plan.best == a + b
    assert plan.score(0b11) == 1.0
    assert plan.score(0b01) == pytest.approx(a / (a + b), abs=1e-12)
    assert plan.page_masks == {0b11, 0b01}


def test_plan_counts_term_matches_from_the_histogram():
    # a: 1 + 3 = 4 messages, b: 1 + 2 = 3 messages, N = 10.
    plan = plan_page({0b11: 1, 0b01: 3, 0b10: 2}, term_count=2, total=10, offset=0, limit=10)
    assert plan.raws[0b01] == idf(10, 4)
    assert plan.raws[0b10] == idf(10, 3)
    assert plan.raws[0b11] == idf(10, 4) + idf(10, 3)


def test_plan_only_keeps_masks_that_reach_the_page():
    # Order of raws: 0b11 > 0b10 (rarer) > 0b01.
    histogram = {0b11: 2, 0b10: 3, 0b01: 50}
    plan = plan_page(histogram, term_count=2, total=100, offset=0, limit=2)
    assert plan.page_masks == {0b11}
    plan = plan_page(histogram, term_count=2, total=100, offset=0, limit=3)
    assert plan.page_masks == {0b11, 0b10}
    plan = plan_page(histogram, term_count=2, total=100, offset=4, limit=1)
    assert plan.page_masks == {0b11, 0b10}
    plan = plan_page(histogram, term_count=2, total=100, offset=5, limit=1)
    assert plan.page_masks == {0b11, 0b10, 0b01}


def test_plan_keeps_every_mask_tied_with_the_page_floor():
    # Two terms with the same match count weigh the same: masks 0b01 and 0b10 tie,
    # so a one-hit page must consider both (the tie is broken by recency later).
    plan = plan_page({0b01: 1, 0b10: 1}, term_count=2, total=2, offset=0, limit=1)
    assert plan.raws[0b01] == plan.raws[0b10]
    assert plan.page_masks == {0b01, 0b10}
    assert plan.score(0b01) == plan.score(0b10) == 1.0


def test_plan_ties_below_a_better_mask():
    histogram = {0b111: 1, 0b001: 4, 0b010: 4, 0b100: 4}
    plan = plan_page(histogram, term_count=3, total=20, offset=0, limit=2)
    assert plan.page_masks == {0b111, 0b001, 0b010, 0b100}
    plan = plan_page(histogram, term_count=3, total=20, offset=0, limit=1)
    assert plan.page_masks == {0b111}


def test_plan_page_reaching_past_the_last_match():
    plan = plan_page({0b1: 3}, term_count=1, total=3, offset=2, limit=10)
    assert plan is not None
    assert plan.page_masks == {0b1}


@pytest.mark.parametrize("offset", [3, 4, 1000])
def test_plan_offset_past_the_end_is_none(offset):
    assert plan_page({0b1: 2, 0b11: 1}, term_count=2, total=5, offset=offset, limit=5) is None


def test_plan_limit_zero_is_none():
    assert plan_page({0b1: 2}, term_count=1, total=5, offset=0, limit=0) is None


def test_plan_without_matches_is_none():
    assert plan_page({}, term_count=2, total=5, offset=0, limit=5) is None
    assert plan_page({0: 7}, term_count=2, total=5, offset=0, limit=5) is None
    assert plan_page({0b1: 0}, term_count=1, total=5, offset=0, limit=5) is None


def test_plan_never_lets_n_fall_below_a_match_count():
    # A stale or wrong total must not make an idf negative or undefined.
    plan = plan_page({0b1: 5}, term_count=1, total=2, offset=0, limit=5)
    assert plan.raws[0b1] == idf(5, 5) > 0


def test_plan_is_a_frozen_dataclass():
    plan = plan_page({0b1: 1}, term_count=1, total=1, offset=0, limit=1)
    assert isinstance(plan, RankPlan)
    with pytest.raises(AttributeError):
        plan.best = 2.0


def test_best_hit_scores_exactly_one():
    plan = plan_page(
        {0b1011: 1, 0b0001: 3, 0b0110: 2, 0b1000: 5}, term_count=4, total=37, offset=0, limit=20
    )
    best_mask = max(plan.raws, key=plan.raws.__getitem__)
    assert plan.score(best_mask) == 1.0
    assert all(0 < plan.score(mask) <= 1 for mask in plan.raws)


# ---------------------------------------------------------------------- sort_key


def test_sort_key_orders_best_first_then_newer_then_chat_id_then_index():
    rows = [
        (1.0, T0, "b", 3),
        (2.0, T0, "z", 9),
        (1.0, T0 + timedelta(microseconds=1), "z", 5),
        (1.0, T0, "B", 7),
        (1.0, T0, "b", 1),
        (1.0, T0, "ä", 0),
    ]
    ordered = sorted(rows, key=lambda row: sort_key(*row))
    assert ordered == [
        (2.0, T0, "z", 9),
        (1.0, T0 + timedelta(microseconds=1), "z", 5),
        (1.0, T0, "B", 7),
        (1.0, T0, "b", 1),
        (1.0, T0, "b", 3),
        (1.0, T0, "ä", 0),
    ]


def test_sort_key_compares_instants_not_timezones():
    from datetime import timezone

    plus_two = timezone(timedelta(hours=2))
    same_instant = T0.astimezone(plus_two)
    assert sort_key(1.0, T0, "c", 0) == sort_key(1.0, same_instant, "c", 0)


def test_sort_key_is_exact_for_far_dates():
    late = datetime(9999, 12, 31, 23, 59, 59, 999_998, tzinfo=UTC)
    assert sort_key(1.0, late + timedelta(microseconds=1), "c", 0) < sort_key(1.0, late, "c", 0)


@given(
    term_count=st.integers(1, 5),
    rows=st.lists(st.integers(0, 31), max_size=40),
)
def test_subset_counts_give_back_the_exact_mask_histogram(term_count, rows):
    """FTS5 counts rows holding at least each subset; inclusion-exclusion recovers masks."""
    masks = [row & ((1 << term_count) - 1) for row in rows]
    expected = Counter(mask for mask in masks if mask)
    together = {
        subset: sum(1 for mask in masks if mask & subset == subset)
        for subset in range(1, 1 << term_count)
    }
    assert masks_from_subset_counts(together, term_count) == expected


# ---------------------------------------------------------------------- pinned rankings


@given(
    st.dictionaries(st.integers(1, 7), st.integers(1, 5), min_size=1),
    st.integers(0, 40),
)
def test_pinned_ranking_scores_as_the_plan_does(histogram, total):
    plan = plan_page(histogram, 3, total, 0, 10**6)
    pinned = PinnedRanking.of(histogram, 3, total)
    assert plan is not None and pinned is not None
    assert {mask: pinned.score(mask) for mask in histogram} == {
        mask: plan.score(mask) for mask in histogram
    }  # bit for bit: the first page of search_page is search()'s


def _after(mask: int, pinned: PinnedRanking) -> PageAfter:
    return PageAfter(pinned, HitKey(mask, 0, "c", 0))


def test_split_masks_ties_and_the_lower_masks_a_page_reaches():
    # terms a, b, c with n = 1, 2, 4 of N = 10: raw(a) > raw(b) > raw(c)
    pinned = PinnedRanking(10, (1, 2, 4), 0b001)
    histogram = {0b001: 1, 0b010: 2, 0b100: 4, 0b110: 1}
    raws = sorted(histogram, key=lambda mask: -pinned.raw(mask))
    assert raws == [0b110, 0b001, 0b010, 0b100]
    assert _after(0b001, pinned).split_masks(histogram, 1) == ({0b001}, {0b010})
    assert _after(0b001, pinned).split_masks(histogram, 3) == ({0b001}, {0b010, 0b100})
    assert _after(0b110, pinned).split_masks(histogram, 1) == ({0b110}, {0b001})
    assert _after(0b100, pinned).split_masks(histogram, 5) == ({0b100}, set())


def test_split_masks_keeps_every_lower_mask_tied_at_the_floor():
    pinned = PinnedRanking(10, (3, 3, 1), 0b100)  # a and b weigh the same
    histogram = {0b100: 1, 0b001: 5, 0b010: 5}
    assert _after(0b100, pinned).split_masks(histogram, 1) == ({0b100}, {0b001, 0b010})


def test_admits_follows_the_tie_order_under_the_pinned_ranking():
    pinned = PinnedRanking(10, (1, 4), 0b01)
    after = PageAfter(pinned, HitKey(0b01, 100, "m", 2))
    assert after.admits(HitKey(0b10, 999, "a", 0))  # a lower mask, whatever its chat
    assert not after.admits(HitKey(0b11, 0, "z", 9))  # a better mask
    assert after.admits(HitKey(0b01, 99, "a", 0))  # older chat
    assert not after.admits(HitKey(0b01, 101, "z", 0))  # newer chat
    assert after.admits(HitKey(0b01, 100, "n", 0))  # same time, later chat id
    assert after.admits(HitKey(0b01, 100, "m", 3))  # same chat, later message
    assert not after.admits(HitKey(0b01, 100, "m", 2))  # the cursor's own hit


def test_scores_never_divide_by_a_zero_best():
    """Counts where every idf is 0.0 in floats (N = n_t = 2**62): every hit ties at 1.0,
    never a ``ZeroDivisionError``."""
    huge = 2**62
    assert idf(huge, huge) == 0.0
    pinned = PinnedRanking(huge, (huge, huge), 3)
    assert pinned.best == 0.0 and pinned.score(1) == pinned.score(3) == 1.0
    assert RankPlan(raws={1: 0.0}, best=0.0, page_masks=frozenset({1})).score(1) == 1.0
