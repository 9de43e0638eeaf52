"""PostgreSQL session settings a search sets for a while and puts back: no sequential scan
and an exact bitmap for GIN counts, and the search's ``statement_timeout`` and ``jit``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import OperationalError, connections, transaction
from django.db.backends.utils import CursorWrapper

from ...errors import SearchTimeout
from ...sql.errors import sqlstate

__all__ = ["BITMAP_WORK_MEM", "BUDGET_SLACK", "bitmap_scans", "search_session"]

#: ``work_mem`` of the GIN counts and bitmap reads (``bitmap_scans``): an exact bitmap of
#: 1,000,000 rows fits in a few MB, so counts of common words need no recheck of each row.
BITMAP_WORK_MEM = "64MB"


@contextmanager
def bitmap_scans(alias: str, cursor: CursorWrapper) -> Iterator[None]:
    """No sequential scan for the statements inside (in a transaction or savepoint, the
    setting put back after).

    A role lexeme is held by a large share of the rows (``user``: ~40%), so the planner
    prefers reading the table for its count; that tests the tsquery on every vector
    (32 ms at 20,000 messages) where the GIN bitmap counts the posting list's rows without
    a test (5 ms). A count of GIN-found rows never gains from a sequential scan.

    ``work_mem`` is raised to ``BITMAP_WORK_MEM`` inside (never lowered): with the default
    4 MB the bitmap of a very common word turns lossy and every row of its pages is read
    and tested again (1M messages: 1.35 s for a word in 638,000 rows, 0.54 s exact).
    """
    with transaction.atomic(using=alias):
        cursor.execute(
            "SELECT current_setting('enable_seqscan'), current_setting('work_mem'), "
            "set_config('enable_seqscan', 'off', true), set_config('work_mem', CASE WHEN "
            "pg_size_bytes(current_setting('work_mem')) < pg_size_bytes(%s) THEN %s "
            "ELSE current_setting('work_mem') END, true)",
            [BITMAP_WORK_MEM, BITMAP_WORK_MEM],
        )
        row = cursor.fetchone()
        yield
        if row is not None:
            cursor.execute(
                "SELECT set_config('enable_seqscan', %s, true), set_config('work_mem', %s, true)",
                [row[0], row[1]],
            )


#: How far past its budget a search may run before its next statement's timeout is
#: lowered to what is left (a share of the budget): a fast search never pays for it.
BUDGET_SLACK = 0.1


@contextmanager
def search_session(alias: str, timeout_ms: int) -> Iterator[None]:
    """A search's statements in a transaction (a savepoint in the caller's) with JIT
    compilation off and, unless ``timeout_ms`` is 0, a time budget for all of them
    together; the session's own values are put back afterwards, and a cancelled search
    rolls back to it, leaving the caller's transaction usable.

    JIT: GIN's row estimates for a tsquery are often far too high (47,681 rows for a
    word in 926 at 10M messages), which pushes a statement's estimated cost past
    ``jit_above_cost``, and compiling it then took 151 of its 157 ms (bench/RESULTS.md).
    A search reads a page; it never runs long enough to gain from compiled code.

    ``statement_timeout`` bounds one statement; a search runs several (32 term counts,
    each just under the limit, took 45 s of a 10 s budget at 10M messages). So before
    each statement the time left is checked: none left raises ``SearchTimeout``, and once
    more than ``BUDGET_SLACK`` of the budget is spent the timeout is lowered to what is
    left.
    """
    connection = connections[alias]
    nested = connection.in_atomic_block
    deadline = time.monotonic() + timeout_ms / 1000
    limit_ms = timeout_ms

    def within_budget(
        execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
    ) -> Any:
        nonlocal limit_ms
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise SearchTimeout(timeout_ms)
        if left_ms < limit_ms - timeout_ms * BUDGET_SLACK:
            context["cursor"].cursor.execute(
                "SELECT set_config('statement_timeout', %s, true)", [f"{left_ms}ms"]
            )
            limit_ms = left_ms
        return execute(sql, params, many, context)

    try:
        with transaction.atomic(using=alias):
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT current_setting('statement_timeout'), current_setting('jit'), "
                    "set_config('statement_timeout', COALESCE(%s, "
                    "current_setting('statement_timeout')), true), set_config('jit', 'off', true)",
                    [f"{timeout_ms}ms" if timeout_ms else None],
                )
                row = cursor.fetchone()
            if timeout_ms:
                with connection.execute_wrapper(within_budget):
                    yield
            else:
                yield
            if nested and row is not None:  # released savepoint: the settings would stay
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT set_config('statement_timeout', %s, true), "
                        "set_config('jit', %s, true)",
                        [row[0], row[1]],
                    )
    except OperationalError as exc:
        if sqlstate(exc) == _QUERY_CANCELED:
            raise SearchTimeout(timeout_ms) from exc
        raise


_QUERY_CANCELED = "57014"
