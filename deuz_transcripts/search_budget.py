"""``SEARCH_TIMEOUT_MS`` for a search's Python work: the spans of its hits.

The database stops a search's statements past the budget (``backends``' ``time_limit``);
a page's hits then get their spans in Python, which for long messages can cost more than
the statements. ``search_budget`` starts the same budget in a context variable and
``check_budget`` raises the database's own ``SearchTimeout`` once it is spent, checked
before each hit's spans. Outside ``search_budget`` (the in-memory index, which reads no
settings) there is no budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .errors import SearchTimeout

__all__ = ["check_budget", "search_budget"]

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
