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

from django.db import connections

from .backends import maintenance_for

__all__ = ["search_index_deferred"]


@contextmanager
def search_index_deferred(
    database: str, *, defer: bool, report: Callable[[str], None]
) -> Iterator[None]:
    """Runs the block without the search index when ``defer`` (PostgreSQL), and builds
    the index after it wherever it is missing or invalid (``defer`` or not). Elsewhere,
    and inside a transaction (which would hold the table's lock to its end), the block
    just runs."""
    engine = maintenance_for(database)
    name = engine.search_index_name
    state = "unmigrated"
    if name and not connections[database].in_atomic_block:
        state = engine.search_index_state()
    if state == "unmigrated":
        yield
        return
    if state == "ready" and defer:
        engine.drop_search_index()
        report(f"Search index {name} dropped: it is built once the backfill ends.")
    try:
        yield
    finally:
        if state != "ready" or defer:
            started = time.monotonic()
            engine.build_search_index(replace_invalid=state == "invalid")
            report(f"Search index {name} built in {time.monotonic() - started:.1f} s.")
