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
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from ... import ranking
from ...backends.base import Candidate
from ...backends.matches import Matches
from .walks import walk_if_dense

__all__ = ["unread_mask_rows"]


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
    fixed by N = ``total``; ``None``: more unread terms than
    ``unread_terms_max`` (too many masks: ranking every match is cheaper)."""
    policy = matches.policy
    if not depth or len(unread) > policy.unread_terms_max:
        return None
    total = max(1, total, *counts)
    masks = [
        sum(1 << position for bit, position in enumerate(unread) if pick >> bit & 1)
        for pick in range(1, 1 << len(unread))
    ]
    raws = {mask: ranking.mask_raw(mask, idfs) for mask in masks}
    masks.sort(key=lambda mask: (-raws[mask], mask))
    known_raws = [ranking.mask_raw(row.mask, idfs) for row in known]
    shares = [min(counts[position] / total, 1.0) for position in unread]
    fetched: list[Candidate] = []
    for raw, group in itertools.groupby(masks, key=raws.__getitem__):
        for mask in group:
            share = math.prod(
                shares[bit] if mask >> position & 1 else 1.0 - shares[bit]
                for bit, position in enumerate(unread)
            )
            # walked within the newest chats the guess says hold them, else read and sorted
            rows = walk_if_dense(matches, mask, share, depth)
            if rows is None:
                rows = matches.mask_candidates({mask}, depth)
            fetched.extend(rows)
        if len(fetched) + sum(1 for known_raw in known_raws if known_raw >= raw) >= depth:
            break
    return fetched
