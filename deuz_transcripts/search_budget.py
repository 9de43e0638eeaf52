"""``SEARCH_TIMEOUT_MS``: one time budget for a whole search, its statements and the
Python work on its hits.

``search_budget`` starts the budget in a context variable. The database's statements are
held to what is left of it (``SearchBudget.lowered_limit``, which a PostgreSQL search
session asks before each read), and ``check_budget`` raises the database's own
``SearchTimeout`` once it is spent, checked before each hit's spans: for long messages
they can cost more than the statements. Outside ``search_budget`` (the in-memory index,
which reads no settings) there is no budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .errors import SearchTimeout

__all__ = ["BUDGET_SLACK", "SearchBudget", "check_budget", "search_budget"]

#: The clock budgets are read by (tests set one they control).
clock: Callable[[], float] = time.monotonic

#: ``(deadline by clock(), the budget in ms)`` of the search running in this context.
_budget: ContextVar[tuple[float, int] | None] = ContextVar(
    "deuz_transcripts_search_budget", default=None
)


@contextmanager
def search_budget(timeout_ms: int) -> Iterator[None]:
    """A budget of ``timeout_ms`` for the search inside (``0``: none)."""
    if not timeout_ms:
        yield
        return
    token = _budget.set((clock() + timeout_ms / 1000, timeout_ms))
    try:
        yield
    finally:
        _budget.reset(token)


def check_budget() -> None:
    """``SearchTimeout`` once the running search's budget is spent; nothing otherwise."""
    budget = _budget.get()
    if budget is not None and clock() >= budget[0]:
        raise SearchTimeout(budget[1])


#: How far past its budget a search may run before its next statement's timeout is
#: lowered to what is left (a share of the budget): a fast search never pays for it.
BUDGET_SLACK = 0.1


class SearchBudget:
    """``statement_timeout`` bounds one statement; a search runs several (32 term counts,
    each just under the limit, took 45 s of a 10 s budget at 10M messages). So before
    each statement the time left is checked: none left raises ``SearchTimeout``, and
    once more than ``BUDGET_SLACK`` of the budget is spent the statement's limit is
    lowered to what is left. The deadline is the running search's (``search_budget``),
    so statements and spans share one clock; a session opened outside one starts its own."""

    def __init__(self, timeout_ms: int) -> None:
        running = _budget.get()
        self.timeout_ms = timeout_ms
        self.deadline = running[0] if running is not None else clock() + timeout_ms / 1000
        self.limit_ms = timeout_ms

    def lowered_limit(self) -> int | None:
        """Before a statement: the milliseconds to lower its limit to (``None``: the
        limit in force stands); ``SearchTimeout`` when nothing is left."""
        left_ms = int((self.deadline - clock()) * 1000)
        if left_ms <= 0:
            raise SearchTimeout(self.timeout_ms)
        if left_ms < self.limit_ms - self.timeout_ms * BUDGET_SLACK:
            self.limit_ms = left_ms
            return left_ms
        return None
