"""Several statements in one round trip, where the driver sends them as one query string.

A store write is a few small statements (the chat's lock and row, then its rows); sent
one by one, each is a round trip in which the writer and its server backend wait on each
other, and on a loaded machine those waits, not the statements, were most of a write's
time (bench/RESULTS.md, "A write in fewer round trips"). psycopg 3's client-side binding
(Django's default on PostgreSQL) sends a query string by the simple query protocol,
which may hold several statements; each still runs with its own snapshot, in order, and
the first that fails stops the rest with its own error. Elsewhere (server-side binding,
SQLite, which has no round trips) the statements run one by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.backends.utils import CursorWrapper

__all__ = ["Statement", "binds_on_client", "run_batched"]

#: One statement and its parameters (``%s`` placeholders).
Statement = tuple[str, Sequence[Any]]


def binds_on_client(cursor: CursorWrapper) -> bool:
    """Whether one query string may hold several statements: psycopg 3's client-side
    binding sends it by the simple query protocol; server-side binding
    (``OPTIONS["server_side_binding"]``) and other drivers send one statement."""
    try:
        from psycopg import ClientCursor
    except ImportError:  # pragma: no cover - psycopg2, or no PostgreSQL driver at all
        return False
    return isinstance(cursor.cursor, ClientCursor)


def run_batched(cursor: CursorWrapper, statements: Sequence[Statement]) -> None:
    """Run ``statements`` in order, in one round trip where the driver allows; the
    cursor is left on the last one's result."""
    if len(statements) > 1 and binds_on_client(cursor):
        cursor.execute(
            "; ".join(sql for sql, _ in statements),
            [param for _, params in statements for param in params],
        )
        for _ in statements[1:]:
            cursor.cursor.nextset()
        return
    for sql, params in statements:
        cursor.execute(sql, params)
