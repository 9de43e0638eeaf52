"""A page's rows among the terms too common to read: their masks, best raw score first.

When the essential-terms plan has read the rarer terms' rows (every row holding one of
them, with its full mask) and two or more terms are left, each with more rows than it
may read, every other row's mask is made of the unread terms alone. Those masks are
taken best raw score first (equal raws together), and of each the first rows in tie
order are fetched: at most the page's depth, as no mask puts more on a page. Once a
page of rows scores at least the next mask's raw, no row of a lower mask can reach the
page: the page, and the best raw score present, are exact (a score is a sum of idfs
with no term frequency: MaxScore over term combinations).

A mask the counts predict dense (as if the terms were independent) is walked newest
chat first, bounded as the guessed walk is (``SearchPolicy.big_read_rows``); a
sparse one, or a walk that ends short, is read through the index. The masks are
disjoint, so the rows read never exceed the matches that ranking every one would read.

More unread terms than ``unread_terms_max`` make too many masks for a statement each
(eight common words: 255). Their masks are then read in tiers: every mask whose raw
score reaches a bound, in one statement (the rows holding every term of one of the
tier's least masks: a score is a sum of idfs, so the masks reaching a bound are those
holding one of its least masks). The bound is the best raw down to which the counts
predict a page of rows; a tier that holds less lowers it by as much as the guess fell
short. Once a tier, with the known rows reaching its bound, fills the page, the page is
exact as above, without the histogram of every match.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence

from ... import ranking
from ...backends.base import Candidate, MaskTier
from ...backends.matches import Matches
from ...backends.policy import SearchPolicy
from .walks import walk_if_dense

__all__ = ["least_masks", "reads_unread_masks", "unread_mask_rows"]


def reads_unread_masks(policy: SearchPolicy, unread: int) -> bool:
    """Whether ``unread`` terms left unread are few enough for their masks to be read
    (one by one, or in tiers), rather than ranking every match."""
    return unread <= max(policy.unread_terms_max, policy.tiered_terms_max)


def unread_mask_rows(
    matches: Matches,
    known: Sequence[Candidate],
    unread: Sequence[int],
    counts: Sequence[int],
    idfs: list[float],
    total: int,
    depth: int,
) -> list[Candidate] | None:
    """The rows of the unread terms' masks a page of ``depth`` can hold, besides the
    ``known`` rows (every row holding a term read), the terms' ``counts`` and ``idfs``
    fixed by N = ``total``; ``None``: more unread terms than ``tiered_terms_max`` (too
    many masks to enumerate: ranking every match is cheaper)."""
    policy = matches.policy
    if not depth or not reads_unread_masks(policy, len(unread)):
        return None
    total = max(1, total, *counts)
    masks = [
        sum(1 << position for bit, position in enumerate(unread) if pick >> bit & 1)
        for pick in range(1, 1 << len(unread))
    ]
    raws = {mask: ranking.mask_raw(mask, idfs) for mask in masks}
    masks.sort(key=lambda mask: (-raws[mask], mask))
    known_raws = sorted(ranking.mask_raw(row.mask, idfs) for row in known)
    shares = [min(counts[position] / total, 1.0) for position in unread]

    def share_of(mask: int) -> float:
        return math.prod(
            shares[bit] if mask >> position & 1 else 1.0 - shares[bit]
            for bit, position in enumerate(unread)
        )

    if len(unread) > policy.unread_terms_max:
        groups = [list(group) for _, group in itertools.groupby(masks, key=raws.__getitem__)]
        read = sum(1 << position for position in range(len(idfs)) if position not in unread)
        guesses = {mask: total * share_of(mask) for mask in masks}
        return _tiers(matches, groups, raws, guesses, known_raws, read, depth)
    fetched: list[Candidate] = []
    for raw, group in itertools.groupby(masks, key=raws.__getitem__):
        for mask in group:
            share = share_of(mask)
            # walked within the newest chats the guess says hold them, else read and sorted
            rows = walk_if_dense(matches, mask, share, depth)
            if rows is None:
                rows = matches.mask_candidates({mask}, depth)
            fetched.extend(rows)
        if len(fetched) + _reaching(known_raws, raw) >= depth:
            break
    return fetched


def _tiers(
    matches: Matches,
    groups: Sequence[Sequence[int]],
    raws: dict[int, float],
    guesses: dict[int, float],
    known_raws: Sequence[float],
    read: int,
    depth: int,
) -> list[Candidate]:
    """The unread terms' rows of the best tier that fills the page with the ``known``
    rows: ``groups`` are the masks of equal raw, best first; ``guesses``, each mask's
    rows as the counts predict them; ``known_raws``, the known rows' raws in order;
    ``read``, the terms read (rows holding one are known)."""
    wanted = float(depth)
    guessed = 0.0
    tier: list[int] = []
    for index, group in enumerate(groups):
        tier.extend(group)
        guessed += sum(guesses[mask] for mask in group)
        reaching = _reaching(known_raws, raws[group[0]])
        last = index == len(groups) - 1
        if reaching + guessed < wanted and not last:
            continue
        rows = matches.mask_candidates(MaskTier(tuple(least_masks(tier)), read), depth)
        found = reaching + len(rows)
        if found >= depth or last:
            return rows
        # the guess fell short by found / (reaching + guessed): ask that much more of it
        wanted = depth * (reaching + guessed) / max(found, 1)
    return []


def _reaching(ordered_raws: Sequence[float], bound: float) -> int:
    """How many of ``ordered_raws`` (ascending) reach ``bound``."""
    return len(ordered_raws) - bisect.bisect_left(ordered_raws, bound)


def least_masks(tier: Sequence[int]) -> list[int]:
    """The masks of ``tier`` (an up-set: every superset of a member is a member) holding
    no smaller member: a row reaches the tier when it holds every term of one of them."""
    members = set(tier)
    return sorted(
        mask
        for mask in members
        if not any(
            mask ^ (1 << bit) in members for bit in range(mask.bit_length()) if mask >> bit & 1
        )
    )
