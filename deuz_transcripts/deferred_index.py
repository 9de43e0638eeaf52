"""A bulk backfill on PostgreSQL without the GIN index, which is built once at the end.

GIN maintenance is the largest part of a PostgreSQL load (bench/RESULTS.md: 1M legacy
messages with 2 workers took 220 s with the index, 112 s without it plus 31 s to build
it afterwards). ``backfill_transcripts --defer-index`` drops the index before the first chat is
written and builds it again when the run ends, failed or not. Meanwhile searches read
the whole message table (their time budget still holds) and the build blocks message
writes while it runs, so it is for a first load, not for a database serving users.

A run killed before its end leaves the index missing: check ``deuz_transcripts.W006``
reports it, and the next ``backfill_transcripts`` (with the flag or not) builds it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connections, transaction

from .backends.postgresql_storage import VECTOR_INDEX, vector_index_sql, vector_index_state

__all__ = ["search_index_deferred"]


@contextmanager
def search_index_deferred(
    database: str, *, defer: bool, report: Callable[[str], None]
) -> Iterator[None]:
    """Runs the block without the search index when ``defer`` (PostgreSQL), and builds
    the index after it wherever it is missing or invalid (``defer`` or not). Elsewhere,
    and inside a transaction (which would hold the table's lock to its end), the block
    just runs."""
    connection = connections[database]
    state = "unmigrated"
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        with connection.cursor() as cursor:
            state = vector_index_state(cursor)
    if state == "unmigrated":
        yield
        return
    if state == "ready" and defer:
        with transaction.atomic(using=database), connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {VECTOR_INDEX}")
        report(f"Search index {VECTOR_INDEX} dropped: it is built once the backfill ends.")
    try:
        yield
    finally:
        if state != "ready" or defer:
            _build(database, state, report)


def _build(database: str, state: str, report: Callable[[str], None]) -> None:
    started = time.monotonic()
    with transaction.atomic(using=database), connections[database].cursor() as cursor:
        if state == "invalid":  # left by a failed build (CREATE INDEX CONCURRENTLY, say)
            cursor.execute(f"DROP INDEX IF EXISTS {VECTOR_INDEX}")
        cursor.execute(vector_index_sql())
    report(f"Search index {VECTOR_INDEX} built in {time.monotonic() - started:.1f} s.")
