"""PostgreSQL's search backend: its rows, row source, counts, matches and checks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet

from ..base import RowSource
from ..engine_counts import EngineCounts
from ..policy import current_policy
from ..search_backend import SearchBackend
from .checks import PostgresChecks
from .counts.statistics import PostgresCounts, PostgresStoredCounts
from .engine import PostgresRowSource
from .matches import PostgresMatches
from .policy import PostgresPolicy
from .rows import PostgresRows
from .session import SessionCursor, search_session

if TYPE_CHECKING:
    from ...records import Scope

__all__ = ["PostgresBackend"]


class PostgresBackend(SearchBackend):
    name = "postgresql"
    rows_class = PostgresRows
    checks_class = PostgresChecks
    matches_class = PostgresMatches

    def search_parts(self) -> tuple[RowSource, EngineCounts]:
        """The row source and the counts share the search's stored counts (each read
        once)."""
        stored = PostgresStoredCounts(self.alias)
        source = PostgresRowSource(self.alias, current_policy(PostgresPolicy), stored)
        return source, PostgresCounts(source, stored)

    def legacy_scope_filter(self, rows: QuerySet[Any], scope: Scope) -> QuerySet[Any]:
        return rows.filter(scope__contains=dict(scope)) if scope else rows  # jsonb @>

    def search_cursor(self, timeout_ms: int) -> AbstractContextManager[SessionCursor]:
        """One transaction, the budget and JIT off, sent with the search's reads
        (``search_session``); once it has ended, the terms the search noted for counting
        are marked (``PostgresStoredCounts.send_notes``)."""
        return self._noting_session(timeout_ms)

    @contextmanager
    def _noting_session(self, timeout_ms: int) -> Iterator[SessionCursor]:
        with search_session(self.alias, timeout_ms) as cursor:
            yield cursor
        counts = self.counts
        assert isinstance(counts, PostgresCounts)
        counts.stored.send_notes()
