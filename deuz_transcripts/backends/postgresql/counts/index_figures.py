"""PostgreSQL: the whole index's figures for a query's terms, for planning only.

A mid-size scope's route (``PostgresMatches.sized``) needs how long the terms' posting
lists are, and a small tenant's walk guess (``PostgresStoredCounts.index_density``) how dense
the terms are in the whole index; both come from the stored counts of every tenant
(``postgresql.counts.stored``) and the table's row estimate, read in one statement. Never
an N or n_t: those are exact and come from the filter's own counts or from GIN.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

from django.db.backends.utils import CursorWrapper

from ....models import CountedTerm, Message
from ....text import stored_term
from ...chat_filter import table
from . import stored as term_counts
from .deltas import counts_relation

__all__ = ["IndexTermCounts", "index_term_counts"]


class IndexTermCounts(NamedTuple):
    """The whole index's figures for a query's terms, read in one statement: what a
    mid-size scope's route and a small tenant's walk guess are decided by."""

    #: whether common terms were ever chosen (``CountedTerm`` is not empty)
    chosen: bool
    #: the message table's estimated rows (``pg_class.reltuples``, over its partitions)
    table_rows: int
    #: each term's indexed messages over every tenant and role (``None``: not counted)
    rows: list[int | None]
    #: ... of the search's roles only (``rows`` when it has none)
    role_rows: list[int | None]

    def posting_rows(self) -> int | None:
        """The rows the terms' posting lists hold in all, at most ``COUNTED_MIN_ROWS`` for
        a term not counted (as of the last choice); ``None``: none was ever chosen."""
        if not self.chosen:
            return None
        bound = term_counts.COUNTED_MIN_ROWS  # read when used: the choice's threshold
        return sum(bound if rows is None else rows for rows in self.rows)


def index_term_counts(
    cursor: CursorWrapper, terms: Sequence[str], roles: Collection[str] | None = None
) -> IndexTermCounts:
    """``IndexTermCounts`` of ``terms`` (and ``roles``), in one statement."""
    table_rows = (
        "(SELECT sum(GREATEST(c.reltuples, 0)) FROM pg_class c WHERE c.oid = %s::regclass "
        "OR c.oid IN (SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = %s::regclass))"
    )
    role_rows, role_params = "sum(t.rows)", list[Any]()
    if roles is not None:
        role_rows, role_params = "sum(t.rows) FILTER (WHERE t.role = ANY(%s))", [sorted(roles)]
    cursor.execute(
        f"SELECT {table_rows}, EXISTS (SELECT 1 FROM {table(CountedTerm)}), "
        f"EXISTS (SELECT 1 FROM {table(CountedTerm)} k WHERE k.lexeme = q.lexeme), "
        f"(SELECT ARRAY[COALESCE(sum(t.rows), 0), COALESCE({role_rows}, 0)] "
        f"FROM {counts_relation(tenant=False)} t WHERE t.lexeme = q.lexeme) "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS q(lexeme, n) ORDER BY q.n",
        [
            table(Message),
            table(Message),
            *role_params,
            [stored_term(term) for term in terms],
        ],
    )
    found = cursor.fetchall()
    chosen = bool(found) and bool(found[0][1])
    estimated = int(found[0][0] or 0) if found else 0
    rows = [int(both[0]) if counted else None for _, _, counted, both in found]
    role_counts = [int(both[1]) if counted else None for _, _, counted, both in found]
    return IndexTermCounts(chosen, estimated, rows, role_counts)
