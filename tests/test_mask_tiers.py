"""The unread terms' masks read in tiers: which masks a tier's statement names, and how
a tier that holds less than its guess lowers the bound."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from deuz_transcripts import ranking
from deuz_transcripts.backends.base import Candidate, MaskTier
from deuz_transcripts.sql.search import unread_masks
from deuz_transcripts.sql.search.unread_masks import least_masks


def tier(idfs: list[float], bound: float) -> list[int]:
    """Every mask over ``idfs``'s terms whose raw score reaches ``bound``."""
    return [mask for mask in range(1, 1 << len(idfs)) if ranking.mask_raw(mask, idfs) >= bound]


def test_a_tier_is_named_by_its_least_masks() -> None:
    # raws: a=3, b=2, c=1; reaching 3: a, a+b, a+c, a+b+c, b+c
    assert least_masks(tier([3.0, 2.0, 1.0], 3.0)) == [0b001, 0b110]


@given(
    idfs=st.lists(st.floats(0.01, 10.0), min_size=1, max_size=7),
    cut=st.floats(0.0, 1.0),
)
def test_a_row_reaches_the_tier_when_it_holds_one_of_its_least_masks(
    idfs: list[float], cut: float
) -> None:
    bound = cut * sum(idfs)
    members = tier(idfs, bound)
    least = least_masks(members)
    for mask in range(1, 1 << len(idfs)):
        holds_one = any(mask & each == each for each in least)
        assert holds_one == (mask in members)


class Rows:
    """Matches whose rows are ``masks`` (one row each), read through tiers only."""

    def __init__(self, masks: list[int]) -> None:
        self.masks = masks
        self.reads: list[list[int]] = []

    def mask_candidates(self, tier: MaskTier, depth: int) -> list[Any]:
        self.reads.append(list(tier.least))
        found = [mask for mask in self.masks if tier.holds(mask)]
        return [Candidate(n, mask, n, f"c{n}", 0, 0, 0) for n, mask in enumerate(found)]


def test_a_tier_short_of_its_guess_is_read_again_lower() -> None:
    idfs = [1.0, 1.0, 1.0]
    raws = {mask: ranking.mask_raw(mask, idfs) for mask in range(1, 8)}
    masks = sorted(raws, key=lambda mask: (-raws[mask], mask))
    groups = [
        [m for m in masks if raws[m] == raw] for raw in sorted(set(raws.values()), reverse=True)
    ]
    # the counts guess 5 rows holding all three terms (one does) and 3 of each pair:
    # a fifth of the guess found, the next tier is read where it guesses 10 rows
    guesses = {mask: {3: 5.0, 2: 3.0}.get(mask.bit_count(), 0.1) for mask in masks}
    matches = Rows([0b111, 0b011, 0b001, 0b001])
    rows = unread_masks._tiers(matches, groups, raws, guesses, [], 0, 2)  # type: ignore[arg-type]
    assert matches.reads == [[0b111], [0b011, 0b101, 0b110]]
    assert sorted(row.mask for row in rows) == [0b011, 0b111]


def test_rows_holding_a_term_read_are_left_to_the_known_rows() -> None:
    idfs = [1.0, 1.0]
    raws = {mask: ranking.mask_raw(mask, idfs) for mask in (0b01,)}
    matches = Rows([0b01, 0b11])
    rows = unread_masks._tiers(matches, [[0b01]], raws, {0b01: 1.0}, [2.0], 0b10, 2)  # type: ignore[arg-type]
    assert [row.mask for row in rows] == [0b01]
