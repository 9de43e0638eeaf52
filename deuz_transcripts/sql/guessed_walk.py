"""The newest-first walk of one mask, tried only where a guess says it is short.

A walk newest chat first costs about ``depth / share`` messages for a mask held by a
``share`` of the rows, and the whole scope when the mask is rarer than that near the
newest chats. Where the share can be guessed without visiting a row (stored counts, as
if the terms were independent), a walk bounded to the newest chats of
``walk_guess_margin * depth / share`` messages finds the page when the guess holds, and
costs that bound when it does not (PostgreSQL at 10M: a GIN probe of two common words
took 50-180 ms before the walk).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from django.db.backends.utils import CursorWrapper

from ..backends.base import Candidate, SearchMatcher
from ..backends.chat_filter import ChatFilter

__all__ = ["walk_if_dense"]


def walk_if_dense(
    matcher: SearchMatcher,
    cursor: CursorWrapper,
    chats: ChatFilter,
    terms: Sequence[str],
    mask: int,
    share: float,
    depth: int,
) -> list[Candidate] | None:
    """The first ``depth`` rows of ``mask`` in tie order, walked within the newest chats
    that ``share`` (the guessed fraction of rows holding exactly ``mask``) says hold
    ``walk_guess_margin`` pages of them among at most ``walk_guess_max_rows`` messages.
    ``None``: no such guess (or no walk here), or the walk ended short."""
    policy = matcher.policy
    margin, most = policy.walk_guess_margin, policy.walk_guess_max_rows
    if not depth or not matcher.walks_newest_first or share * most < margin * depth:
        return None
    within = math.ceil(margin * depth / share)
    rows = matcher.newest_with_mask(cursor, chats, terms, mask, depth, within_rows=within)
    return rows if len(rows) >= depth else None
