"""A search's time budget (``SEARCH_TIMEOUT_MS``) over all of its statements together."""

from __future__ import annotations

import time

from ..errors import SearchTimeout

__all__ = ["BUDGET_SLACK", "SearchBudget"]

#: How far past its budget a search may run before its next statement's timeout is
#: lowered to what is left (a share of the budget): a fast search never pays for it.
BUDGET_SLACK = 0.1


class SearchBudget:
    """``statement_timeout`` bounds one statement; a search runs several (32 term counts,
    each just under the limit, took 45 s of a 10 s budget at 10M messages). So before
    each statement the time left is checked: none left raises ``SearchTimeout``, and
    once more than ``BUDGET_SLACK`` of the budget is spent the statement's limit is
    lowered to what is left."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.deadline = time.monotonic() + timeout_ms / 1000
        self.limit_ms = timeout_ms

    def lowered_limit(self) -> int | None:
        """Before a statement: the milliseconds to lower its limit to (``None``: the
        limit in force stands); ``SearchTimeout`` when nothing is left."""
        left_ms = int((self.deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise SearchTimeout(self.timeout_ms)
        if left_ms < self.limit_ms - self.timeout_ms * BUDGET_SLACK:
            self.limit_ms = left_ms
            return left_ms
        return None
